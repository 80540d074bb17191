package alerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
)

// fuzzTemplate renders every field of an alert unambiguously, so a test
// can tell that what was delivered is what was published.
const fuzzTemplate = `{{json .Severity}} {{json .Kind}} {{json .JobID}} {{json .Summary}} {{json .Details}} {{json .ID}} {{json .Source}}`

// FuzzAlertsConsumer publishes random bytes and mutated alerts through
// the real bus to a running Notifier with a Slack, an Alertmanager and a
// template webhook: nothing panics; a message that is not an alert is
// dropped (counted by the bus) and delivered nowhere; an alert reaches
// every webhook exactly as it was published, within each format's limits
// (Slack refuses a message whose texts are too long); and an alert
// published afterwards is still delivered.
//
//	go test -run '^$' -fuzz FuzzAlertsConsumer -fuzztime 1m -fuzzminimizetime 10x ./alerts/
func FuzzAlertsConsumer(f *testing.F) {
	// Quiet: every dropped message is a warning, and a fuzz run drops
	// thousands.
	bus, err := events.Open(context.Background(), events.Config{Embedded: events.EmbeddedOptions{DataDir: f.TempDir()}}, "fuzz", nil, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(bus.Close)
	slack, am, text := newReceiver(f, nil), newReceiver(f, nil), newReceiver(f, nil)
	cfg := alerts.Config{
		Webhooks: []alerts.Webhook{
			{Name: "slack", URL: slack.URL(), Format: alerts.FormatSlack},
			{Name: "am", URL: am.URL(), Format: alerts.FormatAlertmanager, GeneratorURL: "http://spotwise/jobs/{job_id}"},
			{Name: "text", URL: text.URL(), Format: alerts.FormatTemplate, Template: fuzzTemplate, Headers: map[string]string{"Content-Type": "text/plain"}},
		},
		// Every alert of a run is delivered: no window, no limit that a
		// thousand runs could reach.
		DedupeWindow: time.Nanosecond,
		RateLimit:    alerts.RateLimit{Count: 1 << 30, Per: time.Second, Burst: 1 << 30},
	}
	n := startNotifier(f, bus, cfg, zap.NewNop())
	receivers := map[string]*receiver{"slack": slack, "am": am, "text": text}
	seq := 0

	good := func(summary string) []byte {
		b, err := events.Encode(&events.Alert{Severity: events.SeverityWarning, Kind: "preemption", JobID: job1, Summary: summary,
			Details: map[string]string{"zone": "us-east-1a"}}, "", "seed", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, seed := range [][]byte{
		good("job bert preempted"),
		good(strings.Repeat("&<>", 2000)),
		good(strings.Repeat("é", 5000) + "\x00\u2028"),
		[]byte(`{"v":1,"id":"a","type":"alert","time":"2026-01-01T00:00:00Z","source":"` + strings.Repeat("<&>", 1500) + `","data":{"severity":"critical","kind":"` + strings.Repeat("k", 300) + `","summary":"s","details":{"` + strings.Repeat("<", 3000) + `":"` + strings.Repeat("&", 3000) + `"}}}`),
		[]byte(`{"v":1,"id":"a","type":"alert","time":"2026-01-01T00:00:00Z","source":"x","data":{"severity":"info","kind":"{{.Summary}}","summary":"{{template \"x\"}}","job_id":"j-0"}}`),
		[]byte(`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`),
		[]byte(`{"v":1,"id":"a","type":"alert","time":"2026-01-01T00:00:00Z","source":"x","data":{"severity":"loud","kind":"k","summary":"s"}}`),
		[]byte(`{"v":1,"id":"a","type":"alert","time":"2026-01-01T00:00:00Z","source":"x","data":{"severity":"info","kind":"k","summary":"s","details":` + manyDetails(100) + `}}`),
		[]byte("{"), []byte(""), []byte("\xff"),
	} {
		f.Add(uint8(0), seed)
		f.Add(uint8(3), seed)
	}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		subject := []string{events.AlertsSubject(events.SeverityInfo), events.AlertsSubject(events.SeverityWarning),
			events.AlertsSubject(events.SeverityCritical), "spotwise.alerts.x.y"}[sel%4]
		env, p, decodeErr := events.Decode(data)
		a, isAlert := p.(*events.Alert)
		before := n.Stats()
		dropped := bus.Dropped()
		lens := map[string]int{}
		for name, rc := range receivers {
			lens[name] = len(rc.requests())
		}
		if err := bus.PublishRaw(context.Background(), subject, data); err != nil {
			t.Fatalf("publishing: %v", err)
		}
		switch {
		case decodeErr != nil, !isAlert:
			reason := "refused"
			if decodeErr != nil {
				reason = "garbled"
			}
			key := events.DropKey{Consumer: alerts.Durable, Reason: reason}
			testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
				if got := bus.Dropped()[key]; got != dropped[key]+1 {
					return fmt.Errorf("%v dropped %d times, want %d", key, got, dropped[key]+1)
				}
				return nil
			})
			if st := n.Stats(); st.Received != before.Received {
				t.Fatalf("a message that is not an alert was received as one")
			}
		default:
			seq++
			for name, rc := range receivers {
				body := waitDelivered(t, n, rc, name, before, lens[name])
				checkBody(t, name, body, a, env)
			}
		}
		// The Notifier goes on.
		seq++
		probe := events.Alert{Severity: events.SeverityCritical, Kind: "probe", Summary: fmt.Sprintf("probe %d", seq)}
		before = n.Stats()
		for name, rc := range receivers {
			lens[name] = len(rc.requests())
		}
		publish(t, bus, probe)
		for name, rc := range receivers {
			if body := waitDelivered(t, n, rc, name, before, lens[name]); !strings.Contains(string(body), probe.Summary) {
				t.Fatalf("the probe was delivered to %s as %q", name, body)
			}
		}
	})
}

