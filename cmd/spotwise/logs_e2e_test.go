package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/agent/demo"
	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// TestLogsShowBothAttemptsOfAPreemptedJob runs a job on the simulated
// cloud, preempts it once it has checkpointed some of its work, and reads
// its output with `spotwise logs` once it has finished elsewhere: the
// output of both attempts is there, in order, and the second says it
// resumed from the first one's checkpoint. Once with the simulated
// workload, once with the real demo workload under the real agent.
func TestLogsShowBothAttemptsOfAPreemptedJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server with its simulated cloud")
	}
	t.Parallel() // mostly waits
	for _, tt := range []struct {
		name, command string
		// realTime: the workload checkpoints in real time (the simulated
		// one in simulated time, which a paused clock would stop).
		realTime bool
		check    func(t *testing.T, first, second []string)
	}{
		{"simulated workload", `[python, train.py]`, false, checkSimulatedOutput},
		{"demo workload", fmt.Sprintf(`[spotwise, demo-workload, --steps, "%d", --checkpoint-mb, "1"]`, logsE2ESteps), true, checkDemoOutput},
	} {
		t.Run(tt.name, func(t *testing.T) { preemptAndReadLogs(t, tt.command, tt.realTime, tt.check) })
	}
}

const logsE2ESteps = 400

func preemptAndReadLogs(t *testing.T, command string, realTime bool, check func(t *testing.T, first, second []string)) {
	cfg := server.Defaults()
	dir := t.TempDir()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS.Listen = ""
	cfg.Sim.Speed = 240
	cfg.Sim.Interruptions = server.SimInterruptions{} // only the preemption the test asks for
	cfg.Scheduler.Arbitrage.Enabled = false
	cfg.Scheduler.ReconcileInterval = job.Duration(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := server.Start(ctx, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := api.NewClient(srv.HTTPAddr())
	c.Token = srv.OperatorToken()
	spec := fmt.Sprintf(`name: logged
command: %s
resources: {gpus_per_node: 1, accelerators: [A100]}
work: 1h on A100
purchase: spot
placement: {providers: [aws]}
checkpoint: {duration: 20s, interval: 5m}
`, command)
	v, _, err := c.Submit(ctx, []byte(spec), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(*api.JobView) bool) *api.JobView {
		t.Helper()
		var got *api.JobView
		testutil.CheckFor(t, 90*time.Second, 20*time.Millisecond, func() error {
			var err error
			if got, err = c.Get(context.Background(), v.ID); err != nil {
				return err
			}
			if !cond(got) {
				return fmt.Errorf("%s: job %s at %.0f%%, attempt %d (%s)", what, got.State, got.Progress*100, got.Attempt, got.Message)
			}
			return nil
		})
		return got
	}
	waitFor("checkpointed on its first attempt", func(j *api.JobView) bool {
		return j.State == job.Running && j.Attempt == 1 && j.Checkpoint != nil && j.Progress >= 0.2
	})
	sim := func(action string, body any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr()+"/v1/sim/"+action, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+c.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sim %s: %s", action, resp.Status)
		}
	}
	// The clock stands still from the notice until the replacement is
	// chosen (and a real workload's checkpoint, taken in real time, is
	// stored), so the move goes the same whatever the machine's load; the
	// simulated workload checkpoints in simulated time, once the clock
	// goes on.
	sim("clock", map[string]bool{"paused": true})
	sim("preempt", map[string]string{"job": v.ID})
	waitFor("replaced", func(j *api.JobView) bool {
		return j.Attempt == 2 && (!realTime || j.State == job.Migrating)
	})
	sim("clock", map[string]bool{"paused": false})
	done := waitFor("finished", func(j *api.JobView) bool { return j.State.Terminal() })
	if done.State != job.Succeeded || done.Preemptions != 1 {
		t.Fatalf("the job ended %s after %d preemptions: %s", done.State, done.Preemptions, done.Message)
	}

	a := &apiServer{url: "http://" + srv.HTTPAddr(), token: c.Token}
	out, _, err := a.cliOut(ctx, "logs", v.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("spotwise logs %s:\n%s", v.ID, out)
	first, second, ok := strings.Cut(out, "==> attempt 2 (")
	if !ok || strings.Contains(second, "==> attempt") {
		t.Fatalf("spotwise logs printed no single second attempt:\n%s", out)
	}
	check(t, strings.Split(strings.TrimSpace(first), "\n"), strings.Split(strings.TrimSpace(second), "\n")[1:])
	// The second attempt alone, prefixed.
	out, _, err = a.cliOut(ctx, "logs", v.ID, "--attempt", "2", "--prefix")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !regexp.MustCompile(`^\S+Z a2 (stdout|stderr|agent) `).MatchString(l) {
			t.Fatalf("spotwise logs --attempt 2 --prefix printed %q", l)
		}
	}
}

var (
	simSaved   = regexp.MustCompile(`^checkpoint saved at (\d+\.\d)% `)
	simResumed = regexp.MustCompile(`^resuming from checkpoint at (\d+\.\d)% \(step \d+, saved by attempt 1\)$`)
)

func checkSimulatedOutput(t *testing.T, first, second []string) {
	t.Helper()
	if !strings.HasPrefix(first[0], "starting on ") || first[1] != "starting from step 0 of 10000" {
		t.Errorf("the first attempt's output begins %q", first[:2])
	}
	saved := ""
	for _, l := range first {
		if m := simSaved.FindStringSubmatch(l); m != nil {
			saved = m[1]
		}
	}
	if !strings.HasPrefix(second[0], "starting on ") {
		t.Errorf("the second attempt's output begins %q", second[0])
	}
	if m := simResumed.FindStringSubmatch(second[1]); m == nil || m[1] != saved {
		t.Errorf("the second attempt's second line is %q: want it to resume from the last checkpoint saved (at %s%%)", second[1], saved)
	}
	if last := second[len(second)-1]; last != "training finished: step 10000/10000; exiting with code 0" {
		t.Errorf("the output ends %q", last)
	}
}

var demoSaved = regexp.MustCompile(`^checkpoint at step (\d+)$`)

func checkDemoOutput(t *testing.T, first, second []string) {
	t.Helper()
	step := ""
	for _, l := range first {
		if m := demoSaved.FindStringSubmatch(l); m != nil {
			step = m[1]
		}
	}
	if step == "" {
		t.Fatalf("the first attempt wrote no checkpoint:\n%s", strings.Join(first, "\n"))
	}
	want := []string{fmt.Sprintf("(step %s)", step), fmt.Sprintf("resumed at step %s of %d", step, logsE2ESteps)}
	if !strings.HasPrefix(second[0], "spotwise: resuming from the checkpoint of attempt 1 at ") || !strings.HasSuffix(second[0], want[0]) || second[1] != want[1] {
		t.Errorf("the second attempt's output begins %q, want it to resume from step %s", second[:2], step)
	}
	if n := len(second); second[n-2] != "result "+demo.Result(logsE2ESteps) || second[n-1] != "spotwise: the workload exited with code 0" {
		t.Errorf("the output ends %q", second[max(0, n-2):])
	}
}
