package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what the scheduler does.
type Metrics struct {
	cycles             atomic.Int64
	lastCycle          atomic.Int64 // nanoseconds
	placements         atomic.Int64
	launchErrors       atomic.Int64
	terminations       atomic.Int64
	instancesLost      atomic.Int64
	finished           atomic.Int64
	reconciles         atomic.Int64
	orphans            atomic.Int64
	queued             atomic.Int64
	notices            atomic.Int64
	checkpointRequests atomic.Int64
	checkpointFailures atomic.Int64
	moves              atomic.Int64
}

// Stats is a snapshot of the scheduler's counters.
type Stats struct {
	Cycles             int64         `json:"cycles"`
	LastCycle          time.Duration `json:"last_cycle"`
	Placements         int64         `json:"placements"`
	LaunchErrors       int64         `json:"launch_errors"`
	Terminations       int64         `json:"terminations"`
	InstancesLost      int64         `json:"instances_lost"`
	Finished           int64         `json:"finished"`
	Reconciles         int64         `json:"reconciles"`
	Orphans            int64         `json:"orphans"`
	Queued             int64         `json:"queued"`
	Notices            int64         `json:"notices"`
	CheckpointRequests int64         `json:"checkpoint_requests"`
	CheckpointFailures int64         `json:"checkpoint_failures"`
	Moves              int64         `json:"moves"`
}

// Stats returns the counters now.
func (s *Scheduler) Stats() Stats { return s.metrics.Stats() }

// Stats returns the counters now.
func (m *Metrics) Stats() Stats {
	return Stats{
		Cycles: m.cycles.Load(), LastCycle: time.Duration(m.lastCycle.Load()), Placements: m.placements.Load(),
		LaunchErrors: m.launchErrors.Load(), Terminations: m.terminations.Load(), InstancesLost: m.instancesLost.Load(),
		Finished: m.finished.Load(), Reconciles: m.reconciles.Load(), Orphans: m.orphans.Load(), Queued: m.queued.Load(),
		Notices: m.notices.Load(), CheckpointRequests: m.checkpointRequests.Load(), CheckpointFailures: m.checkpointFailures.Load(),
		Moves: m.moves.Load(),
	}
}

// Register adds the scheduler's metrics to a Prometheus registry.
func (m *Metrics) Register(r prometheus.Registerer) error {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: name, Help: help}, f)
	}
	for _, c := range []prometheus.Collector{
		counter("cycles_total", "Scheduling cycles run.", &m.cycles),
		counter("placements_total", "Placements decided and recorded.", &m.placements),
		counter("launch_errors_total", "Launches refused or failed.", &m.launchErrors),
		counter("terminations_total", "Instances terminated.", &m.terminations),
		counter("instances_lost_total", "Instances that went away under an active job.", &m.instancesLost),
		counter("attempts_finished_total", "Attempts that ended with the command's exit.", &m.finished),
		counter("reconciliations_total", "Reconciliations against the clouds.", &m.reconciles),
		counter("orphans_terminated_total", "Instances terminated because no job owned them.", &m.orphans),
		counter("notices_total", "Interruption notices acted on.", &m.notices),
		counter("checkpoint_requests_total", "Checkpoint requests delivered to agents.", &m.checkpointRequests),
		counter("checkpoint_failures_total", "Checkpoints that did not finish.", &m.checkpointFailures),
		counter("moves_total", "Running jobs the scheduler chose to move (back to spot, or to cheaper capacity).", &m.moves),
		gauge("queued_jobs", "Jobs waiting in the queue.", func() float64 { return float64(m.queued.Load()) }),
		gauge("last_cycle_seconds", "Duration of the last scheduling cycle.", func() float64 { return time.Duration(m.lastCycle.Load()).Seconds() }),
	} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
