package alerts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/alerts"
)

const secretPath = "/services/T000/B000/cfgSECRETtoken"

func validConfig() alerts.Config {
	return alerts.Config{Webhooks: []alerts.Webhook{
		{Name: "slack", URL: "https://hooks.slack.example" + secretPath},
		{Name: "am", URL: "http://alertmanager:9093/api/v2/alerts", Format: alerts.FormatAlertmanager, MinSeverity: "warning"},
	}}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *alerts.Config)
		want   []string // each must appear in the error
	}{
		{"valid", func(*alerts.Config) {}, nil},
		{"no name", func(c *alerts.Config) { c.Webhooks[0].Name = "" }, []string{"webhooks[0].name: is required"}},
		{"duplicate name", func(c *alerts.Config) { c.Webhooks[1].Name = "slack" }, []string{`webhooks[1].name: "slack" is also the name of webhooks[0]`}},
		{"no url", func(c *alerts.Config) { c.Webhooks[0].URL = "" }, []string{"webhooks[0].url: is required"}},
		{"bad scheme", func(c *alerts.Config) { c.Webhooks[0].URL = "ftp://hooks.example" + secretPath }, []string{`webhooks[0].url: scheme must be http or https, not "ftp"`}},
		{"unparsable url", func(c *alerts.Config) { c.Webhooks[0].URL = "http://[::1" + secretPath }, []string{"webhooks[0].url: is not a valid URL"}},
		{"no host", func(c *alerts.Config) { c.Webhooks[0].URL = "https://" + secretPath }, []string{"webhooks[0].url: has no host"}},
		{"unknown format", func(c *alerts.Config) { c.Webhooks[1].Format = "slak" }, []string{`webhooks[1].format: unknown format "slak"`}},
		{"template does not parse", func(c *alerts.Config) {
			c.Webhooks[0].Format, c.Webhooks[0].Template = alerts.FormatTemplate, `{"text": {{json .Summary}`
		}, []string{"webhooks[0].template: "}},
		{"template names a missing field", func(c *alerts.Config) {
			c.Webhooks[0].Format, c.Webhooks[0].Template = alerts.FormatTemplate, `{{.Nope}}`
		}, []string{"webhooks[0].template: ", "Nope"}},
		{"template format without template", func(c *alerts.Config) { c.Webhooks[0].Format = alerts.FormatTemplate }, []string{`webhooks[0].template: is required with format "template"`}},
		{"template with another format", func(c *alerts.Config) { c.Webhooks[1].Template = "{{.Summary}}" }, []string{`webhooks[1].template: is only used with format "template", not "alertmanager"`}},
		{"unknown severity", func(c *alerts.Config) { c.Webhooks[1].MinSeverity = "urgent" }, []string{`webhooks[1].min_severity: unknown severity "urgent"`}},
		{"bad header name", func(c *alerts.Config) { c.Webhooks[0].Headers = map[string]string{"X Token": "v"} }, []string{`webhooks[0].headers: "X Token" is not a valid header name`}},
		{"header value with a line break", func(c *alerts.Config) {
			c.Webhooks[0].Headers = map[string]string{"Authorization": "Bearer hdrSECRET\r\nX: y"}
		}, []string{`webhooks[0].headers: the value of "Authorization" contains a line break`}},
		{"negative timeout", func(c *alerts.Config) { c.Webhooks[0].Timeout = -time.Second }, []string{"webhooks[0].timeout: must not be negative"}},
		{"bad generator url", func(c *alerts.Config) { c.Webhooks[1].GeneratorURL = "spotwise/{job_id}" }, []string{"webhooks[1].generator_url: must be an http or https URL"}},
		{"negative globals", func(c *alerts.Config) {
			c.DedupeWindow, c.QueueSize = -1, -1
			c.RateLimit = alerts.RateLimit{Count: -1, Per: -1, Burst: -1}
			c.Retry = alerts.Retry{MaxAttempts: -1, Initial: -1, Max: -1}
		}, []string{"dedupe_window:", "queue_size:", "rate_limit.count:", "rate_limit.per:", "rate_limit.burst:", "retry.max_attempts:", "retry.initial:", "retry.max:"}},
		{"every problem at once", func(c *alerts.Config) {
			c.Webhooks[0].URL = "gopher://x" + secretPath
			c.Webhooks[1].Format = "xml"
		}, []string{"webhooks[0].url:", "webhooks[1].format:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted the configuration")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, secret := range []string{"cfgSECRETtoken", "hdrSECRET"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error quotes a secret: %q", err)
				}
			}
			// New refuses what Validate refuses, with the same words.
			if _, nerr := alerts.New(c, nil, nil); nerr == nil || !strings.Contains(nerr.Error(), tt.want[0]) {
				t.Errorf("New: %v, want an error saying %q", nerr, tt.want[0])
			}
		})
	}
}

