package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/bidding/simulate"
	"github.com/spotwise/spotwise/bidding/trace"
)

// Diagnosis (-diagnose N): where spotwise loses against the optimum on
// the heterogeneous sets. For every set and C/R it replays spotwise and
// the optimum from each start with their timelines, splits each run's
// cost into spot, on-demand, changeovers (billed ticks without progress)
// and egress, prints the mean split of both and the N starts where
// spotwise pays most above the optimum, each with both plans drawn as
// runs of one choice.

// tracing is Spotwise printing each of its decisions that changes what
// the job runs on, with what it saw (Spotwise.Explain).
type tracing struct {
	bidding.Spotwise
	zones []string
}

func (t tracing) Decide(s bidding.PolicyState) bidding.Choice {
	c := t.Spotwise.Decide(s)
	if c != s.Current {
		name := func(c bidding.Choice) string {
			switch {
			case c.Kind == bidding.RunSpot:
				return t.zones[c.Zone]
			case c.Kind == bidding.RunOnDemand && c.Zone >= 0:
				return "od@" + t.zones[c.Zone]
			}
			return c.Kind.String()
		}
		fmt.Printf("    %6.2fh %s -> %s: %s\n", s.Elapsed.Hours(), name(s.Current), name(c), t.Explain(s))
	}
	return c
}

// breakdown is one run's cost split, in dollars, and its counts.
type breakdown struct {
	spot, onDemand, change, egress, total float64
	idleH, spotH, odH                     float64
	leftH                                 float64 // slack left at the finish
	moves                                 int
	plan                                  string
	// entries counts the launches by what the job left and what it
	// entered (a relaunch where it was preempted included); wasted those
	// whose stint ended before its changeover did (no progress at all).
	entries, wasted map[entry]float64
	// odStints counts the stints on on-demand by length: under an hour,
	// under four, four or more.
	odStints [3]float64
}

// entry is a launch: the kind of what the job left ("start", "idle",
// "od", "spot") and of what it entered.
type entry struct{ from, to string }

// entryOrder is the order the entries are printed in.
var entryOrder = []entry{{"start", "spot"}, {"start", "od"}, {"idle", "spot"}, {"spot", "spot"}, {"od", "spot"}, {"idle", "od"}, {"spot", "od"}, {"od", "od"}}

func kindOf(c bidding.Choice) string {
	switch c.Kind {
	case bidding.RunSpot:
		return "spot"
	case bidding.RunOnDemand:
		return "od"
	}
	return "idle"
}

// stints counts b's entries and on-demand stints from a timeline.
func (b *breakdown) stints(tl []simulate.Slot, h float64) {
	b.entries, b.wasted = map[entry]float64{}, map[entry]float64{}
	prev, open, progressed, ticks := "start", entry{}, false, 0
	end := func() {
		if open.to == "" {
			return
		}
		if !progressed {
			b.wasted[open]++
		}
		if open.to == "od" {
			switch l := float64(ticks) * h; {
			case l < 1:
				b.odStints[0]++
			case l < 4:
				b.odStints[1]++
			default:
				b.odStints[2]++
			}
		}
		open = entry{}
	}
	for i, sl := range tl {
		relaunch := i > 0 && sl.Choice == tl[i-1].Choice && sl.Changeover && !tl[i-1].Changeover
		if i == 0 || sl.Choice != tl[i-1].Choice || relaunch {
			if i > 0 {
				prev = kindOf(tl[i-1].Choice)
				if relaunch {
					prev = "idle" // preempted and launched again where it was
				}
			}
			end()
			if k := kindOf(sl.Choice); k != "idle" {
				open, progressed, ticks = entry{prev, k}, false, 0
				b.entries[open]++
			}
		}
		ticks++
		progressed = progressed || !sl.Changeover
	}
	end()
}

// stintLine is how b launched, per run over n runs.
func (b breakdown) stintLine(n float64) string {
	var parts []string
	for _, e := range entryOrder {
		if b.entries[e] > 0 {
			parts = append(parts, fmt.Sprintf("%s->%s %.1f (%.1f)", e.from, e.to, b.entries[e]/n, b.wasted[e]/n))
		}
	}
	return fmt.Sprintf("launches/run (no progress): %s; on-demand stints/run <1h %.1f, 1-4h %.1f, >=4h %.1f",
		strings.Join(parts, ", "), b.odStints[0]/n, b.odStints[1]/n, b.odStints[2]/n)
}

func split(m *simulate.Market, start, deadline int, o simulate.Outcome) breakdown {
	var b breakdown
	h := m.Step.Hours()
	var runs []string
	cur, n := "", 0
	flush := func() {
		if n > 0 {
			runs = append(runs, fmt.Sprintf("%s:%.1fh", cur, float64(n)*h))
		}
	}
	for i, sl := range o.Timeline {
		var price float64
		name := sl.Choice.String()
		switch sl.Choice.Kind {
		case bidding.RunSpot:
			price = m.SpotPrice(sl.Choice.Zone, start+i).Dollars() * h
			b.spot += price
			b.spotH += h
			name = m.Zones[sl.Choice.Zone]
		case bidding.RunOnDemand:
			price = m.OnDemandPriceIn(sl.Choice.Zone).Dollars() * h
			b.onDemand += price
			b.odH += h
			name = "od@" + m.Zones[sl.Choice.Zone]
		default:
			b.idleH += h
		}
		if sl.Changeover {
			b.change += price
		}
		if name != cur {
			flush()
			cur, n = name, 0
		}
		n++
	}
	flush()
	b.egress = o.Egress.Dollars()
	b.total = o.Cost.Dollars()
	b.moves = o.Moves
	b.leftH = float64(deadline-o.Finish) * h
	b.plan = strings.Join(runs, " ")
	b.stints(o.Timeline, h)
	return b
}

