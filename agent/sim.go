package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
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
// reported in steps, checkpoints are taken when the scheduler asks and on
// the plan's interval (each pauses the work for the checkpoint's duration
// and stores a real, small checkpoint), a replacement resumes from the
// newest good checkpoint of earlier attempts, and the exit comes when the
// work is done. It reports exactly what a real agent reports, and writes
// output as a training script would (where it runs, where it resumed
// from, its progress every 5%, each checkpoint saved, its end), shipped
// to the log stream by the real agent's LogShipper.
type SimWorkload struct {
	Clock      clock.Clock
	Reporter   Reporter
	Throughput bidding.ThroughputTable
	GPUOf      GPULookup
	Log        *zap.Logger
	// Checkpoints is where checkpoints go; nil: the workload cannot
	// checkpoint (a move starts it over).
	Checkpoints checkpoint.Store
	// Control receives the scheduler's requests; nil: none.
	Control Answerer
	// Steps is how many progress reports a full run sends (default 20),
	// at most one every half job.ProgressEvery.
	Steps int
	// Logs bounds the shipping of the output (defaults: LogShipOptions).
	Logs LogShipOptions

	// active counts the runs doing something now, not parked waiting for
	// the clock or a request; parked holds the parked runs' request
	// channels, to see a request not yet taken up.
	active atomic.Int64
	mu     sync.Mutex
	parked map[*simRun]<-chan *events.AgentControl
}

// Busy reports whether a run is doing something now rather than waiting
// for the simulated clock or for a request: a report being published, a
// checkpoint being stored, a request from the scheduler not yet taken up.
// Tests that drive a fake clock wait for it before they move time on.
func (s *SimWorkload) Busy() bool {
	if s.active.Load() > 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.parked {
		if len(ch) > 0 {
			return true
		}
	}
	return false
}

// park marks r as waiting (for the clock or requests) until unpark.
func (r *simRun) park(requests <-chan *events.AgentControl) {
	r.s.mu.Lock()
	if r.s.parked == nil {
		r.s.parked = map[*simRun]<-chan *events.AgentControl{}
	}
	r.s.parked[r] = requests
	r.s.mu.Unlock()
	r.s.active.Add(-1)
}

func (r *simRun) unpark() {
	r.s.active.Add(1) // before it leaves parked: never counted as neither
	r.s.mu.Lock()
	delete(r.s.parked, r)
	r.s.mu.Unlock()
}

// InProcess reports that a simulated workload's agent runs in this
// process, reporting with Reporter: it needs no NATS credential.
func (s *SimWorkload) InProcess([]string) bool { return true }

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
	gpu, ok := "", false
	if s.GPUOf != nil {
		gpu, ok = s.GPUOf(inst.Provider, inst.InstanceType)
	}
	if !ok {
		gpu = w.ReferenceGPU
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &simRun{s: s, inst: inst, w: w, runtime: runtime, log: log, ctx: ctx, cancel: cancel, ended: make(chan struct{}), gpu: gpu}
	s.active.Add(1) // until loop parks or ends
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
	s       *SimWorkload
	inst    providers.Instance
	w       providers.Workload
	runtime time.Duration // the whole work's wall time on this GPU
	log     *zap.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	ended   chan struct{}

	resume   float64              // what earlier attempts kept (0..1)
	restored *checkpoint.Manifest // the checkpoint it resumed from
	start    time.Time            // when this instance's work began
	paused   time.Duration        // time spent checkpointing (no progress)
	gpu      string               // what the work runs on
	out      *LogShipper          // the run's output
	nextLine float64              // the progress its next progress line is for
}

func (r *simRun) stop() {
	r.cancel()
	<-r.ended
}

// finish is when the work is done, given the pauses so far.
func (r *simRun) finish() time.Time {
	return r.start.Add(r.paused + time.Duration(float64(r.runtime)*(1-r.resume)))
}

// progressAt is the fraction of the work done at now: what earlier
// attempts kept plus what this instance has done since it started.
func (r *simRun) progressAt(now time.Time) float64 {
	if !now.Before(r.finish()) || r.runtime <= 0 {
		return 1
	}
	p := r.resume + float64(now.Sub(r.start)-r.paused)/float64(r.runtime)
	return math.Max(r.resume, math.Min(1, p))
}

