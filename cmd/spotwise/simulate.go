package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/bidding/simulate"
	"github.com/spotwise/spotwise/bidding/trace"
	"github.com/spotwise/spotwise/money"
)

// simulateFlags are the flags of `spotwise simulate`.
type simulateFlags struct {
	traces         []string
	jobHours       float64
	deadlineHours  float64
	changeover     float64
	onDemandPrice  string
	spotPrice      string
	useTracePrices bool
	pricesDir      string
	checkpointGB   float64
	egressPerGB    string
	nodes          int
	starts         int
	seed           uint64
	even           bool
	historyHours   float64
	policies       []string
	json           bool
	output         string
	plot           string
	workers        int
}

const simulateLong = `Replay measured spot-availability traces through the purchase policies
with a simulated clock, from many start points, and compare their cost.

Each --trace file is one zone; several files are zones the job may move
between; a folder stands for every .json and .csv file in it. The model is
the one of "Can't Be Late" (NSDI '24): one tick is the traces' step; the
work (C) and changeover (d) are rounded up to whole ticks, the deadline (R)
down; every launch on spot or on-demand (from idle, the other option or
another zone) bills d without progress; a spot tick without capacity
preempts the job at once (not billed, progress kept) and the policy may
relaunch on the same tick; with --nodes N a tick has capacity when at least
N instances are available, and every cost is per node.

Zones may differ: a trace's metadata.on_demand_price (a CSV column
ondemand_usd_per_hour) is its zone's on-demand price (--ondemand-price for
the others), and on-demand runs in any zone at that price. A zone's
region is metadata.region, or its name without the last letter and a
trailing "-" (us-east-1a: us-east-1). Once the job has made progress, a
launch in another region than its checkpoint's pays --checkpoint-gb x
--egress-usd-per-gb, at the launch. --prices DIR joins spot prices kept
apart (one JSON file per zone, same file names, "prices": [...]).

Policies: on-demand, greedy, uniform-progress, spotwise (the scheduler's)
and optimal (the exact omniscient optimum, by dynamic programming over the
known future: the bound no online policy can beat). The online policies
see the capacity now and statistics of what was observed before: the
whole trace before each start unless --history-hours says otherwise.

Trace formats:
  JSON (the public traces): {"metadata": {"gap_seconds": G}, "data": [...],
  "prices": [...]}; data holds per step the count of available instances
  (1/0 for one node); prices (optional) the spot USD per instance-hour.
  CSV (ours), a header then one row per step, # starts a comment:
      time_seconds,available,price_usd_per_hour
      0,1,0.9731
      195,0,0.9731
  time_seconds grows by the same step on every row; available is the
  count of instances available; the price column, and an
  ondemand_usd_per_hour column, are optional. Prices with more than six
  decimals are rounded to the micro-dollar.
The zone's name is the file name up to the first "_".`

const simulateExample = `  spotwise simulate --trace ../shared/traces/availability/1-node/aws-02-15-2023 \
    --job-hours 48 --deadline-hours 60 --changeover-hours 0.2 \
    --ondemand-price 3.06 --spot-price 0.9731 --starts 300 --even \
    --policy on-demand,greedy,uniform-progress,spotwise,optimal

  # measured prices per zone, and a 50 GB checkpoint at $0.02/GB between regions
  spotwise simulate --trace ../shared/traces/availability/1-node/aws-02-15-2023 \
    --prices ../shared/traces/prices/aws-02-15-2023 --checkpoint-gb 50 --egress-usd-per-gb 0.02 \
    --job-hours 48 --deadline-hours 60`

