package providers

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/spotwise/spotwise/money"
)

// PurchaseOption is how capacity is bought.
type PurchaseOption string

// Purchase options.
const (
	Spot     PurchaseOption = "spot"
	OnDemand PurchaseOption = "on-demand"
	Reserved PurchaseOption = "reserved"
)

// Valid reports whether p is a known purchase option.
func (p PurchaseOption) Valid() bool { return p == Spot || p == OnDemand || p == Reserved }

// CapacitySignal is a provider's coarse view of how much of an offer is left
// (AWS spot placement scores, Azure eviction rates, our own launch results).
type CapacitySignal string

// Capacity signals.
const (
	CapacityHigh   CapacitySignal = "high"
	CapacityMedium CapacitySignal = "medium"
	CapacityLow    CapacitySignal = "low"
	CapacityNone   CapacitySignal = "none"
)

// Offer is one thing a provider sells: an instance type in a zone under a
// purchase option, at a price per instance-hour.
type Offer struct {
	Provider     string         `json:"provider"`
	Region       string         `json:"region"`
	Zone         string         `json:"zone"`
	InstanceType string         `json:"instance_type"`
	GPU          string         `json:"gpu"`
	GPUs         int            `json:"gpus"`
	GPUMemoryGB  int            `json:"gpu_memory_gb"`
	VCPUs        int            `json:"vcpus"`
	MemoryGiB    float64        `json:"memory_gib"`
	Purchase     PurchaseOption `json:"purchase"`
	// Price is what one instance-hour costs now.
	Price money.Micros `json:"price_per_hour"`
	// OnDemandPrice is the on-demand price of the same instance type in the
	// same region, for discounts and spot max prices.
	OnDemandPrice money.Micros `json:"on_demand_price_per_hour"`
	// Available is how many more instances the provider expects to be able
	// to start; -1 when it does not say.
	Available int            `json:"available"`
	Capacity  CapacitySignal `json:"capacity"`
	// LaunchLatency is how long an instance typically takes from launch to
	// running.
	LaunchLatency time.Duration `json:"launch_latency"`
	// NoticeWindow is how long before taking the capacity back the
	// provider warns (zero: NoticeWindow's default for the provider).
	NoticeWindow time.Duration `json:"notice_window,omitempty"`
	// Until is, for a reserved offer, when the term of the reservation it
	// launches on ends: past it the job pays the on-demand price
	// elsewhere. Zero: not known, or not within the job's run.
	Until     time.Time `json:"until,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Notice is how long before taking an offer's capacity back its provider
// warns: what the offer says, else 2 minutes for AWS spot (the EC2
// interruption notice) and 30 seconds for the others (Azure Scheduled
// Events Preempt, GCP preemption). On-demand and reserved capacity is not
// taken back on short notice (maintenance is announced days ahead).
func (o Offer) Notice() time.Duration {
	switch {
	case o.NoticeWindow > 0:
		return o.NoticeWindow
	case o.Purchase != Spot:
		return 24 * time.Hour
	case o.Provider == "aws":
		return 2 * time.Minute
	}
	return 30 * time.Second
}

// ID is the offer's stable key: provider/region/zone/instance-type/purchase.
func (o Offer) ID() string {
	return OfferID(o.Provider, o.Region, o.Zone, o.InstanceType, o.Purchase)
}

// IsID reports whether id is o's ID (o.ID() == id) without building it:
// books look offers up by ID many times a second.
func (o *Offer) IsID(id string) bool {
	for _, part := range [...]string{o.Provider, o.Region, o.Zone, o.InstanceType} {
		if len(id) <= len(part) || id[:len(part)] != part || id[len(part)] != '/' {
			return false
		}
		id = id[len(part)+1:]
	}
	return id == string(o.Purchase)
}

// OfferID builds an offer key from its parts.
func OfferID(provider, region, zone, instanceType string, p PurchaseOption) string {
	return provider + "/" + region + "/" + zone + "/" + instanceType + "/" + string(p)
}

// Validate checks that an offer is usable; offers from a feed that fail it
// are dropped with the error logged.
func (o Offer) Validate() error {
	switch {
	case o.Provider == "" || o.Region == "" || o.Zone == "" || o.InstanceType == "":
		return fmt.Errorf("offer %q: provider, region, zone and instance type are required", o.ID())
	case !o.Purchase.Valid():
		return fmt.Errorf("offer %s: unknown purchase option %q", o.ID(), o.Purchase)
	case o.GPU == "" || o.GPUs <= 0:
		return fmt.Errorf("offer %s: a GPU type and a positive GPU count are required", o.ID())
	case o.Price < 0:
		return fmt.Errorf("offer %s: negative price %s", o.ID(), o.Price)
	case o.Available < -1:
		return fmt.Errorf("offer %s: available %d is below -1", o.ID(), o.Available)
	}
	return nil
}

// HasCapacity reports whether at least n instances can be expected.
func (o Offer) HasCapacity(n int) bool {
	if o.Capacity == CapacityNone {
		return false
	}
	return o.Available < 0 || o.Available >= n
}

// Offers is a list of offers with the helpers placement needs.
type Offers []Offer

// Cheapest returns the offer with the lowest hourly price (ties broken by
// ID, so the answer is stable) and false for an empty list.
func (os Offers) Cheapest() (Offer, bool) {
	if len(os) == 0 {
		return Offer{}, false
	}
	return slices.MinFunc(os, func(a, b Offer) int {
		if c := cmp.Compare(a.Price, b.Price); c != 0 {
			return c
		}
		return cmp.Compare(a.ID(), b.ID())
	}), true
}

// Filter returns the offers for which keep returns true.
func (os Offers) Filter(keep func(Offer) bool) Offers {
	var out Offers
	for _, o := range os {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}