// waitDelivered waits until a webhook has sent one more alert than it
// had in before and returns the body.
func waitDelivered(t *testing.T, n *alerts.Notifier, rc *receiver, name string, before alerts.Stats, had int) []byte {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		ws, was := n.Stats().Webhooks[name], before.Webhooks[name]
		if ws.Failed != was.Failed || ws.Dropped != was.Dropped || ws.RateLimited != was.RateLimited || ws.Deduplicated != was.Deduplicated {
			return fmt.Errorf("webhook %s lost the alert: %+v (was %+v)", name, ws, was)
		}
		if ws.Sent != was.Sent+1 || len(rc.requests()) != had+1 {
			return fmt.Errorf("webhook %s: %d sent, want %d", name, ws.Sent, was.Sent+1)
		}
		return nil
	})
	return rc.requests()[had].body
}

// checkBody holds a delivered body to its format: the template's exactly
// the alert; Slack's and Alertmanager's valid JSON, naming the alert,
// within Slack's limits.
func checkBody(t *testing.T, name string, body []byte, a *events.Alert, env events.Envelope) {
	t.Helper()
	switch name {
	case "text":
		js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
		details := js(a.Details)
		if a.Details == nil {
			details = "null"
		}
		want := strings.Join([]string{js(a.Severity), js(a.Kind), js(a.JobID), js(a.Summary), details, js(env.ID), js(env.Source)}, " ")
		if string(body) != want {
			t.Fatalf("template webhook got\n%q\nwant\n%q", body, want)
		}
	case "am":
		var got []struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		}
		if err := json.Unmarshal(body, &got); err != nil || len(got) != 1 {
			t.Fatalf("alertmanager body %q: %v", body, err)
		}
		if got[0].Labels["alertname"] != a.Kind || got[0].Labels["severity"] != a.Severity || got[0].Annotations["summary"] != a.Summary {
			t.Fatalf("alertmanager body %+v is not the alert %+v", got[0], a)
		}
	case "slack":
		var msg slackMessage
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Fatalf("slack body %q: %v", body, err)
		}
		// Slack's Block Kit limits, counted on the text as sent (escaped).
		check := func(what, s string, max int) {
			if n := utf8.RuneCountInString(s); n > max {
				t.Fatalf("slack %s is %d characters, over Slack's %d: Slack refuses the message", what, n, max)
			}
		}
		check("text", msg.Text, 40000)
		if len(msg.Blocks) > 50 {
			t.Fatalf("slack message has %d blocks, over Slack's 50", len(msg.Blocks))
		}
		for _, b := range msg.Blocks {
			if b.Text != nil {
				max := 3000
				if b.Type == "header" {
					max = 150
				}
				check(b.Type+" text", b.Text.Text, max)
			}
			if len(b.Fields) > 10 {
				t.Fatalf("slack section has %d fields, over Slack's 10", len(b.Fields))
			}
			for _, fl := range b.Fields {
				check("field", fl.Text, 2000)
			}
			for _, e := range b.Elements {
				check("context element", e.Text, 3000)
			}
		}
	}
}

func manyDetails(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%03d":"v"`, i)
	}
	b.WriteString("}")
	return b.String()
}
