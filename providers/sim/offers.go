package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// offer is one thing the cloud sells. The static fields are set once by
// buildOffers; pool, live, reclaimed, outage and pinned change under
// Cloud.mu.
type offer struct {
	static providers.Offer // Price, Available, Capacity, UpdatedAt unset
	region regionKey
	walk   uint64       // seed of this offer's price walk
	centre money.Micros // the walk's centre (spot offers)
	bucket string       // Spot Advisor-like bucket (spot offers)
	hazard float64      // seeded interruptions per instance-hour, before RateScale

	pool      int          // instances the offer holds in all; Available = pool - live - reclaimed
	live      int          // pending or running instances of this offer
	reclaimed int          // capacity held back after interruptions
	outage    bool         // its zone's trace says no spot capacity
	pinned    money.Micros // price set by SetPrice; 0 = follow the walk
	// pins are the SetPrice calls on it, in time order (Price 0 = unpinned):
	// what its instances were billed at, between the steps of its walk.
	pins []money.PriceChange

	cacheStep  int64 // the step cachePrice is for
	cachePrice money.Micros
	cached     bool

	res []*reservation // a reserved offer's reservations (reserved.go)
}

// regionKey names a region; region names are only unique per provider.
type regionKey struct{ provider, region string }

func (k regionKey) compare(o regionKey) int {
	return cmp.Or(cmp.Compare(k.provider, o.provider), cmp.Compare(k.region, o.region))
}

