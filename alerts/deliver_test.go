package alerts_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/events/eventstest"
)

// answers makes a handler that answers the nth request with statuses[n-1]
// (the last one for any later request); 0 drops the connection without an
// answer. A 429 or 503 comes with "Retry-After: 1".
func answers(statuses ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		code := statuses[min(n, len(statuses))-1]
		switch code {
		case 0:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	tests := []struct {
		name         string
		statuses     []int
		wantAttempts int
		wantSent     int64
		wantRetried  int64
		minGap       time.Duration // between the first two attempts
	}{
		{"500 then success", []int{500, 502, 200}, 3, 1, 2, 0},
		{"500 until giving up", []int{500}, 3, 0, 2, 0},
		{"dropped connection then success", []int{0, 200}, 2, 1, 1, 0},
		{"429 honours Retry-After", []int{429, 200}, 2, 1, 1, 900 * time.Millisecond},
		{"400 is not retried", []int{400}, 1, 0, 0, 0},
		{"404 is not retried", []int{404, 200}, 1, 0, 0, 0},
	}
	cfg := alerts.Config{Retry: fastRetry}
	receivers := map[string]*receiver{}
	for _, tt := range tests {
		rc := newReceiver(t, answers(tt.statuses...))
		receivers[tt.name] = rc
		cfg.Webhooks = append(cfg.Webhooks, alerts.Webhook{Name: tt.name, URL: rc.URL()})
	}
	n := startNotifier(t, bus, cfg, nil)
	reg := prometheus.NewRegistry()
	if err := n.Register(reg); err != nil {
		t.Fatal(err)
	}
	publish(t, bus, alert("critical", "checkpoint failed"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waitStats(t, n, 5*time.Second, done(tt.name, 1))
			st := n.Stats().Webhooks[tt.name]
			reqs := receivers[tt.name].requests()
			if len(reqs) != tt.wantAttempts || st.Sent != tt.wantSent || st.Failed != 1-tt.wantSent || st.Retried != tt.wantRetried {
				t.Errorf("%d attempts, stats %+v; want %d attempts, %d sent, %d retried", len(reqs), st, tt.wantAttempts, tt.wantSent, tt.wantRetried)
			}
			if tt.minGap > 0 {
				if gap := reqs[1].at.Sub(reqs[0].at); gap < tt.minGap {
					t.Errorf("retried after %v, before the Retry-After of 1s", gap)
				}
			}
		})
	}
	t.Run("metrics", func(t *testing.T) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := mf.GetName()
				for _, l := range m.GetLabel() {
					key += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
				}
				got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		for key, want := range map[string]float64{
			"spotwise_alerts_received_total":                                 1,
			"spotwise_alerts_sent_total{webhook=500 then success}":           1,
			"spotwise_alerts_retries_total{webhook=500 then success}":        2,
			"spotwise_alerts_failed_total{webhook=500 until giving up}":      1,
			"spotwise_alerts_failed_total{webhook=400 is not retried}":       1,
			"spotwise_alerts_queued{webhook=400 is not retried}":             0,
			"spotwise_alerts_rate_limited_total{webhook=400 is not retried}": 0,
		} {
			if v, ok := got[key]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
			}
		}
	})
}

// TestHangingWebhook: a webhook that never answers delays neither another
// webhook nor the consumption of later alerts.
func TestHangingWebhook(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	stuck := newReceiver(t, hang(t))
	healthy := newReceiver(t, nil)
	cfg := alerts.Config{
		RateLimit: alerts.RateLimit{Count: 1000, Per: time.Second, Burst: 1000},
		Webhooks: []alerts.Webhook{
			textWebhook("stuck", stuck.URL()), // default timeout: 10s, longer than this test
			textWebhook("healthy", healthy.URL()),
		},
	}
	n := startNotifier(t, bus, cfg, nil)
	publish(t, bus, alert("critical", "first"))
	stuck.waitRequests(t, 1, 5*time.Second) // the stuck webhook's worker is now hanging

	const more = 50
	start := time.Now()
	for i := range more {
		publish(t, bus, alert("critical", fmt.Sprintf("alert %d", i)))
	}
	published := time.Since(start)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stats %+v", n.Stats())
		}
	})
	healthy.waitRequests(t, 1+more, 2*time.Second)
	waitStats(t, n, time.Second, received(1+more))
	t.Logf("%d alerts published in %v and delivered to the healthy webhook in %v while the other hangs", more, published, time.Since(start))
	st := n.Stats().Webhooks["stuck"]
	if st.Queued != more || st.Sent != 0 {
		t.Errorf("stuck webhook: %+v; want %d queued behind the hanging request", st, more)
	}
}

// TestQueueOverflow: a full queue drops its oldest alerts and counts them.
func TestQueueOverflow(t *testing.T) {
	t.Parallel()
	bus := eventstest.NewBus(t, nil)
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, _ http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	cfg := alerts.Config{QueueSize: 3, Webhooks: []alerts.Webhook{textWebhook("slow", rc.URL())}}
	n := startNotifier(t, bus, cfg, nil)
	publish(t, bus, alert("warning", "a1"))
	rc.waitRequests(t, 1, 5*time.Second) // a1 is in flight, the queue is empty
	for i := 2; i <= 8; i++ {
		publish(t, bus, alert("warning", fmt.Sprintf("a%d", i)))
	}
	waitStats(t, n, 5*time.Second, received(8))
	if st := n.Stats().Webhooks["slow"]; st.Dropped != 4 || st.Queued != 3 {
		t.Errorf("stats %+v; want 4 dropped and 3 queued", st)
	}
	close(release)
	waitStats(t, n, 5*time.Second, done("slow", 4))
	var got []string
	for _, b := range rc.bodies() {
		got = append(got, b[strings.LastIndex(b, " ")+1:])
	}
	if want := []string{"a1", "a6", "a7", "a8"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q (the oldest dropped)", got, want)
	}
}
