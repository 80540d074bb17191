package alerts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// Webhook formats.
const (
	FormatSlack        = "slack"
	FormatAlertmanager = "alertmanager"
	FormatTemplate     = "template"
)

// Defaults for what a Config leaves zero.
const (
	DefaultDedupeWindow = 5 * time.Minute
	DefaultQueueSize    = 256
	DefaultTimeout      = 10 * time.Second
	DefaultRateCount    = 30
	DefaultRatePer      = time.Minute
	DefaultRateBurst    = 10
	DefaultMaxAttempts  = 6
	DefaultRetryInitial = time.Second
	DefaultRetryMax     = time.Minute
	// DefaultResolveTimeout is Alertmanager's own resolve_timeout.
	DefaultResolveTimeout   = 5 * time.Minute
	DefaultConditionTimeout = 6 * time.Hour
)

// Config says where alerts go and how hard to try. Zero values take the
// defaults above. In YAML or JSON the keys are snake_case and durations are
// text with a unit ("5m", "30s"), never bare numbers.
type Config struct {
	Webhooks []Webhook `json:"webhooks"`
	// DedupeWindow: an alert with the same kind, job and summary as one
	// sent to the same webhook less than this long ago is not sent again.
	DedupeWindow time.Duration `json:"dedupe_window"`
	// RateLimit applies to each webhook on its own.
	RateLimit RateLimit `json:"rate_limit"`
	// QueueSize bounds each webhook's queue of alerts waiting to be
	// delivered; when it is full the oldest is dropped.
	QueueSize int   `json:"queue_size"`
	Retry     Retry `json:"retry"`
}

// RateLimit is a token bucket: Count alerts per Per, with bursts of up to
// Burst. Alerts over the limit are dropped and counted, and one "N alerts
// suppressed" alert is sent when the webhook may send again (at most once
// per Per).
type RateLimit struct {
	Count int           `json:"count"`
	Per   time.Duration `json:"per"`
	Burst int           `json:"burst"`
}

// Retry is how a failed delivery is retried: on network errors, 5xx and
// 429, with exponential backoff from Initial up to Max (with jitter), or
// after the receiver's Retry-After; at most MaxAttempts attempts in all.
// Other 4xx answers are not retried.
type Retry struct {
	MaxAttempts int           `json:"max_attempts"`
	Initial     time.Duration `json:"initial"`
	Max         time.Duration `json:"max"`
}

// Webhook is one receiver of alerts.
//
// URL and Headers are secrets (a Slack incoming-webhook URL is a bearer
// credential): they are never logged; logs name the webhook by Name and
// the URL's host.
type Webhook struct {
	// Name identifies the webhook in logs and metrics; unique.
	Name string `json:"name"`
	// URL is POSTed to; http or https.
	URL string `json:"url"`
	// Format is "slack" (the default), "alertmanager" or "template".
	Format string `json:"format"`
	// Template is a Go text/template, for Format "template". It is
	// executed with a TemplateData and the functions json, upper, lower
	// and trunc.
	Template string `json:"template"`
	// Headers are added to every request; a Content-Type here replaces
	// the default application/json.
	Headers map[string]string `json:"headers"`
	// MinSeverity is the least severe alert sent: info (the default),
	// warning or critical.
	MinSeverity string `json:"min_severity"`
	// Timeout bounds one attempt.
	Timeout time.Duration `json:"timeout"`
	// GeneratorURL, for Format "alertmanager", becomes each alert's
	// generatorURL, with "{job_id}" replaced by the alert's job ID (and
	// left out for an alert without one).
	GeneratorURL string `json:"generator_url"`
	// ResolveTimeout, for Format "alertmanager": an alert about an event
	// (a job failed, a checkpoint did not make it) ends this long after it
	// starts (default DefaultResolveTimeout).
	ResolveTimeout time.Duration `json:"resolve_timeout"`
	// ConditionTimeout, for Format "alertmanager": an alert about a
	// condition (a job leaving capacity under a notice) ends when the
	// condition clears (spotwise sends it again, resolved), or this long
	// after it starts if that never comes (default
	// DefaultConditionTimeout).
	ConditionTimeout time.Duration `json:"condition_timeout"`
}

// String names the webhook without its secrets, so a Webhook printed with
// %v (or a Config holding it) cannot leak its URL.
func (w Webhook) String() string { return w.Name + " (" + hostOf(w.URL) + ")" }

// GoString is String, for %#v.
func (w Webhook) GoString() string { return w.String() }