func TestWebhookPrintsWithoutSecrets(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.Webhooks[0].Headers = map[string]string{"Authorization": "Bearer hdrSECRET"}
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Webhooks[0]), fmt.Sprint(c.Webhooks)} {
		if strings.Contains(s, "cfgSECRETtoken") || strings.Contains(s, "hdrSECRET") {
			t.Errorf("printed configuration shows a secret: %s", s)
		}
		if !strings.Contains(s, "slack (hooks.slack.example)") {
			t.Errorf("printed configuration does not name the webhook and host: %s", s)
		}
	}
}

// decodeYAML reads a server configuration file's alerts section the way
// the server reads its file: YAML to JSON, unknown keys refused.
func decodeYAML(text string) (alerts.Config, error) {
	var out struct {
		Alerts alerts.Config `json:"alerts"`
	}
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return out.Alerts, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	err = dec.Decode(&out)
	return out.Alerts, err
}

func TestConfigFromYAML(t *testing.T) {
	t.Parallel()
	c, err := decodeYAML(`
alerts:
  dedupe_window: 10m
  rate_limit: {count: 20, per: 1m, burst: 5}
  queue_size: 100
  retry: {max_attempts: 4, initial: 500ms, max: 30s}
  webhooks:
    - name: oncall
      url: ${SLACK_URL}
      min_severity: warning
      timeout: 5s
    - name: pager
      url: https://pager.example/v1/enqueue
      format: template
      template: '{"text": {{json .Summary}}}'
      headers: {Authorization: "Bearer ${PAGER_TOKEN}"}
`)
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if c.DedupeWindow != 10*time.Minute || c.RateLimit != (alerts.RateLimit{Count: 20, Per: time.Minute, Burst: 5}) ||
		c.QueueSize != 100 || c.Retry != (alerts.Retry{MaxAttempts: 4, Initial: 500 * time.Millisecond, Max: 30 * time.Second}) {
		t.Errorf("decoded %+v", c)
	}
	if len(c.Webhooks) != 2 || c.Webhooks[0].Timeout != 5*time.Second || c.Webhooks[0].MinSeverity != "warning" ||
		c.Webhooks[1].Format != alerts.FormatTemplate {
		t.Errorf("decoded webhooks %#v", c.Webhooks)
	}
	env := map[string]string{"SLACK_URL": "https://hooks.slack.example" + secretPath, "PAGER_TOKEN": "tok123456"}
	if err := c.ExpandEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatalf("ExpandEnv: %v", err)
	}
	if c.Webhooks[0].URL != env["SLACK_URL"] || c.Webhooks[1].Headers["Authorization"] != "Bearer tok123456" {
		t.Errorf("expanded to %q and %q", c.Webhooks[0].URL, c.Webhooks[1].Headers["Authorization"])
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestConfigFromYAMLRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "alerts:\n  dedupe_windw: 5m\n", `unknown field "dedupe_windw"`},
		{"unknown webhook key", "alerts:\n  webhooks:\n    - {name: a, url: 'http://x', timout: 5s}\n", `unknown field "timout"`},
		{"bare number duration", "alerts:\n  dedupe_window: 300\n", "is not a duration"},
		{"bad duration", "alerts:\n  rate_limit: {per: soon}\n", `"soon" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeYAML(tt.yaml)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestExpandEnvNamesMissingVariables(t *testing.T) {
	t.Parallel()
	c := alerts.Config{Webhooks: []alerts.Webhook{{Name: "a", URL: "${NOPE_URL}", Headers: map[string]string{"Authorization": "Bearer ${NOPE_TOKEN}"}}}}
	err := c.ExpandEnv(func(string) (string, bool) { return "", false })
	for _, want := range []string{"webhooks[0].url: environment variable NOPE_URL is not set", "webhooks[0].headers.Authorization: environment variable NOPE_TOKEN is not set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q", err, want)
		}
	}
}
