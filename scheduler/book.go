package scheduler

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// book is the scheduler's view of every offer, replaced one provider region
// at a time as price feeds report, plus the insufficient-capacity cache.
//
// Feeds report a region whenever anything in it changes (a launch there
// lowers a count), so the flat book, its index and the merged rates are
// rebuilt only when a cycle asks for them, and the index (names, scope
// keys, price order) only when a name or a price changed.
type book struct {
	mu      sync.Mutex
	regions map[regionKey]*regionOffers
	version uint64
	// gen counts every change to the offers or the marks (version counts
	// only those that may make a pending job placeable).
	gen uint64
	// shape counts the changes to what the offers are, their capacity
	// aside (the set of offers, their shape, price and notice): all that
	// the static filters read (needs.staticReason), so a job no offer
	// passes those for stays so while it does not move.
	shape uint64
	// unavailable marks offers whose launch failed for lack of capacity,
	// until a time.
	unavailable map[string]time.Time
	rateOf      func(providers.Offer) (float64, bool)
	geography   func(provider, region string) string

	// Derived from regions when asked for, never modified in place.
	flat       []providers.Offer
	index      *offerIndex // of flat; nil: to build
	base       *offerBase  // of index and rates; nil: to build
	rates      map[string]float64
	stale      bool // flat is to rebuild
	reshaped   bool // and with it the index
	ratesStale bool

	// launching are the counts taken for launches not back from their
	// provider yet, by launch key, and their sum by offer ID: a feed
	// update counted before those launches reached the provider would
	// otherwise hand their capacity out again, and every launch past the
	// real count would be refused.
	launching   map[string]launchTake
	launchingBy map[string]int
	// taken are the counts launches took off offers since their region was
	// last fed, by offer ID: laid over the flat book's counts where a cycle
	// compiles them, so that a launch does not make the next cycle copy
	// the whole book (thousands of offers, at every launch).
	taken map[string]int
}

// launchTake is what one launch under way took off an offer.
type launchTake struct {
	offer string
	n     int
}

// regionOffers is one provider region's offers (their counts less what
// launches under way when the feed reported them took; what launches took
// since is in book.taken), the offers as its feed last reported them, and
// their interruption rates by offer ID.
type regionOffers struct {
	offers []providers.Offer
	fed    []providers.Offer
	rates  map[string]float64
}

func newBook() *book {
	return &book{regions: map[regionKey]*regionOffers{}, unavailable: map[string]time.Time{},
		launching: map[string]launchTake{}, launchingBy: map[string]int{}, taken: map[string]int{}}
}

