package aws

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// typeFacts is what an offer says about its machine.
type typeFacts struct {
	GPU         string // catalog GPU name ("A100-40GB")
	GPUs        int
	GPUMemoryGB int
	VCPUs       int
	MemoryGiB   float64
}

// regionState is the last refresh of one region.
type regionState struct {
	refreshed bool
	types     map[string]typeFacts // instance type -> facts
	zones     map[string][]string  // instance type -> zones it is offered in
	typesErr  error                // the catalog stood in for the type list
	typesAt   time.Time            // last full refresh (types, on-demand)
	onDemand  onDemandPrices
	odErr     error
	spot      spotPrices
	spotErr   error
	spotAt    time.Time
	reserved  []reservation
	logged    string // the price source last logged
}

func (rs *regionState) source() string {
	switch {
	case !rs.refreshed:
		return ""
	case rs.odErr != nil || rs.spotErr != nil:
		return SourceCatalog
	}
	return SourceLive
}

// Offers returns every offer of the configured regions: spot and
// on-demand per GPU instance type and zone, and reserved offers for the
// configured capacity reservations. Prices due for a refresh (by the
// schedules) are read first; a price API that fails is replaced by the
// catalog for that region (see PriceSource). Offers that failed for lack
// of capacity recently read Capacity none and Available 0.
func (p *Provider) Offers(ctx context.Context) ([]providers.Offer, error) {
	p.refreshDue(ctx)
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []providers.Offer
	for _, r := range p.cfg.Regions {
		out = append(out, p.regionOffersLocked(r.Name, now)...)
	}
	return out, nil
}

// refreshDue refreshes, in every region at once, whatever the schedules
// say is due: everything (instance types, on-demand prices, spot prices,
// reservations) on the on-demand schedule or the first time, spot prices
// and reservations on the spot schedule.
func (p *Provider) refreshDue(ctx context.Context) []string {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	now := p.clk.Now()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		touched []string
	)
	for _, r := range p.cfg.Regions {
		p.mu.Lock()
		rs := p.regions[r.Name]
		full := !rs.refreshed || !now.Before(p.odSched.Next(rs.typesAt))
		spot := full || !now.Before(p.spotSched.Next(rs.spotAt))
		p.mu.Unlock()
		if !spot {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.refreshRegion(ctx, r.Name, full, now)
			mu.Lock()
			touched = append(touched, r.Name)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(touched)
	return touched
}

// refreshRegion reads one region's prices (and with full its instance
// types, on-demand prices) and stores them.
func (p *Provider) refreshRegion(ctx context.Context, region string, full bool, now time.Time) {
	log := p.log.With(zap.String("region", region))
	p.mu.Lock()
	rs := p.regions[region]
	types, zones, typesErr, od, odErr := rs.types, rs.zones, rs.typesErr, rs.onDemand, rs.odErr
	p.mu.Unlock()
	if full {
		types, zones, typesErr = p.discoverTypes(ctx, region)
		if typesErr != nil {
			log.Warn("listing GPU instance types failed; using the catalog's", zap.Error(typesErr))
			types, zones = p.catalogTypes(region)
		}
		od, odErr = p.fetchOnDemand(ctx, region, sortedKeys(types))
		if odErr != nil {
			log.Warn("reading on-demand prices failed; using the catalog's", zap.Error(odErr))
		}
	}
	spot, since, spotErr := p.fetchSpot(ctx, region, sortedKeys(types), now)
	if spotErr != nil {
		log.Warn("reading spot prices failed; using the catalog's typical spot prices", zap.Error(spotErr))
	}
	reserved, resErr := p.fetchReservations(ctx, region)
	if resErr != nil {
		log.Warn("listing capacity reservations failed; keeping the last list", zap.Error(resErr))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rs.refreshed = true
	rs.types, rs.zones, rs.typesErr = types, zones, typesErr
	rs.onDemand, rs.odErr = od, odErr
	rs.spot, rs.spotErr, rs.spotAt = spot, spotErr, now
	p.noteSpotLocked(spot, since, now)
	if full {
		rs.typesAt = now
	}
	if resErr == nil {
		rs.reserved = reserved
	}
	p.noteSourceLocked(region, rs)
}

// discoverTypes lists the wanted GPU instance types offered in each zone
// of a region, with their facts.
func (p *Provider) discoverTypes(ctx context.Context, region string) (map[string]typeFacts, map[string][]string, error) {
	api := p.ec2[region]
	zones := map[string][]string{}
	in := &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: awssdk.String("instance-type"), Values: p.cfg.typePatterns(p.cat)}},
	}
	pg := ec2.NewDescribeInstanceTypeOfferingsPaginator(api, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("instance type offerings in %s: %w", region, err)
		}
		for _, o := range page.InstanceTypeOfferings {
			t := string(o.InstanceType)
			if p.wanted(t) && p.zoneAllowed(region, awssdk.ToString(o.Location)) {
				zones[t] = append(zones[t], awssdk.ToString(o.Location))
			}
		}
	}
	names := sortedKeys(zones)
	types := map[string]typeFacts{}
	for chunk := range slices.Chunk(names, 100) {
		req := &ec2.DescribeInstanceTypesInput{}
		for _, n := range chunk {
			req.InstanceTypes = append(req.InstanceTypes, ec2types.InstanceType(n))
		}
		tp := ec2.NewDescribeInstanceTypesPaginator(api, req)
		for tp.HasMorePages() {
			page, err := tp.NextPage(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("instance types in %s: %w", region, err)
			}
			for _, info := range page.InstanceTypes {
				if f, ok := p.factsOf(info); ok {
					types[string(info.InstanceType)] = f
				}
			}
		}
	}
	for t := range zones {
		if _, ok := types[t]; !ok {
			delete(zones, t)
			continue
		}
		slices.Sort(zones[t])
	}
	return types, zones, nil
}

