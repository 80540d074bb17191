package agent

import (
	"context"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/clock"
	"github.com/spotwise/spotwise/providers"
)

// Reporter sends an agent report; the bus implements it.
type Reporter interface {
	Publish(ctx context.Context, subject string, p events.Payload, opts ...events.PublishOption) error
}

// GPULookup finds the GPU type of an instance type; the catalog does.
type GPULookup func(provider, instanceType string) (gpu string, ok bool)

// SimWorkload runs jobs on simulated instances: a job's work takes the
// runtime its GPU type implies (the throughput table), progress is
// reported in steps, and the exit comes when the work is done.
type SimWorkload struct {
	Clock      clock.Clock
	Reporter   Reporter
	Throughput bidding.ThroughputTable
	GPUOf      GPULookup
	Log        *zap.Logger
	// Steps is how many progress reports a full run sends (default 20).
	Steps int
}

// Start begins the workload on a running instance. Only node 0 of a
// multi-node job reports; the other nodes are its silent peers.
func (s *SimWorkload) Start(inst providers.Instance, w providers.Workload) (stop func()) {
	if inst.Node != 0 || inst.JobID == "" {
		return func() {}
	}
	log := s.Log
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("job", inst.JobID), zap.String("instance", inst.ID))
	runtime, err := s.runtime(inst, w)
	if err != nil {
		log.Error("cannot size simulated workload", zap.Error(err))
		return func() {}
	}
	r := &simRun{s: s, inst: inst, w: w, runtime: runtime, log: log, done: make(chan struct{})}
	go r.loop()
	return r.stop
}

// runtime is the full work's wall time on this instance's GPU type.
func (s *SimWorkload) runtime(inst providers.Instance, w providers.Workload) (time.Duration, error) {
	gpu, ok := s.GPUOf(inst.Provider, inst.InstanceType)
	if !ok {
		gpu = w.ReferenceGPU
	}
	return bidding.Runtime(s.Throughput, time.Duration(w.ReferenceSeconds*float64(time.Second)), w.ReferenceGPU, gpu, w.Class)
}

type simRun struct {
	s       *SimWorkload
	inst    providers.Instance
	w       providers.Workload
	runtime time.Duration
	log     *zap.Logger
	once    sync.Once
	done    chan struct{}
}

func (r *simRun) stop() { r.once.Do(func() { close(r.done) }) }

// progressAt is the fraction of the work done at now: what earlier
// attempts kept plus what this instance has done since it started running.
func (r *simRun) progressAt(now time.Time) float64 {
	start := r.inst.RunningAt
	if start.IsZero() {
		start = now
	}
	if r.runtime <= 0 {
		return 1
	}
	p := r.w.ResumeFrom + (1-r.w.ResumeFrom)*float64(now.Sub(start))/float64(r.runtime)
	return math.Max(0, math.Min(1, p))
}

func (r *simRun) loop() {
	steps := r.s.Steps
	if steps <= 0 {
		steps = 20
	}
	now := r.s.Clock.Now()
	if !r.report(events.AgentStarted, r.progressAt(now), 0) {
		return
	}
	remaining := time.Duration(float64(r.runtime) * (1 - r.w.ResumeFrom))
	step := max(remaining/time.Duration(steps), time.Second)
	for {
		now = r.s.Clock.Now()
		p := r.progressAt(now)
		if p >= 1 {
			r.report(events.AgentExited, 1, 0)
			return
		}
		start := r.inst.RunningAt
		if start.IsZero() {
			start = now
		}
		finish := start.Add(remaining)
		wait := min(step, finish.Sub(now))
		t := r.s.Clock.NewTimer(max(wait, time.Millisecond))
		select {
		case <-r.done:
			t.Stop()
			return
		case <-t.C():
		}
		if p2 := r.progressAt(r.s.Clock.Now()); p2 < 1 {
			if !r.report(events.AgentProgress, p2, 0) {
				return
			}
		}
	}
}

// report publishes one report, retrying until it is stored or the run is
// stopped; it returns false when stopped.
func (r *simRun) report(kind string, progress float64, code int) bool {
	rep := &events.AgentReport{JobID: r.inst.JobID, Attempt: r.inst.Attempt, InstanceID: r.inst.ID, Kind: kind, Progress: progress, ExitCode: code}
	for try := 0; ; try++ {
		select {
		case <-r.done:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := r.s.Reporter.Publish(ctx, events.AgentSubject(r.inst.JobID), rep)
		cancel()
		if err == nil {
			return true
		}
		r.log.Warn("agent report not delivered; retrying", zap.String("event", kind), zap.Error(err))
		select {
		case <-r.done:
			return false
		case <-time.After(time.Duration(min(try+1, 10)) * 200 * time.Millisecond):
		}
	}
}
