package sim

import (
	"slices"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Billing. An instance is charged the price of its offer as it moves: from
// its launch price, each change of the offer's price while it lives (a
// step of the spot walk, a SetPrice) starts a new price segment. The cloud
// records the changes on the instance (providers.Instance.PriceChanges),
// as far as its life has got, so that a listing, an event and the bill
// all say the same; providers.Instance.Bill sums the segments.
//
// The walk is a pure function of the step, so the changes are worked out
// from the offer's steps and SetPrice calls whenever the instance is seen
// from outside (listed, reported in an event) or ends, however late: a
// price step itself touches no instance, so it costs the same however
// many run. After a restart too, from the last change the stored record
// holds (SetPrice calls from before a restart are forgotten, as the pin
// itself is).

// priceAt is what the offer charged at t: the price SetPrice pinned then,
// else the walk's price at t's step.
func (c *Cloud) priceAt(o *offer, t time.Time) money.Micros {
	for i := len(o.pins) - 1; i >= 0; i-- {
		if !o.pins[i].At.After(t) {
			if p := o.pins[i].Price; p > 0 {
				return p
			}
			break
		}
	}
	step := stepAt(t, c.interval)
	switch {
	case o.static.Purchase != providers.Spot:
		return o.static.OnDemandPrice
	case step == c.step && o.pinned == 0:
		return o.price(step) // cached
	}
	return spotPrice(o.walk, o.centre, o.static.OnDemandPrice, step)
}

// repriceLocked records the changes of an instance's price up to t (its
// end, or now while it lives).
func (c *Cloud) repriceLocked(in *instance, t time.Time) {
	i := &in.rec.Instance
	if i.State.Ended() {
		return
	}
	o, ok := c.offers[in.rec.Offer]
	if !ok || o.static.Purchase == providers.Reserved {
		return // a reservation's hourly price is fixed for its term
	}
	from, last := i.LaunchedAt, i.Price
	if n := len(i.PriceChanges); n > 0 {
		from, last = i.PriceChanges[n-1].At, i.PriceChanges[n-1].Price
	}
	if in.pricedTo.After(from) {
		from = in.pricedTo
	}
	if t.Before(from) {
		return
	}
	// The moments the price may have changed in (from, t]: the steps that
	// start there and the SetPrice calls made there (one made at from
	// itself, after the cloud caught up to it, too), in time order.
	var at []time.Time
	if o.static.Purchase == providers.Spot && c.interval > 0 {
		for s := stepAt(from, c.interval) + 1; !stepStart(s, c.interval).After(t); s++ {
			at = append(at, stepStart(s, c.interval))
		}
	}
	for _, p := range o.pins {
		if !p.At.Before(from) && !p.At.After(t) {
			at = append(at, p.At)
		}
	}
	slices.SortFunc(at, time.Time.Compare)
	for _, a := range at {
		if p := c.priceAt(o, a); p != last {
			i.PriceChanges = append(i.PriceChanges, money.PriceChange{At: a, Price: p})
			last = p
		}
	}
	in.pricedTo = t
}

// repriceOfferLocked brings the price changes of the live instances of one
// offer up to now.
func (c *Cloud) repriceOfferLocked(o *offer, now time.Time) {
	id := o.static.ID()
	for _, in := range c.list.live {
		if in.rec.Offer == id {
			c.repriceLocked(in, now)
		}
	}
}
