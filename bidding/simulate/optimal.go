package simulate

import (
	"fmt"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/money"
)

// PolicyOptimal is the name of the omniscient optimum.
const PolicyOptimal = "optimal"

// The optimum is a backwards dynamic program over the known future. A
// state is (progress p, wasted ticks w, mode) at tick p+w from the start,
// where w counts the ticks without progress (idle or changing over) and
// never exceeds the slack R-C. The modes are: idle with the checkpoint in
// region r; running on-demand in a class of zones (zones with the same
// on-demand price and region are one class: which of them is
// indifferent); running on spot in zone z (changeover done). From a
// state the job may
//   - idle one tick:                 (p, w+1, idle in its region), free;
//   - keep running where it is:      (p+1, w, mode), one tick's price;
//   - launch a target (an on-demand class or a spot zone): (p, w+d,
//     target), d ticks of its price, plus the egress when p > 0 and the
//     target's region is not the checkpoint's; a spot launch needs
//     capacity through the changeover (a launch preempted before it runs
//     is never better than waiting instead);
//
// and a spot mode whose zone has no capacity at the tick is preempted: it
// is worth what idle in its region is worth. Without egress every zone is
// in one region for the program. Costs are sums in the market's exact
// integer units. Rows over w are kept for p and p+1 only; the choice of
// every state is kept (a byte) to replay the best run.

// infinity marks an infeasible state; sums stay far from overflowing.
const infinity = int64(1) << 62

// Choice codes of the optimum's table: idle, continue, or launch target
// code-optLaunch.
const (
	optIdle     = 0
	optContinue = 1
	optLaunch   = 2
)

// maxOptimalStates bounds the choice table (one byte per state).
const maxOptimalStates = 1 << 30

// optimalScratch is one worker's memory for the optimum.
type optimalScratch struct {
	cur, next []int64 // [w*modes + mode]
	choice    []uint8 // [(p*(W+1)+w)*modes + mode]
	target    []int64 // [target] launch values at one state
	best      []pick  // [region] best and second-best launch from there
}

// pick is a launch target and its value, best and second best.
type pick struct {
	v1, v2 int64
	t1, t2 int
}

// prepared holds per-job tables shared by every start: per tick, the
// price of running a tick on each zone (infinity without capacity) and
// of a d-tick launch into it (infinity unless the zone has capacity for
// all d ticks); and the modes of the program.
type prepared struct {
	zones  int
	run    []int64 // [tick*zones + z]
	launch []int64 // [tick*zones + z]

	regions int     // idle modes: 0..regions-1
	odPrice []int64 // [class] scaled on-demand price; modes regions+class
	odZone  []int   // [class] the zone a class's on-demand is billed as
	region  []int   // [target] region of each target (classes, then zones)
	zoneReg []int   // [zone] region for the program
}

func (m *Market) prepare(t Ticks) *prepared {
	Z := len(m.Zones)
	p := &prepared{zones: Z, run: make([]int64, m.Len*Z), launch: make([]int64, m.Len*Z), regions: 1}
	for z := range Z {
		// Walk backwards keeping the length of the run of capacity from i
		// and the sum of its first d prices.
		runLen := 0
		var sum int64
		for i := m.Len - 1; i >= 0; i-- {
			k := i*Z + z
			if !m.avail[z][i] {
				runLen, sum = 0, 0
				p.run[k], p.launch[k] = infinity, infinity
				continue
			}
			runLen++
			sum += m.price[z][i]
			if runLen > t.Changeover && t.Changeover > 0 {
				sum -= m.price[z][i+t.Changeover]
			}
			p.run[k] = m.price[z][i]
			p.launch[k] = infinity
			if runLen >= t.Changeover {
				p.launch[k] = sum
			}
		}
	}
	p.zoneReg = make([]int, Z)
	if m.egress > 0 {
		p.regions = len(m.Regions)
		copy(p.zoneReg, m.region)
	}
	type class struct {
		price  int64
		region int
	}
	classes := map[class]int{}
	for z := range Z {
		c := class{m.onDemand[z], p.zoneReg[z]}
		if _, ok := classes[c]; !ok {
			classes[c] = len(p.odPrice)
			p.odPrice = append(p.odPrice, c.price)
			p.odZone = append(p.odZone, z)
			p.region = append(p.region, c.region)
		}
	}
	p.region = append(p.region, p.zoneReg...)
	return p
}

