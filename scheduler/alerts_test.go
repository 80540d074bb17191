package scheduler_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// alertLog collects the alerts published on the bus.
type alertLog struct {
	mu  sync.Mutex
	got []events.Alert
}

func watchAlerts(t *testing.T, r *rig) *alertLog {
	l := &alertLog{}
	sub, err := r.bus.Conn().Subscribe("spotwise.alerts.>", func(m *nats.Msg) {
		if _, p, err := events.Decode(m.Data); err == nil {
			l.mu.Lock()
			l.got = append(l.got, *p.(*events.Alert))
			l.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

func (l *alertLog) wait(t *testing.T, kind, jobID string) events.Alert {
	t.Helper()
	return l.waitFor(t, jobID, func(a events.Alert) bool { return a.Kind == kind })
}

// waitFor waits for an alert about a job that matches.
func (l *alertLog) waitFor(t *testing.T, jobID string, match func(events.Alert) bool) events.Alert {
	t.Helper()
	var found events.Alert
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.IndexFunc(l.got, func(a events.Alert) bool { return a.JobID == jobID && match(a) })
		if i < 0 {
			return fmt.Errorf("no such alert for %s among %d", jobID, len(l.got))
		}
		found = l.got[i]
		return nil
	})
	return found
}

// count counts the alerts about a job that match.
func (l *alertLog) count(jobID string, match func(events.Alert) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.got {
		if a.JobID == jobID && match(a) {
			n++
		}
	}
	return n
}

// Operators hear about preemptions (at the notice), jobs that can no
// longer meet their deadline (they expire, or run anyway when their spec
// says so), and jobs that failed for good.
func TestAlerts(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	alerts := watchAlerts(t, r)

	late := r.submit(t, "name: late\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 40h on T4\ndeadline: 2h\n")
	// Found hopeless, and still so a policy interval later: it expires.
	got := r.advanceUntil(t, time.Minute, 10*time.Minute, "expired", func(x *job.Record) bool { return x.Status.State == job.Expired }, late.ID)
	if got.Status.Current != nil || got.Status.Attempt != 0 {
		t.Errorf("an expired job holds capacity: %+v", got.Status)
	}
	if a := alerts.wait(t, "job-expired", late.ID); a.Severity != events.SeverityCritical {
		t.Errorf("expiry alert severity %s", a.Severity)
	}

	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	if err := r.cloud.Preempt(rec.Status.Current.Instances[0]); err != nil {
		t.Fatal(err)
	}
	if a := alerts.wait(t, "preemption", rec.ID); a.Severity != events.SeverityWarning || a.Details["deadline"] == "" {
		t.Errorf("preemption alert %+v", a)
	}

	bad := r.runToRunning(t, "name: bad\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1h on T4\npurchase: on-demand\n")
	cur := bad.Status.Current
	if err := r.bus.Publish(r.ctx, events.AgentSubject(bad.ID, cur.N), &events.AgentReport{JobID: bad.ID, Attempt: cur.N, InstanceID: cur.Instances[0], Kind: events.AgentExited, ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, bad.ID, job.Failed)
	alerts.wait(t, "job-failed", bad.ID)
}
