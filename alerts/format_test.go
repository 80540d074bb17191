package alerts_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
)

type slackMessage struct {
	Text   string `json:"text"`
	Blocks []struct {
		Type string `json:"type"`
		Text *struct {
			Type, Text string
		} `json:"text"`
		Fields []struct {
			Type, Text string
		} `json:"fields"`
		Elements []struct {
			Type, Text string
		} `json:"elements"`
	} `json:"blocks"`
}

type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
}

// TestFormats sends one alert to a webhook of each format and reads what
// each received as its receiver would.
func TestFormats(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 19, 32, 17, 0, time.UTC)
	bus := eventstest.NewBus(t, clock.NewFake(at))
	// The wall clock is behind the bus's (simulated) one.
	wall := at.Add(-50 * time.Minute)
	a := events.Alert{
		Severity: events.SeverityCritical,
		Kind:     "preemption",
		JobID:    job1,
		Summary:  "spot capacity <reclaimed> & job moving",
		Details:  map[string]string{"zone": "us-east-1a", "notice": "2m", "instance": "i-0abc"},
	}
	tests := []struct {
		name    string
		webhook alerts.Webhook
		check   func(t *testing.T, r request)
	}{
		{"slack", alerts.Webhook{}, func(t *testing.T, r request) {
			var m slackMessage
			decode(t, r, &m)
			for _, want := range []string{":rotating_light:", "[critical]", "preemption", "&lt;reclaimed&gt; &amp; job moving", job1} {
				if !strings.Contains(m.Text, want) {
					t.Errorf("text %q does not contain %q", m.Text, want)
				}
			}
			if len(m.Blocks) < 4 || m.Blocks[0].Type != "header" || m.Blocks[0].Text.Text != ":rotating_light: Critical: preemption" {
				t.Fatalf("blocks %+v: want a header with the severity first", m.Blocks)
			}
			if got := m.Blocks[1].Text; got == nil || got.Type != "mrkdwn" || got.Text != "spot capacity &lt;reclaimed&gt; &amp; job moving" {
				t.Errorf("summary block %+v", got)
			}
			var fields []string
			for _, f := range m.Blocks[2].Fields {
				fields = append(fields, f.Text)
			}
			want := []string{"*Job*\n" + job1, "*instance*\ni-0abc", "*notice*\n2m", "*zone*\nus-east-1a"}
			if !slices.Equal(fields, want) {
				t.Errorf("fields %q, want %q", fields, want)
			}
			last := m.Blocks[len(m.Blocks)-1]
			if last.Type != "context" || !strings.Contains(last.Elements[0].Text, "2026-11-29T19:32:17Z") {
				t.Errorf("footer %+v: want the event time", last)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		}},
		{"alertmanager", alerts.Webhook{Format: alerts.FormatAlertmanager, GeneratorURL: "http://spotwise.example/v1/jobs/{job_id}"}, func(t *testing.T, r request) {
			var got []amAlert
			decode(t, r, &got)
			if len(got) != 1 {
				t.Fatalf("%d alerts, want 1", len(got))
			}
			am := got[0]
			wantLabels := map[string]string{"alertname": "preemption", "severity": "critical", "job_id": job1, "source": "spotwise"}
			if !maps.Equal(am.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", am.Labels, wantLabels)
			}
			if am.Annotations["summary"] != a.Summary || am.Annotations["description"] != "instance: i-0abc\nnotice: 2m\nzone: us-east-1a" {
				t.Errorf("annotations %q", am.Annotations)
			}
			if !am.StartsAt.Equal(wall) || !am.EndsAt.Equal(wall.Add(alerts.DefaultResolveTimeout)) {
				t.Errorf("startsAt %v, endsAt %v: want the wall clock's %v, and the resolve timeout after it", am.StartsAt, am.EndsAt, wall)
			}
			if am.GeneratorURL != "http://spotwise.example/v1/jobs/"+job1 {
				t.Errorf("generatorURL %q", am.GeneratorURL)
			}
		}},
		{"json template", alerts.Webhook{Format: alerts.FormatTemplate,
			Template: `{"text": {{json .Summary}}, "sev": {{json (upper .Severity)}}, "job": {{json .JobID}}, ` +
				`"zone": {{json (index .Details "zone")}}, "missing": {{json (index .Details "nope")}}, "at": {{json .Time}}, "to": {{json .Webhook}}}`,
		}, func(t *testing.T, r request) {
			var got map[string]string
			decode(t, r, &got)
			want := map[string]string{"text": a.Summary, "sev": "CRITICAL", "job": job1, "zone": "us-east-1a", "missing": "",
				"at": "2026-11-29T19:32:17Z", "to": "json template"}
			if !maps.Equal(got, want) {
				t.Errorf("body %v, want %v", got, want)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want the default application/json", ct)
			}
		}},
		{"text template", alerts.Webhook{Format: alerts.FormatTemplate,
			Template: `{{upper .Severity}} {{.Kind}} {{.JobID}}: {{trunc 14 .Summary}}`,
			Headers:  map[string]string{"content-type": "text/plain; charset=utf-8", "X-Team": "gpu"},
		}, func(t *testing.T, r request) {
			if got, want := string(r.body), "CRITICAL preemption "+job1+": spot capacity…"; got != want {
				t.Errorf("body %q, want %q", got, want)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q, want the configured one", ct)
			}
			if h := r.header.Get("X-Team"); h != "gpu" {
				t.Errorf("X-Team %q", h)
			}
		}},
	}
	var cfg alerts.Config
	receivers := map[string]*receiver{}
	for _, tt := range tests {
		rc := newReceiver(t, nil)
		receivers[tt.name] = rc
		w := tt.webhook
		w.Name, w.URL = tt.name, rc.URL()
		cfg.Webhooks = append(cfg.Webhooks, w)
	}
	startNotifier(t, bus, cfg, nil, alerts.WithClock(clock.NewFake(wall)))
	publish(t, bus, a)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := receivers[tt.name].waitRequests(t, 1, 5*time.Second)
			tt.check(t, reqs[0])
		})
	}
}

func decode(t *testing.T, r request, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %s is not what was expected: %v", r.body, err)
	}
}