// modes is the number of modes: idle per region, on-demand classes, spot
// zones.
func (pr *prepared) modes() int { return pr.regions + len(pr.odPrice) + pr.zones }

// Optimal is the least cost of finishing the job from tick start with the
// whole future known. When the job cannot finish in time (C + d > R) it
// is the cost of on-demand from the start, marked missed.
func (m *Market) Optimal(t Ticks, start int, timeline bool) (Outcome, error) {
	return m.optimal(m.prepare(t), &optimalScratch{}, t, start, timeline)
}

func (m *Market) optimal(pr *prepared, sc *optimalScratch, t Ticks, start int, timeline bool) (Outcome, error) {
	if !t.Feasible() {
		return m.Run(bidding.OnDemandOnly{}, t, start, Past{}, timeline), nil
	}
	C, D, W, Z := t.Work, t.Changeover, t.Deadline-t.Work, pr.zones
	R, K := pr.regions, len(pr.odPrice)
	M, T := pr.modes(), K+Z
	if T+optLaunch > 256 {
		return Outcome{}, fmt.Errorf("the exact optimum handles at most %d zones and on-demand prices together; %d given", 256-optLaunch, T)
	}
	if n := C * (W + 1) * M; n > maxOptimalStates {
		return Outcome{}, fmt.Errorf("the exact optimum needs %d states (work %d ticks, slack %d, %d zones): too many; use a coarser trace or a shorter job", n, C, W, Z)
	}
	rowLen := (W + 1) * M
	sc.cur = grow(sc.cur, rowLen)
	sc.next = grow(sc.next, rowLen)
	sc.target = grow(sc.target, T)
	if cap(sc.best) < R {
		sc.best = make([]pick, R)
	}
	best := sc.best[:R]
	sc.choice = growBytes(sc.choice, C*rowLen)
	cur, next, choice, tv := sc.cur, sc.next, sc.choice, sc.target
	clear(next) // p == C: done, nothing more to pay
	for p := C - 1; p >= 0; p-- {
		egress := int64(0)
		if p > 0 {
			egress = m.egress
		}
		for w := W; w >= 0; w-- {
			tick := start + p + w
			run := pr.run[tick*Z : tick*Z+Z]
			launch := pr.launch[tick*Z : tick*Z+Z]
			base := w * M
			ch := choice[p*rowLen+base : p*rowLen+base+M]

			// The value of launching each target now, egress aside.
			for k := range K {
				switch {
				case D == 0:
					tv[k] = pr.odPrice[k] + next[base+R+k]
				case w+D <= W:
					tv[k] = int64(D)*pr.odPrice[k] + cur[(w+D)*M+R+k]
				default:
					tv[k] = infinity
				}
			}
			for z := range Z {
				v := infinity
				switch {
				case D == 0 && run[z] < infinity:
					v = run[z] + next[base+R+K+z]
				case D > 0 && w+D <= W && launch[z] < infinity:
					v = launch[z] + cur[(w+D)*M+R+K+z]
				}
				tv[K+z] = v
			}
			// From each region, the best and second-best target, so that a
			// running mode can take the best other one.
			for r := range R {
				b := pick{infinity, infinity, -1, -1}
				for k, v := range tv {
					if v >= infinity {
						continue
					}
					if pr.region[k] != r {
						v += egress
					}
					if v < b.v1 {
						b.v2, b.t2, b.v1, b.t1 = b.v1, b.t1, v, k
					} else if v < b.v2 {
						b.v2, b.t2 = v, k
					}
				}
				best[r] = b
			}
			idleNext := func(r int) int64 {
				if w+1 <= W {
					return cur[base+M+r]
				}
				return infinity
			}

			// Idle, checkpoint in region r.
			for r := range R {
				vi, ci := idleNext(r), uint8(optIdle)
				if b := best[r]; b.v1 < vi {
					vi, ci = b.v1, uint8(optLaunch+b.t1)
				}
				cur[base+r], ch[r] = vi, ci
			}
			// Running on a target k: on-demand class, or spot zone.
			for k := range T {
				mode := R + k
				r := pr.region[k]
				var vs int64
				if k < K {
					vs = pr.odPrice[k] + next[base+mode]
				} else if run[k-K] < infinity {
					vs = run[k-K] + next[base+mode]
				} else {
					cur[base+mode], ch[mode] = cur[base+r], ch[r] // preempted
					continue
				}
				cs := uint8(optContinue)
				if v := idleNext(r); v < vs {
					vs, cs = v, optIdle
				}
				b := best[r]
				other, ot := b.v1, b.t1
				if ot == k {
					other, ot = b.v2, b.t2
				}
				if other < vs {
					vs, cs = other, uint8(optLaunch+ot)
				}
				cur[base+mode], ch[mode] = vs, cs
			}
		}
		cur, next = next, cur
	}
	// next now holds row p == 0.
	if next[0] >= infinity {
		// Unreachable when C + d <= R: on-demand from the start fits.
		return Outcome{}, fmt.Errorf("optimum: no feasible plan from tick %d", start)
	}
	return m.replay(pr, choice, t, start, timeline), nil
}

