package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// costsRun is what a user sees of one `spotwise costs`.
type costsRun struct {
	stdout, stderr string
	err            error
}

func runCostsCmd(t *testing.T, p *serverProc, args ...string) costsRun {
	t.Helper()
	cmd := newCostsCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--server", p.addr, "--token", p.token}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(t.Context())
	return costsRun{out.String(), errOut.String(), err}
}

// Two teams' jobs run to the end on a real server; `spotwise costs`
// then reports per team exactly what the jobs were billed, in every
// format, and draws it.
func TestCostsAgainstARealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	t.Parallel() // mostly waits on real time
	p := startProc(t, t.TempDir(), freeAddr(t), "--sim-speed", "900")
	c := p.client()
	ctx := context.Background()
	teams := map[string]string{} // job -> team
	for i, team := range []string{"vision", "vision", "nlp"} {
		spec := fmt.Sprintf("name: costs-%d\nteam: %s\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: %dm on V100\n", i, team, 30+15*i)
		v, _, err := c.Submit(ctx, []byte(spec), "application/yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		teams[v.ID] = team
	}
	billed := map[string]money.Micros{} // team -> what its jobs cost
	testutil.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		clear(billed)
		for id, team := range teams {
			v, err := c.Get(ctx, id)
			if err != nil {
				return err
			}
			if n := len(v.Attempts); v.State != job.Succeeded || n == 0 || v.Attempts[n-1].Outcome != "succeeded" {
				return fmt.Errorf("job %s is %s, its attempts %+v", id, v.State, v.Attempts)
			}
			billed[team] += v.CostUSD
		}
		return nil
	})
	var total money.Micros
	for _, v := range billed {
		total += v
	}
	if billed["vision"] <= 0 || billed["nlp"] <= 0 {
		t.Fatalf("the jobs cost nothing: %v", billed)
	}

	// The client: the last 24 hours of the server's clock, per team. The
	// ledger's writer appends a job's last charges a moment after its
	// record closes the attempt.
	var rep *api.CostSeries
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var err error
		if rep, err = c.Costs(ctx, api.CostQuery{GroupBy: "team"}, 24); err != nil {
			return err
		}
		if rep.Total != total || len(rep.Groups) != 2 || rep.Jobs != 3 {
			return fmt.Errorf("report: total %s over %d groups and %d jobs, want %s over 2 and 3", rep.Total, len(rep.Groups), rep.Jobs, total)
		}
		return nil
	})
	if !rep.To.After(rep.From) || rep.To.Sub(rep.From) != 24*time.Hour {
		t.Errorf("report period %s..%s, want the last 24 hours", rep.From, rep.To)
	}
	for _, g := range rep.Groups {
		if g.Total != billed[g.Key] {
			t.Errorf("team %s: report %s, its jobs were billed %s", g.Key, g.Total, billed[g.Key])
		}
	}

	// The table: a line per team and the totals.
	run := runCostsCmd(t, p, "--since", "24h")
	if run.err != nil {
		t.Fatalf("costs: %v\n%s", run.err, run.stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("vision %s %s", billed["vision"].Human(), share(billed["vision"], total)),
		fmt.Sprintf("nlp %s %s", billed["nlp"].Human(), share(billed["nlp"], total)),
		fmt.Sprintf("TOTAL %s 100.0%%", total.Human()),
		"3 jobs billed in the period",
	} {
		if !strings.Contains(words(run.stdout), want) {
			t.Errorf("the table has no %q:\n%s", want, run.stdout)
		}
	}

	// CSV: each team's exact spend.
	run = runCostsCmd(t, p, "--since", "24h", "-o", "csv")
	recs, err := csv.NewReader(strings.NewReader(run.stdout)).ReadAll()
	if err != nil || run.err != nil {
		t.Fatalf("costs -o csv: %v, %v\n%s", run.err, err, run.stdout)
	}
	got := map[string]string{}
	for _, r := range recs[1:] {
		got[r[1]] = r[2]
	}
	for team, v := range billed {
		if got[team] != v.Decimal() {
			t.Errorf("csv: team %s spent %q, want %s", team, got[team], v.Decimal())
		}
	}

	// JSON: the report as the API answers it.
	run = runCostsCmd(t, p, "--since", "24h", "-o", "json", "--bucket", "15m")
	var asJSON api.CostSeries
	if err := json.Unmarshal([]byte(run.stdout), &asJSON); err != nil || run.err != nil {
		t.Fatalf("costs -o json: %v, %v\n%s", run.err, err, run.stdout)
	}
	if asJSON.Total != total || asJSON.Bucket != "15m0s" || len(asJSON.Starts) != 96 {
		t.Errorf("json: total %s, bucket %s, %d buckets; want %s, 15m0s, 96", asJSON.Total, asJSON.Bucket, len(asJSON.Starts), total)
	}

	// The chart: each team in the legend, its bars adding up to its
	// spend.
	path := filepath.Join(t.TempDir(), "spend.svg")
	run = runCostsCmd(t, p, "--since", "24h", "--svg", path)
	if run.err != nil || !strings.Contains(run.stderr, "chart written to "+path) {
		t.Fatalf("costs --svg: %v\n%s", run.err, run.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bars, legend := readSVG(t, b)
	if strings.Join(legend, ",") != strings.Join([]string{rep.Groups[0].Key, rep.Groups[1].Key}, ",") {
		t.Errorf("legend %q, want the teams biggest first", legend)
	}
	drawn := map[string]money.Micros{}
	for _, bar := range bars {
		drawn[bar.group] += bar.usd
	}
	for team, v := range billed {
		if drawn[team] != v {
			t.Errorf("the chart draws %s for team %s, its jobs were billed %s", drawn[team], team, v)
		}
	}

	// The FOCUS export of the same period: every column on every row, and
	// the billed costs add up to the report, to the micro-dollar.
	run = runCostsCmd(t, p, "--since", "24h", "-o", "focus")
	rows, err := csv.NewReader(strings.NewReader(run.stdout)).ReadAll()
	if err != nil || run.err != nil || len(rows) < 2 {
		t.Fatalf("costs -o focus: %v, %v\n%s", run.err, err, run.stdout)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, name := range []string{"BilledCost", "EffectiveCost", "ListCost", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd",
		"PricingCategory", "ResourceId", "RegionId", "AvailabilityZone", "Tags", "x_JobId", "x_Team", "x_Attempt",
		"x_OnDemandEquivalentCost", "x_InterruptionCount"} {
		if _, ok := col[name]; !ok {
			t.Errorf("the FOCUS export has no column %s", name)
		}
	}
	var focused money.Micros
	for _, r := range rows[1:] {
		if len(r) != len(rows[0]) || r[col["x_JobId"]] == "" || r[col["PricingCategory"]] == "" {
			t.Errorf("FOCUS row %q", r)
		}
		c, err := money.Parse(r[col["BilledCost"]])
		if err != nil {
			t.Fatal(err)
		}
		focused += c
	}
	if focused != total {
		t.Errorf("the FOCUS rows bill %s, the jobs %s", focused, total)
	}

	// Bad flags are refused before anything is asked; a server that is
	// not there is exit code 5, as for every command.
	run = runCostsCmd(t, p, "--group-by", "colour")
	if run.err == nil || exitCode(run.err) != exitGeneric {
		t.Errorf("--group-by colour: %v", run.err)
	}
	cmd := newCostsCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"--server", freeAddr(t), "--token", "x"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.ExecuteContext(ctx); exitCode(err) != exitUnreachable {
		t.Errorf("no server: exit code %d (%v), want %d", exitCode(err), err, exitUnreachable)
	}
}

// words is s with every run of spaces one space, as a table reads.
func words(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}
