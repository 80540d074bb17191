// Command benchpolicy reproduces the policy table of issue 4 (`make
// bench-policy`): every policy over a trace set, each zone alone and all
// zones together, at several deadlines, and checks the targets:
//   - no deadline missed anywhere;
//   - zone by zone, spotwise costs less than uniform-progress on average
//     over the zones at every deadline, and never more than 2% above it in
//     any one zone;
//   - with all zones allowed, spotwise is within 3% of the optimum.
//
// It exits non-zero when a target is missed (-check=false only reports).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spotwise/spotwise/bidding/simulate"
	"github.com/spotwise/spotwise/bidding/trace"
	"github.com/spotwise/spotwise/money"
)

var policies = []string{"on-demand", "greedy", "uniform-progress", "spotwise", "optimal"}

func main() {
	var (
		traces     = flag.String("traces", "../shared/traces", "the shared traces folder")
		set        = flag.String("set", "availability/1-node/aws-02-15-2023", "trace set, relative to -traces")
		jobHours   = flag.Float64("job-hours", 48, "the job's compute, hours")
		changeover = flag.Float64("changeover-hours", 0.2, "changeover, hours")
		onDemand   = flag.String("ondemand-price", "3.06", "on-demand USD per node-hour")
		spot       = flag.String("spot-price", "0.9731", "spot USD per node-hour")
		tracePrice = flag.Bool("use-trace-prices", false, "spot prices from the traces")
		nodes      = flag.Int("nodes", 1, "nodes")
		starts     = flag.Int("starts", 300, "evenly spaced starts")
		fractions  = flag.String("fractions", "0.6,0.7,0.8,0.9", "job fractions C/R")
		history    = flag.Float64("history-hours", -1, "hours observed before each start (-1: all)")
		single     = flag.Bool("single", true, "run each zone alone")
		multi      = flag.Bool("multi", true, "run all zones together")
		check      = flag.Bool("check", true, "fail when a target is missed")
		suite      = flag.String("suite", "", `"heterogeneous": the markets where zones differ in price and region, instead of -set; "generality": the same kind of markets from the other measured sets`)
		sets       = flag.String("sets", "", "with -suite heterogeneous: only these sets (comma-separated names)")
		worst      = flag.Int("diagnose", 0, "with -suite heterogeneous: split spotwise's and the optimum's costs and show the N starts where spotwise loses most")
		start      = flag.Int("start", -1, "with -diagnose: only the run from this start tick")
		trace      = flag.Bool("trace", false, "with -diagnose: print each of spotwise's decisions that changes what the job runs on, with what it saw")
	)
	flag.Parse()
	if *suite != "" {
		if *suite != "heterogeneous" && *suite != "generality" {
			fmt.Fprintf(os.Stderr, "bench-policy: unknown suite %q\n", *suite)
			os.Exit(2)
		}
		var fr []float64
		for _, f := range strings.Split(*fractions, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v <= 0 || v > 1 {
				fmt.Fprintf(os.Stderr, "bench-policy: fraction %q\n", f)
				os.Exit(2)
			}
			fr = append(fr, v)
		}
		var only []string
		if *sets != "" {
			only = strings.Split(*sets, ",")
		}
		if *worst > 0 {
			if err := diagnose(*traces, only, fr, *jobHours, *changeover, *starts, *worst, *start, *trace); err != nil {
				fmt.Fprintln(os.Stderr, "bench-policy:", err)
				os.Exit(2)
			}
			return
		}
		began := time.Now()
		run := heterogeneous
		if *suite == "generality" {
			run = generalityCheck
		}
		report(run(*traces, only, fr, *jobHours, *changeover, *starts), began, *check)
		return
	}
	b, err := newBench(filepath.Join(*traces, *set), *nodes, *onDemand, *spot, *tracePrice)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-policy:", err)
		os.Exit(2)
	}
	b.history = *history
	fmt.Printf("%s: %d zones, step %s, %d nodes; %gh job, changeover %gh, on-demand $%s/h, spot %s; %d evenly spaced starts\n\n",
		*set, len(b.traces), b.traces[0].Step, *nodes, *jobHours, *changeover, *onDemand, spotText(*spot, *tracePrice), *starts)
	began := time.Now()
	var failures []string
	for _, f := range strings.Split(*fractions, ",") {
		frac, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || frac <= 0 || frac > 1 {
			fmt.Fprintf(os.Stderr, "bench-policy: fraction %q\n", f)
			os.Exit(2)
		}
		job := simulate.Job{
			Work:       hours(*jobHours),
			Deadline:   hours(*jobHours / frac),
			Changeover: hours(*changeover),
		}
		failures = append(failures, b.deadline(frac, job, *starts, *single, *multi)...)
	}
	report(failures, began, *check)
}

// report prints the time taken and the targets missed; it exits non-zero
// when one was and check is set.
func report(failures []string, began time.Time, check bool) {
	fmt.Printf("total %s\n", time.Since(began).Round(100*time.Millisecond))
	if len(failures) == 0 {
		fmt.Println("targets: all met")
		return
	}
	fmt.Println("targets missed:")
	for _, f := range failures {
		fmt.Println("  " + f)
	}
	if check {
		os.Exit(1)
	}
}

