package catalog

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

func TestDefaultBuilds(t *testing.T) {
	c := Default()
	if c == nil {
		t.Fatal("Default() returned nil")
	}
	if Default() != c {
		t.Error("Default() built a second catalog; want one shared instance")
	}
	// The bundled inputs must also pass New on their own.
	if _, err := New(gpus, regions, instanceTypes(), sources); err != nil {
		t.Fatalf("New(bundled data): %v", err)
	}
}

func TestCounts(t *testing.T) {
	c := Default()
	perProvider := map[string]int{}
	for _, it := range c.InstanceTypes() {
		perProvider[it.Provider]++
	}
	tests := []struct {
		name string
		got  int
		min  int
	}{
		{"instance types, all providers", len(c.InstanceTypes()), 40},
		{"aws instance types", perProvider["aws"], 1},
		{"azure instance types", perProvider["azure"], 1},
		{"gcp instance types", perProvider["gcp"], 1},
		{"gpus", len(c.GPUs()), 13},
		{"regions with prices", len(pricedRegions(c)), 12},
		{"sources", len(c.Sources()), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got < tt.min {
				t.Errorf("got %d, want at least %d", tt.got, tt.min)
			}
		})
	}
	if got, want := c.Providers(), []string{"aws", "azure", "gcp"}; !slices.Equal(got, want) {
		t.Errorf("Providers() = %v, want %v", got, want)
	}
}

// pricedRegions returns provider/region keys that carry at least one price.
func pricedRegions(c *Catalog) map[string]bool {
	out := map[string]bool{}
	for _, it := range c.InstanceTypes() {
		for _, p := range it.Prices {
			out[it.Provider+"/"+p.Region] = true
		}
	}
	return out
}

func TestNamedInstanceTypes(t *testing.T) {
	c := Default()
	tests := []struct {
		provider, name, gpu string
		count               int
	}{
		{"aws", "p4d.24xlarge", "A100-40GB", 8},
		{"aws", "p4de.24xlarge", "A100-80GB", 8},
		{"aws", "p5.48xlarge", "H100", 8},
		{"aws", "p3.2xlarge", "V100", 1},
		{"aws", "p3.8xlarge", "V100", 4},
		{"aws", "p3.16xlarge", "V100", 8},
		{"aws", "p3dn.24xlarge", "V100-32GB", 8},
		{"aws", "p2.xlarge", "K80", 1},
		{"aws", "g4dn.xlarge", "T4", 1},
		{"aws", "g4dn.2xlarge", "T4", 1},
		{"aws", "g4dn.4xlarge", "T4", 1},
		{"aws", "g4dn.8xlarge", "T4", 1},
		{"aws", "g4dn.12xlarge", "T4", 4},
		{"aws", "g4dn.metal", "T4", 8},
		{"aws", "g5.xlarge", "A10G", 1},
		{"aws", "g5.2xlarge", "A10G", 1},
		{"aws", "g5.4xlarge", "A10G", 1},
		{"aws", "g5.12xlarge", "A10G", 4},
		{"aws", "g5.24xlarge", "A10G", 4},
		{"aws", "g5.48xlarge", "A10G", 8},
		{"aws", "g6.xlarge", "L4", 1},
		{"aws", "g6.48xlarge", "L4", 8},
		{"aws", "g6e.xlarge", "L40S", 1},
		{"aws", "g6e.48xlarge", "L40S", 8},
		{"azure", "Standard_ND96asr_v4", "A100-40GB", 8},
		{"azure", "Standard_ND96amsr_A100_v4", "A100-80GB", 8},
		{"azure", "Standard_NC24ads_A100_v4", "A100-80GB", 1},
		{"azure", "Standard_NC48ads_A100_v4", "A100-80GB", 2},
		{"azure", "Standard_NC96ads_A100_v4", "A100-80GB", 4},
		{"azure", "Standard_NC4as_T4_v3", "T4", 1},
		{"azure", "Standard_NC8as_T4_v3", "T4", 1},
		{"azure", "Standard_NC16as_T4_v3", "T4", 1},
		{"azure", "Standard_NC64as_T4_v3", "T4", 4},
		{"azure", "Standard_NC6s_v3", "V100", 1},
		{"azure", "Standard_NC12s_v3", "V100", 2},
		{"azure", "Standard_NC24s_v3", "V100", 4},
		{"azure", "Standard_ND96isr_H100_v5", "H100", 8},
		{"gcp", "a2-highgpu-1g", "A100-40GB", 1},
		{"gcp", "a2-highgpu-2g", "A100-40GB", 2},
		{"gcp", "a2-highgpu-4g", "A100-40GB", 4},
		{"gcp", "a2-highgpu-8g", "A100-40GB", 8},
		{"gcp", "a2-ultragpu-1g", "A100-80GB", 1},
		{"gcp", "a2-ultragpu-8g", "A100-80GB", 8},
		{"gcp", "g2-standard-4", "L4", 1},
		{"gcp", "g2-standard-8", "L4", 1},
		{"gcp", "g2-standard-48", "L4", 4},
		{"gcp", "a3-highgpu-8g", "H100", 8},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.name, func(t *testing.T) {
			it, ok := c.InstanceType(tt.provider, tt.name)
			if !ok {
				t.Fatalf("instance type %s/%s missing", tt.provider, tt.name)
			}
			if it.GPU != tt.gpu || it.GPUs != tt.count {
				t.Errorf("got %d x %s, want %d x %s", it.GPUs, it.GPU, tt.count, tt.gpu)
			}
			if len(it.Prices) < 2 {
				t.Errorf("priced in %d regions, want several", len(it.Prices))
			}
		})
	}
}

