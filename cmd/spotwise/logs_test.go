package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

var cliT0 = time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)

// jobWithOutput submits a job and stores output for it, as its agents
// would: two lines of attempt 1, one of attempt 2 on stderr.
func (a *apiServer) jobWithOutput(t *testing.T) string {
	t.Helper()
	res, err := a.svc.Submit(auth.WithPrincipal(t.Context(), auth.System("test")), []byte(specYAML("logged", 1)), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	a.ship(t, id, 1, "i-one", events.LogStdout, cliT0, "epoch 1", "checkpoint saved at 50.0%")
	a.ship(t, id, 2, "i-two", events.LogStderr, cliT0.Add(time.Hour), "resuming from checkpoint at 50.0%")
	return id
}

func (a *apiServer) ship(t *testing.T, id string, attempt int, instance, stream string, at time.Time, texts ...string) {
	t.Helper()
	b := &events.LogBatch{JobID: id, Attempt: attempt, Instance: instance, Seq: 1}
	for _, text := range texts {
		b.Lines = append(b.Lines, events.LogLine{Time: at, Stream: stream, Text: text})
	}
	if err := a.bus.Publish(t.Context(), events.LogSubject(id, attempt), b); err != nil {
		t.Fatal(err)
	}
}

// cliOut runs `spotwise <args>` against the server, with its token.
func (a *apiServer) cliOut(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	root := newRoot()
	var out, errOut syncBuffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--server", a.url, "--token", a.token))
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// syncBuffer: see watch_cmds_test.go.

func TestLogsCommand(t *testing.T) {
	a := startAPI(t)
	id := a.jobWithOutput(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"plain", nil, "epoch 1\ncheckpoint saved at 50.0%\n==> attempt 2 (i-two) <==\nresuming from checkpoint at 50.0%\n"},
		{"prefixed", []string{"--prefix"}, "2031-03-14T09:00:00Z a1 stdout epoch 1\n2031-03-14T09:00:00Z a1 stdout checkpoint saved at 50.0%\n" +
			"2031-03-14T10:00:00Z a2 stderr resuming from checkpoint at 50.0%\n"},
		{"one attempt", []string{"--attempt", "1"}, "epoch 1\ncheckpoint saved at 50.0%\n"},
		{"the last line", []string{"--tail", "1"}, "resuming from checkpoint at 50.0%\n"},
		{"since a time", []string{"--since", "2031-03-14T09:30:00Z"}, "resuming from checkpoint at 50.0%\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := a.cliOut(t.Context(), append([]string{"logs", id}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if out != tt.want {
				t.Fatalf("spotwise logs %v printed\n%s\nwant\n%s", tt.args, out, tt.want)
			}
		})
	}
	out, _, err := a.cliOut(t.Context(), "logs", id, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var lines []api.LogLineView
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v api.LogLineView
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("-o json printed %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	if len(lines) != 3 || lines[2].Attempt != 2 || lines[2].Stream != "stderr" || lines[2].Instance != "i-two" {
		t.Fatalf("-o json: %+v", lines)
	}
	for _, bad := range []struct{ args []string }{{[]string{"logs", "j-00000000000000000000000000"}}, {[]string{"logs", id, "--since", "last week"}}, {[]string{"logs", id, "--tail", "9999"}}} {
		if _, _, err := a.cliOut(t.Context(), bad.args...); err == nil {
			t.Errorf("spotwise %v succeeded", bad.args)
		}
	}
}

// TestLogsCommandFollows: -f prints lines as they come and returns once
// the job has ended, saying how; `spotwise job` then shows a failed job's
// last lines.
func TestLogsCommandFollows(t *testing.T) {
	a := startAPI(t)
	id := a.jobWithOutput(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	root := newRoot()
	var out, errOut syncBuffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"logs", id, "-f", "--tail", "1", "--server", a.url, "--token", a.token})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	waitOut := func(want string) {
		t.Helper()
		testutil.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			if !strings.Contains(out.String(), want) {
				return fmt.Errorf("printed %q, not yet %q", out.String(), want)
			}
			return nil
		})
	}
	waitOut("resuming from checkpoint at 50.0%\n")
	a.ship(t, id, 2, "i-two", events.LogStderr, cliT0.Add(2*time.Hour), "Traceback (most recent call last):", "RuntimeError: CUDA out of memory")
	waitOut("RuntimeError: CUDA out of memory\n")
	if _, _, err := a.bus.Jobs().Modify(t.Context(), id, func(r *job.Record) error {
		r.Status.State = job.Failed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("spotwise logs -f did not return when the job ended")
	}
	want := "resuming from checkpoint at 50.0%\nTraceback (most recent call last):\nRuntimeError: CUDA out of memory\n"
	if out.String() != want || errOut.String() != "job "+id+" failed\n" {
		t.Fatalf("spotwise logs -f printed\n%s\n(stderr %q)", out.String(), errOut.String())
	}
	page, _, err := a.cliOut(t.Context(), "job", id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "Last lines of output (spotwise logs "+id+" has all of it):\n  epoch 1\n") ||
		!strings.HasSuffix(page, "  RuntimeError: CUDA out of memory\n") {
		t.Fatalf("spotwise job of the failed job:\n%s", page)
	}
}