func hours(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

func spotText(spot string, fromTraces bool) string {
	if fromTraces {
		return "from the traces"
	}
	return "$" + spot + "/h"
}

type bench struct {
	traces  []trace.Trace
	nodes   int
	prices  simulate.Prices
	history float64
}

func newBench(dir string, nodes int, onDemand, spot string, tracePrices bool) (*bench, error) {
	ts, err := trace.Load(dir)
	if err != nil {
		return nil, err
	}
	p := simulate.Prices{UseTrace: tracePrices}
	if p.OnDemand, err = money.Parse(onDemand); err != nil {
		return nil, err
	}
	if p.Spot, err = money.Parse(spot); err != nil {
		return nil, err
	}
	return &bench{traces: ts, nodes: nodes, prices: p}, nil
}

// result is one simulation's summaries by policy name.
type result struct {
	byName  map[string]simulate.Summary
	elapsed time.Duration
}

func (b *bench) run(ts []trace.Trace, job simulate.Job, starts int) (result, error) {
	m, err := simulate.NewMarket(ts, b.nodes, b.prices)
	if err != nil {
		return result{}, err
	}
	tk, err := m.Ticks(job)
	if err != nil {
		return result{}, err
	}
	history := -1
	if b.history >= 0 {
		history = int(hours(b.history) / m.Step)
	}
	r, err := m.Simulate(context.Background(), job, simulate.Options{
		Policies: policies, Starts: simulate.EvenStarts(m.Len, tk.Deadline, starts), History: history,
	})
	if err != nil {
		return result{}, err
	}
	out := result{byName: map[string]simulate.Summary{}, elapsed: r.Elapsed}
	for _, s := range r.Policies {
		out.byName[s.Name] = s
	}
	return out, nil
}

// deadline runs one job fraction and prints its table; it returns the
// targets missed.
func (b *bench) deadline(frac float64, job simulate.Job, starts int, single, multi bool) []string {
	fmt.Printf("C/R = %.2f (deadline %s)\n", frac, fmtH(job.Deadline))
	fmt.Printf("  %-14s %9s %9s %9s %9s %9s  %8s  %8s  %7s  %s\n", "zones", "greedy", "uniform", "spotwise", "optimal", "od-only", "sw vs up", "sw od h", "misses", "time")
	var failures []string
	row := func(name string, r result) {
		opt := r.byName["optimal"].MeanCost
		ratio := func(p string) string { return fmt.Sprintf("%.3fx", float64(r.byName[p].MeanCost)/float64(opt)) }
		misses := 0
		for _, s := range r.byName {
			misses += s.Misses
		}
		sw, up := r.byName["spotwise"].MeanCost, r.byName["uniform-progress"].MeanCost
		fmt.Printf("  %-14s %9s %9s %9s %9s %9s  %+7.1f%%  %8.1f  %7d  %s\n", name, ratio("greedy"), ratio("uniform-progress"), ratio("spotwise"),
			"$"+strconv.FormatFloat(opt.Dollars(), 'f', 2, 64), ratio("on-demand"), 100*(float64(sw)/float64(up)-1),
			r.byName["spotwise"].MeanOnDemandHours, misses, r.elapsed.Round(10*time.Millisecond))
		if misses > 0 {
			failures = append(failures, fmt.Sprintf("C/R %.2f, %s: %d deadlines missed", frac, name, misses))
		}
	}
	if single && len(b.traces) > 1 || !multi {
		var sumSW, sumUP, sumRatioSW, sumRatioUP, sumRatioG float64
		for _, tr := range b.traces {
			r, err := b.run([]trace.Trace{tr}, job, starts)
			if err != nil {
				failures = append(failures, fmt.Sprintf("C/R %.2f, %s: %v", frac, tr.Name, err))
				continue
			}
			row(tr.Name, r)
			opt := float64(r.byName["optimal"].MeanCost)
			sw, up, g := float64(r.byName["spotwise"].MeanCost), float64(r.byName["uniform-progress"].MeanCost), float64(r.byName["greedy"].MeanCost)
			sumSW, sumUP = sumSW+sw, sumUP+up
			sumRatioSW, sumRatioUP, sumRatioG = sumRatioSW+sw/opt, sumRatioUP+up/opt, sumRatioG+g/opt
			if sw > 1.02*up {
				failures = append(failures, fmt.Sprintf("C/R %.2f, %s: spotwise %.1f%% above uniform-progress (limit 2%%)", frac, tr.Name, 100*(sw/up-1)))
			}
		}
		n := float64(len(b.traces))
		fmt.Printf("  %-14s %8.3fx %8.3fx %8.3fx %9s %9s  %+7.1f%%   (mean over the zones)\n", "mean", sumRatioG/n, sumRatioUP/n, sumRatioSW/n, "", "", 100*(sumSW/sumUP-1))
		if sumSW >= sumUP {
			failures = append(failures, fmt.Sprintf("C/R %.2f: spotwise does not cost less than uniform-progress on average over the zones", frac))
		}
	}
	if multi && len(b.traces) > 1 {
		r, err := b.run(b.traces, job, starts)
		if err != nil {
			failures = append(failures, fmt.Sprintf("C/R %.2f, all zones: %v", frac, err))
		} else {
			row(fmt.Sprintf("all %d zones", len(b.traces)), r)
			if ratio := float64(r.byName["spotwise"].MeanCost) / float64(r.byName["optimal"].MeanCost); ratio > 1.03 {
				failures = append(failures, fmt.Sprintf("C/R %.2f, all zones: spotwise %.3fx the optimum (limit 1.03x)", frac, ratio))
			}
		}
	}
	fmt.Println()
	return failures
}

func fmtH(d time.Duration) string { return strconv.FormatFloat(d.Hours(), 'f', 1, 64) + "h" }