// buildOffers lists the offers of the catalog restricted to the given
// providers and regions (empty = all), sorted by ID.
func buildOffers(cat *catalog.Catalog, seed int64, provs, regions []string) ([]*offer, error) {
	for _, p := range provs {
		if !cat.KnownProvider(p) {
			return nil, fmt.Errorf("sim: provider %q is not in the catalog (have %s)", p, strings.Join(cat.Providers(), ", "))
		}
	}
	for _, r := range regions {
		if !cat.KnownRegion(r) {
			return nil, fmt.Errorf("sim: region %q is not in the catalog", r)
		}
	}
	var out []*offer
	for _, it := range cat.InstanceTypes() {
		if len(provs) > 0 && !slices.Contains(provs, it.Provider) {
			continue
		}
		gpu, _ := cat.GPU(it.GPU) // catalog.New checked it exists
		for _, price := range it.Prices {
			if len(regions) > 0 && !slices.Contains(regions, price.Region) {
				continue
			}
			reg, ok := cat.Region(it.Provider, price.Region)
			if !ok {
				continue
			}
			for _, zone := range reg.Zones {
				for _, po := range []providers.PurchaseOption{providers.Spot, providers.OnDemand} {
					out = append(out, newOffer(seed, it, gpu, price, zone, po))
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sim: the catalog has no offers for providers %v and regions %v", provs, regions)
	}
	slices.SortFunc(out, func(a, b *offer) int { return cmp.Compare(a.static.ID(), b.static.ID()) })
	return out, nil
}

func newOffer(seed int64, it catalog.InstanceType, gpu catalog.GPU, price catalog.Price, zone string, po providers.PurchaseOption) *offer {
	o := &offer{
		static: providers.Offer{
			Provider:      it.Provider,
			Region:        price.Region,
			Zone:          zone,
			InstanceType:  it.Name,
			GPU:           gpu.Name,
			GPUs:          it.GPUs,
			GPUMemoryGB:   gpu.MemoryGB,
			VCPUs:         it.VCPUs,
			MemoryGiB:     it.MemoryGiB,
			Purchase:      po,
			OnDemandPrice: price.OnDemand,
		},
		region: regionKey{it.Provider, price.Region},
	}
	id := o.static.ID()
	o.static.LaunchLatency = launchLatency(seed, id, it.Provider)
	o.pool = initialPool(seed, id, po, it.GPUs)
	o.walk = seeded(seed, "walk", id)
	// Zones and instance types differ a little around the catalog's
	// typical spot price (±10%).
	jitter := uniform(seeded(seed, "centre", id), -100_000, 100_000)
	o.centre = clampSpot(catalog.SpotPrice(it.Provider, price).Scale(ppm+jitter, ppm), price.OnDemand)
	if po == providers.Spot {
		o.bucket, o.hazard = advisorDraw(seed, id)
	}
	return o
}

// launchLatency is how long the offer's instances take to boot: seeded per
// offer within the provider's typical range.
func launchLatency(seed int64, id, provider string) time.Duration {
	lo, hi := int64(60), int64(180)
	switch provider {
	case "aws":
		lo, hi = 60, 150
	case "azure":
		lo, hi = 90, 240
	case "gcp":
		lo, hi = 45, 120
	}
	return time.Duration(uniform(seeded(seed, "latency", id), lo, hi)) * time.Second
}

// initialPool is how many instances an offer can hold: on-demand is ample,
// spot scarce and sometimes gone, 8-GPU machines rarer than small ones.
func initialPool(seed int64, id string, po providers.PurchaseOption, gpus int) int {
	h := seeded(seed, "capacity", id)
	big := gpus >= 8
	if po == providers.OnDemand {
		if big {
			return int(uniform(h, 2, 16))
		}
		return int(uniform(h, 8, 64))
	}
	if uniform(seeded(seed, "spot-none", id), 0, 99) < 15 {
		return 0
	}
	if big {
		return int(uniform(h, 0, 8))
	}
	return int(uniform(h, 0, 24))
}

// capacitySignal turns a count of available instances into the coarse
// signal real clouds give.
func capacitySignal(available int) providers.CapacitySignal {
	switch {
	case available <= 0:
		return providers.CapacityNone
	case available < 4:
		return providers.CapacityLow
	case available < 12:
		return providers.CapacityMedium
	default:
		return providers.CapacityHigh
	}
}

// available is how many more instances of o can start.
func (o *offer) available() int {
	if o.outage {
		return 0
	}
	if o.static.Purchase == providers.Reserved {
		return o.reservedAvailable()
	}
	return max(o.pool-o.live-o.reclaimed, 0)
}

// price is the offer's price at a price step.
func (o *offer) price(step int64) money.Micros {
	if o.pinned > 0 {
		return o.pinned
	}
	switch {
	case o.static.Purchase == providers.Reserved:
		return 0 // paid for already: the instances bill the reservation's price
	case o.static.Purchase != providers.Spot:
		return o.static.OnDemandPrice
	}
	if !o.cached || o.cacheStep != step {
		o.cachePrice = spotPrice(o.walk, o.centre, o.static.OnDemandPrice, step)
		o.cacheStep, o.cached = step, true
	}
	return o.cachePrice
}

// snapshot is the offer as sold now; called with Cloud.mu held.
func (o *offer) snapshot(now time.Time, step int64) providers.Offer {
	s := o.static
	s.Price = o.price(step)
	s.Available = o.available()
	s.Capacity = capacitySignal(s.Available)
	if s.Purchase == providers.Reserved {
		s.Until = o.until()
	}
	s.UpdatedAt = now
	return s
}

// regionOffersLocked is the current offer list of one region.
func (c *Cloud) regionOffersLocked(rk regionKey, now time.Time) []providers.Offer {
	list := c.byRegion[rk]
	out := make([]providers.Offer, 0, len(list))
	for _, o := range list {
		if o.sold() {
			out = append(out, o.snapshot(now, c.step))
		}
	}
	return out
}

// Offers returns every offer the cloud sells now, sorted by ID.
func (c *Cloud) Offers(ctx context.Context) ([]providers.Offer, error) {
	var out []providers.Offer
	err := c.do(ctx, func(now time.Time) error {
		out = make([]providers.Offer, 0, len(c.offerList))
		for _, o := range c.offerList {
			if o.sold() {
				out = append(out, o.snapshot(now, c.step))
			}
		}
		return nil
	})
	return out, err
}

// SetAvailable overrides how many more instances of an offer can start; it
// is a control for tests and demos ("spot capacity runs dry in us-east-1").
// Instances that end later, and capacity held back after interruptions,
// come back on top of n; a trace outage of the zone still shows none.
func (c *Cloud) SetAvailable(offerID string, n int) error {
	if n < 0 {
		return fmt.Errorf("setting capacity of %s: %d is negative", offerID, n)
	}
	return c.do(context.Background(), func(time.Time) error {
		o, ok := c.offers[offerID]
		if !ok {
			return fmt.Errorf("setting capacity of %s: %w", offerID, providers.ErrUnknownOffer)
		}
		o.pool = o.live + o.reclaimed + n
		c.dirty[o.region] = true
		c.log.Info("capacity set", zap.String("offer", offerID), zap.Int("available", n))
		return nil
	})
}

// SetPrice pins an offer's price at p until SetPrice is called again; p = 0
// unpins it and a spot offer follows its walk again. Only the offer's own
// Price changes: the OnDemandPrice reported by the offers of the same type
// stays the list price.
func (c *Cloud) SetPrice(offerID string, p money.Micros) error {
	if p < 0 {
		return fmt.Errorf("setting price of %s: %s is negative", offerID, p)
	}
	return c.do(context.Background(), func(now time.Time) error {
		o, ok := c.offers[offerID]
		if !ok {
			return fmt.Errorf("setting price of %s: %w", offerID, providers.ErrUnknownOffer)
		}
		o.pinned = p
		o.pins = append(o.pins, money.PriceChange{At: now, Price: p})
		c.repriceOfferLocked(o, now)
		c.dirty[o.region] = true
		c.log.Info("price set", zap.String("offer", offerID), zap.Stringer("price", p))
		return nil
	})
}
