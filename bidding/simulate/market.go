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
//     every cost is per node.
//
// Every policy is run from many start ticks; Optimal is the exact
// omniscient optimum of the same model, the bound no online policy beats.
// Money is summed in exact integers and rounded once per run.
package simulate

import (
	"errors"
	"fmt"
	"time"

	"github.com/spotwise/spotwise/bidding/trace"
	"github.com/spotwise/spotwise/money"
)

// Prices are what capacity costs per node-hour.
type Prices struct {
	OnDemand money.Micros
	// Spot is the spot price in every zone and tick, unless UseTrace is
	// set, in which case each trace's own prices are used.
	Spot     money.Micros
	UseTrace bool
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

	onDemand int64
	avail    [][]bool  // [zone][tick]
	price    [][]int64 // [zone][tick], micro-dollars per node-hour
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
	m := &Market{Step: traces[0].Step, Len: traces[0].Len(), Nodes: nodes, TracePrices: p.UseTrace, onDemand: int64(p.OnDemand)}
	for _, t := range traces {
		if t.Step != m.Step {
			return nil, fmt.Errorf("trace %s: step %v differs from %s's %v; zones must share one clock", t.Source, t.Step, traces[0].Source, m.Step)
		}
		if p.UseTrace && t.Prices == nil {
			return nil, fmt.Errorf("trace %s carries no prices (--use-trace-prices)", t.Source)
		}
		m.Len = min(m.Len, t.Len())
	}
	for _, t := range traces {
		av := make([]bool, m.Len)
		pr := make([]int64, m.Len)
		for i := range m.Len {
			av[i] = t.Avail[i] >= nodes
			pr[i] = int64(p.Spot)
			if p.UseTrace {
				pr[i] = int64(t.Prices[i])
			}
		}
		m.Zones = append(m.Zones, t.Name)
		m.avail = append(m.avail, av)
		m.price = append(m.price, pr)
	}
	return m, nil
}

// Available reports whether zone z has spot capacity for the job at tick
// i; there is none past the end of the traces.
func (m *Market) Available(z, i int) bool { return i >= 0 && i < m.Len && m.avail[z][i] }

// SpotPrice is zone z's spot price per node-hour at tick i.
func (m *Market) SpotPrice(z, i int) money.Micros {
	if i < 0 || i >= m.Len {
		return 0
	}
	return money.Micros(m.price[z][i])
}

// OnDemandPrice is the on-demand price per node-hour.
func (m *Market) OnDemandPrice() money.Micros { return money.Micros(m.onDemand) }

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

// cost turns a sum of per-node hourly prices, one per billed tick, into
// money for the job's nodes: rounded once.
func (m *Market) cost(priceTicks int64) money.Micros {
	return money.Micros(priceTicks).MulInt(m.Nodes).ForDuration(m.Step)
}