// sleepUntil waits on the simulated clock; false if the run was stopped.
func (r *simRun) sleepUntil(t time.Time) bool {
	d := t.Sub(r.s.Clock.Now())
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	tm := r.s.Clock.NewTimer(d)
	defer tm.Stop()
	r.park(nil)
	defer r.unpark()
	select {
	case <-r.ctx.Done():
		return false
	case <-tm.C():
		return true
	}
}

// restoreEarlier restores the newest good checkpoint of the job's earlier
// attempts and resumes from its progress.
func (r *simRun) restoreEarlier(st checkpoint.Store) {
	dir, err := os.MkdirTemp("", "spotwise-sim-restore-")
	if err != nil {
		r.log.Warn("restoring checkpoint; starting from the scheduler's resume point", zap.Error(err))
		return
	}
	defer os.RemoveAll(dir)
	m, corrupt, err := restoreFromEarlier(r.ctx, st, r.inst.JobID, r.inst.Attempt, dir)
	switch {
	case err == nil:
		r.restored = &m
		if state, err := readSimState(dir); err == nil {
			r.resume = state.Progress
		} else {
			r.resume = m.Progress
		}
	case errors.Is(err, checkpoint.ErrNotFound):
		r.resume = 0
	default:
		r.log.Warn("restoring checkpoint; starting from the scheduler's resume point", zap.Error(err))
	}
	if corrupt > 0 {
		r.log.Warn("skipped corrupt checkpoints", zap.Int("corrupt", corrupt))
	}
}

// begin waits until it may start (a replacement waits for the attempt it
// replaces to checkpoint: until the scheduler says start, at the latest
// StartAfter), then finds where the work resumes from.
func (r *simRun) begin(requests <-chan *events.AgentControl) bool {
	r.park(requests)
	err := waitToStart(r.ctx, r.s.Clock, r.w.StartAfter, requests)
	r.unpark()
	if err != nil {
		return false
	}
	began := r.s.Clock.Now()
	r.resume = math.Max(0, math.Min(1, r.w.ResumeFrom))
	if st := r.s.Checkpoints; st != nil && !r.w.Checkpoint.Disabled {
		ms, err := st.List(r.ctx, r.inst.JobID)
		switch {
		case err != nil:
			r.log.Warn("restoring checkpoint; starting from the scheduler's resume point", zap.Error(err))
		case !slices.ContainsFunc(ms, func(m checkpoint.Manifest) bool { return m.Attempt < r.inst.Attempt }):
			// No earlier attempt stored one: the work starts from the
			// beginning, and there is nothing to restore into a folder
			// (most runs: at 200 jobs a second, making and removing it
			// was 2.5% of the server's CPU).
			r.resume = 0
		default:
			r.restoreEarlier(st)
		}
		// A run restored after a server restart has already paused for
		// the checkpoints it stored.
		for _, m := range ms {
			if m.Attempt == r.inst.Attempt {
				r.paused += r.w.Checkpoint.Duration
			}
		}
	}
	// The work began when the instance ran, or when it was let start (at
	// StartAfter, or earlier when told): a run restored after a restart
	// keeps the time it began.
	r.start = r.inst.RunningAt
	if held := r.w.StartAfter; !held.IsZero() {
		if began.Before(held) {
			held = began
		}
		if r.start.Before(held) {
			r.start = held
		}
	}
	if r.start.IsZero() {
		r.start = began
	}
	return true
}

