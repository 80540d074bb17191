package scheduler

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// Metrics counts what the scheduler does. The zero value is ready; the
// successive schedulers of one server (one per lease term) share one.
type Metrics struct {
	cycles    atomic.Int64
	lastCycle atomic.Int64 // nanoseconds
	// wholeCycles counts the cycles that looked at every queued job (the
	// offer book changed) rather than the new ones only; cycleTime and
	// wholeCycleTime are the time all cycles, and those, took.
	wholeCycles        atomic.Int64
	cycleTime          atomic.Int64 // nanoseconds
	wholeCycleTime     atomic.Int64 // nanoseconds
	placements         atomic.Int64
	launchErrors       atomic.Int64
	terminations       atomic.Int64
	instancesLost      atomic.Int64
	finished           atomic.Int64
	reconciles         atomic.Int64
	reconcileTime      atomic.Int64 // nanoseconds
	orphans            atomic.Int64
	queued             atomic.Int64
	notices            atomic.Int64
	checkpointRequests atomic.Int64
	checkpointFailures atomic.Int64
	moves              atomic.Int64
	// forged counts events refused for an instance or attempt that is not
	// the job's, even by the provider's own listing.
	forged atomic.Int64
	// deposedWrites counts writes refused because the lease term was over.
	deposedWrites atomic.Int64
	// overhead is spend on instances that belong to no job, in
	// micro-dollars.
	overhead atomic.Int64

	verdictMu sync.Mutex
	verdicts  map[[2]string]int64 // input, verdict

	// The labelled series (labelled.go): counters by placement, the
	// durations jobs saw, and the scheduler's view of jobs and instances
	// while it holds the lease. (Spend by team is the cost ledger's.)
	once sync.Once
	vec  *vecs

	viewMu    sync.Mutex
	jobStates map[job.State]int // nil while no term runs
	instances map[instanceKey]int
}

// verdict counts what the lifecycle made of an input.
func (m *Metrics) verdict(input, verdict string) {
	m.verdictMu.Lock()
	defer m.verdictMu.Unlock()
	if m.verdicts == nil {
		m.verdicts = map[[2]string]int64{}
	}
	m.verdicts[[2]string{input, verdict}]++
}

// Verdicts returns how many inputs of each kind got each verdict
// ("interruption/refused": 3).
func (m *Metrics) Verdicts() map[string]int64 {
	m.verdictMu.Lock()
	defer m.verdictMu.Unlock()
	out := make(map[string]int64, len(m.verdicts))
	for k, v := range m.verdicts {
		out[k[0]+"/"+k[1]] = v
	}
	return out
}

var verdictDesc = prometheus.NewDesc("spotwise_scheduler_events_total",
	"Inputs to the job lifecycle, by kind and by what it made of them (accepted, duplicate, stale, refused, no-job).",
	[]string{"input", "verdict"}, nil)

// verdictCollector exports the verdict counts.
type verdictCollector struct{ m *Metrics }

func (c verdictCollector) Describe(ch chan<- *prometheus.Desc) { ch <- verdictDesc }

func (c verdictCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.verdictMu.Lock()
	defer c.m.verdictMu.Unlock()
	for k, v := range c.m.verdicts {
		ch <- prometheus.MustNewConstMetric(verdictDesc, prometheus.CounterValue, float64(v), k[0], k[1])
	}
}

// Stats is a snapshot of the scheduler's counters.
type Stats struct {
	Cycles    int64         `json:"cycles"`
	LastCycle time.Duration `json:"last_cycle"`
	// WholeCycles are the cycles over every queued job; CycleTime and
	// WholeCycleTime what all cycles, and those, took.
	WholeCycles        int64         `json:"whole_cycles"`
	CycleTime          time.Duration `json:"cycle_time"`
	WholeCycleTime     time.Duration `json:"whole_cycle_time"`
	Placements         int64         `json:"placements"`
	LaunchErrors       int64         `json:"launch_errors"`
	Terminations       int64         `json:"terminations"`
	InstancesLost      int64         `json:"instances_lost"`
	Finished           int64         `json:"finished"`
	Reconciles         int64         `json:"reconciles"`
	ReconcileTime      time.Duration `json:"reconcile_time"` // what all reconciliations took
	Orphans            int64         `json:"orphans"`
	Queued             int64         `json:"queued"`
	Notices            int64         `json:"notices"`
	CheckpointRequests int64         `json:"checkpoint_requests"`
	CheckpointFailures int64         `json:"checkpoint_failures"`
	Moves              int64         `json:"moves"`
	Forged             int64         `json:"forged"`
	DeposedWrites      int64         `json:"deposed_writes"`
	// Overhead is spend on instances no job owns.
	Overhead money.Micros `json:"overhead"`
}