// factsOf turns EC2's description of a type into offer facts: counts and
// sizes from EC2 (live), the GPU's name from the catalog's vocabulary.
// Types without a GPU, or with a GPU the catalog does not know, are left
// out.
func (p *Provider) factsOf(info ec2types.InstanceTypeInfo) (typeFacts, bool) {
	name := string(info.InstanceType)
	if info.GpuInfo == nil || len(info.GpuInfo.Gpus) == 0 {
		return typeFacts{}, false
	}
	dev := info.GpuInfo.Gpus[0]
	f := typeFacts{GPUs: int(awssdk.ToInt32(dev.Count))}
	if info.VCpuInfo != nil {
		f.VCPUs = int(awssdk.ToInt32(info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil {
		f.MemoryGiB = float64(awssdk.ToInt64(info.MemoryInfo.SizeInMiB)) / 1024
	}
	var memGB int
	if dev.MemoryInfo != nil {
		memGB = int(math.Round(float64(awssdk.ToInt32(dev.MemoryInfo.SizeInMiB)) / 1024))
	}
	if it, ok := p.cat.InstanceType(ProviderName, name); ok {
		g, _ := p.cat.GPU(it.GPU)
		f.GPU, f.GPUMemoryGB = g.Name, g.MemoryGB
		if it.GPUs != f.GPUs {
			p.log.Warn("EC2 and the catalog disagree on a type's GPU count; using EC2's", zap.String("instance_type", name),
				zap.Int("ec2", f.GPUs), zap.Int("catalog", it.GPUs))
		}
	} else {
		g, ok := matchGPU(p.cat, awssdk.ToString(dev.Name), memGB)
		if !ok {
			p.log.Warn("skipping an instance type whose GPU the catalog does not know", zap.String("instance_type", name),
				zap.String("gpu", awssdk.ToString(dev.Name)))
			return typeFacts{}, false
		}
		f.GPU, f.GPUMemoryGB = g.Name, g.MemoryGB
	}
	if f.GPUs <= 0 || f.VCPUs <= 0 {
		return typeFacts{}, false
	}
	return f, true
}

// matchGPU finds the catalog GPU EC2 names ("A100" with 80 GB is
// A100-80GB): the family's variant closest in memory.
func matchGPU(cat *catalog.Catalog, name string, memGB int) (catalog.GPU, bool) {
	cands := cat.MatchGPUs(name)
	if len(cands) == 0 {
		return catalog.GPU{}, false
	}
	return slices.MinFunc(cands, func(a, b catalog.GPU) int {
		return cmp.Compare(absInt(a.MemoryGB-memGB), absInt(b.MemoryGB-memGB))
	}), true
}

func absInt(v int) int { return max(v, -v) }

// catalogTypes is the type list when EC2 cannot be asked: the catalog's
// wanted types priced in the region, in each of its zones.
func (p *Provider) catalogTypes(region string) (map[string]typeFacts, map[string][]string) {
	types, zones := map[string]typeFacts{}, map[string][]string{}
	reg, ok := p.cat.Region(ProviderName, region)
	if !ok {
		return types, zones
	}
	for _, it := range p.cat.InstanceTypes() {
		if it.Provider != ProviderName || !p.wanted(it.Name) {
			continue
		}
		if _, ok := it.PriceIn(region); !ok {
			continue
		}
		g, _ := p.cat.GPU(it.GPU)
		types[it.Name] = typeFacts{GPU: g.Name, GPUs: it.GPUs, GPUMemoryGB: g.MemoryGB, VCPUs: it.VCPUs, MemoryGiB: it.MemoryGiB}
		for _, z := range reg.Zones {
			if p.zoneAllowed(region, z) {
				zones[it.Name] = append(zones[it.Name], z)
			}
		}
	}
	return types, zones
}

// zoneAllowed: with subnets configured, only their zones are sold.
func (p *Provider) zoneAllowed(region, zone string) bool {
	r, _ := p.cfg.region(region)
	if len(r.Subnets) == 0 {
		return true
	}
	_, ok := r.Subnets[zone]
	return ok
}

// regionOffersLocked builds a region's offers from its last refresh;
// called with mu held.
func (p *Provider) regionOffersLocked(region string, now time.Time) []providers.Offer {
	rs := p.regions[region]
	if rs == nil || !rs.refreshed {
		return nil
	}
	var out []providers.Offer
	for _, t := range sortedKeys(rs.types) {
		f := rs.types[t]
		od, odOK := p.onDemandLocked(region, rs, t)
		for _, zone := range rs.zones[t] {
			base := providers.Offer{Provider: ProviderName, Region: region, Zone: zone, InstanceType: t,
				GPU: f.GPU, GPUs: f.GPUs, GPUMemoryGB: f.GPUMemoryGB, VCPUs: f.VCPUs, MemoryGiB: f.MemoryGiB,
				OnDemandPrice: od, Available: -1, LaunchLatency: launchLatency(t), UpdatedAt: now}
			if odOK {
				o := base
				o.Purchase, o.Price = providers.OnDemand, od
				out = append(out, o)
			}
			if sp, ok := p.spotLocked(region, rs, zone, t, od); ok {
				o := base
				o.Purchase, o.Price = providers.Spot, sp
				out = append(out, o)
			}
		}
	}
	out = append(out, p.reservedOffersLocked(region, rs, now)...)
	for i := range out {
		p.applyICELocked(&out[i], now)
	}
	slices.SortFunc(out, func(a, b providers.Offer) int { return cmp.Compare(a.ID(), b.ID()) })
	return out
}

// onDemandLocked is a type's on-demand price: the Price List's, or the
// catalog's when the API failed or has no product for it.
func (p *Provider) onDemandLocked(region string, rs *regionState, t string) (money.Micros, bool) {
	if m, ok := rs.onDemand[t]; ok {
		return m, true
	}
	if it, ok := p.cat.InstanceType(ProviderName, t); ok {
		if pr, ok := it.PriceIn(region); ok {
			return pr.OnDemand, true
		}
	}
	return 0, false
}

// spotLocked is a zone's spot price: the newest from the history, the
// catalog's typical one when the history could not be read, and no spot
// offer when the history was read and has no price for the zone (spot is
// not sold there).
func (p *Provider) spotLocked(region string, rs *regionState, zone, t string, od money.Micros) (money.Micros, bool) {
	if rs.spotErr == nil {
		m, ok := rs.spot[zoneType{zone, t}]
		return m, ok
	}
	it, ok := p.cat.InstanceType(ProviderName, t)
	if !ok {
		return 0, false
	}
	pr, ok := it.PriceIn(region)
	if !ok {
		return 0, false
	}
	sp := catalog.SpotPrice(ProviderName, pr)
	if od > 0 && sp > od {
		sp = od
	}
	return sp, true
}

// launchLatency is how long a type typically takes from launch to running:
// the big training machines (p4d, p5, with EFA and NVSwitch) take minutes.
func launchLatency(instanceType string) time.Duration {
	fam, _, _ := strings.Cut(instanceType, ".")
	switch {
	case strings.HasPrefix(fam, "p4"), strings.HasPrefix(fam, "p5"), strings.HasPrefix(fam, "p6"):
		return 5 * time.Minute
	case fam == "p3dn":
		return 3 * time.Minute
	case strings.HasPrefix(fam, "p"):
		return 2 * time.Minute
	}
	return 90 * time.Second
}

// offerKnownLocked reports whether an offer is one the provider sells now
// (its region is configured and, once the region was read, its type is
// offered in its zone).
func (p *Provider) offerKnownLocked(o providers.Offer) bool {
	if o.Provider != ProviderName || !o.Purchase.Valid() {
		return false
	}
	rs := p.regions[o.Region]
	if rs == nil {
		return false
	}
	if !rs.refreshed {
		return p.wanted(o.InstanceType)
	}
	return slices.Contains(rs.zones[o.InstanceType], o.Zone) || o.Purchase == providers.Reserved
}