func (r *simRun) loop() {
	defer close(r.ended)
	defer r.s.active.Add(-1)
	var requests <-chan *events.AgentControl
	if r.s.Control != nil {
		ch, stop, err := controls(r.s.Control, r.inst.JobID, r.inst.Attempt)
		if err != nil {
			r.log.Warn("listening for the scheduler's requests", zap.Error(err))
		} else {
			defer stop()
			requests = ch
		}
	}
	if !r.begin(requests) {
		return
	}
	r.out = NewLogShipper(r.s.Reporter, LogSource{JobID: r.inst.JobID, Attempt: r.inst.Attempt, Instance: r.inst.ID, Node: r.inst.Node},
		r.s.Clock, r.log, r.s.Logs)
	defer r.closeOutput(time.Second) // stopped: what is not out in a second is lost with the instance
	r.greet()
	started := &events.AgentReport{Kind: events.AgentStarted, Progress: r.progressAt(r.s.Clock.Now())}
	if r.restored != nil {
		started.Checkpoint = refOf(*r.restored, r.restored.CreatedAt)
	}
	if !r.report(started) {
		return
	}
	steps := r.s.Steps
	if steps <= 0 {
		steps = 20
	}
	// No more often than the real agent reports: a report the lifecycle
	// would not write is a message for nothing.
	every := max(time.Duration(float64(r.runtime)/float64(steps)), job.ProgressEvery/2)
	canCheckpoint := r.s.Checkpoints != nil && !r.w.Checkpoint.Disabled
	nextPeriodic := time.Time{}
	if canCheckpoint && r.w.Checkpoint.Interval > 0 {
		nextPeriodic = r.start.Add(r.paused + r.w.Checkpoint.Interval)
	}
	nextReport := r.s.Clock.Now().Add(every)
	for {
		now := r.s.Clock.Now()
		finish := r.finish()
		r.progressLine(now)
		if !now.Before(finish) {
			r.print(events.LogStdout, fmt.Sprintf("training finished: step %d/%d; exiting with code 0", simSteps, simSteps))
			r.closeOutput(10 * time.Second) // the output is stored before the end is reported
			r.report(&events.AgentReport{Kind: events.AgentExited, Progress: 1})
			return
		}
		if !nextPeriodic.IsZero() && !now.Before(nextPeriodic) {
			if !r.checkpoint("periodic") {
				return
			}
			nextPeriodic = r.s.Clock.Now().Add(r.w.Checkpoint.Interval)
			continue
		}
		wake := finish
		if nextReport.Before(wake) {
			wake = nextReport
		}
		if at := r.timeAt(r.nextLine); r.nextLine < 1 && at.Before(wake) {
			wake = at
		}
		if !nextPeriodic.IsZero() && nextPeriodic.Before(wake) {
			wake = nextPeriodic
		}
		tm := r.s.Clock.NewTimer(max(wake.Sub(now), time.Millisecond))
		r.park(requests)
		select {
		case <-r.ctx.Done():
			tm.Stop()
			r.unpark()
			return
		case c := <-requests:
			r.unpark()
			tm.Stop()
			if c.Kind == events.ControlCheckpoint && canCheckpoint {
				if !r.checkpoint(c.Reason) {
					return
				}
			}
		case <-tm.C():
			r.unpark()
			if now := r.s.Clock.Now(); !now.Before(nextReport) && now.Before(r.finish()) {
				if !r.report(&events.AgentReport{Kind: events.AgentProgress, Progress: r.progressAt(now)}) {
					return
				}
				nextReport = now.Add(every)
			}
		}
	}
}

// checkpoint pauses the work for the checkpoint's duration and stores the
// progress reached when it began; false if the run was stopped (the
// capacity went before the checkpoint was stored).
func (r *simRun) checkpoint(why string) bool {
	began := r.s.Clock.Now()
	progress := r.progressAt(began)
	d := r.w.Checkpoint.Duration
	if !r.sleepUntil(began.Add(d)) {
		return false
	}
	r.paused += d
	m, err := saveSimState(r.ctx, r.s.Checkpoints, r.inst.JobID, r.inst.Attempt, progress, r.w.Checkpoint.SizeGB)
	if err != nil {
		if r.ctx.Err() != nil {
			return false
		}
		r.log.Warn("storing checkpoint", zap.String("reason", why), zap.Error(err))
		r.print(events.LogStderr, fmt.Sprintf("checkpoint at %.1f%% failed: %v", progress*100, err))
		return r.report(&events.AgentReport{Kind: events.AgentCheckpointFailed, Progress: progress, Message: err.Error()})
	}
	ref := refOf(m, r.s.Clock.Now())
	if r.w.Checkpoint.SizeGB > 0 {
		ref.Size = int64(r.w.Checkpoint.SizeGB * (1 << 30))
	}
	r.print(events.LogStdout, fmt.Sprintf("checkpoint saved at %.1f%% (step %d, %s)", progress*100, simStep(progress), why))
	return r.report(&events.AgentReport{Kind: events.AgentCheckpoint, Progress: progress, Checkpoint: ref, Message: why})
}

