package simulate

import (
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/money"
)

// Outcome is one run of a job from one start tick.
type Outcome struct {
	// Cost is what the run paid, for all nodes.
	Cost money.Micros
	// OnDemand and Spot are the billed ticks on each, changeovers included.
	OnDemand, Spot int
	// Finish is the tick (from the start) the work was done.
	Finish int
	// Missed reports a finish after the deadline.
	Missed bool
	// Moves counts the launches somewhere else (another zone or option)
	// than where the job last ran; Egress is what the moves between
	// regions paid (included in Cost).
	Moves  int
	Egress money.Micros
	// Timeline is what the job ran on at each tick, when asked for.
	Timeline []Slot
}

// Slot is what a job ran on during one tick.
type Slot struct {
	Choice bidding.Choice
	// Changeover marks a tick billed without progress.
	Changeover bool
}

// Past is what the policies have observed of the zones before a run
// starts: per zone, and of the union (capacity in any zone).
type Past struct {
	Zones []bidding.ZoneStats
	Union bidding.ZoneStats
}

// Observe is what watching the zones from tick from up to (not including)
// tick to shows.
func (m *Market) Observe(from, to int) Past {
	p := Past{Zones: make([]bidding.ZoneStats, len(m.Zones))}
	for i := max(0, from); i < min(to, m.Len); i++ {
		anyZone := false
		for z := range p.Zones {
			av := m.avail[z][i]
			p.Zones[z].Observe(av, m.Step)
			anyZone = anyZone || av
		}
		p.Union.Observe(anyZone, m.Step)
	}
	return p
}

// Run replays the job from tick start through policy p. Each tick the
// policy sees the zones' capacity now and the statistics of what was
// observed before (past, then the run so far), never the future. Past the
// deadline the job is put on on-demand, so that every run ends and a miss
// still has a cost.
func (m *Market) Run(p bidding.Policy, t Ticks, start int, past Past, timeline bool) Outcome {
	step := m.Step
	dur := func(ticks int) time.Duration { return time.Duration(ticks) * step }
	zones := make([]bidding.SpotZone, len(m.Zones))
	union := past.Union
	for z := range zones {
		zones[z].Name = m.Zones[z]
		zones[z].Region = m.Region(z)
		zones[z].OnDemandPrice = m.OnDemandPriceIn(z)
		if z < len(past.Zones) {
			zones[z].Seen = past.Zones[z]
		}
	}
	observe := func(i int) {
		anyZone := false
		for z := range zones {
			av := m.Available(z, i)
			zones[z].Available = av
			zones[z].Price = m.SpotPrice(z, i)
			zones[z].Seen.Observe(av, step)
			anyZone = anyZone || av
		}
		union.Observe(anyZone, step)
	}
	var (
		out      Outcome
		cur      = bidding.ChooseIdle
		last     = bidding.ChooseIdle // where the job last ran
		co, done int                  // changeover ticks left on cur, progress ticks
		units    int64                // billed, in the market's units
		moves    int64                // egress paid, counted
	)
	if timeline {
		out.Timeline = make([]Slot, 0, t.Deadline)
	}
	for tick := 0; done < t.Work; tick++ {
		now := start + tick
		observe(now)
		if cur.Kind == bidding.RunSpot && !zones[cur.Zone].Available {
			cur, co = bidding.ChooseIdle, 0 // preempted: the tick is not billed
		}
		st := bidding.PolicyState{
			Elapsed:        dur(tick),
			TimeLeft:       dur(t.Deadline - tick),
			Work:           dur(t.Work),
			WorkLeft:       dur(t.Work - done),
			Changeover:     dur(t.Changeover),
			Step:           step,
			Current:        cur,
			ChangeoverLeft: dur(co),
			OnDemandPrice:  m.OnDemandPrice(),
			Zones:          zones,
			Union:          union,
			Nodes:          m.Nodes,
			MoveCost:       m.Egress(),
		}
		if last.Kind != bidding.RunIdle {
			st.Checkpoint = zones[last.Zone].Region
		}
		next := p.Decide(st)
		switch {
		case tick >= t.Deadline:
			next = m.resolveOnDemand(st, bidding.ChooseOnDemand)
		case next.Kind == bidding.RunSpot && (next.Zone < 0 || next.Zone >= len(zones) || !zones[next.Zone].Available):
			next = bidding.ChooseIdle // a launch into a zone without capacity fails
		case next.Kind == bidding.RunOnDemand:
			next = m.resolveOnDemand(st, next)
		case next.Kind != bidding.RunSpot:
			next = bidding.ChooseIdle
		}
		if next != cur {
			cur, co = next, t.Changeover
			if cur.Kind == bidding.RunIdle {
				co = 0
			} else {
				if last.Kind != bidding.RunIdle && cur != last {
					out.Moves++
					if done > 0 && m.region[cur.Zone] != m.region[last.Zone] {
						moves++
					}
				}
				last = cur
			}
		}
		slot := Slot{Choice: cur, Changeover: co > 0}
		switch cur.Kind {
		case bidding.RunOnDemand:
			units += m.onDemand[cur.Zone]
			out.OnDemand++
		case bidding.RunSpot:
			units += m.price[cur.Zone][now]
			out.Spot++
		}
		if cur.Kind != bidding.RunIdle {
			if co > 0 {
				co--
			} else {
				done++
			}
		}
		if timeline {
			out.Timeline = append(out.Timeline, slot)
		}
		out.Finish = tick + 1
	}
	out.Missed = out.Finish > t.Deadline
	out.Cost = m.cost(units + moves*m.egress)
	out.Egress = money.Micros(moves * m.egress / m.unitB)
	return out
}

// resolveOnDemand resolves an on-demand choice to a zone: the one it names, or
// for AnyZone (or a zone out of range) the one the job runs on-demand in,
// or else the cheapest to finish in.
func (m *Market) resolveOnDemand(st bidding.PolicyState, c bidding.Choice) bidding.Choice {
	if c.Zone >= 0 && c.Zone < len(m.Zones) {
		return bidding.OnDemandIn(c.Zone)
	}
	if st.Current.Kind == bidding.RunOnDemand {
		return st.Current
	}
	if c = st.CheapestOnDemand(); c.Zone >= 0 {
		return c
	}
	return bidding.OnDemandIn(0)
}
