package scheduler

import (
	"math"
	"time"
	"unique"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Snapshot is everything one scheduling cycle decides over. Decide does not
// modify it.
type Snapshot struct {
	Now time.Time
	// Jobs are the queued jobs to place, in queue order.
	Jobs []*QueuedJob
	// Offers is the current offer book.
	Offers []providers.Offer
	// Unavailable marks offers whose launches failed for lack of capacity,
	// until the given time.
	Unavailable map[string]time.Time
	Throughput  bidding.ThroughputTable
	// Geography maps a provider region to its geography ("eu", "us").
	Geography func(provider, region string) string
	// Rates are the offers' interruption rates per instance-hour by offer
	// ID; an offer without one gets the provider's prior.
	Rates map[string]float64
	// Policy, when set, decides between spot, on-demand and waiting for
	// jobs with a deadline and purchase policy auto (the same code
	// `spotwise simulate` measures); without it, the cheapest expected
	// cost to finish wins.
	Policy bidding.Policy
	// Zones is what has been observed of spot capacity, by zone and GPU
	// type (see ZoneKey); PolicyStep how often the policy is asked again.
	Zones      map[ZoneKey]*bidding.ZoneStats
	PolicyStep time.Duration
	// Teams are the teams with quotas or budgets, by name, as the cycle
	// starts; a job of any other team is placed without such limits.
	Teams map[string]TeamState

	// base, when set, is the compiled base of Offers, Rates and Geography (the scheduler's book keeps one between changes).
	base *offerBase
	// taken, when set, are counts launches took off Offers since their
	// feed (by offer ID): an offer's count is its Available less these.
	taken map[string]int
	// pending and placed, when set, are arrays the plan's Pending and
	// Placements may be laid in (the scheduler's cycle hands the ones of
	// the cycle before).
	pending []Pending
	placed  []Placement
	// unshared keeps the needs of the cycle from sharing the lists of
	// the offers their static filters pass (offerFilter): tests check
	// that the plans are the same without.
	unshared bool
}

// offerBase returns the snapshot's compiled base, compiling it if it has
// none.
func (s Snapshot) offerBase() *offerBase {
	if s.base != nil && len(s.base.per) == len(s.Offers) {
		return s.base
	}
	return compileBase(indexOffers(s.Offers), s.Rates, s.Geography)
}

// Placement is one decision: put a job on an offer.
type Placement struct {
	JobID    string
	Offer    providers.Offer
	Nodes    int
	Estimate bidding.Estimate
	// MaxPrice is the spot max price to launch with.
	MaxPrice money.Micros
	// Baseline is, for a job's first placement, what its whole work
	// would cost on the cheapest on-demand offer that meets its needs
	// (see onDemandBaseline); zero otherwise.
	Baseline money.Micros
	// Transfer is what carrying the job's checkpoint to the offer's
	// region costs (zero in the region it was written in).
	Transfer money.Micros
	// DataTransfer is what reading the job's input data into the offer's
	// region costs the attempt (zero in the data's region, or for a job
	// that declares no data).
	DataTransfer money.Micros

	q *QueuedJob // the job decided on
}

// Pending is a job the cycle could not place, with the reasons.
type Pending struct {
	JobID   string
	Reasons []job.PendingReason
	// Hopeless is set when no offer the job may use would meet its
	// deadline even with capacity: waiting cannot help.
	Hopeless bool

	q *QueuedJob
	// nowhere is set when no offer passes the job's static filters.
	nowhere bool
}

// Plan is a cycle's outcome. Carrying it out is the executor's business.
type Plan struct {
	Placements []Placement
	Pending    []Pending
}

// Decide runs one scheduling cycle: for each queued job in queue order it
// filters the offers (cheap checks first), scores the survivors by expected
// cost to finish, drops those that cannot meet the deadline, and selects
// the cheapest; capacity taken by one job is not offered to the next. Jobs
// left unplaced get the reasons every offer was rejected for.
func Decide(s Snapshot) Plan {
	plan, _ := decide(s, nil)
	return plan
}

// MoveOption is where a running job would go, and what staying would cost.
type MoveOption struct {
	Placement
	// Stay is the expected cost of finishing the work left where the job
	// runs now, priced with the same model as the move (no start-up, no
	// transfer: it is there already); zero when that offer is no longer in
	// the book.
	Stay money.Micros
}

// DecideMoves runs the placement pipeline for running jobs (each a
// QueuedJob with the progress it has kept) and prices staying on the
// offer each runs on (runningOn: job ID to offer ID) with the same model,
// so a move is weighed against the cost of finishing the same work where
// it is.
func DecideMoves(s Snapshot, runningOn map[string]string) []MoveOption {
	_, moves := decide(s, runningOn)
	return moves
}

func decide(s Snapshot, runningOn map[string]string) (Plan, []MoveOption) {
	co := compileOffers(s.Offers, s.offerBase(), s.Unavailable, s.taken, s.Now)
	defer co.release()
	rules := &ruleCache{}
	compiled := map[unique.Handle[Requirements]]*needs{}
	shared := newFilters()
	var byID map[string]*compiledOffer
	if runningOn != nil {
		byID = make(map[string]*compiledOffer, len(co.all))
		for i := range co.all {
			byID[co.all[i].id] = &co.all[i]
		}
		co.byID = byID
	}
	var plan Plan
	if runningOn == nil {
		// Sized once: a backlog that fits nowhere is all pending, and
		// growing the slice job by job would leave copies of it behind
		// (tens of MB with 100,000 queued) at every cycle.
		plan.Pending = s.pending[:0]
		if cap(plan.Pending) < len(s.Jobs) {
			plan.Pending = make([]Pending, 0, len(s.Jobs))
		}
		// Placements grow as they come (few jobs are placed at once as a
		// rule), in the array of the cycle before: a burst placing
		// thousands grew a new one of 344 bytes a job every cycle.
		plan.Placements = s.placed[:0]
	}
	var moves []MoveOption
	teams := teamBook(s.Teams)
	for _, q := range s.Jobs {
		nd, ok := compiled[q.Req]
		if !ok {
			r := q.Req.Value()
			nd = co.compileNeeds(&r, s.Throughput, rules)
			if !s.unshared {
				shared.set(nd)
			}
			compiled[q.Req] = nd
		}
		if nd.fitsNowhere() {
			// No offer passes these needs' static filters: every such job
			// waits for the same reasons (a backlog of jobs alike costs
			// one look, not one each).
			if runningOn == nil {
				hopeless := !q.DeadlineAt.IsZero() && !s.Now.Before(q.DeadlineAt)
				plan.Pending = append(plan.Pending, Pending{JobID: q.ID, Reasons: nd.staticOnly, Hopeless: hopeless, q: q, nowhere: true})
			}
			continue
		}
		cj := co.compileJob(q, nd)
		team := teams[q.Team]
		if team != nil {
			if why := team.admit(cj, co); why != nil {
				if runningOn == nil {
					plan.Pending = append(plan.Pending, Pending{JobID: q.ID, Reasons: []job.PendingReason{*why}, q: q})
				}
				continue
			}
		}
		best, est, wait := co.choose(cj, s)
		if wait != nil {
			plan.Pending = append(plan.Pending, Pending{JobID: q.ID, Reasons: wait, q: q})
			continue
		}
		if best == nil {
			if runningOn == nil {
				reasons, hopeless := co.explain(cj, s.Now)
				plan.Pending = append(plan.Pending, Pending{JobID: q.ID, Reasons: reasons, Hopeless: hopeless, q: q, nowhere: nd.fitsNowhere()})
			}
			continue
		}
		if team != nil && runningOn == nil {
			if why := team.overBudget(cj, est.Cost); why != nil {
				plan.Pending = append(plan.Pending, Pending{JobID: q.ID, Reasons: []job.PendingReason{*why}, q: q})
				continue
			}
		}
		if team != nil {
			team.take(cj, *best.offer, cj.nodes, est.Cost)
		}
		if best.available > 0 {
			best.available -= cj.nodes
		}
		p := Placement{JobID: q.ID, Offer: *best.offer, Nodes: cj.nodes, Estimate: est, q: q}
		c := cj.carryTo(best)
		p.Transfer, p.DataTransfer = c.moveCost, c.data
		if runningOn == nil && q.attempt == 0 {
			p.Baseline = co.onDemandBaseline(cj)
		}
		if best.offer.Purchase == providers.Spot {
			p.MaxPrice = bidding.SpotMaxPrice(cj.maxPrice, *best.offer)
		}
		if runningOn == nil {
			plan.Placements = append(plan.Placements, p)
			continue
		}
		m := MoveOption{Placement: p}
		if cur := byID[runningOn[q.ID]]; cur != nil {
			m.Stay = cj.stayEstimate(s.Now, cur, cj.runtime[cur.gpu]).Cost
		}
		moves = append(moves, m)
	}
	return plan, moves
}

// stayEstimate is the expected cost of finishing on the offer a job runs
// on: like estimate, without the start-up and the checkpoint's move (it is
// there already).
func (cj *compiledJob) stayEstimate(now time.Time, o *compiledOffer, runtime time.Duration) bidding.Estimate {
	in := bidding.RiskInput{Now: now, PricePerHour: o.price, Nodes: cj.nodes, Runtime: runtime, Changeover: o.startup,
		InterruptionsPerHour: o.rate, Checkpoint: cj.ckpt, Provider: o.offer.Provider, Region: o.offer.Region, NoticeWindow: o.notice}
	return bidding.ExpectedCost(in).Estimate
}

// staticReason runs the filter stages whose answer does not change within
// a cycle (cheap ones first) and returns the first that rejects the offer,
// or reasonNone.
func (n *needs) staticReason(o *compiledOffer) reason {
	switch {
	case !n.gpus[o.gpu]:
		return reasonGPUType
	case int(o.gpuMem) < n.minMem:
		return reasonGPUMemory
	case int(o.gpus) < n.perNode:
		return reasonGPUCount
	case int(o.vcpus) < n.minVCPUs:
		return reasonVCPUs
	case o.memGiB < n.minRAM:
		return reasonMemory
	case !n.regions[o.region]:
		return reasonRegion
	case n.purchases&o.purchase == 0:
		return reasonPurchase
	case n.maxPrice > 0 && o.price > n.maxPrice:
		return reasonMaxPrice
	case n.skipShort && o.notice < n.ckpt.Time:
		return reasonShortNotice
	}
	return reasonNone
}

// dynamicReason runs the stages that differ between jobs of the same
// needs or change as the cycle places jobs.
func (cj *compiledJob) dynamicReason(o *compiledOffer) reason {
	x := cj.q.Except
	switch {
	case x != nil && len(x.Excluded) > 0 && o.excludedFor(x.Excluded):
		return reasonExcluded
	case o.blocked, x != nil && len(x.Avoid) > 0 && o.excludedFor(x.Avoid):
		return reasonUnavailable
	case cj.team != nil && cj.team.blocks(cj, o):
		return reasonQuota
	case o.available >= 0 && o.available < cj.nodes:
		return reasonCapacity
	}
	return reasonNone
}

// cheapest finds the offer with the lowest expected cost to finish that
// passes every filter and meets the deadline. Offers are visited cheapest
// first within each GPU type and the search stops as soon as no remaining
// offer can beat the best found, so placing a job rarely looks at more than
// a few offers.
func (co *compiledOffers) cheapest(cj *compiledJob, now time.Time, mask uint8) (*compiledOffer, bidding.Estimate) {
	var best *compiledOffer
	var bestEst bidding.Estimate
	bestCost := money.Micros(math.MaxInt64)
	cj.filter.walk(co, cj.needs)
	for gi := range co.groups {
		if !cj.gpus[gi] {
			continue
		}
		g := &co.groups[gi]
		runtime := cj.runtime[gi]
		// Every later offer in the group costs at least price x hours;
		// the bound only prunes, so a float (with a margin) is enough.
		hours := float64(cj.nodes) * (runtime + g.minStartup).Hours()
		offers, passed := cj.filter.offers(co, cj.needs, gi)
		for _, o := range offers {
			if bestCost != math.MaxInt64 && float64(o.price)*hours > float64(bestCost)*(1+1e-9)+1 {
				break
			}
			if cj.maxPrice > 0 && o.price > cj.maxPrice {
				break // and so is every later one
			}
			if o.purchase&mask == 0 || !passed && cj.staticReason(o) != reasonNone || cj.dynamicReason(o) != reasonNone {
				continue
			}
			est := cj.estimate(now, o, runtime)
			if !bidding.MeetsDeadline(est, cj.deadline) || !cj.affordable(est) {
				continue
			}
			if est.Cost < bestCost || (est.Cost == bestCost && best != nil && better(o, best, est, bestEst)) {
				best, bestEst, bestCost = o, est, est.Cost
			}
		}
	}
	return best, bestEst
}

// onDemandBaseline is what the job's work would cost on the cheapest
// on-demand offer that meets its needs (GPU, memory, CPUs, regions), its
// purchase option and price cap aside, capacity or not: its nodes at the
// offer's price for the boot and the work. Zero when there is none.
//
// A group's offers come cheapest first, so its walk stops at the first
// offer that could not cost less than the best found even with the
// group's shortest boot; and jobs with the same needs and no progress
// share one answer per cycle. (Looking at every on-demand offer for every
// job placed made a cycle placing 10,000 jobs over 2,000 offers half as
// slow again: 118 ms against 73.)
func (co *compiledOffers) onDemandBaseline(cj *compiledJob) money.Micros {
	shared := cj.q.Progress <= 0 // its runtime is its needs' (compileJob)
	if shared && cj.baselined {
		return cj.baseline
	}
	var best money.Micros
	cj.baseFilter.walk(co, cj.needs)
	for gi := range co.groups {
		if !cj.gpus[gi] {
			continue
		}
		g := &co.groups[gi]
		offers, listed := cj.baseFilter.offers(co, cj.needs, gi)
		for _, o := range offers {
			if !listed && o.purchase != purchaseBit(providers.OnDemand) {
				continue
			}
			if best != 0 && o.price.MulInt(cj.nodes).ForDuration(cj.runtime[gi]+g.minStartup) >= best {
				break // every offer after it costs as much an hour or more
			}
			if !listed && !baselineCandidate(cj.needs, o) {
				continue
			}
			c := o.price.MulInt(cj.nodes).ForDuration(cj.runtime[gi] + o.startup)
			if best == 0 || c < best {
				best = c
			}
		}
	}
	if shared {
		cj.baseline, cj.baselined = best, true
	}
	return best
}

// estimate is the expected cost to finish on an offer: the price for the
// boot and the work, the checkpoint's move there, the input data's egress
// there (paid again by each restart), and the expected cost of the offer
// being taken back (work redone since the last checkpoint, the
// changeovers, periodic checkpoint writes, checkpoint storage).
func (cj *compiledJob) estimate(now time.Time, o *compiledOffer, runtime time.Duration) bidding.Estimate {
	in := bidding.RiskInput{Now: now, PricePerHour: o.price, Nodes: cj.nodes, Startup: o.startup, Runtime: runtime,
		InterruptionsPerHour: o.rate, Checkpoint: cj.ckpt, Provider: o.offer.Provider, Region: o.offer.Region, NoticeWindow: o.notice}
	if cj.carry != nil {
		c := &cj.carry[o.region]
		in.Startup += c.moveTime
		in.Extra, in.Egress = c.moveCost, c.data
	}
	est := bidding.ExpectedCost(in).Estimate
	est.Cost += cj.reservedOverflow(now, o, est)
	return est
}

// better breaks a tie in cost: the earlier finish, then the lower offer ID.
func better(o, cur *compiledOffer, est, curEst bidding.Estimate) bool {
	if !est.Finish.Equal(curEst.Finish) {
		return est.Finish.Before(curEst.Finish)
	}
	return o.id < cur.id
}
