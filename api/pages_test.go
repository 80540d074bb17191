package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// A server started on a store that has aged shows its old jobs' pages
// from its local copy, made by replaying the store at start and following
// it since: the same pages the store would give (the newest 500 events of
// a long history), still whole when the store has lost the history, and
// current when a finished job's record changes. A job that finished a
// moment ago, one still running, and one whose record changed lately
// (whatever the jobs' clock says), are read from the store, so a change
// just made shows at once.
func TestOldJobsPagesComeFromTheLocalCopy(t *testing.T) {
	e := newEnv(t)
	ctx := asOp(t.Context())
	finish := func(id string, state job.State) {
		t.Helper()
		e.setRecord(id, func(r *job.Record) { r.Status.State, r.Status.FinishedAt = state, e.clk.Now() })
		e.publish(id, string(state), state)
	}
	done := e.submit(spec().Name("done"))
	for _, k := range []string{job.KindPlacing, job.KindLaunched, job.KindRunning, job.KindProgress} {
		e.publish(done, k, job.Running)
	}
	finish(done, job.Succeeded)
	long := e.submit(spec().Name("long"))
	for i := range 600 {
		if err := e.bus.Publish(t.Context(), events.JobEventsSubject(long), &events.JobEvent{JobID: long, Kind: job.KindProgress, State: job.Running, Message: fmt.Sprint("step ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	finish(long, job.Failed)
	running := e.submit(spec().Name("running"))
	e.publish(running, job.KindRunning, job.Running)
	e.clk.Advance(2 * time.Minute)
	late := e.submit(spec().Name("late"))
	finish(late, job.Cancelled)

	// A second server on the same store: its copy replays all of it.
	copied := startService(t, e.bus, e.clk)
	deadline := time.Now().Add(10 * time.Second)
	for !api.PagesReady(copied) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !api.PagesReady(copied) {
		t.Fatal("the local copy never caught up")
	}
	uncopied := api.NewService(e.bus, nil, e.clk, nil)
	uncopied.KeepPages("", 0)
	if err := uncopied.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	page := func(s *api.Service, id string) string {
		t.Helper()
		v, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	jobs := map[string]string{"done": done, "long": long, "running": running, "late": late}
	want := map[string]string{}
	for name, id := range jobs {
		want[name] = page(uncopied, id)
		if name == "done" || name == "long" {
			continue // read from the copy below, once the store has lost them
		}
		if got := page(copied, id); got != want[name] {
			t.Errorf("%s from the copy differs from the store's:\n%.2000s\n%.2000s", name, got, want[name])
		}
	}
	var v api.JobView
	if err := json.Unmarshal([]byte(want["long"]), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Events) != 500 || v.Events[len(v.Events)-1].Kind != string(job.Failed) {
		t.Fatalf("the long job's page shows %d events, the last %+v: want its newest 500", len(v.Events), v.Events[len(v.Events)-1])
	}

	// The store loses the settled jobs' histories: the copy, which
	// replayed them, still has them, and their pages are as the store
	// showed them before (read from the copy; the store has nothing left
	// to show).
	st, err := jetstream.New(e.bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := st.Stream(t.Context(), events.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{done, long} {
		if err := stream.Purge(t.Context(), jetstream.WithPurgeSubject(events.JobEventsSubject(id))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"done", "long"} {
		if got := page(copied, jobs[name]); got != want[name] {
			t.Errorf("%s from the copy, once the store lost its history, differs from the store's before:\n%.2000s\n%.2000s", name, got, want[name])
		}
	}
	// A job that finished a moment ago is read where it was written: an
	// event just stored shows at once.
	e.publish(late, job.KindProgress, job.Cancelled)
	if err := json.Unmarshal([]byte(page(copied, late)), &v); err != nil || len(v.Events) == 0 || v.Events[len(v.Events)-1].Kind != job.KindProgress {
		t.Errorf("a job just finished does not show the event just stored (%v)", err)
	}

	// A settled job's record changes: the page shows the change.
	e.setRecord(done, func(r *job.Record) { r.Status.Message = "reviewed" })
	deadline = time.Now().Add(10 * time.Second)
	for {
		if err := json.Unmarshal([]byte(page(copied, done)), &v); err != nil {
			t.Fatal(err)
		}
		if v.Message == "reviewed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page still shows %q after the record changed", v.Message)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A record that changed lately is read with its history from the
	// store (the job's last events may still be on their way to the copy,
	// whatever the jobs' clock says): here the store has lost it.
	if len(v.Events) != 0 {
		t.Errorf("after the change the page shows %d events: the copy's, not the store's", len(v.Events))
	}
}

// A server is told once, when its copy of job pages has caught up with
// the store at start: the end of what a start reads (the server hands the
// memory it took back then).
func TestPagesCopiedIsToldOnce(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"a", "b"} {
		e.submit(spec().Name(name))
	}
	svc := api.NewService(e.bus, nil, e.clk, nil)
	var told atomic.Int32
	svc.OnPagesCopied(func() { told.Add(1) })
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !api.PagesReady(svc) || told.Load() == 0 {
			return errors.New("the copy of job pages has not caught up, or did not tell")
		}
		return nil
	})
	e.submit(spec().Name("after"))
	if n := told.Load(); n != 1 {
		t.Fatalf("told %d times, want once", n)
	}
}
