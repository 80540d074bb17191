package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/smithy-go"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
	"github.com/spotwise/spotwise/providers/catalog"
)

func TestOffersFromLivePrices(t *testing.T) {
	h := newHarness(t)
	g5, _ := catalog.Default().InstanceType("aws", "g5.xlarge")
	g5Price, _ := g5.PriceIn("us-east-1")
	tests := []struct {
		name          string
		zone, itype   string
		purchase      providers.PurchaseOption
		price, onDem  money.Micros
		gpu           string
		gpus, vcpus   int
		latency       time.Duration
		wantNotOffers bool
	}{
		{name: "on-demand from the price list, exact", zone: "us-east-1a", itype: "p3.2xlarge", purchase: providers.OnDemand,
			price: usd("3.06"), onDem: usd("3.06"), gpu: "V100", gpus: 1, vcpus: 8, latency: 2 * time.Minute},
		{name: "spot: the newest entry of the zone, from the second page", zone: "us-east-1a", itype: "p3.2xlarge", purchase: providers.Spot,
			price: usd("0.9181"), onDem: usd("3.06"), gpu: "V100", gpus: 1, vcpus: 8, latency: 2 * time.Minute},
		{name: "spot in another zone", zone: "us-east-1b", itype: "p3.2xlarge", purchase: providers.Spot,
			price: usd("0.98"), onDem: usd("3.06"), gpu: "V100", gpus: 1, vcpus: 8, latency: 2 * time.Minute},
		{name: "10-decimal price list amount kept to the micro-dollar", zone: "us-east-1a", itype: "p4d.24xlarge", purchase: providers.OnDemand,
			price: usd("21.957642"), onDem: usd("21.957642"), gpu: "A100-40GB", gpus: 8, vcpus: 96, latency: 5 * time.Minute},
		{name: "p4d spot", zone: "us-east-1a", itype: "p4d.24xlarge", purchase: providers.Spot,
			price: usd("8.1234"), onDem: usd("21.957642"), gpu: "A100-40GB", gpus: 8, vcpus: 96, latency: 5 * time.Minute},
		{name: "a type without a price list product: the catalog's on-demand", zone: "us-east-1b", itype: "g5.xlarge", purchase: providers.OnDemand,
			price: g5Price.OnDemand, onDem: g5Price.OnDemand, gpu: "A10G", gpus: 1, vcpus: 4, latency: 90 * time.Second},
		{name: "no spot history in a zone: no spot offer there", zone: "us-east-1b", itype: "g5.xlarge", purchase: providers.Spot, wantNotOffers: true},
		{name: "zones without a subnet are not sold", zone: "us-east-1c", itype: "p3.2xlarge", purchase: providers.Spot, wantNotOffers: true},
	}
	byID := map[string]providers.Offer{}
	for _, o := range h.offers() {
		if err := o.Validate(); err != nil {
			t.Errorf("invalid offer: %v", err)
		}
		byID[o.ID()] = o
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := byID[providers.OfferID("aws", "us-east-1", tt.zone, tt.itype, tt.purchase)]
			if tt.wantNotOffers {
				if ok {
					t.Fatalf("offered %s at %s", o.ID(), o.Price)
				}
				return
			}
			if !ok {
				t.Fatal("not offered")
			}
			if o.Price != tt.price || o.OnDemandPrice != tt.onDem {
				t.Errorf("price %s (on-demand %s), want %s (%s)", o.Price, o.OnDemandPrice, tt.price, tt.onDem)
			}
			if o.GPU != tt.gpu || o.GPUs != tt.gpus || o.VCPUs != tt.vcpus || o.LaunchLatency != tt.latency {
				t.Errorf("got %s x%d, %d vCPUs, latency %s; want %s x%d, %d, %s", o.GPU, o.GPUs, o.VCPUs, o.LaunchLatency,
					tt.gpu, tt.gpus, tt.vcpus, tt.latency)
			}
			if o.Available != -1 || o.Capacity == providers.CapacityNone || !o.UpdatedAt.Equal(t0) {
				t.Errorf("available %d, capacity %q, updated %s", o.Available, o.Capacity, o.UpdatedAt)
			}
		})
	}
	if got := h.p.PriceSource(); got["us-east-1"] != SourceLive {
		t.Errorf("PriceSource = %v, want live", got)
	}
	// The Price List was asked with the documented filters.
	f := h.cloud.PricingFilters()[0]
	for k, v := range map[string]string{"regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared",
		"preInstalledSw": "NA", "capacitystatus": "Used"} {
		if f[k] != v {
			t.Errorf("GetProducts filter %s = %q, want %q", k, f[k], v)
		}
	}
	form := h.lastForm("DescribeSpotPriceHistory")
	if form.Get("ProductDescription.1") != "Linux/UNIX" {
		t.Errorf("spot history asked for %q", form.Get("ProductDescription.1"))
	}
	if n := h.cloud.Calls("DescribeSpotPriceHistory"); n != 2 {
		t.Errorf("%d spot history calls, want 2 (two pages)", n)
	}
	// A second Offers within the schedule reads nothing again.
	calls := h.cloud.PricingCalls()
	h.offers()
	if h.cloud.PricingCalls() != calls || h.cloud.Calls("DescribeSpotPriceHistory") != 2 {
		t.Error("Offers refreshed prices before the schedule said so")
	}
}

