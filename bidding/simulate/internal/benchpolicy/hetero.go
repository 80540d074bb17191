package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/spotwise/spotwise/bidding/simulate"
	"github.com/spotwise/spotwise/bidding/trace"
	"github.com/spotwise/spotwise/money"
)

// The heterogeneous suite (-suite heterogeneous): markets where zones
// differ in spot price, on-demand price and region, built from the nine
// measured V100 zones of availability/1-node/aws-02-15-2023 joined to
// their measured prices (prices/aws-02-15-2023). Every zone keeps its
// measured availability and price series; a scenario scales a zone's
// prices by its tier (1x, 1.3x, 3.5x), may add a zone that always has
// capacity, sets on-demand per region and charges egress on moves
// between regions. Targets: no deadline missed; spotwise within 3% of the
// optimum on average over the sets, and never above greedy or uniform
// progress on any set.

// zoneSpec is one zone of a scenario: a measured zone's availability
// (or always available) and prices times num/10.
type zoneSpec struct {
	name   string // the zone's name in the scenario (its region follows)
	avail  string // measured zone whose availability it has; "" = always
	prices string // measured zone whose prices it has
	tenths int64  // price multiplier in tenths
}

type scenario struct {
	name     string
	zones    []zoneSpec
	onDemand map[string]string // region -> USD per hour; others: od
	egress   string            // USD per move between regions
	// set is the trace folder (relative to -traces) the zones come
	// from; "" is availability/1-node/aws-02-15-2023 joined to its
	// measured prices. Zones are named as trace.Load names them.
	set string
	// od is the on-demand USD per hour where onDemand does not say
	// (default 3.06); spot the spot USD per hour of a zone whose trace
	// has no prices.
	od, spot string
}

var scenarios = []scenario{
	{name: "measured-9z", zones: measured(), egress: "0"},
	{name: "measured-od30", zones: measured(), egress: "2",
		onDemand: map[string]string{"us-east-2": "3.978", "us-west-2": "3.978"}},
	{name: "tiers-3z", egress: "1", zones: []zoneSpec{
		{"us-west-2b", "us-west-2b", "us-west-2b", 10},
		{"us-east-2a", "us-east-2a", "us-east-2a", 13},
		{"us-east-1x", "", "us-east-1a", 35},
	}, onDemand: map[string]string{"us-east-1": "3.978", "us-east-2": "3.978"}},
	{name: "tiers-6z", egress: "1", zones: []zoneSpec{
		{"us-east-1f", "us-east-1f", "us-east-1f", 10},
		{"us-east-1c", "us-east-1c", "us-east-1c", 10},
		{"us-east-2b", "us-east-2b", "us-east-2b", 13},
		{"us-east-2a", "us-east-2a", "us-east-2a", 13},
		{"us-west-2a", "us-west-2a", "us-west-2a", 35},
		{"us-west-2z", "", "us-west-2c", 35},
	}, onDemand: map[string]string{"us-west-2": "3.978"}},
}

func measured() []zoneSpec {
	return asMeasured(10, "us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a", "us-east-2b", "us-west-2a", "us-west-2b", "us-west-2c")
}

// asMeasured is each named zone with its own availability and prices
// times tenths/10.
func asMeasured(tenths int64, zones ...string) []zoneSpec {
	var out []zoneSpec
	for _, z := range zones {
		out = append(out, zoneSpec{z, z, z, tenths})
	}
	return out
}

// build makes the scenario's traces from the measured ones.
func (sc scenario) build(byName map[string]trace.Trace) ([]trace.Trace, simulate.Prices, error) {
	var out []trace.Trace
	for _, z := range sc.zones {
		src, ok := byName[z.prices]
		if !ok {
			return nil, simulate.Prices{}, fmt.Errorf("%s: no measured zone %s", sc.name, z.prices)
		}
		t := trace.Trace{Name: z.name, Source: z.name, Step: src.Step, Avail: slices.Clone(src.Avail)}
		if z.avail == "" {
			for i := range t.Avail {
				t.Avail[i] = 1
			}
		} else if a, ok := byName[z.avail]; ok {
			t.Avail = slices.Clone(a.Avail)
		} else {
			return nil, simulate.Prices{}, fmt.Errorf("%s: no measured zone %s", sc.name, z.avail)
		}
		prices := src.Prices
		if len(prices) == 0 {
			if sc.spot == "" {
				return nil, simulate.Prices{}, fmt.Errorf("%s: zone %s has no prices", sc.name, z.prices)
			}
			prices = slices.Repeat([]money.Micros{money.MustParse(sc.spot)}, len(t.Avail))
		}
		t.Prices = make([]money.Micros, len(prices))
		for i, p := range prices {
			t.Prices[i] = p.Scale(z.tenths, 10)
		}
		od := sc.onDemandDefault()
		if v, ok := sc.onDemand[t.RegionOf()]; ok {
			od = v
		}
		t.OnDemand = money.MustParse(od)
		out = append(out, t)
	}
	return out, simulate.Prices{OnDemand: money.MustParse(sc.onDemandDefault()), UseTrace: true, Egress: money.MustParse(sc.egress)}, nil
}