func TestEveryInstanceTypeIsSourcedAndPricedInKnownRegions(t *testing.T) {
	c := Default()
	for _, it := range c.InstanceTypes() {
		t.Run(it.Provider+"/"+it.Name, func(t *testing.T) {
			if it.Source == "" {
				t.Error("no Source")
			}
			if _, ok := c.GPU(it.GPU); !ok {
				t.Errorf("GPU %q not in catalog", it.GPU)
			}
			seen := map[string]bool{}
			for _, p := range it.Prices {
				if seen[p.Region] {
					t.Errorf("region %s priced twice", p.Region)
				}
				seen[p.Region] = true
				if _, ok := c.Region(it.Provider, p.Region); !ok {
					t.Errorf("priced in unknown region %s", p.Region)
				}
			}
		})
	}
}

func TestSpotBelowOnDemand(t *testing.T) {
	c := Default()
	for _, it := range c.InstanceTypes() {
		for _, p := range it.Prices {
			name := it.Provider + "/" + it.Name + "@" + p.Region
			t.Run(name, func(t *testing.T) {
				if p.OnDemand <= 0 {
					t.Fatalf("on-demand %v, want > 0", p.OnDemand)
				}
				if p.Spot != 0 && p.Spot >= p.OnDemand {
					t.Errorf("spot %v >= on-demand %v", p.Spot, p.OnDemand)
				}
				if s := SpotPrice(it.Provider, p); s <= 0 || s >= p.OnDemand {
					t.Errorf("SpotPrice = %v, want in (0, %v)", s, p.OnDemand)
				}
			})
		}
	}
}

func TestRegionalPricesDiffer(t *testing.T) {
	c := Default()
	tests := []struct {
		provider, typ, cheap, dear string
	}{
		{"aws", "p4d.24xlarge", "us-east-1", "ap-northeast-1"},
		{"aws", "p4d.24xlarge", "us-east-1", "eu-central-1"},
		{"aws", "g5.xlarge", "us-east-1", "eu-central-1"},
		{"aws", "g4dn.xlarge", "us-east-1", "ap-northeast-1"},
		{"aws", "p5.48xlarge", "us-east-1", "ap-northeast-1"},
		{"azure", "Standard_NC24ads_A100_v4", "eastus", "southcentralus"},
		{"gcp", "g2-standard-8", "us-central1", "asia-northeast1"},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.typ+"/"+tt.dear, func(t *testing.T) {
			it, ok := c.InstanceType(tt.provider, tt.typ)
			if !ok {
				t.Fatalf("%s missing", tt.typ)
			}
			lo, ok1 := it.PriceIn(tt.cheap)
			hi, ok2 := it.PriceIn(tt.dear)
			if !ok1 || !ok2 {
				t.Fatalf("missing price: %s=%v %s=%v", tt.cheap, ok1, tt.dear, ok2)
			}
			if hi.OnDemand <= lo.OnDemand {
				t.Errorf("%s %v not above %s %v", tt.dear, hi.OnDemand, tt.cheap, lo.OnDemand)
			}
		})
	}
}

