package agent_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// a100Speedup is the catalog's mixed-precision figure for the A100 40GB
// in a p4d.24xlarge, relative to a V100: 6 h of V100 work takes 6h/2.6.
const a100Speedup = 2.6

// onA100 is how long work measured on a V100 takes on a p4d.24xlarge.
func onA100(onV100 time.Duration) time.Duration {
	return time.Duration(float64(onV100) / a100Speedup)
}

// recorder is a Reporter that keeps what it is given. It can fail its
// first calls, or block each call until the caller gives up.
type recorder struct {
	mu       sync.Mutex
	reports  []events.AgentReport
	subjects []string
	output   []string // the lines of output shipped
	times    []time.Time
	calls    int
	failures int  // calls left to fail
	block    bool // every call waits for its context to end
}

func (r *recorder) Publish(ctx context.Context, subject string, p events.Payload, _ ...events.PublishOption) error {
	if b, ok := p.(*events.LogBatch); ok { // the run's output, kept apart from its reports
		if err := b.Validate(); err != nil {
			return err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range b.Lines {
			r.output = append(r.output, l.Text)
			r.times = append(r.times, l.Time)
		}
		return nil
	}
	r.mu.Lock()
	r.calls++
	block := r.block
	if r.failures > 0 {
		r.failures--
		r.mu.Unlock()
		return errors.New("nats: no responders available for request")
	}
	r.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	rep, ok := p.(*events.AgentReport)
	if !ok {
		return fmt.Errorf("unexpected payload %T", p)
	}
	if err := rep.Validate(); err != nil {
		return err // what the bus would refuse
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, *rep)
	r.subjects = append(r.subjects, subject)
	return nil
}

func (r *recorder) got() []events.AgentReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.AgentReport(nil), r.reports...)
}

func (r *recorder) exited() bool {
	for _, rep := range r.got() {
		if rep.Kind == events.AgentExited {
			return true
		}
	}
	return false
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.output...)
}

func (r *recorder) callCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// env is one workload on a fake clock, with the bundled catalog.
type env struct {
	t   *testing.T
	clk *clock.Fake
	rec *recorder
	sw  *agent.SimWorkload
	// exited reports whether the exit was seen (default: recorded).
	exited func() bool
}

func newEnv(t *testing.T, steps int) *env {
	return newEnvWith(t, &recorder{}, steps)
}

func newEnvWith(t *testing.T, rec *recorder, steps int) *env {
	clk := clock.NewFake(t0)
	return &env{t: t, clk: clk, rec: rec, sw: simWorkload(t, clk, rec, steps), exited: rec.exited}
}

func simWorkload(t *testing.T, clk clock.Clock, r agent.Reporter, steps int) *agent.SimWorkload {
	cat := catalog.Default()
	return &agent.SimWorkload{
		Clock: clk, Reporter: r, Throughput: cat, Steps: steps,
		Log: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
		GPUOf: func(provider, itype string) (string, bool) {
			it, ok := cat.InstanceType(provider, itype)
			return it.GPU, ok
		},
	}
}

func instance(itype string) providers.Instance {
	return providers.Instance{
		ID: "i-0001", Provider: "aws", Region: "us-east-1", InstanceType: itype,
		State: providers.InstanceRunning, JobID: job.NewID(t0), Attempt: 1,
		LaunchedAt: t0.Add(-3 * time.Minute), RunningAt: t0,
	}
}

// bertOnV100 is 6 hours of mixed-precision work measured on a V100.
func bertOnV100(resume float64) providers.Workload {
	return providers.Workload{ReferenceGPU: "V100", ReferenceSeconds: (6 * time.Hour).Seconds(),
		Class: catalog.ClassTrainMixed, ResumeFrom: resume}
}

// settle waits until the workload has caught up with the clock: it is
// asleep on its next step, or it has exited.
func (e *env) settle() {
	e.t.Helper()
	testutil.CheckFor(e.t, 5*time.Second, time.Millisecond, func() error {
		if e.clk.Timers() == 1 || e.exited() {
			return nil
		}
		return fmt.Errorf("workload neither waiting nor exited (%d timers)", e.clk.Timers())
	})
}

// advance moves the clock by d a tick at a time, letting the workload
// catch up after each tick.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	for end := e.clk.Now().Add(d); e.clk.Now().Before(end); {
		e.clk.Advance(min(tick, end.Sub(e.clk.Now())))
		e.settle()
	}
}

