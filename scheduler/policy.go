package scheduler

import (
	"fmt"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
)

// ZoneKey names the spot capacity of one GPU type in one zone: what the
// deadline policy watches come and go.
type ZoneKey struct{ Provider, Zone, GPU string }

// Purchase bits for cheapest's mask.
const (
	maskSpot     uint8 = 1
	maskOnDemand uint8 = 2 | 4 // on-demand and reserved
	maskAny      uint8 = 0xff
)

// choose picks the offer for a job. Most jobs take the cheapest expected
// cost to finish. A job with a deadline and purchase policy auto asks the
// deadline policy instead, as `spotwise simulate` does tick by tick: spot
// (in which zone), on-demand, or wait for spot while the deadline allows;
// wait, if not nil, is why it waits. A job of the policy's running on spot
// asks it too, every cycle: stay, another zone, or on-demand (choose
// returns the offer it runs on to stay, nil when that offer is gone).
func (co *compiledOffers) choose(cj *compiledJob, s Snapshot) (*compiledOffer, bidding.Estimate, []job.PendingReason) {
	if s.Policy == nil || cj.deadline.IsZero() || cj.purchase != job.PurchaseAuto {
		best, est := co.cheapest(cj, s.Now, maskAny)
		return best, est, nil
	}
	if cj.q.runningOffer() != "" {
		return co.chooseRunning(cj, s)
	}
	spot, spotEst := co.cheapest(cj, s.Now, maskSpot)
	if res, resEst := co.reservedFirst(cj, s.Now, spot, spotEst); res != nil {
		return res, resEst, nil // paid for already
	}
	od, odEst := co.cheapest(cj, s.Now, maskOnDemand)
	if od == nil {
		return spot, spotEst, nil // no fallback to weigh
	}
	// The spot market the job would use: where its best spot offer is, or,
	// with no spot capacity anywhere now, the cheapest spot offer it could
	// use when capacity comes back.
	market := spot
	if market == nil {
		if market = co.cheapestStatic(cj, maskSpot); market == nil {
			return od, odEst, nil // the job has no spot market at all
		}
	}
	st, zones := co.policyState(cj, s, market, od)
	c := s.Policy.Decide(st)
	switch c.Kind {
	case bidding.RunOnDemand:
		return od, odEst, nil
	case bidding.RunSpot:
		if c.Zone >= 0 && c.Zone < len(zones) && zones[c.Zone] != nil {
			o := zones[c.Zone]
			est := cj.estimate(s.Now, o, cj.runtime[o.gpu])
			if bidding.MeetsDeadline(est, cj.deadline) && cj.affordable(est) {
				return o, est, nil
			}
		}
		if spot != nil {
			return spot, spotEst, nil
		}
		return od, odEst, nil
	}
	slack := st.TimeLeft - st.WorkLeft
	return nil, bidding.Estimate{}, []job.PendingReason{{Code: "waiting-for-spot",
		Message: fmt.Sprintf("waiting for spot capacity: the deadline leaves %s of slack, and on-demand (%s/h) is kept for when it runs short", human(slack), od.price.Human())}}
}

// chooseRunning asks the deadline policy about a job running on spot, in
// the market of the GPU type it runs on: its zone is the policy's current
// choice. The policy weighs staying against every other zone and
// on-demand, the move's changeover and egress included; whatever it does
// not clearly choose keeps the job where it is.
func (co *compiledOffers) chooseRunning(cj *compiledJob, s Snapshot) (*compiledOffer, bidding.Estimate, []job.PendingReason) {
	cur := co.byID[cj.q.runningOffer()]
	if cur == nil || cur.purchase&maskSpot == 0 {
		return nil, bidding.Estimate{}, nil // its offer is not in the book: nothing to weigh it against
	}
	stay := cj.stayEstimate(s.Now, cur, cj.runtime[cur.gpu])
	od, odEst := co.cheapest(cj, s.Now, maskOnDemand)
	if od == nil {
		return cur, stay, nil
	}
	st, zones := co.policyState(cj, s, cur, od)
	c := s.Policy.Decide(st)
	switch c.Kind {
	case bidding.RunOnDemand:
		return od, odEst, nil
	case bidding.RunSpot:
		if c.Zone >= 0 && c.Zone < len(zones) && zones[c.Zone] != nil && zones[c.Zone] != cur {
			o := zones[c.Zone]
			est := cj.estimate(s.Now, o, cj.runtime[o.gpu])
			if bidding.MeetsDeadline(est, cj.deadline) && cj.affordable(est) {
				return o, est, nil
			}
		}
	}
	return cur, stay, nil
}

// cheapestStatic is the cheapest offer of a purchase kind that passes the
// job's static filters, capacity or not.
func (co *compiledOffers) cheapestStatic(cj *compiledJob, mask uint8) *compiledOffer {
	var best *compiledOffer
	for gi := range co.groups {
		if !cj.gpus[gi] {
			continue
		}
		for _, o := range co.groups[gi].offers {
			if o.purchase&mask != 0 && cj.staticReason(o) == reasonNone {
				if best == nil || o.price < best.price {
					best = o
				}
				break // cheapest first within a group
			}
		}
	}
	return best
}

