package scheduler

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// book is the scheduler's view of every offer, replaced one provider region
// at a time as price feeds report, plus the insufficient-capacity cache.
type book struct {
	mu      sync.Mutex
	regions map[regionKey][]providers.Offer
	flat    []providers.Offer // rebuilt on change; never modified in place
	version uint64
	// unavailable marks offers whose launch failed for lack of capacity,
	// until a time.
	unavailable map[string]time.Time
	// rates are the interruption rates the providers report, by offer ID
	// (rebuilt with the offers; never modified in place).
	rates  map[string]float64
	rateOf func(providers.Offer) (float64, bool)
}

func newBook() *book {
	return &book{regions: map[regionKey][]providers.Offer{}, unavailable: map[string]time.Time{}}
}

// lookup finds an offer by ID.
func (b *book) lookup(provider, region, id string) (providers.Offer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range b.regions[regionKey{provider, region}] {
		if o.ID() == id {
			return o, true
		}
	}
	return providers.Offer{}, false
}

// replace sets the offers of one provider region and reports whether
// anything changed.
func (b *book) replace(provider, region string, offers []providers.Offer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := regionKey{provider, region}
	if slices.EqualFunc(b.regions[k], offers, sameOffer) {
		return false
	}
	b.regions[k] = slices.Clone(offers)
	b.rebuild()
	if b.rateOf != nil {
		rates := make(map[string]float64, len(b.rates)+len(offers))
		for id, r := range b.rates {
			rates[id] = r
		}
		for _, o := range offers {
			if r, ok := b.rateOf(o); ok {
				rates[o.ID()] = r
			}
		}
		b.rates = rates
	}
	return true
}

// sameOffer compares what placement reads, ignoring timestamps.
func sameOffer(a, b providers.Offer) bool {
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return a == b
}

func (b *book) rebuild() {
	keys := make([]regionKey, 0, len(b.regions))
	n := 0
	for k, v := range b.regions {
		keys = append(keys, k)
		n += len(v)
	}
	slices.SortFunc(keys, func(x, y regionKey) int {
		if c := cmp.Compare(x.provider, y.provider); c != 0 {
			return c
		}
		return cmp.Compare(x.region, y.region)
	})
	flat := make([]providers.Offer, 0, n)
	for _, k := range keys {
		flat = append(flat, b.regions[k]...)
	}
	b.flat = flat
	b.version++
}

// ratesNow returns the current interruption rates (shared; read only).
func (b *book) ratesNow() map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rates
}

// snapshot returns the current offers (shared; callers must not modify),
// a copy of the unavailable marks still in force, and the version.
func (b *book) snapshot(now time.Time) ([]providers.Offer, map[string]time.Time, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	un := make(map[string]time.Time, len(b.unavailable))
	for id, until := range b.unavailable {
		if now.Before(until) {
			un[id] = until
		} else {
			delete(b.unavailable, id)
			b.version++ // the offer is back: pending jobs may fit now
		}
	}
	return b.flat, un, b.version
}

// take lowers an offer's available count after the scheduler launched on
// it, so the next cycle does not count on capacity already used; the next
// feed update replaces the figure.
func (b *book) take(o providers.Offer, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	offers := b.regions[regionKey{o.Provider, o.Region}]
	id := o.ID()
	for i := range offers {
		if offers[i].ID() == id && offers[i].Available >= 0 {
			updated := slices.Clone(offers)
			updated[i].Available = max(0, updated[i].Available-n)
			b.regions[regionKey{o.Provider, o.Region}] = updated
			// Less capacity never makes a pending job placeable, so the
			// version (which makes pending jobs be looked at again) stays.
			v := b.version
			b.rebuild()
			b.version = v
			return
		}
	}
}

// markUnavailable records an insufficient-capacity failure on an offer
// until a time.
func (b *book) markUnavailable(offerID string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unavailable[offerID] = until
	b.version++
}

// bump forces every queued job to be looked at again.
func (b *book) bump() {
	b.mu.Lock()
	b.version++
	b.mu.Unlock()
}
