// Package simulate replays spot-availability traces through the bidding
// policies with a simulated clock: `spotwise simulate`.
//
// The model is the one of "Can't Be Late" (NSDI '24), stated in ticks:
//   - one tick is the traces' step; the job's work C and the changeover d
//     are rounded up to whole ticks, its deadline R down;
//   - each tick the job runs on on-demand, on spot in one zone, or on
//     nothing; every entry into spot or on-demand from anything else
//     (idle, the other option, another zone) bills d ticks without
//     progress, after which every tick makes one tick of progress;
//   - a spot tick marked unavailable preempts the job at once: that tick
//     is not billed, the progress so far is kept, and the policy may
//     relaunch on the same tick;
//   - with N nodes a tick is available when at least N instances are, and
//     every cost is per node;
//   - on-demand runs in any zone at that zone's on-demand price (its
//     trace's, or Prices.OnDemand);
//   - a zone's region is its trace's (trace.RegionOf); a launch in
//     another region than the one holding the job's checkpoint (where it
//     last ran, once it has made progress) pays Prices.Egress, at the
//     launch, for the whole job.
//
// Every policy is run from many start ticks; Optimal is the exact
// omniscient optimum of the same model, the bound no online policy beats.
// Money is summed in exact integers and rounded once per run.
package simulate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spotwise/spotwise/bidding/trace"
	"github.com/spotwise/spotwise/money"
)

// Prices are what capacity costs per node-hour, and what a move between
// regions costs.
type Prices struct {
	// OnDemand is the on-demand price of the zones whose trace states
	// none.
	OnDemand money.Micros
	// Spot is the spot price in every zone and tick, unless UseTrace is
	// set, in which case each trace's own prices are used.
	Spot     money.Micros
	UseTrace bool
	// Egress is what carrying the job's checkpoint to another region
	// costs (checkpoint size x transfer price), for the whole job.
	Egress money.Micros
}

// Market is a set of zones' traces on one clock, as the policies and the
// optimum see them.
type Market struct {
	// Step is the length of a tick.
	Step time.Duration
	// Len is the number of ticks: the shortest trace's.
	Len int
	// Zones names the zones, in trace order.
	Zones []string
	// Nodes is how many instances the job needs at once.
	Nodes int
	// TracePrices reports spot prices taken from the traces.
	TracePrices bool

	// Regions names the regions; region[z] is zone z's.
	Regions []string
	region  []int

	// Money inside the market is in exact integer units: a price per
	// node-hour billed for one tick is price*unitA, an egress is
	// egress*unitB, and unitB units are one micro-dollar, so that sums
	// of both are exact and rounded once (cost).
	unitA, unitB int64
	defaultOD    money.Micros
	onDemand     []int64   // [zone], scaled
	egress       int64     // scaled
	avail        [][]bool  // [zone][tick]
	price        [][]int64 // [zone][tick], scaled
}

