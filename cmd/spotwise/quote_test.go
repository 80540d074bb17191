package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/catalog"
)

// quoteAt pins the offer book's clock so quotes are reproducible.
const quoteAt = "2026-12-01T12:00:00Z"

func runQuote(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newQuoteCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func mustQuote(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runQuote(t, args...)
	if err != nil {
		t.Fatalf("quote %v: %v\n%s", args, err, out)
	}
	return out
}

func quoteJSON(t *testing.T, file string, args ...string) quoteReport {
	t.Helper()
	out := mustQuote(t, append([]string{file, "--at", quoteAt, "-o", "json"}, args...)...)
	var rep quoteReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("quote --json: %v\n%s", err, out)
	}
	return rep
}

func example(name string) string { return filepath.Join("..", "..", "examples", name) }

func family(gpu string) string { f, _, _ := strings.Cut(gpu, "-"); return f }

// TestQuoteBERTRanksA100AboveV100 is the seeds' BERT-Large example: about
// 2 h on A100 against 6 h on V100, so the A100 machine, dearer by the
// hour, is cheaper to finish.
func TestQuoteBERTRanksA100AboveV100(t *testing.T) {
	rep := quoteJSON(t, example("bert-finetune.yaml"))
	if len(rep.Options) == 0 {
		t.Fatal("no options")
	}
	best := map[string]quoteOption{} // by family/purchase
	for _, o := range rep.Options {
		k := family(o.GPU) + "/" + o.Purchase
		if _, ok := best[k]; !ok {
			best[k] = o
		}
	}
	for _, purchase := range []string{"", "spot", "on-demand"} {
		var a100 *quoteOption
		for i, o := range rep.Options {
			if family(o.GPU) == "A100" && (purchase == "" || o.Purchase == purchase) {
				a100 = &rep.Options[i]
				break
			}
		}
		if a100 == nil {
			t.Fatalf("no A100 option (%s)", purchase)
		}
		for _, o := range rep.Options {
			if family(o.GPU) == "V100" && (purchase == "" || o.Purchase == purchase) && o.Rank < a100.Rank {
				t.Errorf("%s: V100 option %s (#%d, %s) ranks above the best A100 %s (#%d, %s)",
					purchase, o.Offer, o.Rank, o.ExpectedCost, a100.Offer, a100.Rank, a100.ExpectedCost)
			}
		}
	}
	a, v := best["A100/on-demand"], best["V100/on-demand"]
	if a.RuntimeHours < 1.7 || a.RuntimeHours > 2.6 || v.RuntimeHours < 5.9 || v.RuntimeHours > 6.2 {
		t.Errorf("runtime on A100 %.2f h, on V100 %.2f h; want about 2 and 6", a.RuntimeHours, v.RuntimeHours)
	}
	if a.PricePerHour <= v.PricePerHour*8/10 || 2*a.ExpectedCost >= v.ExpectedCost {
		t.Errorf("A100 %s/h to finish for %s, V100 %s/h for %s: want a dearer hour, a job under half the cost",
			a.PricePerHour, a.ExpectedCost, v.PricePerHour, v.ExpectedCost)
	}
	// The excluded options, by reason, account for the rest of the book.
	n := len(rep.Options)
	for _, e := range rep.Excluded {
		if e.Offers <= 0 || e.Example == "" || e.Meaning == "" || e.Detail == "" {
			t.Errorf("excluded group %+v", e)
		}
		n += e.Offers
	}
	if n != rep.Book.Offers || rep.Book.Feasible != len(rep.Options) {
		t.Errorf("%d options + excluded = %d, book has %d offers (%d feasible)", len(rep.Options), n, rep.Book.Offers, rep.Book.Feasible)
	}
	reasons := map[string]bool{}
	for _, e := range rep.Excluded {
		reasons[e.Reason] = true
	}
	for _, want := range []string{"gpu-type", "gpu-count", "max-price"} {
		if !reasons[want] {
			t.Errorf("no %q group in %+v", want, rep.Excluded)
		}
	}
}

