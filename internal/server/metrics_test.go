package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// A real server, taken through what its metrics count (a job placed
// through launches whose outcome is unknown, run, given notice of
// maintenance, checkpointed, moved and billed; an alert delivered; a garbled event dropped), serves /metrics
// that promlint finds nothing wrong with, and every metric the Grafana
// dashboard and the Prometheus rules ask for is among them.
func TestMetricsAreLintCleanAndCoverTheDashboardAndRules(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer hook.Close()
	cfg := testConfig(t.TempDir())
	cfg.Alerts.Webhooks = []alerts.Webhook{{Name: "am", URL: hook.URL + "/api/v2/alerts", Format: alerts.FormatAlertmanager}}
	// Every launch call answers with an error, though the launch goes
	// through: launch errors are counted, and reconciliation finds the
	// instances.
	cfg.Sim.Faults = SimFaults{Unknown: 1, UnknownLaunched: 1}
	cfg.Sim.Interruptions = SimInterruptions{}
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	v, _, err := c.Submit(ctx, []byte("name: m\nteam: nlp\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 400h on T4\npurchase: spot\ncheckpoint: {duration: 5s}\n"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	first := waitState(t, c, v.ID, job.Running, 30*time.Second)
	op := apiCall{t: t, s: s, v: apiValidator(t), token: s.OperatorToken()}
	// Maintenance announced a simulated day ahead (24 s of wall time at
	// 3600x): the checkpoint makes it whatever the machine's speed.
	op.want(http.StatusOK, http.MethodPost, "/v1/sim/maintenance", "application/json", []byte(`{"job": "`+v.ID+`", "in": "24h"}`))
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		got, err := c.Get(ctx, v.ID)
		if err != nil || got.State != job.Running || got.Attempt <= first.Attempt || len(got.Attempts) == 0 {
			return fmt.Errorf("after its preemption the job is %s on attempt %d, %d attempts closed (%v)", got.State, got.Attempt, len(got.Attempts), err)
		}
		return nil
	})
	if err := s.Bus().PublishRaw(ctx, "spotwise.alerts.info", []byte(`{"v":1,"id":"garbled","type":`)); err != nil {
		t.Fatal(err)
	}

	wanted := map[string][]string{}
	for _, f := range []string{"grafana/spotwise.json", "prometheus/alerts.yml"} {
		for _, e := range deployExprs(t, filepath.Join("..", "..", "deploy", f)) {
			for _, name := range metricNames(e) {
				wanted[name] = append(wanted[name], f)
			}
		}
	}
	// Made by Prometheus itself, not by spotwise.
	delete(wanted, "up")
	if len(wanted) < 20 {
		t.Fatalf("the dashboard and rules ask for %d metrics: %v; the extraction is broken", len(wanted), wanted)
	}
	var text string
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		text = scrapeText(t, s)
		have := exposed(t, text)
		var missing []string
		for name, where := range wanted {
			if !have[name] {
				missing = append(missing, fmt.Sprintf("%s (%s)", name, strings.Join(slices.Compact(where), ", ")))
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("not on /metrics: %s", strings.Join(missing, "; "))
		}
		return nil
	})
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// exposed lists the metric names of an exposition, a histogram's by its
// series (_bucket, _sum, _count) as PromQL names them.
func exposed(t *testing.T, text string) map[string]bool {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics is not the text format: %v", err)
	}
	have := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		have[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			have[name+"_bucket"], have[name+"_sum"], have[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			have[name+"_sum"], have[name+"_count"] = true, true
		}
	}
	return have
}

// deployExprs reads every PromQL expression of a Grafana dashboard
// (panel targets' expr, nested rows included, and template variables'
// queries) or of a Prometheus rules file (each rule's expr).
func deployExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".yml") {
		var rules struct {
			Groups []struct {
				Rules []struct {
					Expr string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := yaml.Unmarshal(b, &rules); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var out []string
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				out = append(out, r.Expr)
			}
		}
		return out
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			switch {
			case key == "expr":
				out = append(out, v)
			case key == "query" || key == "definition":
				// label_values(metric, label): the metric only.
				if m := labelValues.FindStringSubmatch(v); m != nil {
					out = append(out, m[1])
				}
			}
		}
	}
	walk(doc, "")
	return out
}

var (
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*[a-zA-Z_]\w*\s*\)\s*$`)
	// What holds no metric names: strings, label matchers, ranges, and
	// the label lists of grouping and matching clauses.
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promBraces   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promWords    = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "offset": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true, "atan2": true}
)

// metricNames are the metric names a PromQL expression selects:
// identifiers that are not functions, aggregations, keywords, labels or
// numbers.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promBraces.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if promWords[strings.ToLower(name)] {
			continue
		}
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.$") {
			continue // part of a number (1e-9) or a Grafana variable
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		out = append(out, name)
	}
	return out
}

// The extraction reads what Grafana and Prometheus would: metric names,
// and not labels, functions, variables or numbers.
func TestMetricNamesOfPromQL(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (provider, purchase) (rate(spotwise_placements_total{job=~"$job"}[$__rate_interval]))`, []string{"spotwise_placements_total"}},
		{`histogram_quantile(0.95, sum by (le, provider) (rate(x_seconds_bucket{provider!="aws"}[30m]))) > 24`, []string{"x_seconds_bucket"}},
		{`(sum(spotwise_scheduler_leader) or vector(0)) < 1`, []string{"spotwise_scheduler_leader"}},
		{`a / on (team) group_left (x) b > 1e-9 and c`, []string{"a", "b", "c"}},
		{`sum by (team) (rate(s_total[7d] offset 3h)) * 3600 > 20`, []string{"s_total"}},
		{`up{job=~".*spotwise.*", name="a{b}"} == 0`, []string{"up"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%s) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}