// replay follows the optimum's choices from the start and bills them.
func (m *Market) replay(pr *prepared, choice []uint8, t Ticks, start int, timeline bool) Outcome {
	C, D, W, Z := t.Work, t.Changeover, t.Deadline-t.Work, pr.zones
	R, K, M := pr.regions, len(pr.odPrice), pr.modes()
	var out Outcome
	if timeline {
		out.Timeline = make([]Slot, 0, t.Deadline)
	}
	var sum, moves int64
	mode := 0 // idle; the region does not matter before any progress
	last := -1
	// region of a mode: idle modes are their region.
	region := func(mode int) int {
		if mode < R {
			return mode
		}
		return pr.region[mode-R]
	}
	bill := func(mode, tick int, changeover bool) {
		c := bidding.ChooseIdle
		switch k := mode - R; {
		case k >= 0 && k < K:
			sum += pr.odPrice[k]
			out.OnDemand++
			c = bidding.OnDemandIn(pr.odZone[k])
		case k >= K:
			sum += m.price[k-K][tick]
			out.Spot++
			c = bidding.ChooseSpot(k - K)
		}
		if timeline {
			out.Timeline = append(out.Timeline, Slot{Choice: c, Changeover: changeover})
		}
	}
	p, w := 0, 0
	for p < C {
		tick := start + p + w
		if k := mode - R - K; k >= 0 && pr.run[tick*Z+k] >= infinity {
			mode = region(mode) // preempted
		}
		switch c := int(choice[(p*(W+1)+w)*M+mode]); {
		case c == optIdle:
			mode, w = region(mode), w+1
			bill(mode, tick, false)
		case c == optContinue:
			bill(mode, tick, false)
			p++
		default:
			target := R + c - optLaunch
			if p > 0 && m.egress > 0 && region(target) != region(mode) {
				moves++
			}
			if last >= 0 && target != last {
				out.Moves++
			}
			mode, last = target, target
			for i := range D {
				bill(mode, tick+i, true)
			}
			w += D
		}
	}
	out.Finish = C + w
	out.Cost = m.cost(sum + moves*m.egress)
	out.Egress = money.Micros(moves * m.egress / m.unitB)
	return out
}

func grow(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	return s[:n]
}

func growBytes(s []uint8, n int) []uint8 {
	if cap(s) < n {
		return make([]uint8, n)
	}
	return s[:n]
}
