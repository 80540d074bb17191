package alerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
)

// shipOutput stores lines of a job's output as its agent would.
func shipOutput(t *testing.T, bus *events.Bus, jobID string, texts ...string) {
	t.Helper()
	b := &events.LogBatch{JobID: jobID, Attempt: 1, Seq: 1}
	for _, text := range texts {
		b.Lines = append(b.Lines, events.LogLine{Time: time.Now(), Stream: events.LogStderr, Text: text})
	}
	if err := bus.Publish(context.Background(), events.LogSubject(jobID, 1), b); err != nil {
		t.Fatal(err)
	}
}

// TestJobFailedAlertCarriesTheLastLines: the alert of a failed job shows
// the end of its output (at most 10 lines, 2 KiB) in every format; other
// alerts carry none.
func TestJobFailedAlertCarriesTheLastLines(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	slack, am, tmpl := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	startNotifier(t, bus, alerts.Config{Webhooks: []alerts.Webhook{
		{Name: "slack", URL: slack.URL()},
		{Name: "am", URL: am.URL(), Format: alerts.FormatAlertmanager},
		{Name: "tmpl", URL: tmpl.URL(), Format: alerts.FormatTemplate, Headers: map[string]string{"Content-Type": "text/plain"},
			Template: "{{.Kind}}:{{range .LogTail}}\n> {{.}}{{end}}"},
	}}, nil)
	var lines []string
	for i := range 14 {
		lines = append(lines, fmt.Sprintf("step %d", i))
	}
	lines = append(lines, "a fence ``` and <html> & more", "RuntimeError: CUDA out of memory")
	shipOutput(t, bus, job1, lines...)
	shipOutput(t, bus, job2, "x"+strings.Repeat("é", 3000)) // one long line
	publish(t, bus,
		events.Alert{Severity: events.SeverityCritical, Kind: "job-failed", JobID: job1, Summary: "job failed"},
		events.Alert{Severity: events.SeverityWarning, Kind: "preemption", JobID: job1, Summary: "preempted"},
		events.Alert{Severity: events.SeverityCritical, Kind: "job-failed", JobID: job2, Summary: "job 2 failed"})
	want := lines[len(lines)-10:]

	tb := tmpl.waitRequests(t, 3, 10*time.Second)
	if got, w := string(tb[0].body), "job-failed:\n> "+strings.Join(want, "\n> "); got != w {
		t.Errorf("template body:\n%s\nwant\n%s", got, w)
	}
	if got := string(tb[1].body); got != "preemption:" {
		t.Errorf("a preemption's template body %q: want no output", got)
	}
	if long := string(tb[2].body); !strings.HasPrefix(long, "job-failed:\n> …é") || len(long) > 2<<10+20 {
		t.Errorf("one long line: %d bytes, starting %.30q; want its end, within 2 KiB", len(long), long)
	}

	sb := slack.waitRequests(t, 3, 10*time.Second)
	var m slackMessage
	if err := json.Unmarshal(sb[0].body, &m); err != nil {
		t.Fatal(err)
	}
	last := m.Blocks[len(m.Blocks)-2] // before the footer
	if last.Text == nil || !strings.HasPrefix(last.Text.Text, "*Last lines of output*\n```step 6\n") ||
		!strings.HasSuffix(last.Text.Text, "RuntimeError: CUDA out of memory```") ||
		!strings.Contains(last.Text.Text, "&lt;html&gt; &amp;") || strings.Count(last.Text.Text, "```") != 2 {
		t.Errorf("slack's output block: %+v", last.Text)
	}
	if strings.Contains(string(sb[1].body), "Last lines") {
		t.Error("a preemption's slack message carries output")
	}

	ab := am.waitRequests(t, 3, 10*time.Second)
	var got []amAlert
	if err := json.Unmarshal(ab[0].body, &got); err != nil {
		t.Fatal(err)
	}
	if tail := got[0].Annotations["log_tail"]; tail != strings.Join(want, "\n") {
		t.Errorf("alertmanager's log_tail annotation %q", tail)
	}
}
