package azure

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// Price sources, as PriceSource reports them.
const (
	SourceLive    = "live"
	SourceCatalog = "catalog"
)

// regionBook is one region's offers as priced at the last refresh, before
// the capacity marks and reservation use are laid over them.
type regionBook struct {
	offers []providers.Offer
	source string
}

// capacityMark is an offer Azure recently refused for lack of capacity.
type capacityMark struct {
	until  time.Time
	reason string
	code   string
	scope  providers.Scope
	region string // "" for every region (a provider-wide scope)
}

// Offers returns every offer of the configured regions: on-demand and (where
// Azure sells it) spot for every configured size and zone, and reserved for
// the reservations the team holds. Prices come from the Retail Prices API,
// or from the bundled catalog for a region whose prices could not be read
// (see PriceSource). An offer in the scope of a capacity error (the offer,
// the size in every zone, all Spot of the region, ...) shows Capacity none
// and Available 0 until the mark expires.
func (p *Provider) Offers(ctx context.Context) ([]providers.Offer, error) {
	if err := p.ensurePrices(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clk.Now()
	var out []providers.Offer
	for _, r := range p.cfg.Regions {
		out = append(out, p.regionOffersLocked(r, now)...)
	}
	return out, nil
}

// PriceSource says, per region, whether its prices are live (read from the
// Retail Prices API at the last refresh) or the bundled catalog's.
func (p *Provider) PriceSource() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.sources)
}

// ensurePrices reads prices once, for the first caller.
func (p *Provider) ensurePrices(ctx context.Context) error {
	if p.pricesLoaded() {
		return nil
	}
	_, err := p.refreshPrices(ctx, true)
	return err
}

func (p *Provider) pricesLoaded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.books) > 0
}