// severityRank orders severities; unknown ones rank 0.
var severityRank = map[string]int{
	events.SeverityInfo:     1,
	events.SeverityWarning:  2,
	events.SeverityCritical: 3,
}

// Validate reports every problem with the configuration, each named by its
// field ("webhooks[0].url: ..."). Nothing secret is quoted.
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf(field+": "+format, args...))
	}
	if c.DedupeWindow < 0 {
		add("dedupe_window", "must not be negative")
	}
	if c.QueueSize < 0 {
		add("queue_size", "must not be negative")
	}
	if c.RateLimit.Count < 0 {
		add("rate_limit.count", "must not be negative")
	}
	if c.RateLimit.Per < 0 {
		add("rate_limit.per", "must not be negative")
	}
	if c.RateLimit.Burst < 0 {
		add("rate_limit.burst", "must not be negative")
	}
	if c.Retry.MaxAttempts < 0 {
		add("retry.max_attempts", "must not be negative")
	}
	if c.Retry.Initial < 0 {
		add("retry.initial", "must not be negative")
	}
	if c.Retry.Max < 0 {
		add("retry.max", "must not be negative")
	}
	names := map[string]int{}
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		prefix := fmt.Sprintf("webhooks[%d].", i)
		errs = append(errs, w.problems(prefix)...)
		if j, dup := names[w.Name]; dup && w.Name != "" {
			add(prefix+"name", "%q is also the name of webhooks[%d]", w.Name, j)
		}
		names[w.Name] = i
	}
	return errors.Join(errs...)
}

// Validate reports every problem with the webhook, each named by its field.
func (w *Webhook) Validate() error { return errors.Join(w.problems("")...) }

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (w *Webhook) problems(prefix string) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf(prefix+field+": "+format, args...))
	}
	if strings.TrimSpace(w.Name) == "" {
		add("name", "is required")
	}
	// The URL is a secret: say what is wrong with it, never quote it.
	switch u, err := url.Parse(w.URL); {
	case w.URL == "":
		add("url", "is required")
	case err != nil:
		add("url", "is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		add("url", "scheme must be http or https, not %q", u.Scheme)
	case u.Host == "":
		add("url", "has no host")
	}
	switch w.Format {
	case "", FormatSlack, FormatAlertmanager:
		if w.Template != "" {
			add("template", "is only used with format %q, not %q", FormatTemplate, formatOf(w))
		}
	case FormatTemplate:
		if w.Template == "" {
			add("template", "is required with format %q", FormatTemplate)
		} else if err := checkTemplate(w.Template); err != nil {
			add("template", "%w", err)
		}
	default:
		add("format", "unknown format %q (known: slack, alertmanager, template)", w.Format)
	}
	for name, value := range w.Headers {
		if !headerName.MatchString(name) {
			add("headers", "%q is not a valid header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			add("headers", "the value of %q contains a line break or NUL", name)
		}
	}
	if w.MinSeverity != "" && severityRank[w.MinSeverity] == 0 {
		add("min_severity", "unknown severity %q (known: info, warning, critical)", w.MinSeverity)
	}
	if w.Timeout < 0 {
		add("timeout", "must not be negative")
	}
	for field, d := range map[string]time.Duration{"resolve_timeout": w.ResolveTimeout, "condition_timeout": w.ConditionTimeout} {
		switch {
		case d < 0:
			add(field, "must not be negative")
		case d > 0 && formatOf(w) != FormatAlertmanager:
			add(field, "is only used with format %q, not %q", FormatAlertmanager, formatOf(w))
		}
	}
	if w.GeneratorURL != "" {
		if u, err := url.Parse(strings.ReplaceAll(w.GeneratorURL, "{job_id}", "j")); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			add("generator_url", "must be an http or https URL")
		}
	}
	return errs
}

// checkTemplate parses a user template and runs it once on a sample alert,
// so that a reference to a field that does not exist fails at start, not
// at the first alert.
func checkTemplate(text string) error {
	t, err := parseTemplate(text)
	if err != nil {
		return err
	}
	sample := TemplateData{
		Alert: events.Alert{Severity: events.SeverityWarning, Kind: "preemption", JobID: "j-sample",
			Summary: "sample alert", Details: map[string]string{"zone": "us-east-1a"}},
		ID: "sample", Time: time.Unix(0, 0).UTC(), Source: "spotwise", Webhook: "sample",
	}
	if err := t.Execute(io.Discard, sample); err != nil {
		return err
	}
	return nil
}

func parseTemplate(text string) (*template.Template, error) {
	return template.New("webhook").Option("missingkey=zero").Funcs(templateFuncs).Parse(text)
}

