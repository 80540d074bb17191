package alerts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
)

func TestMinSeverity(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	tests := []struct {
		min          string
		want         []string
		wantFiltered int64
	}{
		{"", []string{"info", "warning", "critical"}, 0},
		{"info", []string{"info", "warning", "critical"}, 0},
		{"warning", []string{"warning", "critical"}, 1},
		{"critical", []string{"critical"}, 2},
	}
	var cfg alerts.Config
	receivers := map[string]*receiver{}
	for _, tt := range tests {
		rc := newReceiver(t, nil)
		name := "min-" + tt.min
		receivers[name] = rc
		w := textWebhook(name, rc.URL())
		w.MinSeverity = tt.min
		cfg.Webhooks = append(cfg.Webhooks, w)
	}
	n := startNotifier(t, bus, cfg, nil)
	publish(t, bus, alert("info", "fyi"), alert("warning", "hmm"), alert("critical", "now"))
	waitStats(t, n, 5*time.Second, received(3))
	for _, tt := range tests {
		name := "min-" + tt.min
		t.Run(name, func(t *testing.T) {
			waitStats(t, n, 5*time.Second, done(name, int64(len(tt.want))))
			var got []string
			for _, b := range receivers[name].bodies() {
				sev, _, _ := strings.Cut(b, " ")
				got = append(got, sev)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("received %q, want %q", got, tt.want)
			}
			if f := n.Stats().Webhooks[name].Filtered; f != tt.wantFiltered {
				t.Errorf("filtered %d, want %d", f, tt.wantFiltered)
			}
		})
	}
}

// TestDedupe walks a fake clock through a de-duplication window, for two
// webhooks that each de-duplicate on their own.
func TestDedupe(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	a, b := newReceiver(t, nil), newReceiver(t, nil)
	cfg := alerts.Config{
		DedupeWindow: time.Minute,
		Webhooks:     []alerts.Webhook{textWebhook("a", a.URL()), textWebhook("b", b.URL())},
	}
	n := startNotifier(t, bus, cfg, nil, alerts.WithClock(clk))
	steps := []struct {
		why       string
		advance   time.Duration
		kind, job string
		summary   string
		sent      bool
	}{
		{"first", 0, "preemption", job1, "reclaimed", true},
		{"same again", 0, "preemption", job1, "reclaimed", false},
		{"another job", 10 * time.Second, "preemption", job2, "reclaimed", true},
		{"another kind", 0, "checkpoint-failed", job1, "reclaimed", true},
		{"another summary", 0, "preemption", job1, "reclaimed again", true},
		{"same, 40s after the first", 30 * time.Second, "preemption", job1, "reclaimed", false},
		{"same, 61s after the first", 21 * time.Second, "preemption", job1, "reclaimed", true},
		{"same, right after the resend", 0, "preemption", job1, "reclaimed", false},
	}
	var want []string
	var wantDeduped int64
	for i, s := range steps {
		clk.Advance(s.advance)
		publish(t, bus, events.Alert{Severity: "warning", Kind: s.kind, JobID: s.job, Summary: s.summary})
		waitStats(t, n, 5*time.Second, received(int64(i+1)))
		if s.sent {
			want = append(want, fmt.Sprintf("warning %s %s: %s", s.kind, s.job, s.summary))
		} else {
			wantDeduped++
		}
		for _, name := range []string{"a", "b"} {
			if got := n.Stats().Webhooks[name].Deduplicated; got != wantDeduped {
				t.Fatalf("step %d (%s): webhook %s de-duplicated %d, want %d", i, s.why, name, got, wantDeduped)
			}
		}
	}
	for name, rc := range map[string]*receiver{"a": a, "b": b} {
		waitStats(t, n, 5*time.Second, done(name, int64(len(want))))
		if got := rc.bodies(); !slices.Equal(got, want) {
			t.Errorf("webhook %s received\n%q\nwant\n%q", name, got, want)
		}
	}
}

