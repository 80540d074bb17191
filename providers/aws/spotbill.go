package aws

import (
	"time"

	"github.com/spotwise/spotwise/money"
)

// Spot billing. EC2 charges a spot instance the spot price of its zone and
// type as it moves. Every refresh of the spot price history notes the price
// in force and since when (the history's own timestamp), and a spot
// instance listed carries the changes noted since its launch
// (providers.Instance.PriceChanges), so that it is billed per price
// segment. Changes between two refreshes that were taken back before the
// second are not seen; the history's timestamps put the ones seen where
// EC2 put them.

// spotKeep is how long noted spot prices are kept: longer than a spot
// instance is listed after its end.
const spotKeep = 30 * 24 * time.Hour

// noteSpotLocked notes the spot prices a refresh read; called with p.mu
// held.
func (p *Provider) noteSpotLocked(prices spotPrices, since map[zoneType]time.Time, now time.Time) {
	if p.spotHist == nil {
		p.spotHist = map[zoneType][]money.PriceChange{}
	}
	for k, price := range prices {
		at, ok := since[k]
		if !ok {
			continue
		}
		h := p.spotHist[k]
		if n := len(h); n > 0 && (h[n-1].Price == price || !at.After(h[n-1].At)) {
			continue
		}
		for len(h) > 0 && now.Sub(h[0].At) > spotKeep {
			h = h[1:]
		}
		p.spotHist[k] = append(h, money.PriceChange{At: at, Price: price})
	}
}

// spotChanges are the changes of a zone's spot price for a type noted in
// (from, to), to zero for "up to now", as an instance bills them.
func (p *Provider) spotChanges(zone, instanceType string, from, to time.Time) []money.PriceChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []money.PriceChange
	for _, c := range p.spotHist[zoneType{zone, instanceType}] {
		if c.At.After(from) && (to.IsZero() || c.At.Before(to)) {
			out = append(out, c)
		}
	}
	return out
}