// TestQuoteRiskAwareRanking checks the re-scoring: spot options carry
// their interruption risk, and the ranking is by expected cost.
func TestQuoteRiskAwareRanking(t *testing.T) {
	rep := quoteJSON(t, example("bert-finetune.yaml"), "--top", "0")
	for i, o := range rep.Options {
		if o.Rank != i+1 {
			t.Fatalf("option %d has rank %d", i, o.Rank)
		}
		if o.ExpectedCost < o.Cost || o.ExpectedRuntimeHours < o.RuntimeHours {
			t.Errorf("%s: expected %s / %.3f h below the risk-free %s / %.3f h", o.Offer, o.ExpectedCost, o.ExpectedRuntimeHours, o.Cost, o.RuntimeHours)
		}
		if o.RateSource != "provider" || o.InterruptionsPerHour <= 0 || o.ExpectedInterruptions <= 0 || o.PInterruption <= 0 || o.PInterruption >= 1 {
			t.Errorf("%s: rate %v (%s), %v interruptions, P %v", o.Offer, o.InterruptionsPerHour, o.RateSource, o.ExpectedInterruptions, o.PInterruption)
		}
		if !o.MeetsDeadline || o.Finish.After(*rep.Job.Deadline) {
			t.Errorf("%s: finish %s, deadline %s", o.Offer, o.Finish, rep.Job.Deadline)
		}
		if i > 0 && o.ExpectedCost < rep.Options[i-1].ExpectedCost {
			t.Errorf("#%d %s costs %s, less than #%d's %s", o.Rank, o.Offer, o.ExpectedCost, i, rep.Options[i-1].ExpectedCost)
		}
	}
	// Spot is riskier than on-demand on the same machine.
	var spot, od *quoteOption
	for i, o := range rep.Options {
		if o.InstanceType == "p4d.24xlarge" && o.Purchase == "spot" && spot == nil {
			spot = &rep.Options[i]
		}
		if o.InstanceType == "p4d.24xlarge" && o.Purchase == "on-demand" && od == nil {
			od = &rep.Options[i]
		}
	}
	if spot == nil || od == nil || spot.InterruptionsPerHour <= od.InterruptionsPerHour {
		t.Errorf("spot %+v\non-demand %+v", spot, od)
	}
}

func TestQuoteTable(t *testing.T) {
	out := mustQuote(t, example("bert-finetune.yaml"), "--at", quoteAt, "--top", "3")
	for _, want := range []string{
		"Quote for bert-large-finetune: 6h on V100, 1 node x 8 GPUs, fine-tuning fp16 (train-mixed), purchase auto, deadline 2026-12-02T00:00:00Z (in 12h)",
		"PROVIDER", "EXPECTED COST", "RISK (INT. / P)", "DEADLINE",
		"A100-40GB", "yes (",
		"Excluded:", "gpu-type", "GPU type not accepted", "e.g. ",
		"Advice:", "[task] Prefer spot with checkpoints", "[horizon] One-off run", "[compliance] No data-residency rule",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("quote output lacks %q:\n%s", want, out)
		}
	}
	rows := regexp.MustCompile(`(?m)^\d+ +(aws|azure|gcp) `).FindAllString(out, -1)
	if len(rows) != 3 || !strings.Contains(out, "more (--top 0 shows all)") {
		t.Errorf("--top 3 printed %d rows:\n%s", len(rows), out)
	}
	all := mustQuote(t, example("bert-finetune.yaml"), "--at", quoteAt, "--top", "0")
	if rows := regexp.MustCompile(`(?m)^\d+ +(aws|azure|gcp) `).FindAllString(all, -1); len(rows) <= 10 || strings.Contains(all, "--top 0 shows all") {
		t.Errorf("--top 0 printed %d rows", len(rows))
	}
}

