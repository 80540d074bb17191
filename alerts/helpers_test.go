package alerts_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
)

const (
	job1 = "j-01a2b3c4d5e6f7g8h9j0k1m2n3"
	job2 = "j-01z2y3x4w5v6t7s8r9q0p1n2m3"
)

// request is one request a receiver saw.
type request struct {
	body   []byte
	header http.Header
	at     time.Time
}

// receiver is a webhook endpoint on 127.0.0.1 that records what it gets
// and answers as respond says (200 when respond is nil).
type receiver struct {
	srv     *httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []request
}

func newReceiver(t testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, request{body: body, header: r.Header.Clone(), at: time.Now()})
		n := len(rc.reqs)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) URL() string { return rc.srv.URL + "/hook" }

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

func (rc *receiver) bodies() []string {
	var out []string
	for _, r := range rc.requests() {
		out = append(out, string(r.body))
	}
	return out
}

// waitRequests waits until the receiver has seen n requests.
func (rc *receiver) waitRequests(t testing.TB, n int, timeout time.Duration) []request {
	t.Helper()
	testutil.CheckFor(t, timeout, 5*time.Millisecond, func() error {
		if got := len(rc.requests()); got < n {
			return fmt.Errorf("%d requests, want %d", got, n)
		}
		return nil
	})
	return rc.requests()
}

// hang makes a handler that blocks until the test ends (or the client
// gives up on the request).
func hang(t *testing.T) func(int, http.ResponseWriter, *http.Request) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
}

// startNotifier runs a Notifier until the test ends, and returns once its
// durable consumer exists (it starts with new alerts, so publishing before
// that would lose them).
func startNotifier(t testing.TB, bus *events.Bus, cfg alerts.Config, log *zap.Logger, opts ...alerts.Option) *alerts.Notifier {
	t.Helper()
	if log == nil {
		log = eventstest.Logger(t)
	}
	n, err := alerts.New(cfg, bus, log, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	js, err := jetstream.New(bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		_, err := js.Consumer(context.Background(), events.StreamAlerts, alerts.Durable)
		return err
	})
	return n
}

// publish puts alerts on the stream with the package's helper.
func publish(t testing.TB, bus *events.Bus, as ...events.Alert) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range as {
		if err := alerts.Publish(ctx, bus, a); err != nil {
			t.Fatalf("publishing %q: %v", a.Summary, err)
		}
	}
}

func alert(severity, summary string) events.Alert {
	return events.Alert{Severity: severity, Kind: "preemption", JobID: job1, Summary: summary}
}

// waitStats waits until cond holds for the Notifier's counters.
func waitStats(t testing.TB, n *alerts.Notifier, timeout time.Duration, cond func(alerts.Stats) error) {
	t.Helper()
	testutil.CheckFor(t, timeout, 5*time.Millisecond, func() error { return cond(n.Stats()) })
}

func received(want int64) func(alerts.Stats) error {
	return func(st alerts.Stats) error {
		if st.Received != want {
			return fmt.Errorf("received %d alerts, want %d", st.Received, want)
		}
		return nil
	}
}

// done reports whether a webhook has finished with want alerts, delivered
// or given up on.
func done(webhook string, want int64) func(alerts.Stats) error {
	return func(st alerts.Stats) error {
		ws := st.Webhooks[webhook]
		if ws.Sent+ws.Failed != want {
			return fmt.Errorf("webhook %s: %d sent and %d failed, want %d in all", webhook, ws.Sent, ws.Failed, want)
		}
		return nil
	}
}

// fastRetry keeps retry tests short.
var fastRetry = alerts.Retry{MaxAttempts: 3, Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}

// textTemplate renders "severity kind job: summary" as text/plain, easy
// to read back in tests.
func textWebhook(name, url string) alerts.Webhook {
	return alerts.Webhook{Name: name, URL: url, Format: alerts.FormatTemplate,
		Template: "{{.Severity}} {{.Kind}} {{.JobID}}: {{.Summary}}",
		Headers:  map[string]string{"Content-Type": "text/plain"}}
}
