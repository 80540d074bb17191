package bidding

import (
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Tier is one step of a tiered price: Price per hour of use until the
// account's cumulative use reaches Until. The last tier has no end (Until
// zero).
type Tier struct {
	Until time.Duration `json:"until,omitempty"`
	Price money.Micros  `json:"price_per_hour"`
}

// Tiered is a price that changes with cumulative use: the seeds' "first
// 100 hours at $3.5/h, then $2.8/h". Use is counted in instance-time: two
// instances for an hour use two hours.
type Tiered struct {
	Tiers []Tier `json:"tiers"`
}

// NewTiered checks a tier list: ends strictly increasing, only the last
// without an end, no negative prices.
func NewTiered(tiers ...Tier) (Tiered, error) {
	if len(tiers) == 0 {
		return Tiered{}, errors.New("a tiered price needs at least one tier")
	}
	var prev time.Duration
	for i, t := range tiers {
		last := i == len(tiers)-1
		switch {
		case t.Price < 0:
			return Tiered{}, fmt.Errorf("tier %d: negative price %s", i+1, t.Price)
		case last && t.Until != 0:
			return Tiered{}, fmt.Errorf("tier %d: the last tier has no end", i+1)
		case !last && t.Until <= prev:
			return Tiered{}, fmt.Errorf("tier %d: ends at %s, not after the tier before it (%s)", i+1, t.Until, prev)
		}
		prev = t.Until
	}
	return Tiered{Tiers: tiers}, nil
}

// TwoTier is the common case: the first hours at one price, the rest at
// another.
func TwoTier(first time.Duration, firstPrice, then money.Micros) (Tiered, error) {
	return NewTiered(Tier{Until: first, Price: firstPrice}, Tier{Price: then})
}

// PriceAt is the price of the next hour for an account that has used used
// so far: what a scheduler compares with other offers' hourly prices.
func (t Tiered) PriceAt(used time.Duration) money.Micros {
	for _, tr := range t.Tiers {
		if tr.Until == 0 || used < tr.Until {
			return tr.Price
		}
	}
	return 0
}

// Cost is exactly what a run of run instance-time costs for an account that
// has used used so far: each piece at its tier's price, rounded once.
func (t Tiered) Cost(used, run time.Duration) money.Micros {
	if run <= 0 || len(t.Tiers) == 0 {
		return 0
	}
	used = max(used, 0)
	from, to := used, addSat(used, run)
	var terms [][]int64
	var start time.Duration
	for _, tr := range t.Tiers {
		end := tr.Until
		if end == 0 {
			end = to
		}
		if lo, hi := max(start, from), min(end, to); hi > lo {
			terms = append(terms, []int64{int64(tr.Price), int64(hi - lo)})
		}
		start = end
		if start >= to {
			break
		}
	}
	return exactRatio(big.NewInt(int64(time.Hour)), terms...)
}

// CostToFinish is CostToFinish for a tiered offer: nodes instances for
// startup + runtime, priced from the account's cumulative use so far.
func (t Tiered) CostToFinish(now time.Time, used time.Duration, nodes int, startup, runtime time.Duration) Estimate {
	billed := addSat(startup, runtime)
	return Estimate{
		Startup: startup, Runtime: runtime,
		Cost:   t.Cost(used, durTimes(billed, max(1, nodes))),
		Finish: now.Add(billed),
	}
}
