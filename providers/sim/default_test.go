package sim

import (
	"context"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// defaultCatalog is the bundled catalog, or a skip while its data is
// inconsistent (the catalog's own tests report that).
func defaultCatalog(t *testing.T) (cat *catalog.Catalog) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Skipf("bundled catalog unusable: %v", r)
		}
	}()
	return catalog.Default()
}

func TestDefaultCatalog(t *testing.T) {
	cat := defaultCatalog(t)
	want := 0
	for _, it := range cat.InstanceTypes() {
		for _, p := range it.Prices {
			r, _ := cat.Region(it.Provider, p.Region)
			want += len(r.Zones) * 2
		}
	}
	clk := clock.NewFake(t0)
	c, err := New(context.Background(), Options{Catalog: cat, Clock: clk, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	clk.Advance(defaultPriceInterval) // every spot price moves
	offers, err := c.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d offers in %d regions; a price step took %s", len(offers), len(c.regions), time.Since(start))
	if len(offers) != want {
		t.Errorf("%d offers, want %d", len(offers), want)
	}
	provs := map[string]int{}
	spotNone := 0
	for _, o := range offers {
		provs[o.Provider]++
		if err := o.Validate(); err != nil {
			t.Error(err)
		}
		if o.Purchase == providers.Spot {
			if o.Price >= o.OnDemandPrice {
				t.Errorf("%s: spot %s not below on-demand %s", o.ID(), o.Price, o.OnDemandPrice)
			}
			if o.Capacity == providers.CapacityNone {
				spotNone++
			}
		}
	}
	for _, p := range cat.Providers() {
		if provs[p] == 0 {
			t.Errorf("no offers of %s", p)
		}
	}
	if spotNone == 0 || spotNone > len(offers)/4 {
		t.Errorf("%d of %d spot offers sold out", spotNone, len(offers)/2)
	}
}