// TestQuoteJSONShape pins the JSON field names scripts rely on.
func TestQuoteJSONShape(t *testing.T) {
	out := mustQuote(t, example("bert-finetune.yaml"), "--at", quoteAt, "-o", "json", "--top", "2")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	keys := func(m any) []string {
		var ks []string
		for k := range m.(map[string]any) {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	want := map[string][]string{
		"":       {"book", "decision", "excluded", "job", "options", "recommendations"},
		"job":    {"checkpoint_time", "class", "deadline", "gpus_per_node", "name", "nodes", "precision", "purchase", "work", "workload"},
		"book":   {"at", "feasible", "offers", "seed", "source"},
		"option": {"checkpoint_interval_minutes", "cost", "expected_cost", "expected_interruptions", "expected_runtime_hours", "finish", "gpu", "gpus", "instance_type", "interruptions_per_hour", "meets_deadline", "nodes", "notice_seconds", "offer", "p_interruption", "price_per_hour", "provider", "purchase", "rank", "rate_source", "region", "runtime_hours", "short_notice", "zone"},
		"excl":   {"detail", "example", "meaning", "offers", "reason"},
		"rec":    {"branch", "id", "text"},
	}
	got := map[string][]string{
		"": keys(v), "job": keys(v["job"]), "book": keys(v["book"]),
		"option": keys(v["options"].([]any)[0]), "excl": keys(v["excluded"].([]any)[0]), "rec": keys(v["recommendations"].([]any)[0]),
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s keys = %v, want %v", k, got[k], w)
		}
	}
	// --json lists every option: --top is for people.
	if n := len(v["options"].([]any)); n <= 2 {
		t.Errorf("--json --top 2 listed %d options", n)
	}
	// Money is exact decimal dollars.
	if p := v["options"].([]any)[0].(map[string]any)["expected_cost"]; !regexp.MustCompile(`^\d+\.\d{6}$`).MatchString(jsonNumber(t, p)) {
		t.Errorf("expected_cost %v is not a six-decimal amount", p)
	}
}

func jsonNumber(t *testing.T, v any) string {
	t.Helper()
	b, _ := json.Marshal(v)
	return string(b)
}

func TestQuoteEUOnly(t *testing.T) {
	rep := quoteJSON(t, example("eu-only.yaml"))
	cat := catalog.Default()
	for _, o := range rep.Options {
		if g := cat.GeographyOf(o.Provider, o.Region); g != "eu" {
			t.Errorf("%s is in %q", o.Offer, g)
		}
	}
	var eu *quoteExcluded
	for i, e := range rep.Excluded {
		if e.Reason == "region" {
			eu = &rep.Excluded[i]
		}
	}
	if eu == nil || eu.Offers == 0 {
		t.Errorf("no region exclusions: %+v", rep.Excluded)
	}
	if !hasAdvice(rep, "residency", "EU only: 6 of 32 regions with prices qualify.") {
		t.Errorf("advice %+v", rep.Recommendations)
	}
}

func hasAdvice(rep quoteReport, id, text string) bool {
	for _, r := range rep.Recommendations {
		if r.ID == id && strings.Contains(r.Text, text) {
			return true
		}
	}
	return false
}

func TestQuoteDecisionAdvice(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		args      []string
		want, not []string
	}{
		{"BERT one-off", "bert-finetune.yaml", nil, []string{"spot-with-checkpoints", "one-off", "open-placement"}, []string{"reserve-1y", "multi-node"}},
		{"pre-training 8 times a month for a year", "llm-pretrain.yaml", []string{"--months", "12", "--runs-per-month", "8"},
			[]string{"multi-node", "large-training", "reserve-1y", "open-placement"}, []string{"one-off", "spot-with-checkpoints"}},
		{"nightly inference for two years", "batch-inference.yaml", []string{"--months", "24", "--runs-per-month", "30"},
			[]string{"spot-with-checkpoints", "light-recurring", "small-budget"}, []string{"reserve-1y", "one-off"}},
		{"nothing fits", "too-cheap.yaml", nil, []string{"nothing-fits"}, []string{"one-off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := quoteJSON(t, example(tt.file), tt.args...)
			var got []string
			for _, r := range rep.Recommendations {
				got = append(got, r.ID)
			}
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("advice %v lacks %s", got, w)
				}
			}
			for _, n := range tt.not {
				if slices.Contains(got, n) {
					t.Errorf("advice %v has %s", got, n)
				}
			}
		})
	}
}

func TestQuoteReservedCapacityUsedFirst(t *testing.T) {
	rep := quoteJSON(t, example("bert-finetune.yaml"), "--reservations", example("reservations/p4d-us-east-1.yaml"))
	top := rep.Options[0]
	if top.Purchase != "reserved" || top.Zone != "us-east-1a" || top.ExpectedCost > money.Cent {
		t.Errorf("best option %+v; want the idle reservation, nearly free", top)
	}
	if !hasAdvice(rep, "use-reservation", "paid for whether used or not") {
		t.Errorf("advice %+v", rep.Recommendations)
	}
	// A reservation ending an hour into the run pays on-demand for the
	// rest: still cheaper than on-demand, dearer than when covered.
	dir := t.TempDir()
	short := filepath.Join(dir, "short.yaml")
	data, err := os.ReadFile(example("reservations/p4d-us-east-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, bytes.Replace(data, []byte("left: 2000h"), []byte("left: 1h"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = quoteJSON(t, example("bert-finetune.yaml"), "--reservations", short, "--top", "0")
	for _, o := range rep.Options {
		if o.Purchase != "reserved" {
			continue
		}
		od := money.MustParse("21.957642")
		billed := time.Duration(o.ExpectedRuntimeHours*float64(time.Hour)) + 3*time.Minute
		if o.ExpectedCost <= 10*money.Dollar || o.ExpectedCost >= od.ForDuration(billed) {
			t.Errorf("reservation ending after 1 h: %s", o.ExpectedCost)
		}
		return
	}
	t.Error("no reserved option")
}

func TestQuoteErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nresources: {gpus_per_node: 99}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badRes := filepath.Join(dir, "res.yaml")
	if err := os.WriteFile(badRes, []byte("reservations:\n  - {provider: aws, region: us-east-1, instance_type: p9.huge, term: 1y, hourly: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "accepts 1 arg"},
		{"two files", []string{"a.yaml", "b.yaml"}, "accepts 1 arg"},
		{"missing file", []string{filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"invalid spec", []string{bad}, "gpus_per_node"},
		{"bad --at", []string{example("bert-finetune.yaml"), "--at", "tomorrow"}, "--at"},
		{"unknown reserved type", []string{example("bert-finetune.yaml"), "--reservations", badRes}, "p9.huge"},
		{"--commitment takes no file", []string{"--commitment", example("bert-finetune.yaml"), "--hourly", "1", "--on-demand-price", "2"}, "give no FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runQuote(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q\n%s", err, tt.want, out)
			}
		})
	}
}
