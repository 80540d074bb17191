package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/agent/demo"
	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// webhook records the alerts it receives (Slack format).
type webhook struct {
	mu   sync.Mutex
	got  []string
	srv  *httptest.Server
	hang chan struct{}
}

func newWebhook(t *testing.T, hang bool) *webhook {
	w := &webhook{}
	if hang {
		w.hang = make(chan struct{})
	}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.hang != nil {
			select {
			case <-w.hang:
			case <-r.Context().Done():
			}
			return
		}
		var body struct {
			Text string `json:"text"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.mu.Lock()
		w.got = append(w.got, body.Text)
		w.mu.Unlock()
	}))
	t.Cleanup(func() {
		if w.hang != nil {
			close(w.hang)
		}
		w.srv.Close()
	})
	return w
}

func (w *webhook) count(substr string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, g := range w.got {
		if strings.Contains(g, substr) {
			n++
		}
	}
	return n
}

func simPost(t *testing.T, p *serverProc, action string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+"/v1/sim/"+action, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var e bytes.Buffer
		_, _ = e.ReadFrom(resp.Body)
		t.Fatalf("sim %s: %s %s", action, resp.Status, e.String())
	}
}

// TestJobSurvivesThreePreemptions runs the real demo workload on the
// simulated cloud (in a real server process) and preempts it three times,
// once in a storm that hits its whole zone. Each time it checkpoints inside
// the notice window, resumes elsewhere from its last step and, in the end,
// prints the result of an uninterrupted run. Every notice, checkpoint and
// move is in its history, and an alert reaches the on-call webhook for
// each preemption, while another webhook hangs without holding anything up.
func TestJobSurvivesThreePreemptions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	t.Parallel() // mostly waits on real time
	for _, mode := range []string{"inprocess", "subprocess"} {
		t.Run("agent "+mode, func(t *testing.T) { survivesThreePreemptions(t, mode) })
	}
}

func survivesThreePreemptions(t *testing.T, agentMode string) {
	oncall, stuck := newWebhook(t, false), newWebhook(t, true)
	cfg := filepath.Join(t.TempDir(), "spotwise.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
sim:
  interruptions: {rate_scale: 0, storms_per_day: 0, maintenance_per_hour: 0, failures_per_hour: 0}
  agent: %s
alerts:
  webhooks:
    - {name: stuck, url: %q, timeout: 1m}
    - {name: oncall, url: %q}
`, agentMode, stuck.srv.URL, oncall.srv.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProc(t, t.TempDir(), addr, "--config", cfg, "--sim-speed", "240", "--log-level", "info", "--nats-listen", "127.0.0.1:-1")
	c := p.client()
	ctx := context.Background()
	const steps = 1000
	spec := fmt.Sprintf(`name: survivor
command: [spotwise, demo-workload, --steps, "%d", --checkpoint-mb, "4"]
resources: {gpus_per_node: 1, accelerators: [A100]}
work: 1h on A100
purchase: spot
placement: {providers: [aws]}
checkpoint: {duration: 20s}
`, steps)
	v, _, err := c.Submit(ctx, []byte(spec), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(*api.JobView) bool) *api.JobView {
		t.Helper()
		var got *api.JobView
		testutil.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			var err error
			if got, err = c.Get(ctx, v.ID); err != nil {
				return err
			}
			if !cond(got) {
				return fmt.Errorf("%s: job %s at %.0f%%, attempt %d (%s)", what, got.State, got.Progress*100, got.Attempt, got.Message)
			}
			return nil
		})
		return got
	}
	for i, at := range []float64{0.2, 0.45, 0.7} {
		cur := waitFor("running", func(j *api.JobView) bool {
			return j.State == job.Running && j.Attempt == i+1 && j.Progress >= at
		})
		// The workload checkpoints in real time, however fast the
		// simulation runs: the simulated clock stands still from the
		// notice until the checkpoint is stored and the replacement
		// chosen, so the window is what it is whatever the machine's load.
		simPost(t, p, "clock", map[string]bool{"paused": true})
		if i == 1 {
			simPost(t, p, "preempt", map[string]string{"zone": cur.Placement.Zone}) // a storm
		} else {
			simPost(t, p, "preempt", map[string]string{"job": v.ID})
		}
		waitFor("checkpointed and replaced", func(j *api.JobView) bool {
			// Migrating: the notice's checkpoint is stored (checkpointing
			// before that); the replacement is chosen.
			return j.State == job.Migrating && j.Attempt == i+2
		})
		simPost(t, p, "clock", map[string]bool{"paused": false})
	}
	// Finished: its last attempt closed once its capacity was gone (the
	// teardown billed), and the history has the success.
	done := waitFor("finished", func(j *api.JobView) bool {
		return j.State.Terminal() && (j.State != job.Succeeded || len(j.Attempts) == 4 &&
			slices.ContainsFunc(j.Events, func(e api.EventView) bool { return e.Kind == events.KindSucceeded }))
	})
	if done.State != job.Succeeded {
		t.Fatalf("job ended %s: %s", done.State, done.Message)
	}
	// What the last attempt printed, as `spotwise logs` shows it: the
	// agent stores the output before it reports the end. (The agent's
	// echo into the server's own log is best effort: the instance is
	// torn down once the end is reported.)
	page, err := c.Logs(ctx, v.ID, api.LogsQuery{Attempt: done.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	want := "result " + demo.Result(steps)
	if !slices.ContainsFunc(page.Lines, func(l api.LogLineView) bool { return l.Stream == "stdout" && l.Text == want }) {
		var got []string
		for _, l := range page.Lines {
			got = append(got, l.Stream+": "+l.Text)
		}
		t.Fatalf("attempt %d's output has not the uninterrupted run's result (%s):\n%s", done.Attempt, want, strings.Join(got, "\n"))
	}
	logs := p.logText(t)
	// Agent processes log through the server as "agent" lines.
	if sub := strings.Contains(logs, `"msg":"agent"`); sub != (agentMode == "subprocess") {
		t.Fatalf("agent mode %s, but agent process output in the log: %v", agentMode, sub)
	}
	count := func(kind string) int {
		n := 0
		for _, e := range done.Events {
			if e.Kind == kind {
				n++
			}
		}
		return n
	}
	for kind, want := range map[string]int{events.KindNotice: 3, events.KindMigrating: 3, events.KindPreempted: 3} {
		if got := count(kind); got != want {
			t.Errorf("%d %q events, want %d", got, kind, want)
		}
	}
	if count(events.KindCheckpoint) < 3 || count(events.KindCheckpointFailed) != 0 {
		t.Errorf("%d checkpoints, %d failed", count(events.KindCheckpoint), count(events.KindCheckpointFailed))
	}
	// Each checkpoint landed inside its notice window (AWS: 120 s), and the
	// replacement was asked for within seconds, hanging webhook or not.
	var notice time.Time
	var noticeAttempt int
	for _, e := range done.Events {
		switch e.Kind {
		case events.KindNotice:
			notice, noticeAttempt = e.Time, e.Attempt
		case events.KindCheckpoint:
			if e.Attempt == noticeAttempt && !notice.IsZero() {
				if d := e.Time.Sub(notice); d > 2*time.Minute {
					t.Errorf("attempt %d: checkpoint %s after its notice, outside the window", e.Attempt, d)
				}
			}
		case events.KindPlacing:
			if !notice.IsZero() && e.Attempt == noticeAttempt+1 {
				if d := e.Time.Sub(notice); d > time.Minute {
					t.Errorf("replacement for attempt %d placed %s (simulated) after the notice", noticeAttempt, d)
				}
			}
		}
	}
	if done.WorkLost != 0 {
		t.Errorf("work lost %s: every checkpoint made it, nothing should be lost", done.WorkLost.D())
	}
	zones := map[string]bool{}
	for _, a := range done.Attempts {
		zones[a.Placement.Zone] = true
	}
	if len(done.Attempts) != 4 || len(zones) < 2 {
		t.Errorf("attempts %d in zones %v", len(done.Attempts), zones)
	}
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if n := oncall.count(v.ID); n < 3 {
			return fmt.Errorf("the on-call webhook got %d alerts for the job, want one per preemption", n)
		}
		return nil
	})
	if !slices.ContainsFunc(done.Events, func(e api.EventView) bool { return e.Kind == events.KindSucceeded }) {
		t.Error("history lacks succeeded")
	}
}