// tick is how far the tests move the clock at a time, letting the workload
// catch up after each: fine enough that steps of a few minutes land close
// to where a real clock would wake them.
const tick = 10 * time.Second

// runUntilExit advances the clock a tick at a time until the workload
// exits, and returns the fake time that took.
func (e *env) runUntilExit(limit time.Duration) time.Duration {
	e.t.Helper()
	e.settle()
	for !e.exited() {
		if e.clk.Now().Sub(t0) > limit {
			e.t.Fatalf("no exit after %s of clock time", limit)
		}
		e.clk.Advance(tick)
		e.settle()
	}
	return e.clk.Now().Sub(t0)
}

// checkReports checks what any finished run reports: one start first, one
// successful exit last, progress within 0..1 and never going back.
func checkReports(t *testing.T, inst providers.Instance, reps []events.AgentReport) {
	t.Helper()
	if len(reps) < 2 {
		t.Fatalf("got %d reports, want at least a start and an exit", len(reps))
	}
	if reps[0].Kind != events.AgentStarted {
		t.Errorf("first report is %q, want %q", reps[0].Kind, events.AgentStarted)
	}
	last := reps[len(reps)-1]
	if last.Kind != events.AgentExited || last.ExitCode != 0 || last.Progress != 1 {
		t.Errorf("last report = %+v, want a successful exit at progress 1", last)
	}
	prev := 0.0
	for i, rep := range reps {
		if rep.JobID != inst.JobID || rep.Attempt != inst.Attempt || rep.InstanceID != inst.ID {
			t.Errorf("report %d is for %s attempt %d on %s, want %s attempt %d on %s",
				i, rep.JobID, rep.Attempt, rep.InstanceID, inst.JobID, inst.Attempt, inst.ID)
		}
		if rep.Progress < 0 || rep.Progress > 1 {
			t.Errorf("report %d: progress %v outside 0..1", i, rep.Progress)
		}
		if rep.Progress < prev {
			t.Errorf("report %d: progress went back from %v to %v", i, prev, rep.Progress)
		}
		prev = rep.Progress
		if i > 0 && i < len(reps)-1 && rep.Kind != events.AgentProgress {
			t.Errorf("report %d is %q, want %q between start and exit", i, rep.Kind, events.AgentProgress)
		}
	}
}

func TestSimWorkloadRunsAtItsGPUSpeed(t *testing.T) {
	const steps = 20
	a100 := onA100(6 * time.Hour)
	tests := []struct {
		name          string
		instanceType  string
		resume        float64
		wantRuntime   time.Duration
		wantFirstProg float64
		noRunningAt   bool // the cloud recorded no running time
	}{
		{"6h on V100 runs about 2h18m on A100s", "p4d.24xlarge", 0, a100, 0, false},
		{"6h on V100 runs 6h on V100s", "p3.16xlarge", 0, 6 * time.Hour, 0, false},
		{"resumed halfway it finishes in half the time", "p4d.24xlarge", 0.5, a100 / 2, 0.5, false},
		{"an unknown instance type runs at the reference GPU's speed", "x9.imaginary", 0, 6 * time.Hour, 0, false},
		{"without a recorded running time it runs from its start", "p4d.24xlarge", 0, a100, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, steps)
			inst := instance(tt.instanceType)
			if tt.noRunningAt {
				inst.RunningAt = time.Time{}
			}
			stop := e.sw.Start(inst, bertOnV100(tt.resume))
			defer stop()

			took := e.runUntilExit(7 * time.Hour)
			// The clock moves a tick at a time: the exit comes with the
			// first tick at or past the end of the work, not before.
			if took < tt.wantRuntime || took >= tt.wantRuntime+tick {
				t.Errorf("exited after %s of clock time, want %s", took, tt.wantRuntime.Round(time.Second))
			}

			reps := e.rec.got()
			checkReports(t, inst, reps)
			if math.Abs(reps[0].Progress-tt.wantFirstProg) > 1e-9 {
				t.Errorf("first report at progress %v, want %v", reps[0].Progress, tt.wantFirstProg)
			}
			// A start, a progress report every 1/steps of the whole work
			// (so fewer when resumed), an exit.
			want := int(math.Round(float64(steps)*(1-tt.resume))) + 1
			if n := len(reps); n < want-1 || n > want+1 {
				t.Errorf("got %d reports, want about %d", n, want)
			}
			for i, s := range e.rec.subjects {
				if s != events.AgentSubject(inst.JobID, inst.Attempt) {
					t.Errorf("report %d on %q, want %q", i, s, events.AgentSubject(inst.JobID, inst.Attempt))
				}
			}
		})
	}
}