// report publishes one report, retrying until it is stored or the run is
// stopped; it returns false when stopped. The backoff is wall time: it
// spares a struggling bus, whatever speed the simulated clock runs at.
func (r *simRun) report(rep *events.AgentReport) bool {
	rep.JobID, rep.Attempt, rep.InstanceID = r.inst.JobID, r.inst.Attempt, r.inst.ID
	for try := 0; ; try++ {
		if r.ctx.Err() != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		err := r.s.Reporter.Publish(ctx, events.AgentSubject(r.inst.JobID, r.inst.Attempt), rep)
		cancel()
		if err == nil {
			return true
		}
		if r.ctx.Err() != nil {
			return false
		}
		r.log.Warn("agent report not delivered; retrying", zap.String("event", rep.Kind), zap.Error(err))
		t := time.NewTimer(time.Duration(min(try+1, 10)) * 200 * time.Millisecond)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// simSteps is how many steps the simulated training has in all.
const simSteps = 10000

// simLineEvery is the progress between two progress lines.
const simLineEvery = 0.05

// simLineGap is the least simulated time between two progress lines: a
// training script logs every so many steps, not many times a minute. (A
// short job's every 5% would be: 10,000 simulated jobs of a minute each
// wrote 3,000 lines a second, most of the work of a server running them.)
const simLineGap = 30 * time.Second

func simStep(progress float64) int64 { return int64(math.Round(progress * simSteps)) }

// print writes a line of the run's output.
func (r *simRun) print(stream, text string) {
	if r.out != nil {
		r.out.Line(stream, text)
	}
}

// greet writes where the run is and where it starts from.
func (r *simRun) greet() {
	in := r.inst
	r.print(events.LogStdout, fmt.Sprintf("starting on %s (%s %s %s, %s) for job %s attempt %d",
		in.ID, in.Provider, in.Zone, in.InstanceType, r.gpu, in.JobID, in.Attempt))
	switch {
	case r.restored != nil:
		r.print(events.LogStdout, fmt.Sprintf("resuming from checkpoint at %.1f%% (step %d, saved by attempt %d)",
			r.resume*100, simStep(r.resume), r.restored.Attempt))
	case r.resume > 0:
		r.print(events.LogStdout, fmt.Sprintf("resuming at %.1f%% (step %d)", r.resume*100, simStep(r.resume)))
	default:
		r.print(events.LogStdout, fmt.Sprintf("starting from step 0 of %d", simSteps))
	}
	r.nextLine = (math.Floor(r.resume/simLineEvery+1e-9) + 1) * simLineEvery
}

// timeAt is when the work reaches progress p, given the pauses so far.
func (r *simRun) timeAt(p float64) time.Time {
	return r.start.Add(r.paused + time.Duration((p-r.resume)*float64(r.runtime)))
}

// progressLine writes one line when the work has passed the next 5% mark
// (one, however many marks it passed at once); the next is for the first
// mark at least simLineGap later.
func (r *simRun) progressLine(now time.Time) {
	p := r.progressAt(now)
	if r.nextLine >= 1 || p+1e-9 < r.nextLine || p >= 1 {
		return
	}
	r.print(events.LogStdout, fmt.Sprintf("step %d/%d (%.0f%%)", simStep(p), simSteps, p*100))
	after := r.progressAt(now.Add(simLineGap))
	r.nextLine = math.Max((math.Floor(p/simLineEvery+1e-9)+1)*simLineEvery, math.Ceil(after/simLineEvery-1e-9)*simLineEvery)
}

// closeOutput ships the rest of the run's output, within wait.
func (r *simRun) closeOutput(wait time.Duration) {
	if r.out == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r.out.Close(ctx)
}