// NewMarket puts traces on one clock for a job of nodes instances. All
// traces must have the same step; the market is as long as the shortest.
func NewMarket(traces []trace.Trace, nodes int, p Prices) (*Market, error) {
	if len(traces) == 0 {
		return nil, errors.New("no traces")
	}
	if nodes < 1 {
		return nil, fmt.Errorf("nodes %d: at least 1", nodes)
	}
	if p.OnDemand <= 0 {
		return nil, errors.New("the on-demand price must be positive")
	}
	if !p.UseTrace && p.Spot < 0 {
		return nil, errors.New("the spot price must not be negative")
	}
	if len(traces) > 250 {
		return nil, fmt.Errorf("%d traces: at most 250 zones", len(traces))
	}
	if p.Egress < 0 {
		return nil, errors.New("the egress price must not be negative")
	}
	m := &Market{Step: traces[0].Step, Len: traces[0].Len(), Nodes: nodes, TracePrices: p.UseTrace, defaultOD: p.OnDemand}
	for _, t := range traces {
		if t.Step != m.Step {
			return nil, fmt.Errorf("trace %s: step %v differs from %s's %v; zones must share one clock", t.Source, t.Step, traces[0].Source, m.Step)
		}
		if p.UseTrace && t.Prices == nil {
			return nil, fmt.Errorf("trace %s carries no prices (--use-trace-prices)", t.Source)
		}
		m.Len = min(m.Len, t.Len())
	}
	// A tick of a node-hour price is price*nodes*step/hour micro-dollars:
	// unitA/unitB, reduced.
	g := gcd(int64(m.Step), int64(time.Hour))
	m.unitA, m.unitB = int64(nodes)*(int64(m.Step)/g), int64(time.Hour)/g
	var most money.Micros
	for _, t := range traces {
		most = max(most, t.OnDemand, p.OnDemand, p.Spot)
		if p.UseTrace {
			most = max(most, slices.Max(t.Prices[:m.Len]))
		}
	}
	// Every sum of a run stays below 2^61 with room for the DP's sums.
	if float64(most)*float64(m.unitA)*float64(m.Len) > 1<<60 || float64(p.Egress)*float64(m.unitB)*float64(m.Len) > 1<<60 {
		return nil, fmt.Errorf("prices up to %s over %d ticks of %v do not fit exact sums; use a coarser step", most, m.Len, m.Step)
	}
	m.egress = int64(p.Egress) * m.unitB
	regions := map[string]int{}
	for _, t := range traces {
		av := make([]bool, m.Len)
		pr := make([]int64, m.Len)
		for i := range m.Len {
			av[i] = t.Avail[i] >= nodes
			pr[i] = int64(p.Spot) * m.unitA
			if p.UseTrace {
				pr[i] = int64(t.Prices[i]) * m.unitA
			}
		}
		od := p.OnDemand
		if t.OnDemand > 0 {
			od = t.OnDemand
		}
		r, ok := regions[t.RegionOf()]
		if !ok {
			r = len(m.Regions)
			regions[t.RegionOf()] = r
			m.Regions = append(m.Regions, t.RegionOf())
		}
		m.Zones = append(m.Zones, t.Name)
		m.region = append(m.region, r)
		m.onDemand = append(m.onDemand, int64(od)*m.unitA)
		m.avail = append(m.avail, av)
		m.price = append(m.price, pr)
	}
	return m, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Available reports whether zone z has spot capacity for the job at tick
// i; there is none past the end of the traces.
func (m *Market) Available(z, i int) bool { return i >= 0 && i < m.Len && m.avail[z][i] }

// SpotPrice is zone z's spot price per node-hour at tick i.
func (m *Market) SpotPrice(z, i int) money.Micros {
	if i < 0 || i >= m.Len {
		return 0
	}
	return money.Micros(m.price[z][i] / m.unitA)
}

// OnDemandPrice is the on-demand price per node-hour of the zones whose
// traces state none.
func (m *Market) OnDemandPrice() money.Micros { return m.defaultOD }

// OnDemandPriceIn is zone z's on-demand price per node-hour.
func (m *Market) OnDemandPriceIn(z int) money.Micros { return money.Micros(m.onDemand[z] / m.unitA) }

// Region is zone z's region.
func (m *Market) Region(z int) string { return m.Regions[m.region[z]] }

// Egress is what a move of the checkpoint between regions costs.
func (m *Market) Egress() money.Micros { return money.Micros(m.egress / m.unitB) }

// Availability is the share of ticks on which zone z has capacity.
func (m *Market) Availability(z int) float64 {
	n := 0
	for _, a := range m.avail[z] {
		if a {
			n++
		}
	}
	return float64(n) / float64(max(1, m.Len))
}

// Job is what the simulated job needs.
type Job struct {
	// Work is the compute time (C), Deadline the window from the start
	// (R), Changeover the billed time without progress on every entry
	// into spot or on-demand (d).
	Work, Deadline, Changeover time.Duration
}

// Ticks is a job in whole ticks.
type Ticks struct {
	Work, Deadline, Changeover int
}

// Feasible reports whether on-demand alone finishes in time: C + d <= R.
func (t Ticks) Feasible() bool { return t.Work+t.Changeover <= t.Deadline }

// Ticks rounds the job to the market's ticks: work and changeover up, the
// deadline down.
func (m *Market) Ticks(j Job) (Ticks, error) {
	if j.Work <= 0 {
		return Ticks{}, errors.New("the job's work must be positive")
	}
	if j.Deadline <= 0 {
		return Ticks{}, errors.New("the deadline must be positive")
	}
	if j.Changeover < 0 {
		return Ticks{}, errors.New("the changeover must not be negative")
	}
	up := func(d time.Duration) int { return int((d + m.Step - 1) / m.Step) }
	t := Ticks{Work: up(j.Work), Deadline: int(j.Deadline / m.Step), Changeover: up(j.Changeover)}
	if t.Deadline > m.Len {
		return t, fmt.Errorf("the deadline (%v, %d ticks) is longer than the traces (%d ticks of %v)", j.Deadline, t.Deadline, m.Len, m.Step)
	}
	return t, nil
}

// cost turns a sum in the market's units (billed ticks and egress) into
// money for the job's nodes: rounded once, half away from zero.
func (m *Market) cost(units int64) money.Micros {
	return money.Micros(units).Scale(1, m.unitB)
}