// refreshPrices reads every region's prices and replaces its book, falling
// back to the catalog for a region whose read fails, and sends watchers an
// offers event per region. It reports whether any region fell back. With
// onlyIfEmpty it does nothing once prices have been read.
func (p *Provider) refreshPrices(ctx context.Context, onlyIfEmpty bool) (fellBack bool, err error) {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	if onlyIfEmpty && p.pricesLoaded() {
		return false, nil
	}
	books := map[string]*regionBook{}
	reasons := map[string]error{}
	for _, region := range p.cfg.Regions {
		live, err := p.prices.region(ctx, region, p.cfg.VMSizes)
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil {
			reasons[region] = err
			books[region] = &regionBook{offers: p.buildOffers(region, nil), source: SourceCatalog}
			continue
		}
		books[region] = &regionBook{offers: p.buildOffers(region, live), source: SourceLive}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clk.Now()
	for _, region := range p.cfg.Regions {
		b := books[region]
		p.books[region] = b
		if p.sources[region] != b.source {
			fields := []zap.Field{zap.String("region", region), zap.String("source", b.source), zap.Int("offers", len(b.offers))}
			if reasons[region] != nil {
				fields = append(fields, zap.NamedError("reason", reasons[region]))
			}
			p.log.Info("prices source", fields...)
			p.sources[region] = b.source
		} else if reasons[region] != nil {
			p.log.Debug("retail prices still unreachable; catalog prices kept", zap.String("region", region), zap.Error(reasons[region]))
		}
		p.emitOffersLocked(region, now)
	}
	return len(reasons) > 0, nil
}

// buildOffers makes a region's offers from live prices, or from the
// catalog when live is nil.
func (p *Provider) buildOffers(region string, live regionPrices) []providers.Offer {
	var out []providers.Offer
	zones := p.cfg.zones(p.cat, region)
	for _, size := range p.cfg.VMSizes {
		it, ok := p.cat.InstanceType(Name, size)
		if !ok {
			continue
		}
		var onDemand, spot money.Micros
		reserved := map[providers.Term]money.Micros{}
		if live != nil {
			sp := live[size]
			if sp == nil || sp.OnDemand == 0 {
				continue // not sold in this region
			}
			onDemand, spot = sp.OnDemand, sp.Spot
			maps.Copy(reserved, sp.Reserved)
		} else {
			pr, ok := it.PriceIn(region)
			if !ok {
				continue
			}
			onDemand, spot = pr.OnDemand, catalog.SpotPrice(Name, pr)
		}
		gpu, _ := p.cat.GPU(it.GPU)
		base := providers.Offer{
			Provider: Name, Region: region, InstanceType: size, GPU: gpu.Name, GPUs: it.GPUs,
			GPUMemoryGB: gpu.MemoryGB, VCPUs: it.VCPUs, MemoryGiB: it.MemoryGiB,
			OnDemandPrice: onDemand, Available: -1, LaunchLatency: p.cfg.LaunchLatency.D(),
			UpdatedAt: p.clk.Now(),
		}
		for _, zone := range zones {
			o := base
			o.Zone = zone
			o.Purchase, o.Price = providers.OnDemand, onDemand
			out = append(out, o)
			if spot > 0 {
				o.Purchase, o.Price = providers.Spot, spot
				out = append(out, o)
			}
			if res, ok := p.reservation(region, size); ok {
				term, _ := providers.ParseTerm(res.Term)
				// Without a live reservation price (catalog fallback, or
				// no row for the term) the reserved offer is priced at
				// on-demand: never cheaper than it really is.
				o.Purchase, o.Price = providers.Reserved, cmpOr(reserved[term], onDemand)
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b providers.Offer) int { return cmp.Compare(a.ID(), b.ID()) })
	return out
}

func (p *Provider) reservation(region, size string) (Reservation, bool) {
	for _, r := range p.cfg.Reservations {
		if r.Region == region && r.VMSize == size {
			return r, true
		}
	}
	return Reservation{}, false
}

// regionOffersLocked is a region's offers as sold now; called with mu held.
func (p *Provider) regionOffersLocked(region string, now time.Time) []providers.Offer {
	b := p.books[region]
	if b == nil {
		return nil
	}
	out := slices.Clone(b.offers)
	for i := range out {
		o := &out[i]
		if o.Purchase == providers.Reserved {
			res, _ := p.reservation(region, o.InstanceType)
			o.Available = max(0, res.Count-p.reservedInUseLocked(region, o.InstanceType))
			if o.Available == 0 {
				o.Capacity = providers.CapacityNone
			}
		}
		// Expired marks are dropped by expireMarksLocked, which also
		// tells the watchers.
		if _, ok := p.capacityMarkLocked(*o, now); ok {
			o.Available, o.Capacity = 0, providers.CapacityNone
		}
	}
	return out
}

// reservedInUseLocked counts live reserved VMs of a size in a region.
func (p *Provider) reservedInUseLocked(region, size string) int {
	n := 0
	for _, r := range p.records {
		in := r.inst
		if in.Purchase == providers.Reserved && in.Region == region && in.InstanceType == size && !in.State.Ended() {
			n++
		}
	}
	return n
}

// offerLocked finds an offer of the current book by ID.
func (p *Provider) offerLocked(id string) (providers.Offer, bool) {
	for _, b := range p.books {
		for _, o := range b.offers {
			if o.ID() == id {
				return o, true
			}
		}
	}
	return providers.Offer{}, false
}

// markNoCapacityLocked shows every offer of a capacity error's scope
// (around offer o) with no capacity for the error's For (CapacityTTL when
// it has none); watchers get the regions it covers again.
func (p *Provider) markNoCapacityLocked(o providers.Offer, ice *providers.InsufficientCapacityError, now time.Time) {
	ttl := ice.For
	if ttl <= 0 {
		ttl = p.cfg.CapacityTTL.D()
	}
	m := capacityMark{until: now.Add(ttl), reason: ice.Reason, code: ice.Code, scope: ice.Scope, region: o.Region}
	if ice.Scope == providers.ScopeProvider {
		m.region = ""
	}
	key := providers.ScopeKey(ice.Scope, o)
	p.noCap[key] = m
	p.log.Info("no capacity; marked unavailable", zap.String("offer", o.ID()), zap.String("scope", key), zap.String("code", ice.Code),
		zap.Time("until", m.until))
	for _, r := range p.cfg.Regions {
		if m.covers(r) {
			p.emitOffersLocked(r, now)
		}
	}
}

// covers reports whether a mark is about a region.
func (m capacityMark) covers(region string) bool { return m.region == "" || m.region == region }

// capacityMarkLocked returns the live mark that covers an offer (see
// providers.ScopeKeys), the widest first.
func (p *Provider) capacityMarkLocked(o providers.Offer, now time.Time) (capacityMark, bool) {
	keys := providers.ScopeKeys(o)
	for i := len(keys) - 1; i >= 0; i-- {
		if m, ok := p.noCap[keys[i]]; ok && now.Before(m.until) {
			return m, true
		}
	}
	return capacityMark{}, false
}
