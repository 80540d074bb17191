package agent

import (
	"context"
	"math"
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
// multi-node job reports; the other nodes are its silent peers. The
// returned stop ends the run and returns once it has ended, so nothing is
// reported after it.
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
	// The instance has worked since it started running; one restored after
	// a restart has done part of its share already. Without a running time,
	// it starts now, and the start is fixed once so time keeps counting.
	start := inst.RunningAt
	if start.IsZero() {
		start = s.Clock.Now()
	}
	resume := math.Max(0, math.Min(1, w.ResumeFrom))
	ctx, cancel := context.WithCancel(context.Background())
	r := &simRun{s: s, inst: inst, resume: resume, runtime: runtime, start: start,
		finish: start.Add(time.Duration(float64(runtime) * (1 - resume))),
		log:    log, ctx: ctx, cancel: cancel, ended: make(chan struct{})}
	go r.loop()
	return r.stop
}

// runtime is the full work's wall time on this instance's GPU type.
func (s *SimWorkload) runtime(inst providers.Instance, w providers.Workload) (time.Duration, error) {
	gpu, ok := "", false
	if s.GPUOf != nil {
		gpu, ok = s.GPUOf(inst.Provider, inst.InstanceType)
	}
	if !ok {
		gpu = w.ReferenceGPU
	}
	return bidding.Runtime(s.Throughput, time.Duration(w.ReferenceSeconds*float64(time.Second)), w.ReferenceGPU, gpu, w.Class)
}

type simRun struct {
	s      *SimWorkload
	inst   providers.Instance
	resume float64 // what earlier attempts kept (0..1)
	// runtime is the whole work's wall time on this GPU; this instance
	// works from start and is done at finish.
	runtime time.Duration
	start   time.Time
	finish  time.Time
	log     *zap.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	ended   chan struct{}
}

func (r *simRun) stop() {
	r.cancel()
	<-r.ended
}

// progressAt is the fraction of the work done at now: what earlier
// attempts kept plus what this instance has done since it started running.
func (r *simRun) progressAt(now time.Time) float64 {
	if !now.Before(r.finish) || r.runtime <= 0 {
		return 1
	}
	p := r.resume + float64(now.Sub(r.start))/float64(r.runtime)
	return math.Max(r.resume, math.Min(1, p))
}

func (r *simRun) loop() {
	defer close(r.ended)
	steps := r.s.Steps
	if steps <= 0 {
		steps = 20
	}
	if !r.report(events.AgentStarted, r.progressAt(r.s.Clock.Now()), 0) {
		return
	}
	step := max(r.finish.Sub(r.start)/time.Duration(steps), time.Second)
	for {
		now := r.s.Clock.Now()
		if !now.Before(r.finish) {
			r.report(events.AgentExited, 1, 0)
			return
		}
		t := r.s.Clock.NewTimer(min(step, r.finish.Sub(now)))
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if now := r.s.Clock.Now(); now.Before(r.finish) {
			if !r.report(events.AgentProgress, r.progressAt(now), 0) {
				return
			}
		}
	}
}

// report publishes one report, retrying until it is stored or the run is
// stopped; it returns false when stopped. The backoff is wall time: it
// spares a struggling bus, whatever speed the simulated clock runs at.
func (r *simRun) report(kind string, progress float64, code int) bool {
	rep := &events.AgentReport{JobID: r.inst.JobID, Attempt: r.inst.Attempt, InstanceID: r.inst.ID, Kind: kind, Progress: progress, ExitCode: code}
	for try := 0; ; try++ {
		if r.ctx.Err() != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		err := r.s.Reporter.Publish(ctx, events.AgentSubject(r.inst.JobID), rep)
		cancel()
		if err == nil {
			return true
		}
		if r.ctx.Err() != nil {
			return false
		}
		r.log.Warn("agent report not delivered; retrying", zap.String("event", kind), zap.Error(err))
		t := time.NewTimer(time.Duration(min(try+1, 10)) * 200 * time.Millisecond)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