// newSimulateCmd is `spotwise simulate`.
func newSimulateCmd() *cobra.Command {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:     "simulate --trace FILE [--trace FILE ...] --job-hours C --deadline-hours R [flags]",
		Short:   "Replay spot-availability traces through the purchase policies and compare their cost",
		Long:    simulateLong,
		Example: simulateExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.traces, "trace", nil, "trace file or folder (repeat for several zones)")
	fl.Float64Var(&f.jobHours, "job-hours", 0, "compute the job needs, hours (C)")
	fl.Float64Var(&f.deadlineHours, "deadline-hours", 0, "time from start to deadline, hours (R)")
	fl.Float64Var(&f.changeover, "changeover-hours", 0.2, "billed time without progress on every launch, hours (d)")
	fl.StringVar(&f.onDemandPrice, "ondemand-price", "3.06", "on-demand USD per node-hour")
	fl.StringVar(&f.spotPrice, "spot-price", "0.9731", "spot USD per node-hour (unless --use-trace-prices)")
	fl.BoolVar(&f.useTracePrices, "use-trace-prices", false, "take spot prices from the traces (every trace must carry them)")
	fl.StringVar(&f.pricesDir, "prices", "", "folder of price files to join to the traces by file name (implies --use-trace-prices)")
	fl.Float64Var(&f.checkpointGB, "checkpoint-gb", 0, "size of the job's checkpoint, GB: a move between regions carries it")
	fl.StringVar(&f.egressPerGB, "egress-usd-per-gb", "0", "transfer price between regions, USD per GB")
	fl.IntVar(&f.nodes, "nodes", 1, "instances the job needs at once")
	fl.IntVar(&f.starts, "starts", 300, "number of start points")
	fl.Uint64Var(&f.seed, "seed", 1, "random start points from this seed")
	fl.BoolVar(&f.even, "even", false, "evenly spaced start points: tick floor(i*(L-R)/(K-1))")
	fl.Float64Var(&f.historyHours, "history-hours", -1, "hours of the trace before each start the policies have observed (-1: all)")
	fl.StringSliceVar(&f.policies, "policy", []string{bidding.PolicyOnDemandOnly, bidding.PolicyGreedy, bidding.PolicyUniformProgress, bidding.PolicySpotwise, simulate.PolicyOptimal}, "policies to run, comma-separated")
	addOutputFlag(cmd, &f.output, &f.json)
	fl.StringVar(&f.plot, "plot", "", "also write an SVG: cost per policy and one run's timeline")
	fl.IntVar(&f.workers, "workers", 0, "start points run in parallel (0: one per CPU)")
	_ = cmd.MarkFlagRequired("trace")
	_ = cmd.MarkFlagRequired("job-hours")
	_ = cmd.MarkFlagRequired("deadline-hours")
	cmd.MarkFlagsMutuallyExclusive("seed", "even")
	return cmd
}

// simulation is a parsed and checked `spotwise simulate`.
type simulation struct {
	market *simulate.Market
	job    simulate.Job
	ticks  simulate.Ticks
	opts   simulate.Options
}

func (f simulateFlags) parse() (*simulation, error) {
	hours := func(name string, h float64, positive bool) (time.Duration, error) {
		if math.IsNaN(h) || math.IsInf(h, 0) || h < 0 || (positive && h == 0) || h > 1e6 {
			return 0, fmt.Errorf("--%s %v: want a positive number of hours", name, h)
		}
		return time.Duration(h * float64(time.Hour)), nil
	}
	var job simulate.Job
	var err error
	if job.Work, err = hours("job-hours", f.jobHours, true); err != nil {
		return nil, err
	}
	if job.Deadline, err = hours("deadline-hours", f.deadlineHours, true); err != nil {
		return nil, err
	}
	if job.Changeover, err = hours("changeover-hours", f.changeover, false); err != nil {
		return nil, err
	}
	var prices simulate.Prices
	if prices.OnDemand, err = money.Parse(f.onDemandPrice); err != nil || prices.OnDemand <= 0 {
		return nil, fmt.Errorf("--ondemand-price %q: want a positive amount in USD", f.onDemandPrice)
	}
	if prices.Spot, err = money.Parse(f.spotPrice); err != nil || prices.Spot < 0 {
		return nil, fmt.Errorf("--spot-price %q: want an amount in USD", f.spotPrice)
	}
	prices.UseTrace = f.useTracePrices || f.pricesDir != ""
	if prices.Egress, err = egress(f.checkpointGB, f.egressPerGB); err != nil {
		return nil, err
	}
	if f.nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: at least 1", f.nodes)
	}
	if f.starts < 1 {
		return nil, fmt.Errorf("--starts %d: at least 1", f.starts)
	}
	if f.workers < 0 {
		return nil, fmt.Errorf("--workers %d: 0 or more", f.workers)
	}
	policies, err := policyList(f.policies)
	if err != nil {
		return nil, err
	}
	traces, err := trace.Load(f.traces...)
	if err != nil {
		return nil, err
	}
	if f.pricesDir != "" {
		if err := trace.JoinPrices(traces, f.pricesDir); err != nil {
			return nil, fmt.Errorf("--prices: %w", err)
		}
	}
	m, err := simulate.NewMarket(traces, f.nodes, prices)
	if err != nil {
		return nil, err
	}
	t, err := m.Ticks(job)
	if err != nil {
		return nil, err
	}
	history := -1
	if f.historyHours >= 0 {
		history = int(time.Duration(f.historyHours*float64(time.Hour)) / m.Step)
	}
	starts := simulate.RandomStarts(m.Len, t.Deadline, f.starts, f.seed)
	if f.even {
		starts = simulate.EvenStarts(m.Len, t.Deadline, f.starts)
	}
	return &simulation{
		market: m, job: job, ticks: t,
		opts: simulate.Options{Policies: policies, Starts: starts, History: history, Workers: f.workers},
	}, nil
}