func (sc scenario) onDemandDefault() string {
	if sc.od != "" {
		return sc.od
	}
	return "3.06"
}

// The generality suite (-suite generality): the same kind of markets
// built from the other measured sets, none of which spotwise was tuned
// on: p3.2xlarge in four zones of two regions a week in April 2023 (32 s
// steps; one zone's prices are not in the set: $0.918, as in the others),
// with the zones as they are and with a region dearer; r5.16xlarge in
// three zones of us-east-1 with their own measured prices (on-demand
// $4.032); p3.2xlarge in two zones of us-west-2 in October 2022, the
// second relabelled into another region (us-east-1x: 1.3x the spot price,
// on-demand $3.978, $1 to move), and p2.xlarge in the same two zones
// (spot $0.27, on-demand $0.90). The targets are those of the
// heterogeneous suite set by set (no deadline missed, never above greedy
// or uniform progress); their mean is reported, not held to 1.03: these
// sets say how far what was tuned on the development sets carries.
var generality = []scenario{
	{name: "v100-apr-4z", set: "preemption/1-node/aws-04-22-2023", egress: "1", spot: "0.918",
		zones: asMeasured(10, "us-east-1c", "us-east-1f", "us-west-2b", "us-west-2c")},
	{name: "v100-apr-tiers", set: "preemption/1-node/aws-04-22-2023", egress: "1", spot: "0.918",
		zones: append(asMeasured(13, "us-east-1c", "us-east-1f"), zoneSpec{"us-west-2b", "us-west-2b", "us-west-2b", 10},
			zoneSpec{"us-west-2x", "", "us-west-2c", 35}),
		onDemand: map[string]string{"us-east-1": "3.978"}},
	{name: "r5-apr-3z", set: "preemption/1-node/aws-04-19-2023", egress: "0", od: "4.032",
		zones: asMeasured(10, "us-east-1b", "us-east-1c", "us-east-1d")},
	{name: "v100-oct-2z", set: "availability/1-node/aws-10-26-2022", egress: "1", spot: "0.9731", zones: []zoneSpec{
		{"us-west-2a", "us-west-2a_v100_1", "us-west-2a_v100_1", 10},
		{"us-east-1x", "us-west-2b_v100_1", "us-west-2b_v100_1", 13},
	}, onDemand: map[string]string{"us-east-1": "3.978"}},
	{name: "k80-oct-2z", set: "availability/1-node/aws-10-26-2022", egress: "1", spot: "0.27", od: "0.90", zones: []zoneSpec{
		{"us-west-2a", "us-west-2a_k80_1", "us-west-2a_k80_1", 10},
		{"us-west-2b", "us-west-2b_k80_1", "us-west-2b_k80_1", 10},
	}},
}

// heterogeneous runs the suite; it returns the targets missed.
func heterogeneous(root string, only []string, fractions []float64, jobHours, changeover float64, starts int) []string {
	fmt.Printf("heterogeneous markets: measured V100 availability and prices (aws-02-15-2023), prices scaled by tier; %gh job, changeover %gh; %d evenly spaced starts\n", jobHours, changeover, starts)
	return runSuite(root, scenarios, "heterogeneous sets", true, only, fractions, jobHours, changeover, starts)
}

// generalityCheck runs the generality suite; it returns the targets
// missed.
func generalityCheck(root string, only []string, fractions []float64, jobHours, changeover float64, starts int) []string {
	fmt.Printf("generality: the other measured sets (April 2023 p3.2xlarge and r5.16xlarge, October 2022 p3.2xlarge and p2.xlarge), prices as measured or by tier; %gh job, changeover %gh; %d evenly spaced starts\n", jobHours, changeover, starts)
	return runSuite(root, generality, "generality sets", false, only, fractions, jobHours, changeover, starts)
}

