package scheduler

import (
	"cmp"
	"slices"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/providers"
)

// Verdict is what the placement pipeline makes of one offer for one job:
// either an estimate of finishing there, or the first filter stage that
// rejects it.
type Verdict struct {
	Offer providers.Offer
	// Reason is "" for an offer the job could be placed on, else the
	// stable reason code (gpu-type, max-price, deadline, ...).
	Reason   string
	Estimate bidding.Estimate
	// MeetsDeadline is false when the estimate finishes after the
	// deadline (Reason is then "deadline").
	MeetsDeadline bool
}

// Explain runs the placement pipeline for one job over every offer and
// returns a verdict per offer: feasible ones first, cheapest to finish
// first, then the rejected ones in pipeline order. It is the same code
// Decide places with, so `spotwise quote` shows what the scheduler would
// do.
func Explain(s Snapshot, q *QueuedJob) []Verdict {
	co := compileOffers(s.Offers, s.offerBase(), s.Unavailable, s.taken, s.Now)
	defer co.release()
	r := q.Req.Value()
	nd := co.compileNeeds(&r, s.Throughput, &ruleCache{})
	cj := co.compileJob(q, nd)
	out := make([]Verdict, 0, len(co.all))
	for gi := range co.groups {
		for _, o := range co.groups[gi].offers {
			v := Verdict{Offer: *o.offer}
			why := cj.staticReason(o)
			if why == reasonNone {
				why = cj.dynamicReason(o)
			}
			if why == reasonNone {
				v.Estimate = cj.estimate(s.Now, o, cj.runtime[gi])
				v.MeetsDeadline = bidding.MeetsDeadline(v.Estimate, cj.deadline)
				if !v.MeetsDeadline {
					why = reasonDeadline
				} else if !cj.affordable(v.Estimate) {
					why = reasonMaxCost
				}
			} else if cj.gpus[gi] {
				v.Estimate = cj.estimate(s.Now, o, cj.runtime[gi])
			}
			v.Reason = reasonCodes[why]
			out = append(out, v)
		}
	}
	order := func(v Verdict) int {
		for r := reasonNone; r < numReasons; r++ {
			if reasonCodes[r] == v.Reason {
				return int(r)
			}
		}
		return int(numReasons)
	}
	slices.SortStableFunc(out, func(a, b Verdict) int {
		if c := cmp.Compare(order(a), order(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Estimate.Cost, b.Estimate.Cost); c != 0 {
			return c
		}
		return cmp.Compare(a.Offer.ID(), b.Offer.ID())
	})
	return out
}
