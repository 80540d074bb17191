package awsfake

import (
	"fmt"
	"strings"
	"time"

	"github.com/spotwise/spotwise/providers/catalog"
)

// TypeInfo is what DescribeInstanceTypes says of a type.
type TypeInfo struct {
	VCPUs        int
	MemoryMiB    int64
	GPU          string // EC2's GPU name ("A100"); empty for a type without GPUs
	GPUMaker     string // default NVIDIA
	GPUs         int
	GPUMemoryMiB int // per GPU
}

type offering struct{ region, instanceType, zone string }

type spotEntry struct {
	zone, instanceType, price string
	at                        time.Time
}

// Reservation is a capacity reservation: an On-Demand Capacity
// Reservation (Type "default") or a Capacity Block for ML (Type
// "capacity-block"). Launches into it take from Available; instances
// that end give it back.
type Reservation struct {
	ID           string
	InstanceType string
	Zone         string
	Type         string // "default" or "capacity-block"
	Total        int
	Available    int
}

type capacityKey struct{ zone, instanceType, market string }

// DefineInstanceType describes a type for DescribeInstanceTypes. The AWS
// GPU types of spotwise's bundled catalog are defined already, with EC2's
// GPU names; define others (or override those) before AddInstanceType.
func (c *Cloud) DefineInstanceType(instanceType string, info TypeInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.types[instanceType] = info
}

// typeInfoLocked is a type's description: defined, else from the catalog.
func (c *Cloud) typeInfoLocked(instanceType string) (TypeInfo, bool) {
	if t, ok := c.types[instanceType]; ok {
		return t, true
	}
	cat := catalog.Default()
	it, ok := cat.InstanceType("aws", instanceType)
	if !ok {
		return TypeInfo{}, false
	}
	g, _ := cat.GPU(it.GPU)
	// The catalog says "A100-40GB" where EC2 says "A100" with 40960 MiB.
	name, suffix, _ := strings.Cut(g.Name, "-")
	if !strings.HasSuffix(suffix, "GB") {
		name = g.Name
	}
	return TypeInfo{VCPUs: it.VCPUs, MemoryMiB: int64(it.MemoryGiB * 1024), GPU: name, GPUs: it.GPUs,
		GPUMemoryMiB: g.MemoryGB * 1024}, true
}

// AddInstanceType offers a type in zones of a region
// (DescribeInstanceTypeOfferings). It panics for a type neither in the
// catalog nor defined with DefineInstanceType: a typo would otherwise just
// leave the provider with no offer.
func (c *Cloud) AddInstanceType(region, instanceType string, zones ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.typeInfoLocked(instanceType); !ok {
		panic(fmt.Sprintf("awsfake: instance type %q is not in the catalog; DefineInstanceType it first", instanceType))
	}
	for _, z := range zones {
		if zoneRegion(z) != region {
			panic(fmt.Sprintf("awsfake: zone %q is not in region %q", z, region))
		}
		c.offerings = append(c.offerings, offering{region, instanceType, z})
	}
}

// SetSpotPrice records a spot price history entry: from at on, the spot
// price of the type in the zone is usd (a decimal string, "0.3"). The
// history keeps every entry; DescribeSpotPriceHistory answers with the
// entries since its StartTime and the one in effect at it, in the order
// they were recorded.
func (c *Cloud) SetSpotPrice(zone, instanceType, usd string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spot = append(c.spot, spotEntry{zone: zone, instanceType: instanceType, price: usd, at: at.UTC()})
}

// spotPriceLocked is the spot price in effect now; false if none.
func (c *Cloud) spotPriceLocked(zone, instanceType string, now time.Time) (string, bool) {
	var price string
	var at time.Time
	for _, s := range c.spot {
		if s.zone == zone && s.instanceType == instanceType && !s.at.After(now) && (price == "" || !s.at.Before(at)) {
			price, at = s.price, s.at
		}
	}
	return price, price != ""
}

// AddSubnet makes a subnet known, in a zone: launches into it land there.
// A launch into an unknown subnet fails with InvalidSubnetID.NotFound.
func (c *Cloud) AddSubnet(subnetID, zone string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subnets[subnetID] = zone
}

// AddReservation adds an active capacity reservation
// (DescribeCapacityReservations, RunInstances into it).
func (c *Cloud) AddReservation(r Reservation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Type == "" {
		r.Type = "default"
	}
	c.reservations = append(c.reservations, &r)
}

// Reservations lists the reservations with their free counts now.
func (c *Cloud) Reservations() []Reservation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Reservation, len(c.reservations))
	for i, r := range c.reservations {
		out[i] = *r
	}
	return out
}

// SetCapacity limits how many more instances of a type a zone can start
// in a market (MarketSpot, MarketOnDemand): past it launches fail with
// InsufficientInstanceCapacity (in an instant fleet's error list, or as
// RunInstances' error). n < 0 lifts the limit; the default is none.
func (c *Cloud) SetCapacity(zone, instanceType, market string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := capacityKey{zone, instanceType, market}
	if n < 0 {
		delete(c.capacity, k)
		return
	}
	c.capacity[k] = n
}

// freeLocked is how many instances a pool can start; -1 for no limit.
func (c *Cloud) freeLocked(zone, instanceType, market string) int {
	if n, ok := c.capacity[capacityKey{zone, instanceType, market}]; ok {
		return n
	}
	return -1
}

func (c *Cloud) offeredLocked(region, instanceType, zone string) bool {
	for _, o := range c.offerings {
		if o == (offering{region, instanceType, zone}) {
			return true
		}
	}
	return false
}
