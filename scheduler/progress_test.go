package scheduler_test

import (
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// An agent's progress reports: the job's record takes one only when it
// says 1% more and the last was written a minute ago or more
// (job.ProgressEvery), or it passes a 10% mark; the reports between change
// nothing.
func TestProgressReportsAreWrittenAtMostOnceAMinute(t *testing.T) {
	r := newRig(t, rigOpt{})
	rec := r.runToRunning(t, spotT4)
	a := rec.Status.Current
	real := r.instancesFor(t, rec.ID)[0]
	report := func(p float64) {
		t.Helper()
		rep := &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: real.ID, Kind: events.AgentProgress, Progress: p}
		if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, a.N), rep); err != nil {
			t.Fatal(err)
		}
		r.settle(t)
	}
	steps := []struct {
		after time.Duration
		p     float64
		want  float64 // the record's progress afterwards
	}{
		{0, 0.10, 0.10},                  // the first report is written
		{time.Second, 0.12, 0.10},        // a second later: not yet
		{20 * time.Second, 0.15, 0.10},   // still within the minute
		{40 * time.Second, 0.155, 0.155}, // a minute since the last write
		{2 * time.Minute, 0.16, 0.155},   // under 1% more, however late
		{time.Second, 0.2, 0.2},          // 1% more, and the minute has passed
	}
	for i, st := range steps {
		r.clk.Set(r.clk.Now().Add(st.after))
		report(st.p)
		if got := r.get(t, rec.ID).Status.Progress; got != st.want {
			t.Fatalf("report %d (%.3f): the record's progress is %.3f, want %.3f", i, st.p, got, st.want)
		}
	}
	if got := r.get(t, rec.ID); got.Status.State != job.Running {
		t.Fatalf("the job is %s, want running", got.Status.State)
	}
}
