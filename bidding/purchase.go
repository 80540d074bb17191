package bidding

import (
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Purchase policies as written in job specs.
const (
	PolicySpot     = "spot"
	PolicyOnDemand = "on-demand"
	PolicyAuto     = "auto"
)

// Allows reports whether a job's purchase policy accepts an offer's
// purchase option. Reserved capacity counts as on-demand: it never goes
// away under the job.
func Allows(policy string, p providers.PurchaseOption) bool {
	switch policy {
	case PolicySpot:
		return p == providers.Spot
	case PolicyOnDemand:
		return p == providers.OnDemand || p == providers.Reserved
	default:
		return true
	}
}

// SpotMaxPrice is the max price to bid for a spot offer: the job's own cap
// if it has one, never above on-demand (paying more than on-demand for
// interruptible capacity is never worth it), and on-demand otherwise
// (Azure's "-1").
func SpotMaxPrice(jobMax money.Micros, o providers.Offer) money.Micros {
	limit := o.OnDemandPrice
	if limit == 0 {
		limit = o.Price
	}
	if jobMax > 0 && jobMax < limit {
		return jobMax
	}
	return limit
}