// lookup finds an offer by ID, with its count less what launches took.
func (b *book) lookup(provider, region, id string) (providers.Offer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.regions[regionKey{provider, region}]; r != nil {
		for i := range r.offers {
			if r.offers[i].IsID(id) {
				o := r.offers[i]
				if o.Available > 0 {
					o.Available = max(0, o.Available-b.taken[id])
				}
				return o, true
			}
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
	old := b.regions[k]
	if old != nil && slices.EqualFunc(old.fed, offers, sameOffer) {
		return false
	}
	r := &regionOffers{offers: slices.Clone(offers)}
	r.fed = r.offers
	if len(b.launchingBy) > 0 {
		// What launches under way took is not in the provider's count
		// yet, or is about to be: it stays taken.
		for i, o := range r.offers {
			if n := b.launchingBy[o.ID()]; n > 0 && o.Available >= 0 {
				if &r.fed[0] == &r.offers[0] {
					r.fed = slices.Clone(offers)
				}
				r.offers[i].Available = max(0, o.Available-n)
			}
		}
	}
	if b.rateOf != nil {
		r.rates = make(map[string]float64, len(offers))
		for _, o := range offers {
			if v, ok := b.rateOf(o); ok {
				r.rates[o.ID()] = v
			}
		}
	}
	if old != nil {
		for _, o := range old.offers {
			delete(b.taken, o.ID())
		}
	}
	for _, o := range offers {
		delete(b.taken, o.ID()) // counted by the feed, or under way
	}
	b.regions[k] = r
	b.stale = true
	b.reshaped = b.reshaped || old == nil || !slices.EqualFunc(old.offers, offers, sameShape)
	if old == nil || !slices.EqualFunc(old.fed, offers, sameButCapacity) {
		b.shape++
	}
	ratesChanged := old == nil || !maps.Equal(old.rates, r.rates)
	b.ratesStale = b.ratesStale || ratesChanged
	// Pending jobs are looked at again only when the change may let one
	// fit (a launch there reports a lower count: no job fits better). The
	// feed is compared with what it said before, not with the counts the
	// scheduler took meanwhile (the feed catching up on those is no news).
	if ratesChanged || !slices.EqualFunc(old.fed, offers, noBetter) {
		b.version++
	}
	b.gen++
	return true
}

// noBetter reports whether offer b, replacing a, is a worse or equal
// prospect for every job: the same offer with no more capacity and no
// lower price.
func noBetter(a, b providers.Offer) bool {
	if b.Available >= 0 && a.Available >= 0 && b.Available <= a.Available {
		b.Available = a.Available
	}
	if b.Price >= a.Price {
		b.Price = a.Price
	}
	if b.Capacity == providers.CapacityNone || a.Capacity != providers.CapacityNone {
		b.Capacity = a.Capacity
	}
	return sameOffer(a, b)
}

// sameOffer compares what placement reads, ignoring timestamps.
func sameOffer(a, b providers.Offer) bool {
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return a == b
}

// sameButCapacity reports whether two offers differ at most in their
// capacity (count and state) and when they were fed.
func sameButCapacity(a, b providers.Offer) bool {
	a.Available, a.Capacity = b.Available, b.Capacity
	return sameOffer(a, b)
}

// sameShape reports whether two offers agree in what an offerIndex holds:
// the names, the GPU type and the price.
func sameShape(a, b providers.Offer) bool {
	return a.Provider == b.Provider && a.Region == b.Region && a.Zone == b.Zone && a.InstanceType == b.InstanceType &&
		a.Purchase == b.Purchase && a.GPU == b.GPU && a.Price == b.Price
}

// refresh rebuilds what is derived from the regions, if stale.
func (b *book) refresh() {
	if b.stale {
		keys := slices.SortedFunc(maps.Keys(b.regions), func(x, y regionKey) int {
			if c := cmp.Compare(x.provider, y.provider); c != 0 {
				return c
			}
			return cmp.Compare(x.region, y.region)
		})
		n := 0
		for _, k := range keys {
			n += len(b.regions[k].offers)
		}
		flat := make([]providers.Offer, 0, n)
		for _, k := range keys {
			flat = append(flat, b.regions[k].offers...)
		}
		b.flat = flat
		if b.reshaped {
			b.index, b.base = nil, nil
		} else {
			b.index = b.index.withAvailable(flat)
		}
		b.stale, b.reshaped = false, false
	}
	if b.ratesStale {
		rates := map[string]float64{}
		for _, r := range b.regions {
			maps.Copy(rates, r.rates)
		}
		b.rates, b.ratesStale, b.base = rates, false, nil
	}
}

// bookView is one moment of the book: the offers (shared; callers must
// not modify) and their index, the unavailable marks still in force (a
// copy), and the version and generation.
type bookView struct {
	offers      []providers.Offer
	index       *offerIndex
	base        *offerBase
	rates       map[string]float64
	unavailable map[string]time.Time
	// taken are the counts launches took off offers since the feed (by
	// offer ID; a copy): offers' counts are theirs less these.
	taken   map[string]int
	version uint64
	gen     uint64
	shape   uint64
}

// snapshot returns the book as it is now.
func (b *book) snapshot(now time.Time) bookView {
	b.mu.Lock()
	defer b.mu.Unlock()
	un := make(map[string]time.Time, len(b.unavailable))
	for id, until := range b.unavailable {
		if now.Before(until) {
			un[id] = until
		} else {
			delete(b.unavailable, id)
			b.version++ // the offer is back: pending jobs may fit now
			b.gen++
		}
	}
	b.refresh()
	if b.index == nil {
		b.index = indexOffers(b.flat)
	}
	if b.base == nil {
		b.base = compileBase(b.index, b.rates, b.geography)
	}
	var taken map[string]int
	if len(b.taken) > 0 {
		taken = maps.Clone(b.taken)
	}
	return bookView{offers: b.flat, index: b.index, base: b.base, rates: b.rates, unavailable: un, taken: taken, version: b.version, gen: b.gen, shape: b.shape}
}

// take lowers an offer's available count after the scheduler launched on
// it, so the next cycle does not count on capacity already used; the next
// feed update replaces the figure.
func (b *book) take(o providers.Offer, n int, key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if key != "" {
		if old, ok := b.launching[key]; ok {
			b.unlaunchLocked(key, old)
		}
		b.launching[key] = launchTake{offer: o.ID(), n: n}
		b.launchingBy[o.ID()] += n
	}
	r := b.regions[regionKey{o.Provider, o.Region}]
	if r == nil {
		return
	}
	id := o.ID()
	for i := range r.offers {
		if r.offers[i].IsID(id) && r.offers[i].Available >= 0 {
			// Less capacity never makes a pending job placeable, so the
			// version (which makes pending jobs be looked at again) stays.
			b.taken[id] = min(b.taken[id]+n, r.offers[i].Available)
			b.gen++
			return
		}
	}
}

// launched records that the launch of a key take counted is back from its
// provider or will not be made. When it bought something the provider's
// next count says what it used (till then the book keeps it taken); when
// it bought nothing (bought false) the count is given back at once.
func (b *book) launched(key string, bought bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.launching[key]
	if !ok {
		return
	}
	b.unlaunchLocked(key, t)
	if bought {
		return
	}
	for k, r := range b.regions {
		for i := range r.offers {
			if !r.offers[i].IsID(t.offer) || r.offers[i].Available < 0 {
				continue
			}
			// No more than the feed's count less what other launches
			// under way took.
			now := r.offers[i].Available - b.taken[t.offer]
			ceiling := now + t.n
			for j := range r.fed {
				if f := &r.fed[j]; f.IsID(t.offer) && f.Available >= 0 {
					ceiling = min(ceiling, max(0, f.Available-b.launchingBy[t.offer]))
				}
			}
			if ceiling == now {
				continue
			}
			if ceiling <= r.offers[i].Available {
				b.taken[t.offer] = r.offers[i].Available - ceiling
				if b.taken[t.offer] == 0 {
					delete(b.taken, t.offer)
				}
			} else {
				updated := slices.Clone(r.offers)
				updated[i].Available = ceiling
				b.regions[k] = &regionOffers{offers: updated, fed: r.fed, rates: r.rates}
				b.stale = true
				delete(b.taken, t.offer)
			}
			b.version++ // capacity back: a waiting job may fit
			b.gen++
			return
		}
	}
}

func (b *book) unlaunchLocked(key string, t launchTake) {
	delete(b.launching, key)
	if b.launchingBy[t.offer] -= t.n; b.launchingBy[t.offer] <= 0 {
		delete(b.launchingBy, t.offer)
	}
}

// markUnavailable records an insufficient-capacity failure on an offer
// (or a wider scope) until a time. Less capacity lets no waiting job fit,
// so the version moves only if an earlier mark is cut short.
func (b *book) markUnavailable(offerID string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.unavailable[offerID]; ok && until.Before(old) {
		b.version++
	}
	b.unavailable[offerID] = until
	b.gen++
}

// bump forces every queued job to be looked at again.
func (b *book) bump() {
	b.mu.Lock()
	b.version++
	b.mu.Unlock()
}