// policyState describes the job to the policy: its deadline and work on
// the GPU type of market (its best spot offer, or the one it runs on), and
// each zone where that GPU is sold on spot, with its region, its spot and
// on-demand prices, whether it has capacity now and what has been seen of
// it. zones[i] is the cheapest usable offer of the policy's zone i (nil
// where there is none now); for a job running on spot, its zone's is the
// offer it runs on, and that zone is the policy's current choice.
func (co *compiledOffers) policyState(cj *compiledJob, s Snapshot, market, od *compiledOffer) (bidding.PolicyState, []*compiledOffer) {
	gi := market.gpu
	runtime := cj.runtime[gi]
	whole := runtime
	if p := cj.q.Progress; p > 0 && p < 1 {
		whole = time.Duration(float64(runtime) / (1 - p))
	}
	step := s.PolicyStep
	if step <= 0 {
		step = time.Minute
	}
	st := bidding.PolicyState{
		Elapsed: s.Now.Sub(cj.q.SubmittedAt), TimeLeft: cj.deadline.Sub(s.Now),
		Work: whole, WorkLeft: runtime, Changeover: market.startup, Step: step,
		Current: bidding.ChooseIdle, OnDemandPrice: od.price, Nodes: cj.nodes, Checkpoint: cj.ckptRegion,
	}
	if r := cj.q.Running; r != nil && !r.OnDemandSince.IsZero() {
		since := r.OnDemandSince
		st.Current = bidding.ChooseOnDemand
		st.ChangeoverLeft = max(0, od.startup-s.Now.Sub(since))
	}
	var running *compiledOffer
	if off := cj.q.runningOffer(); off != "" && co.byID != nil {
		if o := co.byID[off]; o != nil && o.gpu == gi && o.purchase&maskSpot != 0 {
			running = o
		}
	}
	index := map[string]int{}
	var zones []*compiledOffer
	zoneOf := func(o *compiledOffer) int {
		z := o.offer.Provider + "/" + o.offer.Zone
		i, ok := index[z]
		if !ok {
			i = len(st.Zones)
			index[z] = i
			sz := bidding.SpotZone{Name: z, Price: o.price, Region: o.offer.Provider + "/" + o.offer.Region, OnDemandPrice: o.offer.OnDemandPrice}
			if stats := s.Zones[ZoneKey{o.offer.Provider, o.offer.Zone, o.offer.GPU}]; stats != nil {
				sz.Seen = *stats
			}
			st.Zones = append(st.Zones, sz)
			zones = append(zones, nil)
		}
		if cj.carry != nil {
			// What a move between regions pays: the dearest carry of
			// the checkpoint to any of these zones, with the input
			// data's egress there (a new attempt reads it again).
			c := cj.carry[o.region]
			st.MoveCost = max(st.MoveCost, c.moveCost+c.data)
		}
		return i
	}
	for _, o := range co.groups[gi].offers {
		if o.purchase&maskSpot == 0 || cj.staticReason(o) != reasonNone {
			continue
		}
		i := zoneOf(o)
		// Offers come cheapest first: the first usable one is the zone's.
		if zones[i] == nil && o != running && cj.dynamicReason(o) == reasonNone {
			zones[i] = o
			st.Zones[i].Available = true
			st.Zones[i].Price = o.price
		}
	}
	if running != nil {
		// Where it runs, there is capacity for it, at its price.
		i := zoneOf(running)
		zones[i] = running
		st.Zones[i].Available = true
		st.Zones[i].Price = running.price
		st.Current = bidding.ChooseSpot(i)
		st.ChangeoverLeft = max(0, running.startup-s.Now.Sub(cj.q.Running.SpotSince))
	}
	if u := s.Zones[ZoneKey{Zone: "*", GPU: market.offer.GPU}]; u != nil {
		st.Union = *u
	}
	return st, zones
}

// zoneWatch keeps what the scheduler has seen of spot capacity per zone
// and GPU type, for the deadline policy. It is only touched by the cycle.
type zoneWatch struct {
	stats map[ZoneKey]*bidding.ZoneStats
	last  time.Time
	// up is which zones had capacity in the book of generation upGen;
	// of is each zone's stats. Both by index into upBase.zones.
	up     []bool
	of     []*bidding.ZoneStats
	upBase *offerBase
	upGen  uint64
}

// observe records, for the time since the last look, which zones had
// spot capacity for each GPU type (an offer with capacity, not marked
// unavailable), and whether any zone had (under ZoneKey{Zone: "*"}).
// A cycle looks, hundreds of times a second on a busy server: the zones
// and their stats are found once for each shape of the book.
func (w *zoneWatch) observe(bv bookView, now time.Time) {
	if w.stats == nil {
		w.stats = map[ZoneKey]*bidding.ZoneStats{}
	}
	dt := now.Sub(w.last)
	if w.last.IsZero() || dt <= 0 {
		w.last = now
		return
	}
	w.last = now
	if bv.base == nil {
		return
	}
	if w.upBase != bv.base {
		w.of = w.of[:0]
		for _, k := range bv.base.zones {
			zs := w.stats[k]
			if zs == nil {
				zs = &bidding.ZoneStats{}
				w.stats[k] = zs
			}
			w.of = append(w.of, zs)
		}
	}
	if w.upBase != bv.base || w.upGen != bv.gen {
		w.up, w.upBase, w.upGen = bv.base.zonesUp(w.up, bv.offers, bv.unavailable, bv.taken, now), bv.base, bv.gen
	}
	for z, zs := range w.of {
		zs.Observe(w.up[z], dt)
	}
}
