package azure

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in    string
		hours int64
		want  money.Micros
	}{
		{"3.673", 1, usd("3.673")},
		{"0.062699", 1, usd("0.062699")},
		{"0.4444326", 1, usd("0.444433")}, // seven decimals: rounded once, half up
		{"0.4444325", 1, usd("0.444433")},
		{"0.4444324999", 1, usd("0.444432")},
		{"5.6E-05", 1, usd("0.000056")},
		{"27.197", 1, usd("27.197")},
		// Reservations, per term: 150263 / 8760 h = 17.153310502... -> 17.153311.
		{"150263", 8760, usd("17.153311")},
		{"150263.0", 8760, usd("17.153311")},
		// 292548 / 26280 h = 11.131963470... -> 11.131963.
		{"292548", 26280, usd("11.131963")},
		// 19170 / 8760 h = 2.188356164... -> 2.188356.
		{"19170", 8760, usd("2.188356")},
		{"0", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseUSD(tt.in, tt.hours)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("parseUSD(%s, %d) = %s, want %s", tt.in, tt.hours, got.Format(6), tt.want.Format(6))
			}
		})
	}
	for _, bad := range []string{"", "abc", "-1", "1e400000"} {
		if _, err := parseUSD(bad, 1); err == nil {
			t.Errorf("parseUSD(%q) should fail", bad)
		}
	}
}

func TestRetailPricesBecomeOffers(t *testing.T) {
	e := newEnv(t)
	offers, err := e.p.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]providers.Offer{}
	for _, o := range offers {
		if err := o.Validate(); err != nil {
			t.Errorf("invalid offer: %v", err)
		}
		byID[o.ID()] = o
	}
	tests := []struct {
		id        string
		price     money.Micros
		onDemand  money.Micros
		available int
	}{
		{"azure/eastus/eastus-1/Standard_NC24ads_A100_v4/on-demand", usd("3.673"), usd("3.673"), -1},
		{"azure/eastus/eastus-2/Standard_NC24ads_A100_v4/spot", usd("0.444433"), usd("3.673"), -1},
		{"azure/eastus/eastus-3/Standard_ND96asr_v4/on-demand", usd("27.197"), usd("27.197"), -1},
		{"azure/eastus/eastus-1/Standard_ND96asr_v4/spot", usd("2.99167"), usd("27.197"), -1},
		// The team's 1-year reservation: 150263 / 8760 hours.
		{"azure/eastus/eastus-2/Standard_ND96asr_v4/reserved", usd("17.153311"), usd("27.197"), 2},
		{"azure/eastus/eastus-1/Standard_NC6s_v3/on-demand", usd("3.06"), usd("3.06"), -1},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			o, ok := byID[tt.id]
			if !ok {
				t.Fatalf("no offer %s", tt.id)
			}
			if o.Price != tt.price || o.OnDemandPrice != tt.onDemand || o.Available != tt.available {
				t.Errorf("price %s on-demand %s available %d, want %s %s %d", o.Price.Format(6), o.OnDemandPrice, o.Available, tt.price.Format(6), tt.onDemand, tt.available)
			}
			if o.GPU == "" || o.GPUs == 0 || o.LaunchLatency != DefaultLaunchLatency {
				t.Errorf("GPU facts or latency missing: %+v", o)
			}
		})
	}
	for _, missing := range []string{
		"azure/eastus/eastus-1/Standard_NC6s_v3/spot",             // no Spot meter (Low Priority is not Spot)
		"azure/eastus/eastus-1/Standard_NC24ads_A100_v4/reserved", // the team holds no such reservation
		"azure/westus2/westus2-1/Standard_ND96asr_v4/reserved",    // reservation is in eastus
	} {
		if _, ok := byID[missing]; ok {
			t.Errorf("unexpected offer %s", missing)
		}
	}
	a100 := byID["azure/eastus/eastus-1/Standard_NC24ads_A100_v4/on-demand"]
	if a100.GPU != "A100-80GB" || a100.GPUs != 1 || a100.GPUMemoryGB != 80 || a100.VCPUs != 24 {
		t.Errorf("catalog facts: %+v", a100)
	}
	// The feed was paged (15 rows, 4 a page), every request asked for
	// the region and the configured sizes.
	reqs := e.cloud.PriceRequests()
	if len(reqs) != 2 {
		t.Errorf("%d first-page requests, want one per region", len(reqs))
	}
	for _, f := range reqs {
		if !strings.Contains(f, "armSkuName eq 'Standard_ND96asr_v4'") {
			t.Errorf("filter %q does not name the sizes", f)
		}
	}
}

func TestPricesFallBackToCatalog(t *testing.T) {
	e := newEnv(t)
	e.cloud.FailPrices("westus2", http.StatusInternalServerError)
	offers, err := e.p.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := e.p.PriceSource(); got["eastus"] != SourceLive || got["westus2"] != SourceCatalog {
		t.Fatalf("PriceSource = %v", got)
	}
	var found bool
	for _, o := range offers {
		if o.ID() == "azure/westus2/westus2-1/Standard_NC6s_v3/spot" {
			found = true
			// The catalog's westus2 figures for NC6s_v3.
			if o.Price != usd("0.35343") || o.OnDemandPrice != usd("3.06") {
				t.Errorf("catalog prices: %s / %s", o.Price, o.OnDemandPrice)
			}
		}
	}
	if !found {
		t.Fatal("no catalog offer for westus2")
	}
	if n := e.logs.FilterMessage("prices source").FilterField(zap.String("source", SourceCatalog)).Len(); n != 1 {
		t.Errorf("%d info lines about the catalog fallback, want 1", n)
	}

	// The API comes back: the next refresh is live, and says so once.
	e.cloud.FailPrices("westus2", 0)
	if _, err := e.p.refreshPrices(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.refreshPrices(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if got := e.p.PriceSource()["westus2"]; got != SourceLive {
		t.Fatalf("westus2 source %s after recovery", got)
	}
	if n := e.logs.FilterMessage("prices source").FilterField(zap.String("region", "westus2")).Len(); n != 2 {
		t.Errorf("%d source lines for westus2, want 2 (catalog, then live)", n)
	}
}

func TestPricesThrottledThenServed(t *testing.T) {
	e := newEnv(t)
	e.cloud.ThrottlePrices(2) // the retry policy allows two retries
	if _, err := e.p.Offers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.p.PriceSource()["eastus"]; got != SourceLive {
		t.Fatalf("eastus prices %s after two 429s; want them retried to live", got)
	}
}
