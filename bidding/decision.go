package bidding

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spotwise/spotwise/money"
)

// Facts are what the decision rules look at: the job (task type, scale),
// its best options as quoted, the user's budget horizon and the placement
// rules (compliance). `spotwise quote` fills them.
type Facts struct {
	Workload  string // training, fine-tuning, inference, batch-inference
	Precision string
	Purchase  string // the job's purchase policy
	Nodes     int
	GPUs      int // in all
	// Checkpoints is false when the job cannot checkpoint.
	Checkpoints bool
	// GPUHours is the work in GPU-hours on the best option.
	GPUHours float64
	// HorizonMonths is the budget horizon: 0 for a one-off run, else how
	// many months the job will keep coming back; RunsPerMonth how often.
	HorizonMonths int
	RunsPerMonth  float64
	// Utilization is the share of a month the job keeps its instances
	// busy (runs x runtime of the best option / 730 h): what a reservation
	// would be used.
	Utilization float64
	// MonthlySpend is runs per month x the best option's expected cost.
	MonthlySpend money.Micros
	// Geographies are the job's data-residency areas (empty: any);
	// Regions how many regions with offers its placement rules allow, of
	// AllRegions, in Areas geographies.
	Geographies []string
	Regions     int
	AllRegions  int
	Areas       int
	// SpotSaving is how much cheaper the best spot option is expected to
	// finish than the best on-demand one (0 when either is missing);
	// SpotPAny its probability of at least one interruption.
	SpotSaving float64
	SpotPAny   float64
	// Slack is the best option's time to spare before the deadline over
	// its runtime; negative when there is no deadline.
	Slack float64
	// Best names the best option ("spot p4d.24xlarge (8x A100-40GB) in
	// aws us-east-2"), empty when nothing fits; BestPurchase is its
	// purchase option.
	Best         string
	BestPurchase string
}

// CondOp is how a condition compares a fact.
type CondOp string

// Ops. In and NotIn take Values (a list fact matches when any element is
// in Values); AtLeast and Below take Number; Is takes Values[0] "true" or
// "false"; Set holds for a non-empty string or list or a non-zero number,
// Unset for the opposite.
const (
	OpIn      CondOp = "in"
	OpNotIn   CondOp = "not-in"
	OpAtLeast CondOp = ">="
	OpBelow   CondOp = "<"
	OpIs      CondOp = "is"
	OpSet     CondOp = "set"
	OpUnset   CondOp = "unset"
)

// Cond is one test on one fact, by the fact's name (see Facts.Values).
type Cond struct {
	Fact   string   `json:"fact"`
	Op     CondOp   `json:"op"`
	Values []string `json:"values,omitempty"`
	Number float64  `json:"number,omitempty"`
}

// Rule is one branch of the seeds' decision tree as data: when every
// condition holds, the advice applies. Advice names facts in braces
// ("{utilization}"), filled in as people read them.
type Rule struct {
	ID     string `json:"id"`
	Branch string `json:"branch"` // task, scale, horizon, compliance, fit
	When   []Cond `json:"when"`
	Advice string `json:"advice"`
}

// Recommendation is a rule that applies, with its advice filled in.
type Recommendation struct {
	ID     string `json:"id"`
	Branch string `json:"branch"`
	Text   string `json:"text"`
}

func whenIn(fact string, v ...string) Cond    { return Cond{Fact: fact, Op: OpIn, Values: v} }
func whenNotIn(fact string, v ...string) Cond { return Cond{Fact: fact, Op: OpNotIn, Values: v} }
func whenAtLeast(fact string, n float64) Cond { return Cond{Fact: fact, Op: OpAtLeast, Number: n} }
func whenBelow(fact string, n float64) Cond   { return Cond{Fact: fact, Op: OpBelow, Number: n} }
func whenSet(fact string) Cond                { return Cond{Fact: fact, Op: OpSet} }
func whenIs(fact string, b bool) Cond {
	return Cond{Fact: fact, Op: OpIs, Values: []string{strconv.FormatBool(b)}}
}