func TestOffersFallBackToTheCatalog(t *testing.T) {
	cat := catalog.Default()
	p3, _ := cat.InstanceType("aws", "p3.2xlarge")
	p3Price, _ := p3.PriceIn("us-east-1")
	tests := []struct {
		name              string
		pricingDown       bool
		spotDown          bool
		wantOD, wantSpot  money.Micros
		wantSource        string
		wantLogSubstring  string
		wantCatalogLogged bool
	}{
		{name: "price list answers 500", pricingDown: true, wantOD: p3Price.OnDemand, wantSpot: usd("0.9181"),
			wantSource: SourceCatalog, wantCatalogLogged: true},
		{name: "spot history refused", spotDown: true, wantOD: usd("3.06"), wantSpot: catalog.SpotPrice("aws", p3Price),
			wantSource: SourceCatalog, wantCatalogLogged: true},
		{name: "both answer", wantOD: usd("3.06"), wantSpot: usd("0.9181"), wantSource: SourceLive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.cloud.SetPricingDown(tt.pricingDown)
			if tt.spotDown {
				for range 4 { // every attempt of the bounded retry
					h.cloud.FailEC2("DescribeSpotPriceHistory", awsfake.Fault{Status: 403, Code: "UnauthorizedOperation"})
				}
			}
			od := h.offer("us-east-1a", "p3.2xlarge", providers.OnDemand)
			sp := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
			if od.Price != tt.wantOD || sp.Price != tt.wantSpot {
				t.Errorf("on-demand %s spot %s, want %s %s", od.Price, sp.Price, tt.wantOD, tt.wantSpot)
			}
			if got := h.p.PriceSource()["us-east-1"]; got != tt.wantSource {
				t.Errorf("PriceSource = %q, want %q", got, tt.wantSource)
			}
			logged := h.logs.FilterMessageSnippet("bundled catalog").Len()
			if tt.wantCatalogLogged != (logged == 1) {
				t.Errorf("catalog source logged %d times", logged)
			}
			if !tt.pricingDown {
				return
			}
			// The API comes back: the next on-demand refresh is live again,
			// and the change is logged once.
			h.cloud.SetPricingDown(false)
			h.clk.Advance(12 * time.Hour)
			if od := h.offer("us-east-1a", "p3.2xlarge", providers.OnDemand); od.Price != usd("3.06") {
				t.Errorf("after recovery on-demand %s", od.Price)
			}
			if got := h.p.PriceSource()["us-east-1"]; got != SourceLive {
				t.Errorf("after recovery PriceSource = %q", got)
			}
			if n := h.logs.FilterMessageSnippet("come from the AWS price APIs").Len(); n != 1 {
				t.Errorf("live source logged %d times", n)
			}
		})
	}
}