func TestSimWorkloadProgressTracksTheClock(t *testing.T) {
	const steps = 12
	e := newEnv(t, steps)
	inst := instance("p3.16xlarge") // V100s: 6 hours, a step every 30 minutes
	stop := e.sw.Start(inst, bertOnV100(0))
	defer stop()
	e.settle()
	for h := 1; h <= 5; h++ {
		e.advance(time.Hour)
		reps := e.rec.got()
		last := reps[len(reps)-1]
		// The last report is at most one step old.
		want := float64(h) / 6
		if last.Kind != events.AgentProgress || last.Progress > want || last.Progress < want-1.0/steps-0.01 {
			t.Fatalf("after %dh of 6h the last report is %s at %.3f, want progress just under %.3f", h, last.Kind, last.Progress, want)
		}
	}
	if e.rec.exited() {
		t.Fatal("exited after 5h of 6h of work")
	}
}

func TestSimWorkloadRestoredAfterRestart(t *testing.T) {
	a100 := onA100(6 * time.Hour)
	tests := []struct {
		name      string
		ranFor    time.Duration // before the restart, on this instance
		resume    float64       // kept by earlier attempts
		wantFirst float64
		wantLeft  time.Duration
	}{
		{"most of the work done", 2 * time.Hour, 0, float64(2*time.Hour) / float64(a100), a100 - 2*time.Hour},
		{"a resumed attempt that ran a while", time.Hour, 0.5, 0.5 + float64(time.Hour)/float64(a100), a100/2 - time.Hour},
		{"the work finished while the server was down", 3 * time.Hour, 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 20)
			inst := instance("p4d.24xlarge")
			inst.RunningAt = t0.Add(-tt.ranFor)
			stop := e.sw.Start(inst, bertOnV100(tt.resume))
			defer stop()

			testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
				if len(e.rec.got()) == 0 {
					return errors.New("no report yet")
				}
				return nil
			})
			if first := e.rec.got()[0]; math.Abs(first.Progress-tt.wantFirst) > 0.001 {
				t.Errorf("first report at progress %.4f, want %.4f at once", first.Progress, tt.wantFirst)
			}
			took := e.runUntilExit(3 * time.Hour)
			if tt.wantLeft <= 0 && took != 0 {
				t.Errorf("exited after %s, want at once", took)
			}
			if tt.wantLeft > 0 && (took < tt.wantLeft || took >= tt.wantLeft+tick) {
				t.Errorf("exited %s after the restart, want %s", took, tt.wantLeft.Round(time.Second))
			}
			checkReports(t, inst, e.rec.got())
		})
	}
}

func TestSimWorkloadStartsNothing(t *testing.T) {
	tests := []struct {
		name string
		edit func(*providers.Instance)
	}{
		{"a peer node of a multi-node job", func(i *providers.Instance) { i.Node = 1 }},
		{"an instance without a job", func(i *providers.Instance) { i.JobID = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 20)
			inst := instance("p4d.24xlarge")
			tt.edit(&inst)
			before := runtime.NumGoroutine()
			stop := e.sw.Start(inst, bertOnV100(0))
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("%d goroutines after Start, %d before", n, before)
			}
			e.clk.Advance(7 * time.Hour)
			stop()
			if n := e.rec.callCount(); n != 0 {
				t.Errorf("%d reports sent, want none", n)
			}
			if n := e.clk.Timers(); n != 0 {
				t.Errorf("%d timers waiting, want none", n)
			}
		})
	}
}

