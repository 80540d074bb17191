package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func TestOffersFromCatalog(t *testing.T) {
	tests := []struct {
		name      string
		providers []string
		regions   []string
		want      int    // offers
		wantErr   string // substring of New's error
	}{
		// types x priced regions x zones x 2: p4de (2+1 zones), g5 (2), a2 (3).
		{name: "all", want: (3 + 2 + 3) * 2},
		{name: "aws only", providers: []string{"aws"}, want: (3 + 2) * 2},
		{name: "one region", regions: []string{"us-central1"}, want: 3 * 2},
		{name: "aws in us-east-1", providers: []string{"aws"}, regions: []string{"us-east-1"}, want: (2 + 2) * 2},
		{name: "provider without the region", providers: []string{"gcp"}, regions: []string{"us-east-1"}, wantErr: "no offers"},
		{name: "unknown provider", providers: []string{"oracle"}, wantErr: `provider "oracle"`},
		{name: "unknown region", regions: []string{"mars-1"}, wantErr: `region "mars-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			c, err := New(context.Background(), Options{Catalog: testCatalog(t), Clock: clk, Seed: 1,
				Providers: tt.providers, Regions: tt.regions})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			offers, err := c.Offers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(offers) != tt.want {
				t.Fatalf("%d offers, want %d", len(offers), tt.want)
			}
			for _, o := range offers {
				if (len(tt.providers) > 0 && o.Provider != tt.providers[0]) || (len(tt.regions) > 0 && o.Region != tt.regions[0]) {
					t.Errorf("offer %s is outside the restriction", o.ID())
				}
			}
		})
	}
}

func TestOfferFields(t *testing.T) {
	e := newEnv(t)
	if got := e.cloud.Name(); got != "sim" {
		t.Errorf("Name() = %q, want sim", got)
	}
	offers, err := e.cloud.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	latency := map[string][2]time.Duration{"aws": {60 * time.Second, 150 * time.Second}, "gcp": {45 * time.Second, 120 * time.Second}}
	onDemand := map[string]providers.Offer{}
	for _, o := range offers {
		if err := o.Validate(); err != nil {
			t.Error(err)
		}
		if o.Purchase == providers.OnDemand {
			onDemand[o.Provider+o.Region+o.Zone+o.InstanceType] = o
		}
	}
	for _, o := range offers {
		t.Run(o.ID(), func(t *testing.T) {
			if !o.UpdatedAt.Equal(t0) {
				t.Errorf("UpdatedAt %s, want the clock's %s", o.UpdatedAt, t0)
			}
			if r := latency[o.Provider]; o.LaunchLatency < r[0] || o.LaunchLatency > r[1] {
				t.Errorf("launch latency %s outside %s..%s", o.LaunchLatency, r[0], r[1])
			}
			if o.Capacity != capacitySignal(o.Available) {
				t.Errorf("capacity %s for %d available", o.Capacity, o.Available)
			}
			od := onDemand[o.Provider+o.Region+o.Zone+o.InstanceType]
			if o.OnDemandPrice != od.Price {
				t.Errorf("OnDemandPrice %s, want the on-demand offer's %s", o.OnDemandPrice, od.Price)
			}
			switch o.Purchase {
			case providers.OnDemand:
				if o.Available < 2 || o.Available > 64 {
					t.Errorf("on-demand available %d, want 2..64", o.Available)
				}
			case providers.Spot:
				if o.Price >= o.OnDemandPrice || o.Price < o.OnDemandPrice.Scale(25, 100) {
					t.Errorf("spot price %s not within [25%%, 100%%) of on-demand %s", o.Price, o.OnDemandPrice)
				}
				if o.Available < 0 || o.Available > 24 {
					t.Errorf("spot available %d, want 0..24", o.Available)
				}
			}
		})
	}

	want := providers.Offer{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p4de.24xlarge",
		GPU: "A100-80GB", GPUs: 8, GPUMemoryGB: 80, VCPUs: 96, MemoryGiB: 1152, Purchase: providers.OnDemand,
		Price: money.MustParse("40.966"), OnDemandPrice: money.MustParse("40.966")}
	got := e.offer(awsBigOD)
	got.Available, got.Capacity, got.LaunchLatency, got.UpdatedAt = 0, "", 0, time.Time{}
	if got != want {
		t.Errorf("offer\n got %+v\nwant %+v", got, want)
	}
	// g5's catalog row has a spot price of $0.45: the walk starts near it.
	if p := e.offer(awsSmallSp).Price; p < money.MustParse("0.30") || p > money.MustParse("0.62") {
		t.Errorf("g5 spot price %s is not near the catalog's $0.45", p)
	}
}

func TestCapacitySignal(t *testing.T) {
	tests := []struct {
		available int
		want      providers.CapacitySignal
	}{
		{0, providers.CapacityNone}, {1, providers.CapacityLow}, {3, providers.CapacityLow},
		{4, providers.CapacityMedium}, {11, providers.CapacityMedium}, {12, providers.CapacityHigh}, {64, providers.CapacityHigh},
	}
	for _, tt := range tests {
		if got := capacitySignal(tt.available); got != tt.want {
			t.Errorf("capacitySignal(%d) = %s, want %s", tt.available, got, tt.want)
		}
	}
}

func TestSeedSpreadsCapacity(t *testing.T) {
	// Over many offers the seeded capacity covers its ranges, with some
	// spot offers sold out.
	var none, bigOD, smallOD, maxSpot int
	for i := range 2000 {
		id := "offer-" + string(rune('a'+i%26)) + "-" + time.Duration(i).String()
		spot := initialPool(7, id, providers.Spot, 1)
		if spot == 0 {
			none++
		}
		maxSpot = max(maxSpot, spot)
		smallOD = max(smallOD, initialPool(7, id, providers.OnDemand, 1))
		bigOD = max(bigOD, initialPool(7, id, providers.OnDemand, 8))
	}
	if none < 200 || none > 500 {
		t.Errorf("%d of 2000 spot offers sold out, want roughly 15-20%%", none)
	}
	if maxSpot != 24 || smallOD != 64 || bigOD != 16 {
		t.Errorf("maximum pools spot %d, on-demand %d, 8-GPU on-demand %d; want 24, 64, 16", maxSpot, smallOD, bigOD)
	}
}

func TestSetAvailableAndPrice(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallSp, 3)
	if o := e.offer(awsSmallSp); o.Available != 3 || o.Capacity != providers.CapacityLow {
		t.Errorf("after SetAvailable(3): available %d, capacity %s", o.Available, o.Capacity)
	}
	pin := money.MustParse("0.7777")
	if err := e.cloud.SetPrice(awsSmallSp, pin); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(3 * defaultPriceInterval)
	if p := e.offer(awsSmallSp).Price; p != pin {
		t.Errorf("pinned price %s after 3 steps, want %s", p, pin)
	}
	if err := e.cloud.SetPrice(awsSmallSp, 0); err != nil {
		t.Fatal(err)
	}
	if p := e.offer(awsSmallSp).Price; p == pin {
		t.Errorf("price still pinned after SetPrice(0)")
	}
	for _, err := range []error{e.cloud.SetAvailable("aws/nowhere/x/y/spot", 1), e.cloud.SetPrice("aws/nowhere/x/y/spot", 1)} {
		if !errors.Is(err, providers.ErrUnknownOffer) {
			t.Errorf("unknown offer: %v, want ErrUnknownOffer", err)
		}
	}
	if err := e.cloud.SetAvailable(awsSmallSp, -1); err == nil {
		t.Error("SetAvailable(-1) accepted")
	}
}

func TestDefaults(t *testing.T) {
	cat := testCatalog(t)
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"no catalog", Options{Clock: clock.NewFake(t0)}, false},
		{"no clock", Options{Catalog: cat}, false},
		{"negative interval", Options{Catalog: cat, Clock: clock.NewFake(t0), PriceInterval: -time.Second}, false},
		{"minimal", Options{Catalog: cat, Clock: clock.NewFake(t0)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(context.Background(), tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
			if c != nil {
				defer c.Close()
				if c.Name() != "sim" || c.interval != defaultPriceInterval {
					t.Errorf("defaults: name %q, interval %s", c.Name(), c.interval)
				}
			}
		})
	}
}