func TestMatchGPUs(t *testing.T) {
	c := Default()
	names := func(gs []GPU) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.Name)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"A100", []string{"A100-40GB", "A100-80GB"}},
		{"a100", []string{"A100-40GB", "A100-80GB"}},
		{"A100-80GB", []string{"A100-80GB"}},
		{"V100", []string{"V100"}}, // exact name wins over the family
		{"H100", []string{"H100"}},
		{"MI300X", []string{"MI300X"}},
		{"TPUv5", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got := names(c.MatchGPUs(tt.query)); !slices.Equal(got, tt.want) {
				t.Errorf("MatchGPUs(%q) = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
	fam := c.MatchGPUs("A100")
	for _, g := range fam {
		if g.Family != "A100" {
			t.Errorf("%s family = %q", g.Name, g.Family)
		}
	}
}

func TestGPUFigures(t *testing.T) {
	c := Default()
	tests := []struct {
		name     string
		memoryGB int
		bf16Zero bool
	}{
		{"K80", 12, true},
		{"T4", 16, true},
		{"V100", 16, true},
		{"V100-32GB", 32, true},
		{"A10", 24, false},
		{"A10G", 24, false},
		{"L4", 24, false},
		{"L40S", 48, false},
		{"A100-40GB", 40, false},
		{"A100-80GB", 80, false},
		{"H100", 80, false},
		{"H200", 141, false},
		{"MI300X", 192, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ok := c.GPU(tt.name)
			if !ok {
				t.Fatalf("GPU %s missing", tt.name)
			}
			if g.MemoryGB != tt.memoryGB {
				t.Errorf("memory %d GB, want %d", g.MemoryGB, tt.memoryGB)
			}
			if (g.BF16TFLOPS == 0) != tt.bf16Zero {
				t.Errorf("BF16 %v TFLOPS, want zero=%v", g.BF16TFLOPS, tt.bf16Zero)
			}
			if g.FP32TFLOPS <= 0 || g.Source == "" || g.Vendor == "" {
				t.Errorf("incomplete: %+v", g)
			}
			if g.FP16TFLOPS != 0 && g.FP16TFLOPS < g.FP32TFLOPS {
				t.Errorf("FP16 tensor %v below FP32 %v", g.FP16TFLOPS, g.FP32TFLOPS)
			}
		})
	}
	if g, _ := c.GPU("h100"); g.Family != "H100" {
		t.Errorf("GPU lookup should ignore case; got %+v", g)
	}
}

func TestThroughputOrder(t *testing.T) {
	c := Default()
	order := []string{"H100", "A100-80GB", "A100-40GB", "V100", "T4", "K80"}
	for _, class := range Classes {
		t.Run(class, func(t *testing.T) {
			var prev float64 = math.Inf(1)
			prevName := ""
			for _, name := range order {
				v, ok := c.RelativeThroughput(name, class)
				if !ok {
					t.Fatalf("%s unknown", name)
				}
				strict := !(prevName == "A100-80GB" && name == "A100-40GB")
				if v > prev || (strict && v == prev) {
					t.Errorf("%s (%v) not below %s (%v)", name, v, prevName, prev)
				}
				prev, prevName = v, name
			}
		})
	}
	if v, _ := c.RelativeThroughput("V100", ClassTrainMixed); v != 1 {
		t.Errorf("V100 TrainMixed = %v, want 1 (the baseline)", v)
	}
	if _, ok := c.RelativeThroughput("nope", ClassTrainMixed); ok {
		t.Error("RelativeThroughput of an unknown GPU reported ok")
	}
	// Mixed-precision transformer training: A100 about 3x V100.
	a100, _ := c.RelativeThroughput("A100-40GB", ClassTrainMixed)
	if a100 < 2.4 || a100 > 3.3 {
		t.Errorf("A100-40GB TrainMixed = %v, want about 3x V100", a100)
	}
}

// The spotwise design example: a job that takes 6 h on 8xV100 (p3.16xlarge)
// finishes in about 2 h on p4d.24xlarge, and costs less there on demand.
func TestDesignExampleP3ToP4d(t *testing.T) {
	c := Default()
	p3, ok1 := c.InstanceType("aws", "p3.16xlarge")
	p4d, ok2 := c.InstanceType("aws", "p4d.24xlarge")
	if !ok1 || !ok2 {
		t.Fatal("p3.16xlarge or p4d.24xlarge missing")
	}
	rate := func(it InstanceType) float64 {
		v, ok := c.RelativeThroughput(it.GPU, ClassTrainMixed)
		if !ok {
			t.Fatalf("GPU %s unknown", it.GPU)
		}
		return v * float64(it.GPUs)
	}
	const hoursOnP3 = 6.0
	hoursOnP4d := hoursOnP3 * rate(p3) / rate(p4d)
	if hoursOnP4d < 1.5 || hoursOnP4d > 2.5 {
		t.Errorf("p4d runtime %.2f h, want about 2 h", hoursOnP4d)
	}
	for _, region := range []string{"us-east-1", "us-west-2", "eu-west-1"} {
		t.Run(region, func(t *testing.T) {
			pp3, ok1 := p3.PriceIn(region)
			pp4, ok2 := p4d.PriceIn(region)
			if !ok1 || !ok2 {
				t.Fatalf("no price in %s", region)
			}
			costP3 := pp3.OnDemand.ForDuration(time.Duration(hoursOnP3 * float64(time.Hour)))
			costP4d := pp4.OnDemand.ForDuration(time.Duration(hoursOnP4d * float64(time.Hour)))
			if costP4d >= costP3 {
				t.Errorf("p4d %v not cheaper than p3.16xlarge %v to finish", costP4d, costP3)
			}
		})
	}
}

func TestThroughputFor(t *testing.T) {
	tp := Throughput{TrainMixed: 2, TrainFP32: 3, Inference: 4}
	tests := []struct {
		class string
		want  float64
	}{
		{ClassTrainMixed, 2},
		{ClassTrainFP32, 3},
		{ClassInference, 4},
		{"", 2},
		{"something-else", 2},
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			if got := tp.For(tt.class); got != tt.want {
				t.Errorf("For(%q) = %v, want %v", tt.class, got, tt.want)
			}
		})
	}
}