// Stats returns the counters now.
func (s *Scheduler) Stats() Stats { return s.metrics.Stats() }

// Metrics is where the scheduler counts (Options.Metrics, or its own).
func (s *Scheduler) Metrics() *Metrics { return s.metrics }

// Stats returns the counters now.
func (m *Metrics) Stats() Stats {
	return Stats{
		Cycles: m.cycles.Load(), LastCycle: time.Duration(m.lastCycle.Load()), Placements: m.placements.Load(),
		WholeCycles: m.wholeCycles.Load(), CycleTime: time.Duration(m.cycleTime.Load()), WholeCycleTime: time.Duration(m.wholeCycleTime.Load()),
		LaunchErrors: m.launchErrors.Load(), Terminations: m.terminations.Load(), InstancesLost: m.instancesLost.Load(),
		Finished: m.finished.Load(), Reconciles: m.reconciles.Load(), ReconcileTime: time.Duration(m.reconcileTime.Load()), Orphans: m.orphans.Load(), Queued: m.queued.Load(),
		Notices: m.notices.Load(), CheckpointRequests: m.checkpointRequests.Load(), CheckpointFailures: m.checkpointFailures.Load(),
		Moves: m.moves.Load(), Forged: m.forged.Load(), DeposedWrites: m.deposedWrites.Load(), Overhead: money.Micros(m.overhead.Load()),
	}
}

// Register adds the scheduler's metrics to a Prometheus registry. The
// placements, launch errors and moves are labelled (spotwise_placements_total
// and the others in labelled.go); the unlabelled totals stay in Stats.
func (m *Metrics) Register(r prometheus.Registerer) error {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	seconds := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: name, Help: help}, func() float64 { return time.Duration(v.Load()).Seconds() })
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: name, Help: help}, f)
	}
	v := m.vecs()
	for _, c := range []prometheus.Collector{
		counter("cycles_total", "Scheduling cycles run.", &m.cycles),
		counter("whole_queue_cycles_total", "Scheduling cycles that looked at every queued job (the offer book changed), not only new ones.", &m.wholeCycles),
		seconds("cycle_seconds_total", "Time spent in scheduling cycles.", &m.cycleTime),
		seconds("whole_queue_cycle_seconds_total", "Time spent in scheduling cycles that looked at every queued job.", &m.wholeCycleTime),
		counter("terminations_total", "Instances terminated.", &m.terminations),
		counter("instances_lost_total", "Instances that went away under an active job.", &m.instancesLost),
		counter("attempts_finished_total", "Attempts that ended with the command's exit.", &m.finished),
		counter("reconciliations_total", "Reconciliations against the clouds.", &m.reconciles),
		seconds("reconciliation_seconds_total", "Time spent in reconciliations (one taking longer than the interval between them falls behind).", &m.reconcileTime),
		counter("orphans_terminated_total", "Instances terminated because no job owned them.", &m.orphans),
		counter("notices_total", "Interruption notices acted on.", &m.notices),
		counter("checkpoint_requests_total", "Checkpoint requests delivered to agents.", &m.checkpointRequests),
		counter("checkpoint_failures_total", "Checkpoints that did not finish.", &m.checkpointFailures),
		counter("forged_events_total", "Events refused for an attempt or instance that is not the job's, even by the provider's own listing.", &m.forged),
		counter("deposed_writes_total", "Job writes refused because this scheduler's lease term was over.", &m.deposedWrites),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "spotwise", Subsystem: "scheduler", Name: "overhead_usd_total",
			Help: "Spend on instances no job owns (orphans), in US dollars."}, func() float64 { return money.Micros(m.overhead.Load()).Dollars() }),
		verdictCollector{m},
		gauge("queued_jobs", "Jobs waiting in the queue.", func() float64 { return float64(m.queued.Load()) }),
		gauge("last_cycle_seconds", "Duration of the last scheduling cycle.", func() float64 { return time.Duration(m.lastCycle.Load()).Seconds() }),
		v.placements, v.launchErrors, v.moves, v.queueToRunning, v.noticeToCheckpoint,
		viewCollector{m},
	} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
