package bidding

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/money"
)

// facts is a fixture builder for decision facts: a one-off, single-node
// fine-tuning job that can checkpoint, with spot much cheaper than
// on-demand, no placement rules and plenty of slack.
type facts struct{ Facts }

func newFacts() *facts {
	return &facts{Facts{
		Workload: "fine-tuning", Precision: "fp16", Purchase: "auto", Nodes: 1, GPUs: 8, Checkpoints: true,
		GPUHours: 18, RunsPerMonth: 1, Utilization: 0.003, MonthlySpend: money.MustParse("13"),
		Regions: 32, AllRegions: 32, Areas: 7, SpotSaving: 0.74, SpotPAny: 0.003, Slack: 4,
		Best: "spot p4d.24xlarge (8x A100-40GB) in aws us-east-2", BestPurchase: "spot",
	}}
}

func (f *facts) with(fn func(*Facts)) *facts { fn(&f.Facts); return f }

func ids(rs []Recommendation) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestDecisionRules(t *testing.T) {
	tests := []struct {
		name  string
		facts *facts
		want  []string
		text  string // in the first recommendation of the list that has it
	}{
		{"BERT fine-tuning, one-off", newFacts(),
			[]string{"spot-with-checkpoints", "one-off", "open-placement"}, "finish 74% cheaper than on-demand, interruptions included (0.3% chance"},
		{"EU only", newFacts().with(func(f *Facts) { f.Geographies, f.Regions, f.Areas = []string{"eu"}, 6, 1 }),
			[]string{"spot-with-checkpoints", "one-off", "residency"}, "EU only: 6 of 32 regions with prices qualify."},
		{"multi-node pre-training, a year of it", newFacts().with(func(f *Facts) {
			f.Workload, f.Precision, f.Purchase, f.Nodes, f.GPUs, f.GPUHours = "training", "bf16", "on-demand", 4, 32, 2048
			f.HorizonMonths, f.RunsPerMonth, f.Utilization, f.MonthlySpend = 12, 8, 0.7, money.MustParse("56000")
			f.BestPurchase = "on-demand"
		}), []string{"multi-node", "large-training", "reserve-1y", "open-placement"}, "busy 70% of the time, above the ~60% break-even"},
		{"three years at half use: 3-year term only", newFacts().with(func(f *Facts) {
			f.HorizonMonths, f.Utilization, f.MonthlySpend = 36, 0.5, money.MustParse("5000")
		}), []string{"spot-with-checkpoints", "reserve-3y", "open-placement"}, ""},
		{"small recurring budget", newFacts().with(func(f *Facts) {
			f.HorizonMonths, f.Utilization, f.MonthlySpend = 3, 0.1, money.MustParse("200")
		}), []string{"spot-with-checkpoints", "light-recurring", "small-budget", "open-placement"}, "Budget under $1,000 a month ($200.00)"},
		{"cannot checkpoint", newFacts().with(func(f *Facts) { f.Checkpoints = false }),
			[]string{"no-checkpoints", "one-off", "open-placement"}, "restarts it from the beginning"},
		{"real-time inference in fp16", newFacts().with(func(f *Facts) { f.Workload, f.Precision, f.SpotSaving = "inference", "fp16", 0.6 }),
			[]string{"realtime-inference", "quantize-inference", "one-off", "open-placement"}, "latency-bound"},
		{"batch inference in int8 on spot", newFacts().with(func(f *Facts) { f.Workload, f.Precision = "batch-inference", "int8" }),
			[]string{"spot-with-checkpoints", "one-off", "open-placement"}, ""},
		{"fp32 training", newFacts().with(func(f *Facts) { f.Workload, f.Precision = "training", "fp32" }),
			[]string{"spot-with-checkpoints", "mixed-precision", "one-off", "open-placement"}, "FP32 training"},
		{"spot barely cheaper", newFacts().with(func(f *Facts) { f.SpotSaving = 0.1 }),
			[]string{"one-off", "open-placement"}, ""},
		{"tight deadline", newFacts().with(func(f *Facts) { f.Slack = 0.1 }),
			[]string{"spot-with-checkpoints", "one-off", "open-placement", "tight-deadline"}, "only 10% of its runtime to spare"},
		{"no deadline is not tight", newFacts().with(func(f *Facts) { f.Slack = -1 }),
			[]string{"spot-with-checkpoints", "one-off", "open-placement"}, ""},
		{"idle reservation", newFacts().with(func(f *Facts) { f.BestPurchase = "reserved" }),
			[]string{"spot-with-checkpoints", "use-reservation", "open-placement"}, "paid for whether used or not"},
		{"nothing fits", newFacts().with(func(f *Facts) { f.Best, f.BestPurchase, f.SpotSaving, f.Slack = "", "", 0, -1 }),
			[]string{"open-placement", "nothing-fits"}, "No offer fits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Recommend(DecisionRules, tt.facts.Facts)
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("rules fired %v, want %v", ids(got), tt.want)
			}
			if tt.text == "" {
				return
			}
			for _, r := range got {
				if strings.Contains(r.Text, tt.text) {
					return
				}
			}
			t.Errorf("no advice says %q: %+v", tt.text, got)
		})
	}
}

// TestDecisionRulesTable keeps the rules honest: every condition names a
// fact and an op that exist, every placeholder a fact, IDs are unique.
func TestDecisionRulesTable(t *testing.T) {
	known := Facts{}.Values()
	ops := []CondOp{OpIn, OpNotIn, OpAtLeast, OpBelow, OpIs, OpSet, OpUnset}
	branches := []string{"task", "scale", "horizon", "compliance", "fit"}
	seen := map[string]bool{}
	placeholder := regexp.MustCompile(`\{([a-z_]+)\}`)
	for _, r := range DecisionRules {
		if seen[r.ID] || r.ID == "" {
			t.Errorf("rule ID %q empty or repeated", r.ID)
		}
		seen[r.ID] = true
		if !slices.Contains(branches, r.Branch) {
			t.Errorf("%s: branch %q", r.ID, r.Branch)
		}
		if len(r.When) == 0 {
			t.Errorf("%s: no conditions", r.ID)
		}
		for _, c := range r.When {
			if _, ok := known[c.Fact]; !ok {
				t.Errorf("%s: unknown fact %q", r.ID, c.Fact)
			}
			if !slices.Contains(ops, c.Op) {
				t.Errorf("%s: unknown op %q", r.ID, c.Op)
			}
		}
		for _, m := range placeholder.FindAllStringSubmatch(r.Advice, -1) {
			if _, ok := known[m[1]]; !ok {
				t.Errorf("%s: advice names unknown fact {%s}", r.ID, m[1])
			}
		}
	}
	// A condition on a fact that does not exist never holds.
	if got := Recommend([]Rule{{ID: "x", When: []Cond{{Fact: "nope", Op: OpUnset}}, Advice: "x"}}, newFacts().Facts); len(got) != 0 {
		t.Errorf("unknown fact matched: %+v", got)
	}
}