func TestWorkSeconds(t *testing.T) {
	c := Default()
	v100, _ := c.RelativeThroughput("V100", ClassTrainMixed)
	a100, _ := c.RelativeThroughput("A100-40GB", ClassTrainMixed)
	tests := []struct {
		name        string
		ref         float64
		refGPU, gpu string
		want        float64
		ok          bool
	}{
		{name: "the same GPU", ref: 3600, refGPU: "V100", gpu: "V100", want: 3600, ok: true},
		{name: "a faster GPU takes less", ref: 21600, refGPU: "V100", gpu: "A100-40GB", want: 21600 * v100 / a100, ok: true},
		{name: "a family stands for its first variant", ref: 21600, refGPU: "A100", gpu: "V100", want: 21600 * a100 / v100, ok: true},
		{name: "no reference runtime", ref: 0, refGPU: "V100", gpu: "A100-40GB"},
		{name: "no reference GPU", ref: 3600, gpu: "A100-40GB"},
		{name: "no GPU", ref: 3600, refGPU: "V100"},
		{name: "an unknown GPU", ref: 3600, refGPU: "V100", gpu: "unknown-gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.WorkSeconds(tt.ref, tt.refGPU, tt.gpu, ClassTrainMixed)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("WorkSeconds(%v, %q, %q) = %v, %v; want %v, %v", tt.ref, tt.refGPU, tt.gpu, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPriceIn(t *testing.T) {
	c := Default()
	p4d, _ := c.InstanceType("aws", "p4d.24xlarge")
	tests := []struct {
		region string
		ok     bool
		want   money.Micros
	}{
		{"us-east-1", true, money.MustParse("21.957642")},
		{"ap-northeast-1", true, money.MustParse("30.09784")},
		{"eu-central-1", true, money.MustParse("27.43298")},
		{"mars-north-1", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.region, func(t *testing.T) {
			p, ok := p4d.PriceIn(tt.region)
			if ok != tt.ok || p.OnDemand != tt.want {
				t.Errorf("PriceIn(%q) = %v, %v; want %v, %v", tt.region, p.OnDemand, ok, tt.want, tt.ok)
			}
			if ok && p.Region != tt.region {
				t.Errorf("row region %q", p.Region)
			}
		})
	}
}

func TestSpotPrice(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		price    Price
		want     money.Micros
	}{
		{"explicit spot wins", "aws", Price{OnDemand: money.MustParse("10"), Spot: money.MustParse("3.5")}, money.MustParse("3.5")},
		{"aws fallback 65% off", "aws", Price{OnDemand: money.MustParse("10")}, money.MustParse("3.5")},
		{"azure fallback 70% off", "azure", Price{OnDemand: money.MustParse("10")}, money.MustParse("3")},
		{"gcp fallback 65% off", "gcp", Price{OnDemand: money.MustParse("10")}, money.MustParse("3.5")},
		{"unknown provider", "other", Price{OnDemand: money.MustParse("10")}, money.MustParse("3.5")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SpotPrice(tt.provider, tt.price); got != tt.want {
				t.Errorf("SpotPrice = %v, want %v", got, tt.want)
			}
		})
	}
	// A bundled row without a spot figure falls back to the discount.
	it, _ := Default().InstanceType("azure", "Standard_ND96isr_H100_v5")
	p, ok := it.PriceIn("eastus")
	if !ok || p.Spot != 0 {
		t.Fatalf("want an eastus row without spot, got %+v %v", p, ok)
	}
	if got, want := SpotPrice("azure", p), p.OnDemand.Scale(30, 100); got != want {
		t.Errorf("SpotPrice fallback = %v, want %v", got, want)
	}
}

