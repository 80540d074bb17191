package alerts_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
)

// fakeAlertmanager speaks Alertmanager's POST /api/v2/alerts: it refuses
// what Alertmanager would (no labels, an alert that ends before it
// starts, one that starts in its future), and keeps each alert by its
// label set as Alertmanager merges them: the first startsAt, the latest
// endsAt sent.
type fakeAlertmanager struct {
	srv  *httptest.Server
	wall clock.Clock

	mu      sync.Mutex
	alerts  map[string]amAlert // by label set
	refused []string
	posts   int
}

func newFakeAlertmanager(t *testing.T, wall clock.Clock) *fakeAlertmanager {
	am := &fakeAlertmanager{wall: wall, alerts: map[string]amAlert{}}
	am.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v2/alerts" {
			http.NotFound(w, r)
			return
		}
		var posted []amAlert
		if err := json.NewDecoder(r.Body).Decode(&posted); err != nil {
			am.refuse(w, "body: "+err.Error())
			return
		}
		for _, a := range posted {
			switch {
			case len(a.Labels) == 0 || a.Labels["alertname"] == "":
				am.refuse(w, "no alertname")
				return
			case a.StartsAt.IsZero() || (!a.EndsAt.IsZero() && a.EndsAt.Before(a.StartsAt)):
				am.refuse(w, fmt.Sprintf("startsAt %s, endsAt %s", a.StartsAt, a.EndsAt))
				return
			case a.StartsAt.After(am.wall.Now().Add(time.Minute)):
				am.refuse(w, fmt.Sprintf("startsAt %s is in the future (now %s)", a.StartsAt, am.wall.Now()))
				return
			}
		}
		am.mu.Lock()
		defer am.mu.Unlock()
		am.posts++
		for _, a := range posted {
			k := labelKey(a.Labels)
			if old, ok := am.alerts[k]; ok && old.StartsAt.Before(a.StartsAt) {
				a.StartsAt = old.StartsAt
			}
			am.alerts[k] = a
		}
	}))
	t.Cleanup(am.srv.Close)
	return am
}

func (am *fakeAlertmanager) refuse(w http.ResponseWriter, why string) {
	am.mu.Lock()
	am.refused = append(am.refused, why)
	am.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

func labelKey(ls map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ls)) {
		parts = append(parts, k+"="+ls[k])
	}
	return strings.Join(parts, ",")
}

// waitPosts waits for n accepted posts and returns the alerts as kept.
func (am *fakeAlertmanager) waitPosts(t *testing.T, n int) map[string]amAlert {
	t.Helper()
	var out map[string]amAlert
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		am.mu.Lock()
		defer am.mu.Unlock()
		if len(am.refused) > 0 {
			t.Fatalf("Alertmanager refused: %v", am.refused)
		}
		if am.posts < n {
			return fmt.Errorf("%d posts, want %d", am.posts, n)
		}
		out = maps.Clone(am.alerts)
		return nil
	})
	return out
}