// TestRateLimit: over the limit, alerts are dropped and counted, and one
// summary says how many when the webhook may send again, at most once per
// rate period.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rc := newReceiver(t, nil)
	cfg := alerts.Config{
		RateLimit: alerts.RateLimit{Count: 60, Per: time.Minute, Burst: 2}, // one a second
		Webhooks:  []alerts.Webhook{{Name: "ops", URL: rc.URL(), Format: alerts.FormatAlertmanager}},
	}
	n := startNotifier(t, bus, cfg, nil, alerts.WithClock(clk))
	limited := func(want int64) {
		t.Helper()
		if got := n.Stats().Webhooks["ops"].RateLimited; got != want {
			t.Fatalf("rate-limited %d, want %d", got, want)
		}
	}
	lastAlert := func(wantRequests int) amAlert {
		t.Helper()
		reqs := rc.waitRequests(t, wantRequests, 5*time.Second)
		if len(reqs) != wantRequests {
			t.Fatalf("%d requests, want %d", len(reqs), wantRequests)
		}
		var got []amAlert
		decode(t, reqs[len(reqs)-1], &got)
		return got[0]
	}

	// A burst of 5: 2 go, 3 are suppressed.
	publish(t, bus, alert("info", "a1"), alert("info", "a2"), alert("critical", "a3"), alert("info", "a4"), alert("warning", "a5"))
	waitStats(t, n, 5*time.Second, received(5))
	limited(3)
	if got := lastAlert(2); got.Annotations["summary"] != "a2" {
		t.Errorf("second request is %q, want a2", got.Annotations["summary"])
	}

	// A second later a token is back: the summary goes, with the most
	// severe of what it stands for.
	clk.Advance(time.Second)
	sum := lastAlert(3)
	if sum.Labels["alertname"] != alerts.KindSuppressed || sum.Labels["severity"] != "critical" ||
		sum.Annotations["summary"] != "3 alerts suppressed by the rate limit of webhook ops" ||
		!strings.Contains(sum.Annotations["description"], "kinds: preemption: 3") {
		t.Errorf("summary %+v", sum)
	}
	// The summary does not spend the token: the next alert goes.
	publish(t, bus, alert("info", "b1"))
	if got := lastAlert(4); got.Annotations["summary"] != "b1" {
		t.Errorf("after the summary, got %q, want b1", got.Annotations["summary"])
	}

	// Suppressed again right away: the next summary waits a rate period
	// after the last one, although tokens come back every second.
	publish(t, bus, alert("info", "b2"))
	waitStats(t, n, 5*time.Second, received(7))
	limited(4)
	clk.Advance(30 * time.Second)
	if clk.Timers() != 1 {
		t.Fatalf("%d timers waiting, want the summary's", clk.Timers())
	}
	clk.Advance(30 * time.Second)
	if sum := lastAlert(5); sum.Annotations["summary"] != "1 alert suppressed by the rate limit of webhook ops" {
		t.Errorf("second summary %+v", sum)
	}
	waitStats(t, n, 5*time.Second, done("ops", 5))
}

// TestSharedDurable: two servers share the durable; each alert is
// delivered once.
func TestSharedDurable(t *testing.T) {
	t.Parallel()
	bus1 := eventstest.OpenBus(t, t.TempDir(), "127.0.0.1:-1", nil)
	bus2 := eventstest.OpenBusConfig(t, events.Config{URL: bus1.ClientURL(), IdentityDir: bus1.Identity().Dir()}, nil)
	rc := newReceiver(t, nil)
	cfg := alerts.Config{
		RateLimit: alerts.RateLimit{Count: 1000, Per: time.Second, Burst: 1000},
		Webhooks:  []alerts.Webhook{textWebhook("ops", rc.URL())},
	}
	n1 := startNotifier(t, bus1, cfg, nil)
	n2 := startNotifier(t, bus2, cfg, nil)
	const total = 40
	for i := range total {
		bus := bus1
		if i%2 == 1 {
			bus = bus2
		}
		publish(t, bus, alert("warning", fmt.Sprintf("alert %d", i)))
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		s1, s2 := n1.Stats().Webhooks["ops"], n2.Stats().Webhooks["ops"]
		if s1.Sent+s2.Sent < total {
			return fmt.Errorf("%d + %d sent, want %d", s1.Sent, s2.Sent, total)
		}
		return nil
	})
	got := rc.bodies()
	slices.Sort(got)
	if len(got) != total || len(slices.Compact(got)) != total {
		t.Errorf("webhook received %d requests, %d distinct; want %d, each once", len(got), len(slices.Compact(got)), total)
	}
	if r := n1.Stats().Received + n2.Stats().Received; r != total {
		t.Errorf("servers received %d alerts in all, want %d", r, total)
	}
	t.Logf("server 1 delivered %d, server 2 %d", n1.Stats().Webhooks["ops"].Sent, n2.Stats().Webhooks["ops"].Sent)
}

// TestPublishWithID: a retried publish with the same ID is stored, and so
// delivered, once.
func TestPublishWithID(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	rc := newReceiver(t, nil)
	cfg := alerts.Config{
		DedupeWindow: time.Nanosecond, // so only the stream de-duplicates
		Webhooks:     []alerts.Webhook{textWebhook("ops", rc.URL())},
	}
	n := startNotifier(t, bus, cfg, nil)
	ctx := context.Background()
	a := alert("critical", "preempted")
	for range 2 {
		if err := alerts.Publish(ctx, bus, a, events.WithID(job1+"-a1-preempted")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := alerts.Publish(ctx, bus, a); err != nil {
			t.Fatal(err)
		}
	}
	// Alerts are delivered in order: once the last one is in, the
	// duplicate would have been too.
	publish(t, bus, alert("info", "last"))
	waitStats(t, n, 5*time.Second, done("ops", 4))
	if got := n.Stats().Received; got != 4 {
		t.Errorf("received %d alerts, want 4 (the one published twice with one ID, twice without, and the last)", got)
	}
	if err := alerts.Publish(ctx, bus, events.Alert{Severity: "urgent", Kind: "x", Summary: "y"}); err == nil ||
		!strings.Contains(err.Error(), `unknown severity "urgent"`) {
		t.Errorf("publishing an invalid alert: %v", err)
	}
}