// loadSet reads a trace folder; "" is the heterogeneous suite's, joined to
// its measured prices.
func loadSet(root, set string) (map[string]trace.Trace, error) {
	var ts []trace.Trace
	var err error
	if set == "" {
		ts, err = trace.Load(filepath.Join(root, "availability/1-node/aws-02-15-2023"))
		if err == nil {
			err = trace.JoinPrices(ts, filepath.Join(root, "prices/aws-02-15-2023"))
		}
	} else {
		ts, err = trace.Load(filepath.Join(root, set))
	}
	if err != nil {
		return nil, err
	}
	byName := map[string]trace.Trace{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	return byName, nil
}

// runSuite runs the scenarios named in only (all when empty) at every
// fraction; it returns the targets missed, the mean held to 1.03 when
// meanTarget is set.
func runSuite(root string, suite []scenario, what string, meanTarget bool, only []string, fractions []float64, jobHours, changeover float64, starts int) []string {
	fmt.Printf("  %-14s %4s %8s %8s %8s %9s %8s %6s  %-23s  %s\n", "set", "C/R", "greedy", "uniform", "spotwise", "optimal", "od-only", "misses", "moves/run g/up/sw/opt", "egress/run sw/opt")
	var failures []string
	var sumRatio float64
	var n int
	sets := map[string]map[string]trace.Trace{}
	for _, sc := range suite {
		if len(only) > 0 && !slices.Contains(only, sc.name) {
			continue
		}
		byName, ok := sets[sc.set]
		if !ok {
			var err error
			if byName, err = loadSet(root, sc.set); err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", sc.name, err))
				continue
			}
			sets[sc.set] = byName
		}
		ts, prices, err := sc.build(byName)
		if err != nil {
			failures = append(failures, err.Error())
			continue
		}
		for _, frac := range fractions {
			job := simulate.Job{Work: hours(jobHours), Deadline: hours(jobHours / frac), Changeover: hours(changeover)}
			r, err := runMarket(ts, prices, job, starts)
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s C/R %.2f: %v", sc.name, frac, err))
				continue
			}
			g, up, sw, opt := r.byName["greedy"], r.byName["uniform-progress"], r.byName["spotwise"], r.byName["optimal"]
			ratio := func(s simulate.Summary) float64 { return float64(s.MeanCost) / float64(opt.MeanCost) }
			misses := 0
			for _, s := range r.byName {
				misses += s.Misses
			}
			fmt.Printf("  %-14s %4.2f %7.3fx %7.3fx %7.3fx %9s %7.3fx %6d  %-23s  %s / %s\n", sc.name, frac, ratio(g), ratio(up), ratio(sw),
				"$"+strconv.FormatFloat(opt.MeanCost.Dollars(), 'f', 2, 64), ratio(r.byName["on-demand"]), misses,
				fmt.Sprintf("%.1f/%.1f/%.1f/%.1f", g.MeanMoves, up.MeanMoves, sw.MeanMoves, opt.MeanMoves), sw.MeanEgress.Human(), opt.MeanEgress.Human())
			sumRatio += ratio(sw)
			n++
			if misses > 0 {
				failures = append(failures, fmt.Sprintf("%s C/R %.2f: %d deadlines missed", sc.name, frac, misses))
			}
			if sw.MeanCost > g.MeanCost || sw.MeanCost > up.MeanCost {
				failures = append(failures, fmt.Sprintf("%s C/R %.2f: spotwise %.3fx above greedy %.3fx or uniform progress %.3fx", sc.name, frac, ratio(sw), ratio(g), ratio(up)))
			}
		}
	}
	if n > 0 && meanTarget {
		fmt.Printf("  spotwise mean over the %s: %.3fx the optimum (target <= 1.03x)\n\n", what, sumRatio/float64(n))
		if sumRatio/float64(n) > 1.03 {
			failures = append(failures, fmt.Sprintf("%s: spotwise %.3fx the optimum on average (limit 1.03x)", what, sumRatio/float64(n)))
		}
	} else if n > 0 {
		fmt.Printf("  spotwise mean over the %s: %.3fx the optimum (reported, not a target)\n\n", what, sumRatio/float64(n))
	}
	return failures
}

// runMarket simulates every policy over one market.
func runMarket(ts []trace.Trace, prices simulate.Prices, job simulate.Job, starts int) (result, error) {
	b := &bench{nodes: 1, prices: prices, history: -1}
	return b.run(ts, job, starts)
}