// egress is what a move between regions costs: --checkpoint-gb x
// --egress-usd-per-gb, rounded once to the micro-dollar.
func egress(gb float64, perGB string) (money.Micros, error) {
	if math.IsNaN(gb) || gb < 0 || gb > 1e9 {
		return 0, fmt.Errorf("--checkpoint-gb %v: want a size in GB, 0 or more", gb)
	}
	p, err := money.Parse(perGB)
	if err != nil || p < 0 {
		return 0, fmt.Errorf("--egress-usd-per-gb %q: want an amount in USD", perGB)
	}
	// GB to a millionth: the product stays exact in 128 bits.
	return p.Scale(int64(math.Round(gb*1e6)), 1e6), nil
}

// policyList checks the --policy names: known, each once.
func policyList(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if n != simulate.PolicyOptimal {
			if _, err := bidding.NewPolicy(n); err != nil {
				return nil, fmt.Errorf("--policy: %w (or %s)", err, simulate.PolicyOptimal)
			}
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("--policy: %q named twice", n)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("--policy: name at least one policy")
	}
	return out, nil
}

func runSimulate(cmd *cobra.Command, f simulateFlags) error {
	format, err := outputOf(cmd, f.output, f.json)
	if err != nil {
		return err
	}
	sim, err := f.parse()
	if err != nil {
		return err
	}
	stop := startProgress(cmd.ErrOrStderr(), &sim.opts)
	report, err := sim.market.Simulate(cmd.Context(), sim.job, sim.opts)
	stop()
	if err != nil {
		return err
	}
	if f.plot != "" {
		if err := writeSimulatePlot(f.plot, sim, report); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	if structured(format) {
		return writeSimulateData(out, format, report)
	}
	printSimulateReport(out, sim, report)
	if f.plot != "" {
		fmt.Fprintf(out, "plot: %s\n", f.plot)
	}
	return nil
}

// simPolicyJSON is one policy in `simulate -o json` (and yaml).
type simPolicyJSON struct {
	MeanCost          money.Micros `json:"mean_cost"`
	P50Cost           money.Micros `json:"p50_cost"`
	P90Cost           money.Micros `json:"p90_cost"`
	MeanOnDemandHours float64      `json:"mean_ondemand_hours"`
	MeanSpotHours     float64      `json:"mean_spot_hours"`
	MeanMoves         float64      `json:"mean_moves"`
	MeanEgress        money.Micros `json:"mean_egress"`
	Misses            int          `json:"misses"`
	Runs              int          `json:"runs"`
}

func writeSimulateData(w io.Writer, format string, r *simulate.Report) error {
	out := struct {
		Policies map[string]simPolicyJSON `json:"policies"`
	}{Policies: map[string]simPolicyJSON{}}
	for _, s := range r.Policies {
		out.Policies[s.Name] = simPolicyJSON{
			MeanCost:          s.MeanCost,
			P50Cost:           s.P50Cost,
			P90Cost:           s.P90Cost,
			MeanOnDemandHours: roundTo(s.MeanOnDemandHours, 4),
			MeanSpotHours:     roundTo(s.MeanSpotHours, 4),
			MeanMoves:         roundTo(s.MeanMoves, 4),
			MeanEgress:        s.MeanEgress,
			Misses:            s.Misses,
			Runs:              s.Runs,
		}
	}
	return writeData(w, format, out)
}

func roundTo(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

func printSimulateReport(w io.Writer, sim *simulation, r *simulate.Report) {
	m, t := sim.market, sim.ticks
	zones := strings.Join(m.Zones, ", ")
	if len(m.Zones) > 6 {
		zones = strings.Join(m.Zones[:6], ", ") + ", ..."
	}
	fmt.Fprintf(w, "zones: %d (%s); step %s; %d ticks\n", len(m.Zones), zones, m.Step, m.Len)
	fmt.Fprintf(w, "job: %s of work, deadline %s, changeover %s = %d / %d / %d ticks; %d node(s); on-demand %s/h, spot %s\n",
		fmtHours(sim.job.Work), fmtHours(sim.job.Deadline), fmtHours(sim.job.Changeover), t.Work, t.Deadline, t.Changeover,
		m.Nodes, m.OnDemandPrice().Human(), spotPriceText(sim))
	if !t.Feasible() {
		fmt.Fprintln(w, "note: work plus one changeover exceeds the deadline; every run misses it")
	}
	if m.Egress() > 0 {
		fmt.Fprintf(w, "regions: %d (%s); a move between them costs %s\n", len(m.Regions), strings.Join(m.Regions, ", "), m.Egress().Human())
	}
	fmt.Fprintf(w, "%d runs; history: %s\n\n", len(r.Starts), historyText(sim))
	_, hasOptimal := r.Policy(simulate.PolicyOptimal)
	// The policy column reads left to right, the figures line up right.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "policy \tmean cost\tp50\tp90\ton-demand h\tspot h\tmoves\tegress\tmisses\truns\t"
	if hasOptimal {
		head += "vs optimal\t"
	}
	name := func(s string) string { return fmt.Sprintf("%-18s", s) }
	fmt.Fprintln(tw, name("policy")+head[len("policy "):])
	for _, s := range r.Policies {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%s\t%d\t%d\t", name(s.Name), s.MeanCost.Human(), s.P50Cost.Human(), s.P90Cost.Human(),
			s.MeanOnDemandHours, s.MeanSpotHours, s.MeanMoves, s.MeanEgress.Human(), s.Misses, s.Runs)
		if hasOptimal {
			line += fmt.Sprintf("%.3fx\t", s.Ratio)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntook %s\n", r.Elapsed.Round(time.Millisecond))
}

func spotPriceText(sim *simulation) string {
	if sim.market.TracePrices {
		return "from the traces"
	}
	return sim.market.SpotPrice(0, 0).Human() + "/h"
}

func historyText(sim *simulation) string {
	if sim.opts.History < 0 {
		return "the whole trace before each start"
	}
	return fmt.Sprintf("%d ticks before each start", sim.opts.History)
}

func fmtHours(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", d.Hours()), "0"), ".") + "h"
}

// writeSimulatePlot writes the SVG, with the timeline of the run whose
// cost is the median of the first online policy (spotwise if run).
func writeSimulatePlot(path string, sim *simulation, r *simulate.Report) error {
	pick := r.Policies[0]
	for _, s := range r.Policies {
		if s.Name == bidding.PolicySpotwise {
			pick = s
		}
	}
	order := make([]int, len(pick.Outcomes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(pick.Outcomes[a].Cost, pick.Outcomes[b].Cost) })
	tl, err := sim.market.Timelines(sim.job, r, order[len(order)/2], sim.opts.History)
	if err != nil {
		return err
	}
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := sim.market.WritePlot(fh, r, tl); err != nil {
		fh.Close()
		return fmt.Errorf("--plot: %w", err)
	}
	return fh.Close()
}

// startProgress draws a progress bar on w while the simulation runs, when
// w is a terminal and the run lasts long enough to want one. The returned
// func stops it and clears the line.
func startProgress(w io.Writer, o *simulate.Options) (stop func()) {
	f, ok := w.(*os.File)
	if !ok {
		return func() {}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	var done, total atomic.Int64
	o.Progress = func(d, t int) { done.Store(int64(d)); total.Store(int64(t)) }
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		began := time.Now()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		drawn := false
		for {
			select {
			case <-quit:
				if drawn {
					fmt.Fprint(f, "\r\033[K")
				}
				return
			case <-tick.C:
				if time.Since(began) < time.Second || total.Load() == 0 {
					continue
				}
				d, t := done.Load(), total.Load()
				const width = 30
				n := int(width * d / t)
				fmt.Fprintf(f, "\r[%s%s] %d/%d runs", strings.Repeat("#", n), strings.Repeat(".", width-n), d, t)
				drawn = true
			}
		}
	}()
	return func() { close(quit); <-finished }
}
