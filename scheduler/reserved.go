package scheduler

import (
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Reserved capacity is paid whether used or not, so a reserved offer is
// sold at price 0 and a job on a free slot costs nothing more: the
// cheapest expected cost to finish puts it there before spot and
// on-demand, and so does choose for the jobs of the deadline policy. Its
// instances still bill the reservation's hourly price to the job. What
// the reservation does not cover, the run going past the end of its term
// (Offer.Until), is priced at on-demand, as bidding.Reservation models it
// for `spotwise quote --reservations`.

// maskReserved selects reserved offers in cheapest.
const maskReserved uint8 = 4

// reservedOverflow is what a run of est on a reserved offer pays beyond
// the reservation's term: the on-demand price for the nodes' time after
// Offer.Until. Zero for other offers and for a run within the term.
func (cj *compiledJob) reservedOverflow(now time.Time, o *compiledOffer, est bidding.Estimate) money.Micros {
	off := o.offer
	if off.Purchase != providers.Reserved || off.Until.IsZero() {
		return 0
	}
	free := o.available
	if free < 0 {
		free = cj.nodes
	}
	r := bidding.Reservation{Free: free, Left: off.Until.Sub(now), Overflow: off.OnDemandPrice}
	over, _ := r.MarginalCost(cj.nodes, est.Startup+est.Runtime)
	return over
}

// reservedFirst is the free reserved slot a job of the deadline policy
// takes before the policy weighs spot against on-demand: nil when none
// fits and finishes by the deadline, or when the run past the
// reservation's term makes it dearer than spot.
func (co *compiledOffers) reservedFirst(cj *compiledJob, now time.Time, spot *compiledOffer, spotEst bidding.Estimate) (*compiledOffer, bidding.Estimate) {
	res, est := co.cheapest(cj, now, maskReserved)
	if res == nil || (spot != nil && spotEst.Cost < est.Cost) {
		return nil, bidding.Estimate{}
	}
	return res, est
}