func TestRegionsAndGeography(t *testing.T) {
	c := Default()
	valid := []string{"us", "ca", "eu", "uk", "asia", "oceania", "sa", "me", "af"}
	for _, r := range c.Regions() {
		t.Run(r.Provider+"/"+r.Name, func(t *testing.T) {
			if !slices.Contains(valid, r.Geography) {
				t.Errorf("geography %q not one of %v", r.Geography, valid)
			}
			if r.Location == "" || len(r.Zones) == 0 {
				t.Errorf("incomplete region %+v", r)
			}
			for _, z := range r.Zones {
				if !strings.HasPrefix(z, r.Name) {
					t.Errorf("zone %q not in region %q", z, r.Name)
				}
			}
		})
	}
	tests := []struct {
		provider, region, geo string
	}{
		{"aws", "us-east-1", "us"},
		{"aws", "eu-west-2", "uk"},
		{"aws", "eu-central-1", "eu"},
		{"aws", "ap-northeast-1", "asia"},
		{"aws", "ap-southeast-2", "oceania"},
		{"aws", "ca-central-1", "ca"},
		{"azure", "eastus", "us"},
		{"azure", "westeurope", "eu"},
		{"azure", "japaneast", "asia"},
		{"gcp", "us-central1", "us"},
		{"gcp", "europe-west4", "eu"},
		{"gcp", "europe-west2", "uk"},
		{"gcp", "me-west1", "me"},
		{"gcp", "asia-east1", "asia"},
		{"aws", "us-central1", ""}, // a GCP name asked of AWS
		{"gcp", "nowhere", ""},
	}
	for _, tt := range tests {
		t.Run("GeographyOf/"+tt.provider+"/"+tt.region, func(t *testing.T) {
			if got := c.GeographyOf(tt.provider, tt.region); got != tt.geo {
				t.Errorf("GeographyOf = %q, want %q", got, tt.geo)
			}
			r, ok := c.Region(tt.provider, tt.region)
			if ok != (tt.geo != "") {
				t.Errorf("Region ok = %v", ok)
			}
			if ok && (r.Provider != tt.provider || r.Name != tt.region) {
				t.Errorf("Region returned %+v", r)
			}
		})
	}
	if r, _ := c.Region("aws", "us-east-1"); !slices.Contains(r.Zones, "us-east-1a") {
		t.Errorf("us-east-1 zones %v", r.Zones)
	}
	if r, _ := c.Region("azure", "eastus"); !slices.Equal(r.Zones, []string{"eastus-1", "eastus-2", "eastus-3"}) {
		t.Errorf("eastus zones %v", r.Zones)
	}
}

func TestKnown(t *testing.T) {
	c := Default()
	tests := []struct {
		name string
		fn   func(string) bool
		arg  string
		want bool
	}{
		{"KnownGPU exact", c.KnownGPU, "H100", true},
		{"KnownGPU family", c.KnownGPU, "A100", true},
		{"KnownGPU case", c.KnownGPU, "l40s", true},
		{"KnownGPU unknown", c.KnownGPU, "B300", false},
		{"KnownRegion aws", c.KnownRegion, "ap-northeast-1", true},
		{"KnownRegion azure", c.KnownRegion, "westeurope", true},
		{"KnownRegion gcp", c.KnownRegion, "europe-west4", true},
		{"KnownRegion unknown", c.KnownRegion, "moon-1", false},
		{"KnownGeography eu", c.KnownGeography, "eu", true},
		{"KnownGeography oceania", c.KnownGeography, "oceania", true},
		{"KnownGeography unknown", c.KnownGeography, "antarctica", false},
		{"KnownProvider gcp", c.KnownProvider, "gcp", true},
		{"KnownProvider unknown", c.KnownProvider, "oci", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.arg); got != tt.want {
				t.Errorf("%s(%q) = %v, want %v", tt.name, tt.arg, got, tt.want)
			}
		})
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	c := Default()
	g := c.GPUs()
	g[0].Name = "mutated"
	if c.GPUs()[0].Name == "mutated" {
		t.Error("GPUs() exposes the catalog's slice")
	}
	it := c.InstanceTypes()
	it[0].Name = "mutated"
	if c.InstanceTypes()[0].Name == "mutated" {
		t.Error("InstanceTypes() exposes the catalog's slice")
	}
}