// DecisionRules are the seeds' decision process (task type, scale, budget
// horizon, compliance), in the order quote prints them.
var DecisionRules = []Rule{
	// Task type: training is throughput work that can be interrupted and
	// resumed; real-time inference is latency work that cannot.
	{ID: "spot-with-checkpoints", Branch: "task",
		When: []Cond{whenIn("workload", "training", "fine-tuning", "batch-inference"), whenIs("checkpoints", true),
			whenNotIn("purchase", "on-demand"), whenAtLeast("spot_saving", 0.2)},
		Advice: "Prefer spot with checkpoints: the best spot option is expected to finish {spot_saving} cheaper than on-demand, interruptions included ({spot_p_any} chance of at least one); checkpoints keep each restart to minutes of lost work."},
	{ID: "no-checkpoints", Branch: "task",
		When:   []Cond{whenIn("workload", "training", "fine-tuning"), whenIs("checkpoints", false)},
		Advice: "The job cannot checkpoint: an interruption restarts it from the beginning. Prefer on-demand, or add checkpoints to make spot safe."},
	{ID: "realtime-inference", Branch: "task",
		When:   []Cond{whenIn("workload", "inference")},
		Advice: "Real-time inference is latency-bound: serve from on-demand capacity (spot can vanish mid-request) on the smallest GPU that holds the model, or a fractional GPU (MIG, vGPU) where the provider sells one."},
	{ID: "mixed-precision", Branch: "task",
		When:   []Cond{whenIn("workload", "training", "fine-tuning"), whenIn("precision", "fp32")},
		Advice: "FP32 training leaves tensor cores idle: mixed precision (bf16/fp16) runs 2-3x faster on A100/H100 for the same price per hour."},
	{ID: "quantize-inference", Branch: "task",
		When:   []Cond{whenIn("workload", "inference", "batch-inference"), whenIn("precision", "fp32", "tf32", "fp16", "bf16")},
		Advice: "Inference in {precision}: INT8 (FP8 on H100) needs half the memory or less and raises throughput on T4/L4/A10-class GPUs."},

	// Scale: multi-node work needs a fast interconnect and suffers any
	// node's interruption; very large runs belong on reserved capacity.
	{ID: "multi-node", Branch: "scale",
		When:   []Cond{whenAtLeast("nodes", 2)},
		Advice: "Multi-node ({nodes} nodes, {gpus} GPUs): prefer instances with a fast interconnect (EFA, InfiniBand); one node's interruption stalls them all, so spot risk grows with the node count."},
	{ID: "large-training", Branch: "scale",
		When:   []Cond{whenIn("workload", "training"), whenAtLeast("gpu_hours", 1000)},
		Advice: "Large training run ({gpu_hours} GPU-hours): reserved capacity with a fast interconnect is the usual home at this size; `spotwise quote --commitment` shows where a term breaks even."},

	// Budget horizon: short is on-demand or spot, long is reserved if the
	// capacity stays busy.
	{ID: "use-reservation", Branch: "horizon",
		When:   []Cond{whenIn("best_purchase", "reserved")},
		Advice: "Idle reserved capacity fits the job: its hours are paid for whether used or not, so it goes first (here: {best})."},
	{ID: "one-off", Branch: "horizon",
		When:   []Cond{whenBelow("horizon_months", 1), whenSet("best"), whenNotIn("best_purchase", "reserved")},
		Advice: "One-off run: no commitment pays off; take spot or on-demand, whichever finishes cheaper in time (here: {best})."},
	{ID: "reserve-3y", Branch: "horizon",
		When:   []Cond{whenAtLeast("horizon_months", 36), whenAtLeast("utilization", 0.4)},
		Advice: "Consider a 3-year reservation: the job keeps its instances busy {utilization} of the time, above the ~40% break-even of a typical 3-year term (60% off); check with `spotwise quote --commitment --term 3y`."},
	{ID: "reserve-1y", Branch: "horizon",
		When:   []Cond{whenAtLeast("horizon_months", 12), whenAtLeast("utilization", 0.6)},
		Advice: "Consider a 1-year reservation: the job keeps its instances busy {utilization} of the time, above the ~60% break-even of a typical 1-year term (40% off); check with `spotwise quote --commitment --term 1y`."},
	{ID: "light-recurring", Branch: "horizon",
		When:   []Cond{whenAtLeast("horizon_months", 1), whenBelow("utilization", 0.4)},
		Advice: "Recurring but light (busy {utilization} of the month): a reservation would sit idle most of its term; stay on spot and on-demand."},
	{ID: "small-budget", Branch: "horizon",
		When:   []Cond{whenAtLeast("horizon_months", 1), whenBelow("monthly_spend", 1000), whenNotIn("purchase", "on-demand")},
		Advice: "Budget under $1,000 a month ({monthly_spend}): spot first, on-demand only when a deadline needs it."},

	// Compliance: data residency limits where the job may run.
	{ID: "residency", Branch: "compliance",
		When:   []Cond{{Fact: "geographies", Op: OpSet}},
		Advice: "{geographies} only: {regions} of {all_regions} regions with prices qualify."},
	{ID: "open-placement", Branch: "compliance",
		When:   []Cond{{Fact: "geographies", Op: OpUnset}, whenAtLeast("regions", 2)},
		Advice: "No data-residency rule: {regions} regions in {areas} geographies compete on price; spotwise moves the job between them when that is cheaper, counting the checkpoint's transfer."},

	// Fit: nothing qualifies, or only just.
	{ID: "nothing-fits", Branch: "fit",
		When:   []Cond{{Fact: "best", Op: OpUnset}},
		Advice: "No offer fits the job (see the excluded reasons): raise the max price, accept more GPU types, allow more regions or a later deadline."},
	{ID: "tight-deadline", Branch: "fit",
		When:   []Cond{whenAtLeast("slack", 0), whenBelow("slack", 0.25)},
		Advice: "Tight deadline: the best option has only {slack} of its runtime to spare; spotwise falls back to on-demand when spot would miss it."},
}

