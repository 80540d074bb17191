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
	onDemand map[string]string // region -> USD per hour; others: 3.06
	egress   string            // USD per move between regions
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
	var out []zoneSpec
	for _, z := range []string{"us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a", "us-east-2b", "us-west-2a", "us-west-2b", "us-west-2c"} {
		out = append(out, zoneSpec{z, z, z, 10})
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
		t.Prices = make([]money.Micros, len(src.Prices))
		for i, p := range src.Prices {
			t.Prices[i] = p.Scale(z.tenths, 10)
		}
		od := "3.06"
		if v, ok := sc.onDemand[t.RegionOf()]; ok {
			od = v
		}
		t.OnDemand = money.MustParse(od)
		out = append(out, t)
	}
	return out, simulate.Prices{OnDemand: money.MustParse("3.06"), UseTrace: true, Egress: money.MustParse(sc.egress)}, nil
}

// heterogeneous runs the suite; it returns the targets missed.
func heterogeneous(root string, only []string, fractions []float64, jobHours, changeover float64, starts int) []string {
	avail, err := trace.Load(filepath.Join(root, "availability/1-node/aws-02-15-2023"))
	if err == nil {
		err = trace.JoinPrices(avail, filepath.Join(root, "prices/aws-02-15-2023"))
	}
	if err != nil {
		return []string{err.Error()}
	}
	byName := map[string]trace.Trace{}
	for _, t := range avail {
		byName[t.Name] = t
	}
	fmt.Printf("heterogeneous markets: measured V100 availability and prices (aws-02-15-2023), prices scaled by tier; %gh job, changeover %gh; %d evenly spaced starts\n", jobHours, changeover, starts)
	fmt.Printf("  %-14s %4s %8s %8s %8s %9s %8s %6s  %-23s  %s\n", "set", "C/R", "greedy", "uniform", "spotwise", "optimal", "od-only", "misses", "moves/run g/up/sw/opt", "egress/run sw/opt")
	var failures []string
	var sumRatio float64
	var n int
	for _, sc := range scenarios {
		if len(only) > 0 && !slices.Contains(only, sc.name) {
			continue
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
	if n > 0 {
		fmt.Printf("  spotwise mean over the heterogeneous sets: %.3fx the optimum (target <= 1.03x)\n\n", sumRatio/float64(n))
		if sumRatio/float64(n) > 1.03 {
			failures = append(failures, fmt.Sprintf("heterogeneous sets: spotwise %.3fx the optimum on average (limit 1.03x)", sumRatio/float64(n)))
		}
	}
	return failures
}

// runMarket simulates every policy over one market.
func runMarket(ts []trace.Trace, prices simulate.Prices, job simulate.Job, starts int) (result, error) {
	b := &bench{nodes: 1, prices: prices, history: -1}
	return b.run(ts, job, starts)
}
