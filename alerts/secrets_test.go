package alerts_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/events/eventstest"
)

// TestSecretsNeverLogged drives webhooks with secret URLs and headers
// through success, retries, refusals (whose answers echo the secrets back),
// refused connections and timeouts, logging at debug level, and looks for
// the secrets in every entry.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const (
		slackPath = "/services/T0000/B0000/slackSECRETtoken"
		bearer    = "hdrSECRETbearer"
		downPath  = "/hooks/downSECRETpath"
		query     = "token=querySECRET"
		slowPath  = "/hooks/slowSECRETpath"
		okPath    = "/hooks/okSECRETpath"
	)
	secrets := []string{"slackSECRETtoken", bearer, "downSECRETpath", "querySECRET", "slowSECRETpath", "okSECRETpath"}

	bus := eventstest.NewBus(t, nil)
	echo := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		// A receiver that quotes the request back in its errors.
		code := http.StatusInternalServerError
		if n > 1 {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "bad request to %s with %s", r.URL.Path, r.Header.Get("Authorization"))
	})
	slow := newReceiver(t, hang(t))
	ok := newReceiver(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://user:passSECRET@" + ln.Addr().String() + downPath + "?" + query
	ln.Close() // nothing listens there now
	secrets = append(secrets, "passSECRET")

	core, logs := observer.New(zapcore.DebugLevel)
	cfg := alerts.Config{
		Retry: alerts.Retry{MaxAttempts: 2, Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		Webhooks: []alerts.Webhook{
			{Name: "slack", URL: echo.srv.URL + slackPath, Headers: map[string]string{"Authorization": "Bearer " + bearer}},
			{Name: "down", URL: downURL, Format: alerts.FormatAlertmanager},
			{Name: "slow", URL: slow.srv.URL + slowPath, Timeout: 100 * time.Millisecond},
			{Name: "ok", URL: ok.srv.URL + okPath},
		},
	}
	n := startNotifier(t, bus, cfg, zap.New(core))
	publish(t, bus, alert("critical", "preempted"))
	for _, name := range []string{"slack", "down", "slow", "ok"} {
		waitStats(t, n, 5*time.Second, done(name, 1))
	}
	if reqs := echo.requests(); len(reqs) != 2 || reqs[0].header.Get("Authorization") != "Bearer "+bearer ||
		reqs[1].header.Get("Authorization") != "Bearer "+bearer {
		t.Errorf("the receiver got %d requests, want 2 with the configured Authorization header", len(reqs))
	}

	var all strings.Builder
	for _, e := range logs.All() {
		enc := zapcore.NewMapObjectEncoder()
		for _, f := range e.Context {
			f.AddTo(enc)
		}
		line := fmt.Sprintf("%s %s %v", e.LoggerName, e.Message, enc.Fields)
		all.WriteString(line + "\n")
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("log entry shows the secret %q: %s", s, line)
			}
		}
	}
	// The logs must still say what happened, and to which webhook.
	for _, want := range []string{"giving up on an alert", "webhook:slack", "host:127.0.0.1", "HTTP 400: bad request to [redacted] with [redacted]",
		"webhook:down", "connection refused", "webhook:slow", "no answer within 100ms", "alert delivered"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("logs do not mention %q:\n%s", want, all.String())
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", all.String())
	}
}