// Values are the facts by the names conditions use, with how people read
// each.
func (f Facts) Values() map[string]Fact {
	pct := func(x float64) string {
		if x != 0 && x < 0.1 && x > -0.1 {
			return strconv.FormatFloat(x*100, 'f', 1, 64) + "%"
		}
		return strconv.FormatFloat(x*100, 'f', 0, 64) + "%"
	}
	num := func(x float64) Fact { return Fact{Num: x, Text: strconv.FormatFloat(x, 'f', -1, 64)} }
	geos := make([]string, len(f.Geographies))
	for i, g := range f.Geographies {
		geos[i] = strings.ToUpper(g)
	}
	return map[string]Fact{
		"workload":       {Str: f.Workload, Text: f.Workload},
		"precision":      {Str: f.Precision, Text: strings.ToUpper(f.Precision)},
		"purchase":       {Str: f.Purchase, Text: f.Purchase},
		"nodes":          num(float64(f.Nodes)),
		"gpus":           num(float64(f.GPUs)),
		"checkpoints":    {Str: strconv.FormatBool(f.Checkpoints), Text: strconv.FormatBool(f.Checkpoints)},
		"gpu_hours":      {Num: f.GPUHours, Text: strconv.FormatFloat(f.GPUHours, 'f', 0, 64)},
		"horizon_months": num(float64(f.HorizonMonths)),
		"runs_per_month": num(f.RunsPerMonth),
		"utilization":    {Num: f.Utilization, Text: pct(f.Utilization)},
		"monthly_spend":  {Num: f.MonthlySpend.Dollars(), Text: f.MonthlySpend.Human()},
		"geographies":    {List: f.Geographies, Text: strings.Join(geos, "/")},
		"regions":        num(float64(f.Regions)),
		"all_regions":    num(float64(f.AllRegions)),
		"areas":          num(float64(f.Areas)),
		"spot_saving":    {Num: f.SpotSaving, Text: pct(f.SpotSaving)},
		"spot_p_any":     {Num: f.SpotPAny, Text: pct(f.SpotPAny)},
		"slack":          {Num: f.Slack, Text: pct(f.Slack)},
		"best":           {Str: f.Best, Text: f.Best},
		"best_purchase":  {Str: f.BestPurchase, Text: f.BestPurchase},
	}
}

// Fact is one fact's value: a string, a number or a list, and its text.
type Fact struct {
	Str  string
	Num  float64
	List []string
	Text string
}

func (v Fact) set() bool { return len(v.List) > 0 || v.Str != "" || v.Num != 0 }

// Recommend returns the advice of every rule whose conditions all hold,
// in rule order. A condition on an unknown fact never holds (TestRules
// keeps the table honest).
func Recommend(rules []Rule, f Facts) []Recommendation {
	vals := f.Values()
	var out []Recommendation
	for _, r := range rules {
		if !condsHold(r.When, vals) {
			continue
		}
		out = append(out, Recommendation{ID: r.ID, Branch: r.Branch, Text: fillFacts(r.Advice, vals)})
	}
	return out
}

func condsHold(conds []Cond, vals map[string]Fact) bool {
	for _, c := range conds {
		v, ok := vals[c.Fact]
		if !ok || !c.test(v) {
			return false
		}
	}
	return true
}

func (c Cond) test(v Fact) bool {
	member := func() bool {
		if v.List != nil {
			for _, x := range v.List {
				if slices.Contains(c.Values, x) {
					return true
				}
			}
			return false
		}
		return slices.Contains(c.Values, v.Str)
	}
	switch c.Op {
	case OpIn, OpIs:
		return member()
	case OpNotIn:
		return !member()
	case OpAtLeast:
		return v.Num >= c.Number
	case OpBelow:
		return v.Num < c.Number
	case OpSet:
		return v.set()
	case OpUnset:
		return !v.set()
	}
	return false
}

// fillFacts replaces each {fact} in text with the fact as people read it.
func fillFacts(text string, vals map[string]Fact) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '{')
		j := strings.IndexByte(text[max(i, 0):], '}')
		if i < 0 || j < 0 {
			b.WriteString(text)
			return b.String()
		}
		name := text[i+1 : i+j]
		b.WriteString(text[:i])
		if v, ok := vals[name]; ok {
			b.WriteString(v.Text)
		} else {
			fmt.Fprintf(&b, "{%s}", name)
		}
		text = text[i+j+1:]
	}
}