func (b breakdown) line() string {
	return fmt.Sprintf("$%7.2f = spot $%6.2f (%5.1fh) + od $%6.2f (%4.1fh) + egress $%5.2f; changeovers $%5.2f; idle %4.1fh; moves %d; finished %.1fh early",
		b.total, b.spot, b.spotH, b.onDemand, b.odH, b.egress, b.change, b.idleH, b.moves, b.leftH)
}

// diagnose prints the diagnosis of the sets named in only (all when
// empty).
//
// With start >= 0, only the run from that start tick is diagnosed, and
// with decisions set, each decision of spotwise's that changes what the job
// runs on is printed with what the policy saw (Spotwise.Explain).
func diagnose(root string, only []string, fractions []float64, jobHours, changeover float64, starts, worst, start int, decisions bool) error {
	sets := map[string]map[string]trace.Trace{}
	for _, sc := range append(slices.Clone(scenarios), generality...) {
		if len(only) > 0 && !slices.Contains(only, sc.name) {
			continue
		}
		byName, ok := sets[sc.set]
		if !ok {
			var err error
			if byName, err = loadSet(root, sc.set); err != nil {
				return err
			}
			sets[sc.set] = byName
		}
		ts, prices, err := sc.build(byName)
		if err != nil {
			return err
		}
		m, err := simulate.NewMarket(ts, 1, prices)
		if err != nil {
			return err
		}
		for _, frac := range fractions {
			job := simulate.Job{Work: hours(jobHours), Deadline: hours(jobHours / frac), Changeover: hours(changeover)}
			tk, err := m.Ticks(job)
			if err != nil {
				return err
			}
			st := simulate.EvenStarts(m.Len, tk.Deadline, starts)
			if start >= 0 {
				st = []int{start}
			}
			if decisions {
				for _, s := range st {
					fmt.Printf("%s C/R %.2f, start %d: spotwise's decisions\n", sc.name, frac, s)
					m.Run(tracing{zones: m.Zones}, tk, s, m.Observe(0, s), false)
				}
			}
			sw, opt := make([]breakdown, len(st)), make([]breakdown, len(st))
			var wg sync.WaitGroup
			sem := make(chan struct{}, 2)
			for k, s := range st {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					out := m.Run(bidding.Spotwise{}, tk, s, m.Observe(0, s), true)
					sw[k] = split(m, s, tk.Deadline, out)
					o, err := m.Optimal(tk, s, true)
					if err == nil {
						opt[k] = split(m, s, tk.Deadline, o)
					}
				})
			}
			wg.Wait()
			mean := func(bs []breakdown) breakdown {
				var a breakdown
				for _, b := range bs {
					a.spot, a.onDemand, a.change, a.egress, a.total = a.spot+b.spot, a.onDemand+b.onDemand, a.change+b.change, a.egress+b.egress, a.total+b.total
					a.idleH, a.spotH, a.odH, a.moves, a.leftH = a.idleH+b.idleH, a.spotH+b.spotH, a.odH+b.odH, a.moves+b.moves, a.leftH+b.leftH
					if a.entries == nil {
						a.entries, a.wasted = map[entry]float64{}, map[entry]float64{}
					}
					for e, v := range b.entries {
						a.entries[e] += v
					}
					for e, v := range b.wasted {
						a.wasted[e] += v
					}
					for i, v := range b.odStints {
						a.odStints[i] += v
					}
				}
				n := float64(len(bs))
				a.spot, a.onDemand, a.change, a.egress, a.total = a.spot/n, a.onDemand/n, a.change/n, a.egress/n, a.total/n
				a.idleH, a.spotH, a.odH, a.leftH = a.idleH/n, a.spotH/n, a.odH/n, a.leftH/n
				a.moves = int(float64(a.moves)/n + 0.5)
				return a
			}
			ms, mo := mean(sw), mean(opt)
			fmt.Printf("%s C/R %.2f: spotwise %.3fx\n  spotwise mean %s\n  optimal  mean %s\n", sc.name, frac, ms.total/mo.total, ms.line(), mo.line())
			// mean divides the sums but not the counts of launches.
			n := float64(len(st))
			fmt.Printf("  spotwise %s\n  optimal  %s\n", ms.stintLine(n), mo.stintLine(n))
			idx := make([]int, len(st))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int {
				da, db := sw[a].total-opt[a].total, sw[b].total-opt[b].total
				switch {
				case da > db:
					return -1
				case da < db:
					return 1
				}
				return 0
			})
			for _, k := range idx[:min(worst, len(idx))] {
				fmt.Printf("  start %d: +$%.2f\n    spotwise %s\n      %s\n    optimal  %s\n      %s\n", st[k], sw[k].total-opt[k].total, sw[k].line(), sw[k].plan, opt[k].line(), opt[k].plan)
			}
			fmt.Println()
		}
	}
	return nil
}
