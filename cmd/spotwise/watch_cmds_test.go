package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

var asSystem = auth.WithPrincipal(context.Background(), auth.System("test"))

// jobNamed waits until the API lists a job of that name and returns its ID.
func (a *apiServer) jobNamed(t *testing.T, name string) string {
	t.Helper()
	var id string
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		l, err := a.svc.List(asSystem, api.Query{Name: name})
		if err != nil || len(l.Jobs) == 0 {
			return fmt.Errorf("no job %s yet (%v)", name, err)
		}
		id = l.Jobs[0].ID
		return nil
	})
	return id
}

// end ends a job the way the scheduler would: its record, then the event.
func (a *apiServer) end(t *testing.T, id string, state job.State) {
	t.Helper()
	if state == job.Cancelled {
		if _, err := a.svc.Cancel(asSystem, id, "test"); err != nil {
			t.Fatal(err)
		}
		return
	}
	a.event(t, id, job.KindRunning, job.Running)
	if _, _, err := a.bus.Jobs().Modify(t.Context(), id, func(r *job.Record) error {
		r.Status.State = state
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a.event(t, id, string(state), state)
}

func (a *apiServer) event(t *testing.T, id, kind string, state job.State) {
	t.Helper()
	if err := a.bus.Publish(t.Context(), events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: kind, State: state, Message: kind + " (test)"}); err != nil {
		t.Fatal(err)
	}
}

// cli runs a command of the root as a user would, until it returns or
// ctx ends.
func (a *apiServer) cli(ctx context.Context, args ...string) submitRun {
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--server", a.url, "--token", a.token))
	err := root.ExecuteContext(ctx)
	return submitRun{out.String(), errOut.String(), err}
}

func waitRun(t *testing.T, ch <-chan submitRun) submitRun {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not return")
		return submitRun{}
	}
}

// submit --wait exits 0 only when the job succeeded, with a code per
// outcome, and a code of its own when the server cannot be reached.
func TestSubmitWaitExitCodes(t *testing.T) {
	a := startAPI(t)
	for _, c := range []struct {
		state job.State
		code  int
	}{
		{job.Succeeded, exitOK}, {job.Failed, exitFailed}, {job.Cancelled, exitCancelled}, {job.Expired, exitExpired},
	} {
		t.Run(string(c.state), func(t *testing.T) {
			name := "wait-" + string(c.state)
			path := writeFile(t, "job.yaml", specYAML(name, 1))
			done := make(chan submitRun, 1)
			go func() { done <- a.cli(t.Context(), "submit", path, "--wait") }()
			id := a.jobNamed(t, name)
			a.end(t, id, c.state)
			run := waitRun(t, done)
			if got := exitCode(run.err); got != c.code {
				t.Fatalf("exit %d (%v), want %d\n%s", got, run.err, c.code, run.stderr)
			}
			if want := fmt.Sprintf("submitted %s (%s): %s", id, name, c.state); !strings.Contains(run.stdout, want) {
				t.Errorf("stdout:\n%s\nwant %q", run.stdout, want)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		path := writeFile(t, "job.yaml", specYAML("nowhere", 1))
		root := newRoot()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs([]string{"submit", path, "--wait", "--server", "127.0.0.1:1", "--token", "x"})
		if got := exitCode(root.ExecuteContext(t.Context())); got != exitUnreachable {
			t.Errorf("exit %d, want %d", got, exitUnreachable)
		}
	})
	t.Run("refused", func(t *testing.T) {
		path := writeFile(t, "job.yaml", "name: bad\n")
		if run := a.cli(t.Context(), "submit", path, "--wait"); exitCode(run.err) != exitGeneric {
			t.Errorf("a refused spec: exit %d (%v)", exitCode(run.err), run.err)
		}
	})
}

// job --watch prints each event as it happens, its history first, and
// exits with the job's outcome.
func TestJobWatchPrintsEventsUntilTheEnd(t *testing.T) {
	a := startAPI(t)
	res, err := a.svc.Submit(asSystem, []byte(specYAML("watched", 1)), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			if format == "json" {
				res, err := a.svc.Submit(asSystem, []byte(specYAML("watched-json", 1)), "", "test")
				if err != nil {
					t.Fatal(err)
				}
				id = res.Job.ID
			}
			done := make(chan submitRun, 1)
			go func() { done <- a.cli(t.Context(), "job", id, "--watch", "-o", format) }()
			a.event(t, id, job.KindPlacing, job.Placing)
			a.end(t, id, job.Failed)
			run := waitRun(t, done)
			if got := exitCode(run.err); got != exitFailed {
				t.Fatalf("exit %d (%v), want %d", got, run.err, exitFailed)
			}
			var kinds []string
			for _, l := range strings.Split(strings.TrimSpace(run.stdout), "\n") {
				if format == "json" {
					var ev api.StreamEvent
					if err := json.Unmarshal([]byte(l), &ev); err != nil {
						t.Fatalf("a line of -o json is not an event: %q", l)
					}
					kinds = append(kinds, ev.Kind)
					continue
				}
				if f := strings.Fields(l); len(f) > 2 && f[0] != "job" {
					kinds = append(kinds, f[2])
				}
			}
			if want := []string{job.KindQueued, job.KindPlacing, job.KindRunning, string(job.Failed)}; strings.Join(kinds, " ") != strings.Join(want, " ") {
				t.Errorf("events %v, want %v\n%s", kinds, want, run.stdout)
			}
			if format == "table" && !strings.Contains(run.stdout, "job "+id+" failed") {
				t.Errorf("no closing line:\n%s", run.stdout)
			}
		})
	}
}

// jobs --watch prints the listing, then a line per change, of the jobs
// asked for, until interrupted (which is not an error).
func TestJobsWatchPrintsALinePerChange(t *testing.T) {
	a := startAPI(t)
	res, err := a.svc.Submit(asSystem, []byte(specYAML("first", 1)), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs([]string{"jobs", "--watch", "--state", "running,failed", "--server", a.url, "--token", a.token})
		done <- root.ExecuteContext(ctx)
	}()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(out.String(), "no jobs") {
			return fmt.Errorf("no listing yet: %q", out.String())
		}
		return nil
	})
	// The stream may not be open the moment the listing is printed: send
	// events until one shows.
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		a.event(t, res.Job.ID, job.KindProgress, job.Running)
		if !strings.Contains(out.String(), res.Job.ID) {
			return fmt.Errorf("no line for the job yet")
		}
		return nil
	})
	a.event(t, res.Job.ID, job.KindPlacing, job.Placing) // not a state asked for
	a.event(t, res.Job.ID, job.KindFailed, job.Failed)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(out.String(), "failed") {
			return fmt.Errorf("no line for the failure yet:\n%s", out.String())
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted jobs --watch: %v", err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "placing") {
			t.Errorf("a line for a state not asked for: %q", l)
		}
	}
}

// syncBuffer is a buffer a command writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