// Alerts reach Alertmanager routable by team, dated by the wall clock
// (the simulated one runs 50 minutes ahead), and each with an end: an
// event's after the resolve timeout, a condition's when it clears (the
// resolution passes even a spent rate limit), or after the condition
// timeout if it never does.
func TestAlertmanagerAlertsStartEndAndResolve(t *testing.T) {
	wall := clock.NewFake(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	simulated := clock.NewFake(wall.Now().Add(50 * time.Minute))
	bus := eventstest.NewBus(t, simulated)
	am := newFakeAlertmanager(t, wall)
	cfg := alerts.Config{
		// One alert per hour: only the resolution gets past it.
		RateLimit: alerts.RateLimit{Count: 1, Per: time.Hour, Burst: 1},
		Webhooks: []alerts.Webhook{{Name: "am", URL: am.srv.URL + "/api/v2/alerts", Format: alerts.FormatAlertmanager,
			ResolveTimeout: 10 * time.Minute, ConditionTimeout: 2 * time.Hour}},
	}
	n := startNotifier(t, bus, cfg, nil, alerts.WithClock(wall))
	start := wall.Now()

	preempted := events.Alert{Severity: events.SeverityWarning, Kind: "preemption", JobID: job1, Ongoing: true,
		Summary: "job bert: spot-interruption on p3.16xlarge; moving it", Details: map[string]string{"team": "nlp", "zone": "us-east-1a"}}
	publish(t, bus, preempted)
	firing := labelKey(map[string]string{"alertname": "preemption", "severity": "warning", "source": "spotwise", "job_id": job1, "team": "nlp"})
	got := am.waitPosts(t, 1)[firing]
	if !got.StartsAt.Equal(start) || !got.EndsAt.Equal(start.Add(2*time.Hour)) {
		t.Fatalf("ongoing alert %+v: want it to start at the wall clock's %s and end at most the condition timeout later", got, start)
	}

	wall.Advance(3 * time.Minute)
	simulated.Advance(3 * time.Hour)
	resolved := events.Alert{Severity: events.SeverityWarning, Kind: "preemption", JobID: job1, Resolved: true,
		Summary: "job bert runs again", Details: map[string]string{"team": "nlp", "state": "running"}}
	publish(t, bus, resolved)
	all := am.waitPosts(t, 2)
	got = all[firing]
	if !got.StartsAt.Equal(start) || !got.EndsAt.Equal(start.Add(3*time.Minute)) {
		t.Fatalf("after its resolution the alert is %+v: want it ended at the wall clock's %s", got, start.Add(3*time.Minute))
	}
	if len(all) != 1 {
		t.Errorf("Alertmanager holds %d alerts, want the one resolved: %v", len(all), slices.Collect(maps.Keys(all)))
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if st := n.Stats().Webhooks["am"]; st.RateLimited != 0 || st.Sent != 2 {
			return fmt.Errorf("webhook stats %+v: want both sent, nothing rate limited", st)
		}
		return nil
	})
}

// An event's alert ends after the resolve timeout; an alert with no team
// has no team label.
func TestAlertmanagerEventsEndAfterTheResolveTimeout(t *testing.T) {
	tests := []struct {
		name   string
		alert  events.Alert
		labels map[string]string
	}{
		{"a job's", events.Alert{Severity: events.SeverityCritical, Kind: "job-failed", JobID: job2, Summary: "job failed",
			Details: map[string]string{"team": "vision"}},
			map[string]string{"alertname": "job-failed", "severity": "critical", "source": "spotwise", "job_id": job2, "team": "vision"}},
		{"no team", events.Alert{Severity: events.SeverityInfo, Kind: "alerts-test", Summary: "no job"},
			map[string]string{"alertname": "alerts-test", "severity": "info", "source": "spotwise"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wall := clock.NewFake(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
			bus := eventstest.NewBus(t, clock.NewFake(wall.Now().Add(50*time.Minute)))
			am := newFakeAlertmanager(t, wall)
			startNotifier(t, bus, alerts.Config{Webhooks: []alerts.Webhook{{Name: "am", URL: am.srv.URL + "/api/v2/alerts",
				Format: alerts.FormatAlertmanager}}}, nil, alerts.WithClock(wall))
			publish(t, bus, tt.alert)
			all := am.waitPosts(t, 1)
			got, ok := all[labelKey(tt.labels)]
			if !ok {
				t.Fatalf("Alertmanager holds %v, want labels %v", slices.Collect(maps.Keys(all)), tt.labels)
			}
			if !got.StartsAt.Equal(wall.Now()) || !got.EndsAt.Equal(wall.Now().Add(alerts.DefaultResolveTimeout)) {
				t.Errorf("alert %+v: want it to start now by the wall clock and end the default resolve timeout later", got)
			}
		})
	}
}