func TestOffersWithoutEC2UseTheCatalogTypes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InstanceTypes = []string{"p3.2xlarge"} })
	for range 4 {
		h.cloud.FailEC2("DescribeInstanceTypeOfferings", awsfake.Fault{Status: 503, Code: "Unavailable"})
	}
	os := h.offers()
	if len(os) == 0 {
		t.Fatal("no offers")
	}
	for _, o := range os {
		if o.InstanceType != "p3.2xlarge" || (o.Zone != "us-east-1a" && o.Zone != "us-east-1b") {
			t.Errorf("unexpected offer %s", o.ID())
		}
	}
}

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in   string
		want money.Micros
		err  bool
	}{
		{"3.0600000000", usd("3.06"), false},
		{"21.9576420000", usd("21.957642"), false},
		{"0.9181", usd("0.9181"), false},
		{"98.3200000000", usd("98.32"), false},
		{"0.00000049", 0, false},
		{"0.0000005", 1, false},
		{"1.2345675", usd("1.234568"), false},
		{"12", usd("12"), false},
		{"", 0, true},
		{"abc", 0, true},
		{"1.23x4567", 0, true},
	}
	for _, tt := range tests {
		got, err := parseUSD(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("parseUSD(%q) = %s, %v; want %s, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseOnDemandSkipsOtherProducts(t *testing.T) {
	docs := []string{
		awsfake.PriceDocument("p3.2xlarge", "us-east-1", "RunInstances:0004", "4.2000000000"),
		awsfake.PriceDocument("p3.8xlarge", "us-east-1", "RunInstances", "12.2400000000"),
		awsfake.PriceDocument("p3.2xlarge", "us-east-1", "RunInstances", "3.0600000000"),
	}
	got, ok, err := parseOnDemand(docs, "p3.2xlarge")
	if err != nil || !ok || got != usd("3.06") {
		t.Fatalf("got %s %v %v", got, ok, err)
	}
	if _, _, err := parseOnDemand([]string{"{not json"}, "p3.2xlarge"); err == nil || !strings.Contains(err.Error(), "document 0") {
		t.Errorf("garbled document: %v", err)
	}
}

func TestOffersOfTypesOutsideTheCatalog(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InstanceFamilies = []string{"p5en", "g4ad", "p3"} })
	h.cloud.DefineInstanceType("p5en.48xlarge", awsfake.TypeInfo{VCPUs: 192, MemoryMiB: 2097152, GPUs: 8, GPU: "H200", GPUMemoryMiB: 144384})
	h.cloud.DefineInstanceType("g4ad.xlarge", awsfake.TypeInfo{VCPUs: 4, MemoryMiB: 16384, GPUs: 1, GPU: "Radeon Pro V520", GPUMaker: "AMD", GPUMemoryMiB: 8192})
	h.cloud.AddInstanceType("us-east-1", "p5en.48xlarge", "us-east-1a")
	h.cloud.AddInstanceType("us-east-1", "g4ad.xlarge", "us-east-1a")
	h.cloud.SetOnDemandPrice("us-east-1", "p5en.48xlarge", "63.2960000000")
	o := h.offer("us-east-1a", "p5en.48xlarge", providers.OnDemand)
	if o.GPU != "H200" || o.GPUs != 8 || o.GPUMemoryGB != 141 || o.Price != usd("63.296") || o.LaunchLatency != 5*time.Minute {
		t.Errorf("p5en offer %+v", o)
	}
	for _, o := range h.offers() {
		if o.InstanceType == "g4ad.xlarge" || o.InstanceType == "p4d.24xlarge" || o.InstanceType == "g5.xlarge" {
			t.Errorf("offered %s", o.ID())
		}
	}
	if h.logs.FilterMessageSnippet("GPU the catalog does not know").Len() == 0 {
		t.Error("dropping g4ad was not logged")
	}
	// p5en has no catalog price, so no spot offer without a spot price.
	for _, x := range h.offers() {
		if x.InstanceType == "p5en.48xlarge" && x.Purchase == providers.Spot {
			t.Errorf("spot offer %s without a spot price", x.ID())
		}
	}
}

// refusingPricing is a PricingAPI that always refuses, given through
// WithPricing the way a caller swaps an SDK client.
type refusingPricing struct{}

func (refusingPricing) GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform pricing:GetProducts"}
}

func TestWithPricingReplacesTheClient(t *testing.T) {
	h := newHarness(t)
	p, err := New(context.Background(), h.cfg, WithAWSConfig(testAWSConfig()), WithClock(h.clk), WithPricing(refusingPricing{}),
		WithRetry(2, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Offers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := p.PriceSource()["us-east-1"]; got != SourceCatalog || h.cloud.PricingCalls() != 0 {
		t.Errorf("PriceSource %q, %d calls to the endpoint", got, h.cloud.PricingCalls())
	}
}
