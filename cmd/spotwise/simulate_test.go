package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runSimulateCmd runs `spotwise simulate` with args, as the root command
// would.
func runSimulateCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newSimulateCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// csvTrace writes a CSV trace with one-hour steps from a picture: '#' has
// capacity, '_' none, a digit is a count.
func csvTrace(t *testing.T, dir, name, picture string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# " + name + "\ntime_seconds,available\n")
	for i, c := range picture {
		n := "0"
		switch {
		case c == '#':
			n = "1"
		case c >= '0' && c <= '9':
			n = string(c)
		}
		b.WriteString(strings.Join([]string{itoa(i * 3600), n}, ",") + "\n")
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

func TestSimulateJSON(t *testing.T) {
	dir := t.TempDir()
	always := csvTrace(t, dir, "us-east-1a_v100_1.csv", strings.Repeat("#", 60))
	stdout, stderr, err := runSimulateCmd(t, "--trace", always,
		"--job-hours", "6", "--deadline-hours", "10", "--changeover-hours", "1",
		"--ondemand-price", "3", "--spot-price", "1", "--starts", "5", "--even",
		"--policy", "on-demand,greedy,uniform-progress,spotwise,optimal", "-o", "json")
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, stderr)
	}
	var raw map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(raw) != 1 || raw["policies"] == nil {
		t.Fatalf("top level %v, want only \"policies\"", keys(raw))
	}
	wantKeys := []string{"mean_cost", "mean_egress", "mean_moves", "mean_ondemand_hours", "mean_spot_hours", "misses", "p50_cost", "p90_cost", "runs"}
	for name, p := range raw["policies"] {
		if got := keys(p); !slices.Equal(got, wantKeys) {
			t.Errorf("%s has keys %v, want %v", name, got, wantKeys)
		}
	}
	var report struct {
		Policies map[string]struct {
			MeanCost          float64 `json:"mean_cost"`
			P50Cost           float64 `json:"p50_cost"`
			P90Cost           float64 `json:"p90_cost"`
			MeanOnDemandHours float64 `json:"mean_ondemand_hours"`
			MeanSpotHours     float64 `json:"mean_spot_hours"`
			Misses            int     `json:"misses"`
			Runs              int     `json:"runs"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Policies) != 5 {
		t.Fatalf("%d policies, want 5", len(report.Policies))
	}
	// Always available: (6 + 1) hours on spot at $1, or on-demand at $3.
	for name, p := range report.Policies {
		want, spot, od := 7.0, 7.0, 0.0
		if name == "on-demand" {
			want, spot, od = 21, 0, 7
		}
		if p.MeanCost != want || p.P50Cost != want || p.P90Cost != want || p.MeanSpotHours != spot || p.MeanOnDemandHours != od || p.Misses != 0 || p.Runs != 5 {
			t.Errorf("%s: %+v, want cost %v, spot %vh, on-demand %vh, 5 runs", name, p, want, spot, od)
		}
	}
	if !strings.Contains(stdout, `"mean_cost": 7.000000`) {
		t.Errorf("costs are not plain dollar numbers:\n%s", stdout)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestSimulateTable(t *testing.T) {
	dir := t.TempDir()
	csvTrace(t, dir, "a_v100_1.csv", strings.Repeat("##__", 30))
	csvTrace(t, dir, "b_v100_1.csv", strings.Repeat("_##_", 30))
	plot := filepath.Join(t.TempDir(), "run.svg")
	stdout, _, err := runSimulateCmd(t, "--trace", dir, "--job-hours", "8", "--deadline-hours", "12",
		"--changeover-hours", "0.5", "--starts", "20", "--seed", "3", "--plot", plot)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"zones: 2 (a, b)", "step 1h0m0s", "20 runs", "vs optimal", "uniform-progress", "1.000x", "plot: " + plot} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("spotwise")) || !bytes.HasSuffix(bytes.TrimSpace(svg), []byte("</svg>")) {
		t.Errorf("plot is not an SVG of the run:\n%.300s", svg)
	}
	t.Run("without optimal there is no ratio", func(t *testing.T) {
		stdout, _, err := runSimulateCmd(t, "--trace", dir, "--job-hours", "8", "--deadline-hours", "12", "--starts", "3", "--policy", "greedy")
		if err != nil || strings.Contains(stdout, "vs optimal") {
			t.Errorf("err %v, output:\n%s", err, stdout)
		}
	})
}

func TestSimulateFlagErrors(t *testing.T) {
	dir := t.TempDir()
	tr := csvTrace(t, dir, "a.csv", strings.Repeat("#", 30))
	base := []string{"--trace", tr, "--job-hours", "4", "--deadline-hours", "8", "--starts", "3"}
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no trace", []string{"--job-hours", "4", "--deadline-hours", "8"}, `"trace" not set`},
		{"no job", []string{"--trace", tr, "--deadline-hours", "8"}, `"job-hours" not set`},
		{"seed and even", with("--seed", "2", "--even"), "none of the others can be"},
		{"unknown policy", with("--policy", "greedy,cheapest"), `unknown policy "cheapest"`},
		{"policy twice", with("--policy", "greedy,greedy"), `"greedy" named twice`},
		{"bad price", with("--ondemand-price", "three"), `--ondemand-price "three"`},
		{"negative spot price", with("--spot-price", "-1"), `--spot-price "-1"`},
		{"zero nodes", with("--nodes", "0"), "--nodes 0"},
		{"no starts", with("--starts", "0"), "--starts 0"},
		{"negative job", []string{"--trace", tr, "--job-hours", "-4", "--deadline-hours", "8"}, "--job-hours -4"},
		{"deadline longer than the trace", []string{"--trace", tr, "--job-hours", "4", "--deadline-hours", "31"}, "longer than the traces"},
		{"missing trace file", []string{"--trace", filepath.Join(dir, "nope.csv"), "--job-hours", "4", "--deadline-hours", "8"}, "nope.csv"},
		{"trace prices wanted but absent", with("--use-trace-prices"), "carries no prices"},
		{"stray argument", with("extra"), "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runSimulateCmd(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestSimulateHelpDocumentsTheFormats(t *testing.T) {
	stdout, _, err := runSimulateCmd(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"time_seconds,available,price_usd_per_hour", "gap_seconds", "--use-trace-prices", "--even", "optimal", "--history-hours"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestSimulateNodesAndTracePrices(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "z_v100_1.json")
	// 4 instances wanted; tick 2 has only 3.
	body := `{"metadata": {"gap_seconds": 3600}, "data": [4, 4, 3, 4, 4, 4, 4, 4, 4, 4], "prices": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runSimulateCmd(t, "--trace", p, "--nodes", "4", "--use-trace-prices", "--spot-price", "99",
		"--job-hours", "3", "--deadline-hours", "8", "--changeover-hours", "1", "--starts", "1", "--policy", "greedy", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	// Greedy: t0 changeover, t1 work, t2 preempted, t3 changeover, t4-t5
	// work: 5 billed hours x 4 nodes x $1 from the trace.
	if !strings.Contains(stdout, `"mean_cost": 20.000000`) {
		t.Errorf("output:\n%s", stdout)
	}
}

func TestSimulateSharedTraces(t *testing.T) {
	dir := "../../../shared/traces/availability/1-node/aws-02-15-2023"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared traces not here: %v", err)
	}
	stdout, _, err := runSimulateCmd(t, "--trace", filepath.Join(dir, "us-west-2c_v100_1.json"), "--trace", filepath.Join(dir, "us-east-2a_v100_1.json"),
		"--job-hours", "48", "--deadline-hours", "60", "--starts", "12", "--even", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Policies map[string]struct {
			MeanCost float64 `json:"mean_cost"`
			Misses   int     `json:"misses"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatal(err)
	}
	opt := report.Policies["optimal"].MeanCost
	for name, p := range report.Policies {
		if p.Misses != 0 || p.MeanCost < opt {
			t.Errorf("%s: %+v (optimal %v)", name, p, opt)
		}
	}
}

func TestSimulateRegionsPricesAndEgress(t *testing.T) {
	dir := t.TempDir()
	avail, prices := filepath.Join(dir, "avail"), filepath.Join(dir, "prices")
	for _, d := range []string{avail, prices} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// r1-a is cheap but gone after two hours; r2-a, in another region,
	// costs twice as much and stays. On-demand costs $10 in both.
	write(filepath.Join(avail, "r1-a_v100_1.json"), `{"metadata": {"gap_seconds": 3600}, "data": [1, 1, 0, 0, 0, 0]}`)
	write(filepath.Join(avail, "r2-a_v100_1.json"), `{"metadata": {"gap_seconds": 3600}, "data": [1, 1, 1, 1, 1, 1]}`)
	write(filepath.Join(prices, "r1-a_v100_1.json"), `{"metadata": {"gap_seconds": 3600, "on_demand_price": 10}, "prices": [1, 1, 1, 1, 1, 1]}`)
	write(filepath.Join(prices, "r2-a_v100_1.json"), `{"metadata": {"gap_seconds": 3600, "on_demand_price": 10.0000001}, "prices": [2, 2, 2, 2, 2, 2.0000004]}`)
	tests := []struct {
		name         string
		args         []string
		cost, egress string
	}{
		// Two hours on r1-a ($2), the move ($1 of egress), two on r2-a ($4).
		{"a 50 GB checkpoint at $0.02/GB", []string{"--checkpoint-gb", "50", "--egress-usd-per-gb", "0.02"}, `"mean_cost": 7.000000`, `"mean_egress": 1.000000`},
		// A $5 move does not pay: r2-a from the start, $8.
		{"a dear move", []string{"--checkpoint-gb", "250", "--egress-usd-per-gb", "0.02"}, `"mean_cost": 8.000000`, `"mean_egress": 0.000000`},
		{"no egress", nil, `"mean_cost": 6.000000`, `"mean_egress": 0.000000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--trace", avail, "--prices", prices, "--job-hours", "4", "--deadline-hours", "4", "--changeover-hours", "0",
				"--starts", "1", "--even", "--policy", "optimal", "-o", "json"}, tt.args...)
			stdout, _, err := runSimulateCmd(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout, tt.cost) || !strings.Contains(stdout, tt.egress) {
				t.Errorf("want %s and %s; output:\n%s", tt.cost, tt.egress, stdout)
			}
		})
	}
	if _, _, err := runSimulateCmd(t, "--trace", avail, "--prices", dir, "--job-hours", "4", "--deadline-hours", "4"); err == nil || !strings.Contains(err.Error(), "--prices") {
		t.Errorf("prices missing for a zone: %v, want an error naming --prices", err)
	}
}
