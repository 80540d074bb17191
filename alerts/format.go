package alerts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/spotwise/spotwise/events"
)

// item is one alert on its way to one webhook, with what its envelope said
// and when (by the notifier's wall clock) it came in.
type item struct {
	alert    events.Alert
	id       string
	time     time.Time
	source   string
	received time.Time
	// logTail is the end of a failed job's output (see logTail).
	logTail []string
}

// TemplateData is what a user template is executed with: the alert's
// fields (.Severity, .Kind, .JobID, .Summary, .Details, .Ongoing,
// .Resolved) and its envelope's ID, Time and Source, the webhook's name,
// and for a job-failed alert the last lines of the job's output
// (.LogTail).
type TemplateData struct {
	events.Alert
	ID      string
	Time    time.Time
	Source  string
	Webhook string
	LogTail []string
}

var templateFuncs = template.FuncMap{
	// json writes a value as JSON, so a template can build a JSON body
	// without worrying about quotes: {"text": {{json .Summary}}}.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	// trunc keeps at most n characters of s.
	"trunc": func(n int, s string) string { return truncate(s, n) },
}

// renderer turns an item into a request body for one webhook.
type renderer func(it item) ([]byte, error)

func newRenderer(w Webhook) (renderer, error) {
	switch w.Format {
	case FormatAlertmanager:
		return func(it item) ([]byte, error) { return alertmanagerBody(it, w) }, nil
	case FormatTemplate:
		t, err := parseTemplate(w.Template)
		if err != nil {
			return nil, fmt.Errorf("webhook %s: template: %w", w.Name, err)
		}
		return func(it item) ([]byte, error) {
			var buf bytes.Buffer
			data := TemplateData{Alert: it.alert, ID: it.id, Time: it.time, Source: it.source, Webhook: w.Name, LogTail: it.logTail}
			if err := t.Execute(&buf, data); err != nil {
				return nil, fmt.Errorf("executing the template: %w", err)
			}
			return buf.Bytes(), nil
		}, nil
	default:
		return slackBody, nil
	}
}

// Slack's limits on block text, from its Block Kit reference.
const (
	slackHeaderMax    = 150
	slackTextMax      = 3000
	slackFieldMax     = 2000
	slackFieldsPerSec = 10
	slackMaxFields    = 40
)

type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string       `json:"type"`
	Text     *slackText   `json:"text,omitempty"`
	Fields   []*slackText `json:"fields,omitempty"`
	Elements []*slackText `json:"elements,omitempty"`
}

type slackText struct {
	Type  string `json:"type"` // plain_text or mrkdwn
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}

var severityLook = map[string]struct{ emoji, title string }{
	events.SeverityCritical: {":rotating_light:", "Critical"},
	events.SeverityWarning:  {":warning:", "Warning"},
	events.SeverityInfo:     {":information_source:", "Info"},
}

// slackBody is a Slack incoming-webhook message: a plain text line for
// notifications, then blocks with the severity, summary, job and details.
func slackBody(it item) ([]byte, error) {
	a := it.alert
	look, ok := severityLook[a.Severity]
	if !ok {
		look = severityLook[events.SeverityInfo]
	}
	if a.Resolved {
		look.emoji, look.title = ":white_check_mark:", "Resolved"
	}
	text := fmt.Sprintf("%s [%s] %s: %s", look.emoji, a.Severity, a.Kind, a.Summary)
	if a.JobID != "" {
		text += " (job " + a.JobID + ")"
	}
	msg := slackMessage{
		Text: slackTruncate(text, slackTextMax),
		Blocks: []slackBlock{
			{Type: "header", Text: &slackText{Type: "plain_text", Emoji: true,
				Text: truncate(look.emoji+" "+look.title+": "+a.Kind, slackHeaderMax)}},
			{Type: "section", Text: &slackText{Type: "mrkdwn", Text: slackTruncate(a.Summary, slackTextMax)}},
		},
	}
	var fields []*slackText
	field := func(name, value string) {
		fields = append(fields, &slackText{Type: "mrkdwn", Text: slackTruncate("*"+name+"*\n"+value, slackFieldMax)})
	}
	if a.JobID != "" {
		field("Job", a.JobID)
	}
	keys := slices.Sorted(maps.Keys(a.Details))
	for i, k := range keys {
		if len(fields) == slackMaxFields-1 && i < len(keys)-1 {
			field("…", fmt.Sprintf("%d more details", len(keys)-i))
			break
		}
		field(k, a.Details[k])
	}
	for chunk := range slices.Chunk(fields, slackFieldsPerSec) {
		msg.Blocks = append(msg.Blocks, slackBlock{Type: "section", Fields: chunk})
	}
	if len(it.logTail) > 0 {
		// A code block, which no fence in the output may end early.
		tail := strings.ReplaceAll(logTailText(it.logTail), "```", "`\u200b``")
		msg.Blocks = append(msg.Blocks, slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn",
			Text: "*Last lines of output*\n```" + slackTruncate(tail, slackTextMax-32) + "```"}})
	}
	footer := "spotwise"
	if it.source != "" {
		footer += " · " + it.source
	}
	if !it.time.IsZero() {
		footer += " · " + it.time.UTC().Format(time.RFC3339)
	}
	msg.Blocks = append(msg.Blocks, slackBlock{Type: "context", Elements: []*slackText{{Type: "mrkdwn", Text: slackTruncate(footer, slackTextMax)}}})
	return json.Marshal(msg)
}

