package aws

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// reservation is one active capacity reservation sold as a reserved
// offer: an On-Demand Capacity Reservation or a Capacity Block for ML.
type reservation struct {
	ID            string
	Zone          string
	InstanceType  string
	Available     int
	CapacityBlock bool
	End           time.Time
}

// fetchReservations lists the region's active reservations spotwise may
// use: the configured IDs, and with Discover every one of a wanted type.
// Only Linux reservations with shared tenancy can take spotwise's
// instances.
func (p *Provider) fetchReservations(ctx context.Context, region string) ([]reservation, error) {
	rc := p.cfg.Reservations
	if len(rc.IDs) == 0 && !rc.Discover {
		return nil, nil
	}
	in := &ec2.DescribeCapacityReservationsInput{
		Filters: []ec2types.Filter{{Name: awssdk.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}},
	}
	var out []reservation
	pg := ec2.NewDescribeCapacityReservationsPaginator(p.ec2[region], in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("capacity reservations in %s: %w", region, err)
		}
		for _, cr := range page.CapacityReservations {
			id, t := awssdk.ToString(cr.CapacityReservationId), awssdk.ToString(cr.InstanceType)
			if !slices.Contains(rc.IDs, id) && !(rc.Discover && p.wanted(t)) {
				continue
			}
			if cr.State != ec2types.CapacityReservationStateActive ||
				(cr.InstancePlatform != "" && cr.InstancePlatform != ec2types.CapacityReservationInstancePlatformLinuxUnix) ||
				(cr.Tenancy != "" && cr.Tenancy != ec2types.CapacityReservationTenancyDefault) {
				continue
			}
			out = append(out, reservation{
				ID: id, Zone: awssdk.ToString(cr.AvailabilityZone), InstanceType: t,
				Available:     int(awssdk.ToInt32(cr.AvailableInstanceCount)),
				CapacityBlock: cr.ReservationType == ec2types.CapacityReservationTypeCapacityBlock,
				End:           awssdk.ToTime(cr.EndDate),
			})
		}
	}
	slices.SortFunc(out, func(a, b reservation) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// reservedOffersLocked sells each zone and type with reservations as one
// reserved offer: paid for already, so its price is zero; Available is
// what the reservations have free.
func (p *Provider) reservedOffersLocked(region string, rs *regionState, now time.Time) []providers.Offer {
	type key struct{ zone, t string }
	free := map[key]int{}
	var keys []key
	for _, r := range rs.reserved {
		if !r.End.IsZero() && !now.Before(r.End) {
			continue
		}
		k := key{r.Zone, r.InstanceType}
		if _, ok := free[k]; !ok {
			keys = append(keys, k)
		}
		free[k] += r.Available
	}
	var out []providers.Offer
	for _, k := range keys {
		f, ok := rs.types[k.t]
		if !ok {
			f, ok = p.catalogFacts(k.t)
		}
		if !ok {
			continue
		}
		od, _ := p.onDemandLocked(region, rs, k.t)
		o := providers.Offer{Provider: ProviderName, Region: region, Zone: k.zone, InstanceType: k.t,
			GPU: f.GPU, GPUs: f.GPUs, GPUMemoryGB: f.GPUMemoryGB, VCPUs: f.VCPUs, MemoryGiB: f.MemoryGiB,
			Purchase: providers.Reserved, OnDemandPrice: od, Available: free[k], Capacity: providers.CapacityHigh,
			LaunchLatency: launchLatency(k.t), UpdatedAt: now}
		if o.Available == 0 {
			o.Capacity = providers.CapacityNone
		}
		out = append(out, o)
	}
	return out
}

func (p *Provider) catalogFacts(t string) (typeFacts, bool) {
	it, ok := p.cat.InstanceType(ProviderName, t)
	if !ok {
		return typeFacts{}, false
	}
	g, _ := p.cat.GPU(it.GPU)
	return typeFacts{GPU: g.Name, GPUs: it.GPUs, GPUMemoryGB: g.MemoryGB, VCPUs: it.VCPUs, MemoryGiB: it.MemoryGiB}, true
}

// reservationPriceLocked is what one instance-hour of reservation id costs:
// its configured price, else the on-demand price of the offer's type.
func (p *Provider) reservationPriceLocked(o providers.Offer, id string) money.Micros {
	if m, ok := p.cfg.Reservations.Prices[id]; ok {
		return m
	}
	if rs := p.regions[o.Region]; rs != nil {
		if od, ok := p.onDemandLocked(o.Region, rs, o.InstanceType); ok {
			return od
		}
	}
	return o.OnDemandPrice
}

// pickReservationLocked chooses the reservation a reserved launch of n
// instances goes into: the one with the most room that fits them.
func (p *Provider) pickReservationLocked(o providers.Offer, n int) (reservation, bool) {
	rs := p.regions[o.Region]
	if rs == nil {
		return reservation{}, false
	}
	var best reservation
	found := false
	for _, r := range rs.reserved {
		if r.Zone == o.Zone && r.InstanceType == o.InstanceType && r.Available >= n && (!found || r.Available > best.Available) {
			best, found = r, true
		}
	}
	return best, found
}