func TestSimWorkloadStop(t *testing.T) {
	tests := []struct {
		name string
		rec  *recorder
		// ready waits until the run is where stop should catch it.
		ready func(t *testing.T, e *env)
	}{
		{"while it waits for its next step", &recorder{}, func(t *testing.T, e *env) {
			e.settle()
			e.clk.Advance(20 * time.Minute) // a few reports in
			e.settle()
		}},
		{"while a report is being retried", &recorder{failures: math.MaxInt}, func(t *testing.T, e *env) {
			testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
				if e.rec.callCount() == 0 {
					return errors.New("no publish tried yet")
				}
				return nil
			})
		}},
		{"while a report is in flight", &recorder{block: true}, func(t *testing.T, e *env) {
			testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
				if e.rec.callCount() == 0 {
					return errors.New("no publish tried yet")
				}
				return nil
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			baseline := runtime.NumGoroutine()
			e := newEnvWith(t, tt.rec, 20)
			stop := e.sw.Start(instance("p4d.24xlarge"), bertOnV100(0))
			tt.ready(t, e)

			done := make(chan struct{})
			go func() { stop(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				t.Fatal("stop did not return within 2s")
			}
			stop() // the cloud may stop an instance twice: harmless

			got := len(e.rec.got())
			e.clk.Advance(7 * time.Hour)
			if n := len(e.rec.got()); n != got {
				t.Errorf("%d reports after stop", n-got)
			}
			if e.rec.exited() {
				t.Error("a stopped run reported an exit")
			}
			if n := e.clk.Timers(); n != 0 {
				t.Errorf("%d timers still waiting after stop", n)
			}
			testutil.CheckFor(t, 2*time.Second, 5*time.Millisecond, func() error {
				if n := runtime.NumGoroutine(); n > baseline {
					return fmt.Errorf("%d goroutines, %d before the run", n, baseline)
				}
				return nil
			})
		})
	}
}

func TestSimWorkloadRetriesAFailingReporter(t *testing.T) {
	e := newEnv(t, 4)
	e.rec.failures = 2 // the bus is briefly unreachable
	inst := instance("p4d.24xlarge")
	stop := e.sw.Start(inst, bertOnV100(0))
	defer stop()

	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if len(e.rec.got()) == 0 {
			return fmt.Errorf("no report stored after %d tries", e.rec.callCount())
		}
		return nil
	})
	if n := e.rec.callCount(); n != 3 {
		t.Errorf("the start was published in %d tries, want 3 (two failures, one success)", n)
	}
	e.runUntilExit(3 * time.Hour)
	checkReports(t, inst, e.rec.got())
}

// The reports really land in the agent stream, where the scheduler reads
// them.
func TestSimWorkloadReportsReachTheAgentStream(t *testing.T) {
	clk := clock.NewFake(t0)
	bus := eventstest.NewBus(t, clk)
	inst := instance("p4d.24xlarge")

	var mu sync.Mutex
	var got []events.Message
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopConsuming, err := bus.Consume(ctx, events.ConsumerConfig{Stream: events.StreamAgent, Durable: "test-agent",
		Subjects: []string{events.AgentSubject(inst.JobID, inst.Attempt)}}, func(_ context.Context, m events.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopConsuming()
	received := func() []events.AgentReport {
		mu.Lock()
		defer mu.Unlock()
		var reps []events.AgentReport
		for _, m := range got {
			if rep, ok := m.Payload.(*events.AgentReport); ok {
				reps = append(reps, *rep)
			}
		}
		return reps
	}

	const steps = 4
	e := &env{t: t, clk: clk, sw: simWorkload(t, clk, bus, steps), exited: func() bool {
		reps := received()
		return len(reps) > 0 && reps[len(reps)-1].Kind == events.AgentExited
	}}
	stop := e.sw.Start(inst, bertOnV100(0))
	defer stop()
	e.runUntilExit(3 * time.Hour)

	reps := received()
	checkReports(t, inst, reps)
	if len(reps) != steps+1 {
		t.Errorf("consumed %d reports, want a start, %d progress reports and an exit", len(reps), steps-1)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range got {
		if m.Envelope.Type != events.TypeAgentReport || m.Subject != events.AgentSubject(inst.JobID, inst.Attempt) {
			t.Errorf("message %s on %s, want %s on %s", m.Envelope.Type, m.Subject, events.TypeAgentReport, events.AgentSubject(inst.JobID, inst.Attempt))
		}
	}
	if exit := got[len(got)-1].Envelope.Time; exit.Sub(t0) < 2*time.Hour {
		t.Errorf("exit stamped %s, want the fake clock's time, past %s", exit, t0.Add(2*time.Hour))
	}
}