// slackEscape escapes the three characters Slack's mrkdwn gives meaning to.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// slackTruncate escapes s and keeps at most n characters of the result:
// Slack counts its limits on the text as sent, escapes included (a
// summary of 3000 "&" is 15000 characters, and the message is refused),
// and the cut never falls inside an escape.
func slackTruncate(s string, n int) string {
	e := slackEscape(s)
	if n <= 0 || utf8.RuneCountInString(e) <= n {
		return truncate(e, n)
	}
	r := []rune(e)[:n-1]
	// Every "&" in escaped text starts an escape, which ends with ";".
	if amp := lastIndex(r, '&'); amp >= 0 && lastIndex(r[amp:], ';') < 0 {
		r = r[:amp]
	}
	return string(r) + "…"
}

func lastIndex(r []rune, c rune) int {
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] == c {
			return i
		}
	}
	return -1
}

// amAlert is one alert as Alertmanager's POST /api/v2/alerts takes it.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// alertmanagerBody is a JSON array of one alert, labelled so Alertmanager
// can route and group it: alertname is the alert's kind, team the job's
// team. Its times are the wall clock's (when the notifier took the alert
// in), never the simulated one's: it starts then, and ends then too when
// it says a condition cleared (Resolved), else after the webhook's
// condition or resolve timeout, so that nothing stays firing for ever.
func alertmanagerBody(it item, w Webhook) ([]byte, error) {
	a := it.alert
	labels := map[string]string{"alertname": a.Kind, "severity": a.Severity, "source": "spotwise"}
	if a.JobID != "" {
		labels["job_id"] = a.JobID
	}
	if team := a.Details["team"]; team != "" {
		labels["team"] = team
	}
	generatorURL := w.GeneratorURL
	var desc strings.Builder
	for _, k := range slices.Sorted(maps.Keys(a.Details)) {
		fmt.Fprintf(&desc, "%s: %s\n", k, a.Details[k])
	}
	annotations := map[string]string{"summary": a.Summary}
	if desc.Len() > 0 {
		annotations["description"] = strings.TrimSuffix(desc.String(), "\n")
	}
	if len(it.logTail) > 0 {
		annotations["log_tail"] = logTailText(it.logTail)
	}
	at := it.received.UTC()
	am := amAlert{Labels: labels, Annotations: annotations, StartsAt: at, EndsAt: at.Add(w.ResolveTimeout)}
	switch {
	case a.Resolved:
		am.EndsAt = at
	case a.Ongoing:
		am.EndsAt = at.Add(w.ConditionTimeout)
	}
	if generatorURL != "" && (a.JobID != "" || !strings.Contains(generatorURL, "{job_id}")) {
		am.GeneratorURL = strings.ReplaceAll(generatorURL, "{job_id}", a.JobID)
	}
	return json.Marshal([]amAlert{am})
}

// truncate keeps at most n characters (runes) of s, marking a cut with "…".
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