func formatOf(w *Webhook) string {
	if w.Format == "" {
		return FormatSlack
	}
	return w.Format
}

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	if c.DedupeWindow == 0 {
		c.DedupeWindow = DefaultDedupeWindow
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.RateLimit.Count == 0 {
		c.RateLimit.Count = DefaultRateCount
	}
	if c.RateLimit.Per == 0 {
		c.RateLimit.Per = DefaultRatePer
	}
	if c.RateLimit.Burst == 0 {
		c.RateLimit.Burst = min(DefaultRateBurst, c.RateLimit.Count)
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry.Initial == 0 {
		c.Retry.Initial = DefaultRetryInitial
	}
	if c.Retry.Max == 0 {
		c.Retry.Max = max(DefaultRetryMax, c.Retry.Initial)
	}
	webhooks := make([]Webhook, len(c.Webhooks))
	for i, w := range c.Webhooks {
		w.Format = formatOf(&w)
		if w.MinSeverity == "" {
			w.MinSeverity = events.SeverityInfo
		}
		if w.Timeout == 0 {
			w.Timeout = DefaultTimeout
		}
		if w.ResolveTimeout == 0 {
			w.ResolveTimeout = DefaultResolveTimeout
		}
		if w.ConditionTimeout == 0 {
			w.ConditionTimeout = DefaultConditionTimeout
		}
		webhooks[i] = w
	}
	c.Webhooks = webhooks
	return c
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandEnv replaces ${VAR} in webhook URLs and header values with the
// variable's value from lookup (os.LookupEnv), so that secrets can stay out
// of the configuration file. An unset variable is an error naming the field
// and the variable.
func (c *Config) ExpandEnv(lookup func(string) (string, bool)) error {
	var errs []error
	expand := func(field, s string) string {
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v, ok := lookup(name)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: environment variable %s is not set", field, name))
			}
			return v
		})
	}
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		w.URL = expand(fmt.Sprintf("webhooks[%d].url", i), w.URL)
		if len(w.Headers) > 0 {
			headers := make(map[string]string, len(w.Headers))
			for k, v := range w.Headers {
				headers[k] = expand(fmt.Sprintf("webhooks[%d].headers.%s", i, k), v)
			}
			w.Headers = headers
		}
	}
	return errors.Join(errs...)
}

// The UnmarshalJSON methods read durations as text ("30s", "5m", "2d"),
// like the rest of spotwise's configuration, and refuse unknown keys, so a
// typo does not silently fall back to a default.

// UnmarshalJSON reads a Config from JSON (or YAML converted to JSON).
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config
	aux := struct {
		*plain
		DedupeWindow job.Duration `json:"dedupe_window"`
	}{plain: (*plain)(c), DedupeWindow: job.Duration(c.DedupeWindow)}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	c.DedupeWindow = aux.DedupeWindow.D()
	return nil
}

// UnmarshalJSON reads a RateLimit from JSON.
func (r *RateLimit) UnmarshalJSON(b []byte) error {
	type plain RateLimit
	aux := struct {
		*plain
		Per job.Duration `json:"per"`
	}{plain: (*plain)(r), Per: job.Duration(r.Per)}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	r.Per = aux.Per.D()
	return nil
}

// UnmarshalJSON reads a Retry from JSON.
func (r *Retry) UnmarshalJSON(b []byte) error {
	type plain Retry
	aux := struct {
		*plain
		Initial job.Duration `json:"initial"`
		Max     job.Duration `json:"max"`
	}{plain: (*plain)(r), Initial: job.Duration(r.Initial), Max: job.Duration(r.Max)}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	r.Initial, r.Max = aux.Initial.D(), aux.Max.D()
	return nil
}

// UnmarshalJSON reads a Webhook from JSON.
func (w *Webhook) UnmarshalJSON(b []byte) error {
	type plain Webhook
	aux := struct {
		*plain
		Timeout          job.Duration `json:"timeout"`
		ResolveTimeout   job.Duration `json:"resolve_timeout"`
		ConditionTimeout job.Duration `json:"condition_timeout"`
	}{plain: (*plain)(w), Timeout: job.Duration(w.Timeout), ResolveTimeout: job.Duration(w.ResolveTimeout),
		ConditionTimeout: job.Duration(w.ConditionTimeout)}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	w.Timeout, w.ResolveTimeout, w.ConditionTimeout = aux.Timeout.D(), aux.ResolveTimeout.D(), aux.ConditionTimeout.D()
	return nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// hostOf is the only part of a webhook URL that is logged.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "invalid-url"
	}
	return u.Host
}
