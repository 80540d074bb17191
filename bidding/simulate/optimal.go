package simulate

import (
	"fmt"

	"github.com/spotwise/spotwise/bidding"
)

// PolicyOptimal is the name of the omniscient optimum.
const PolicyOptimal = "optimal"

// The optimum is a backwards dynamic program over the known future. A
// state is (progress p, wasted ticks w, mode) at tick p+w from the start,
// where w counts the ticks without progress (idle or changing over) and
// never exceeds the slack R-C; the mode is idle, on-demand, or running on
// spot in zone z (changeover done). From a state the job may
//   - idle one tick:                 (p, w+1, idle), free;
//   - keep running where it is:      (p+1, w, mode), one tick's price;
//   - launch on-demand or zone z:    (p, w+d, that mode), d ticks' prices;
//     a spot launch needs capacity through the changeover (a launch
//     preempted before it runs is never better than waiting instead);
//
// and a spot mode whose zone has no capacity at the tick is preempted: it
// is worth what idle is worth. Costs are sums of per-node hourly prices in
// micro-dollars, exact integers. Rows over w are kept for p and p+1 only;
// the choice of every state is kept (a byte) to replay the best run.

// infinity marks an infeasible state; sums stay far from overflowing.
const infinity = int64(1) << 62

// Choice codes of the optimum's table.
const (
	optIdle     = 0
	optContinue = 1
	optOnDemand = 2
	optSpot     = 3 // + zone
)

// maxOptimalStates bounds the choice table (one byte per state).
const maxOptimalStates = 1 << 30

// optimalScratch is one worker's memory for the optimum.
type optimalScratch struct {
	cur, next []int64 // [w*modes + mode]
	choice    []uint8 // [(p*(W+1)+w)*modes + mode]
}

// prepared holds per-job tables shared by every start: per tick, the
// per-node price of running a tick on each zone (infinity without
// capacity) and of a d-tick launch into it (infinity unless the zone has
// capacity for all d ticks).
type prepared struct {
	zones  int
	run    []int64 // [tick*zones + z]
	launch []int64 // [tick*zones + z]
}

func (m *Market) prepare(t Ticks) *prepared {
	Z := len(m.Zones)
	p := &prepared{zones: Z, run: make([]int64, m.Len*Z), launch: make([]int64, m.Len*Z)}
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
	return p
}

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
	M := Z + 2 // idle, on-demand, spot zones
	if n := C * (W + 1) * M; n > maxOptimalStates {
		return Outcome{}, fmt.Errorf("the exact optimum needs %d states (work %d ticks, slack %d, %d zones): too many; use a coarser trace or a shorter job", n, C, W, Z)
	}
	rowLen := (W + 1) * M
	sc.cur = grow(sc.cur, rowLen)
	sc.next = grow(sc.next, rowLen)
	sc.choice = growBytes(sc.choice, C*rowLen)
	cur, next, choice := sc.cur, sc.next, sc.choice
	clear(next) // p == C: done, nothing more to pay
	od := m.onDemand
	launchOD := int64(D) * od
	for p := C - 1; p >= 0; p-- {
		for w := W; w >= 0; w-- {
			tick := start + p + w
			run := pr.run[tick*Z : tick*Z+Z]
			launch := pr.launch[tick*Z : tick*Z+Z]
			base := w * M
			ch := choice[p*rowLen+base : p*rowLen+base+M]

			idleNext := infinity
			if w+1 <= W {
				idleNext = cur[base+M]
			}
			// Launching: best and second-best zone, so that a zone's own
			// state can take the best other one.
			vOD := infinity
			best, second := infinity, infinity
			bz, sz := -1, -1
			if D == 0 {
				vOD = od + next[base+1]
				for z := range Z {
					if run[z] < infinity {
						v := run[z] + next[base+2+z]
						if v < best {
							second, sz, best, bz = best, bz, v, z
						} else if v < second {
							second, sz = v, z
						}
					}
				}
			} else if w+D <= W {
				far := (w + D) * M
				vOD = launchOD + cur[far+1]
				for z := range Z {
					if launch[z] < infinity {
						v := launch[z] + cur[far+2+z]
						if v < best {
							second, sz, best, bz = best, bz, v, z
						} else if v < second {
							second, sz = v, z
						}
					}
				}
			}

			// Idle.
			vi, ci := idleNext, uint8(optIdle)
			if vOD < vi {
				vi, ci = vOD, optOnDemand
			}
			if best < vi {
				vi, ci = best, uint8(optSpot+bz)
			}
			cur[base], ch[0] = vi, ci

			// On-demand, running.
			vo, co := od+next[base+1], uint8(optContinue)
			if idleNext < vo {
				vo, co = idleNext, optIdle
			}
			if best < vo {
				vo, co = best, uint8(optSpot+bz)
			}
			cur[base+1], ch[1] = vo, co

			// Spot in zone z, running.
			for z := range Z {
				if run[z] >= infinity {
					cur[base+2+z], ch[2+z] = vi, ci // preempted
					continue
				}
				vs, cs := run[z]+next[base+2+z], uint8(optContinue)
				if idleNext < vs {
					vs, cs = idleNext, optIdle
				}
				if vOD < vs {
					vs, cs = vOD, optOnDemand
				}
				other, oz := best, bz
				if bz == z {
					other, oz = second, sz
				}
				if other < vs {
					vs, cs = other, uint8(optSpot+oz)
				}
				cur[base+2+z], ch[2+z] = vs, cs
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
	M := Z + 2
	var out Outcome
	if timeline {
		out.Timeline = make([]Slot, 0, t.Deadline)
	}
	var sum int64
	mode := 0 // idle
	bill := func(mode, tick int, changeover bool) {
		var c bidding.Choice
		switch {
		case mode == 1:
			sum += m.onDemand
			out.OnDemand++
			c = bidding.ChooseOnDemand
		case mode >= 2:
			sum += m.price[mode-2][tick]
			out.Spot++
			c = bidding.ChooseSpot(mode - 2)
		}
		if timeline {
			out.Timeline = append(out.Timeline, Slot{Choice: c, Changeover: changeover})
		}
	}
	p, w := 0, 0
	for p < C {
		tick := start + p + w
		if mode >= 2 && pr.run[tick*Z+mode-2] >= infinity {
			mode = 0
		}
		switch c := int(choice[(p*(W+1)+w)*M+mode]); {
		case c == optIdle:
			bill(0, tick, false)
			mode, w = 0, w+1
		case c == optContinue:
			bill(mode, tick, false)
			p++
		default:
			mode = 1
			if c >= optSpot {
				mode = 2 + c - optSpot
			}
			for i := range D {
				bill(mode, tick+i, true)
			}
			w += D
		}
	}
	out.Finish = C + w
	out.Cost = m.cost(sum)
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
