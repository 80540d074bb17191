// Package catalog is spotwise's bundled knowledge of GPU capacity: GPU types
// with their memory, peak FLOPS and relative training throughput, cloud
// regions with their geography, and GPU instance types with list prices per
// region. Every figure names its source and the date it was read.
//
// The catalog is facts, not a feed: live prices come from providers. It is
// the fallback when a price API is unreachable, the vocabulary job specs are
// validated against, and what the simulated cloud sells.
package catalog

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/spotwise/spotwise/money"
)

// Throughput classes: how a workload uses a GPU. Relative throughput differs
// a lot between them (tensor cores help mixed precision, not FP32).
const (
	ClassTrainMixed = "train-mixed" // training/fine-tuning in FP16/BF16
	ClassTrainFP32  = "train-fp32"  // training in FP32/TF32-less code
	ClassInference  = "inference"   // batch inference, FP16/INT8
)

// Classes lists the throughput classes.
var Classes = []string{ClassTrainMixed, ClassTrainFP32, ClassInference}

// Throughput is a GPU's speed relative to one NVIDIA V100 (16 GB) for each
// class: 2.0 means the same work takes half as long as on a V100.
type Throughput struct {
	TrainMixed float64 `json:"train_mixed"`
	TrainFP32  float64 `json:"train_fp32"`
	Inference  float64 `json:"inference"`
}

// For returns the relative throughput for a class; unknown classes read as
// mixed-precision training.
func (t Throughput) For(class string) float64 {
	switch class {
	case ClassTrainFP32:
		return t.TrainFP32
	case ClassInference:
		return t.Inference
	default:
		return t.TrainMixed
	}
}

// GPU is one accelerator model.
type GPU struct {
	// Name is unique ("A100-80GB"); Family groups memory variants ("A100").
	Name     string `json:"name"`
	Family   string `json:"family"`
	Vendor   string `json:"vendor"`
	MemoryGB int    `json:"memory_gb"`
	// Peak dense TFLOPS from the vendor's datasheet (tensor cores where
	// they apply, no sparsity).
	FP32TFLOPS float64    `json:"fp32_tflops"`
	FP16TFLOPS float64    `json:"fp16_tflops"`
	BF16TFLOPS float64    `json:"bf16_tflops"`
	Throughput Throughput `json:"throughput"`
	Source     string     `json:"source"`
}

// Region is one cloud region.
type Region struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
	// Geography is the coarse area used for data-residency rules:
	// "us", "ca", "eu", "uk", "asia", "oceania", "sa", "me", "af".
	Geography string   `json:"geography"`
	Location  string   `json:"location"`
	Zones     []string `json:"zones"`
}

// Price is an instance type's list price in one region.
type Price struct {
	Region string `json:"region"`
	// OnDemand is the list price per instance-hour (Linux, shared tenancy).
	OnDemand money.Micros `json:"on_demand"`
	// Spot is a typical spot/preemptible price per instance-hour observed
	// at the source date; zero when the source gave none, in which case the
	// provider's typical discount (SpotDiscount) applies.
	Spot money.Micros `json:"spot,omitzero"`
}

// InstanceType is one GPU machine shape a provider sells.
type InstanceType struct {
	Provider     string  `json:"provider"`
	Name         string  `json:"name"`
	GPU          string  `json:"gpu"`
	GPUs         int     `json:"gpus"`
	VCPUs        int     `json:"vcpus"`
	MemoryGiB    float64 `json:"memory_gib"`
	Interconnect string  `json:"interconnect,omitempty"`
	Prices       []Price `json:"prices"`
	Source       string  `json:"source"`
}

// PriceIn returns the instance type's price in a region.
func (it InstanceType) PriceIn(region string) (Price, bool) {
	for _, p := range it.Prices {
		if p.Region == region {
			return p, true
		}
	}
	return Price{}, false
}

// Source records where a set of figures came from and when.
type Source struct {
	What string `json:"what"`
	URL  string `json:"url"`
	Date string `json:"date"`
	Note string `json:"note,omitempty"`
}

// Catalog is an immutable set of GPUs, regions and instance types.
type Catalog struct {
	gpus      []GPU
	regions   []Region
	types     []InstanceType
	sources   []Source
	gpuByName map[string]int // lower-case name -> index
	families  map[string][]int
	regionIdx map[string]int // provider/region -> index
	typeIdx   map[string]int // provider/name -> index
	providers []string
	geos      []string
}

// New builds a catalog and checks it for consistency: unique names, every
// instance type's GPU and regions known, prices positive.
func New(gpus []GPU, regions []Region, types []InstanceType, sources []Source) (*Catalog, error) {
	c := &Catalog{
		gpus: gpus, regions: regions, types: types, sources: sources,
		gpuByName: map[string]int{}, families: map[string][]int{},
		regionIdx: map[string]int{}, typeIdx: map[string]int{},
	}
	for i, g := range gpus {
		key := strings.ToLower(g.Name)
		if _, dup := c.gpuByName[key]; dup {
			return nil, fmt.Errorf("catalog: GPU %q listed twice", g.Name)
		}
		if g.MemoryGB <= 0 || g.Throughput.TrainMixed <= 0 || g.Throughput.TrainFP32 <= 0 || g.Throughput.Inference <= 0 {
			return nil, fmt.Errorf("catalog: GPU %q needs memory and three positive throughputs", g.Name)
		}
		c.gpuByName[key] = i
		fam := strings.ToLower(g.Family)
		c.families[fam] = append(c.families[fam], i)
	}
	provs, geos := map[string]bool{}, map[string]bool{}
	for i, r := range regions {
		key := r.Provider + "/" + r.Name
		if _, dup := c.regionIdx[key]; dup {
			return nil, fmt.Errorf("catalog: region %s listed twice", key)
		}
		if r.Geography == "" || len(r.Zones) == 0 {
			return nil, fmt.Errorf("catalog: region %s needs a geography and zones", key)
		}
		c.regionIdx[key] = i
		provs[r.Provider] = true
		geos[r.Geography] = true
	}
	for i, t := range types {
		key := t.Provider + "/" + t.Name
		if _, dup := c.typeIdx[key]; dup {
			return nil, fmt.Errorf("catalog: instance type %s listed twice", key)
		}
		if _, ok := c.gpuByName[strings.ToLower(t.GPU)]; !ok {
			return nil, fmt.Errorf("catalog: instance type %s has unknown GPU %q", key, t.GPU)
		}
		if t.GPUs <= 0 || t.VCPUs <= 0 || t.MemoryGiB <= 0 || len(t.Prices) == 0 {
			return nil, fmt.Errorf("catalog: instance type %s needs GPUs, vCPUs, memory and prices", key)
		}
		for _, p := range t.Prices {
			if _, ok := c.regionIdx[t.Provider+"/"+p.Region]; !ok {
				return nil, fmt.Errorf("catalog: instance type %s priced in unknown region %s", key, p.Region)
			}
			if p.OnDemand <= 0 || p.Spot < 0 || p.Spot > p.OnDemand {
				return nil, fmt.Errorf("catalog: instance type %s in %s: need 0 < spot <= on-demand", key, p.Region)
			}
		}
		c.typeIdx[key] = i
	}
	for p := range provs {
		c.providers = append(c.providers, p)
	}
	for g := range geos {
		c.geos = append(c.geos, g)
	}
	sort.Strings(c.providers)
	sort.Strings(c.geos)
	return c, nil
}

// GPUs returns every GPU type.
func (c *Catalog) GPUs() []GPU { return slices.Clone(c.gpus) }

// Regions returns every region.
func (c *Catalog) Regions() []Region { return slices.Clone(c.regions) }

// InstanceTypes returns every instance type.
func (c *Catalog) InstanceTypes() []InstanceType { return slices.Clone(c.types) }

// Sources lists where the figures came from.
func (c *Catalog) Sources() []Source { return slices.Clone(c.sources) }

// Providers lists the providers that have regions in the catalog.
func (c *Catalog) Providers() []string { return slices.Clone(c.providers) }

// Geographies lists the geographies regions belong to.
func (c *Catalog) Geographies() []string { return slices.Clone(c.geos) }

// GPU looks a GPU up by exact name, ignoring case.
func (c *Catalog) GPU(name string) (GPU, bool) {
	i, ok := c.gpuByName[strings.ToLower(name)]
	if !ok {
		return GPU{}, false
	}
	return c.gpus[i], true
}

// MatchGPUs returns the GPUs a job's accelerator entry stands for: the GPU of
// that exact name, or every memory variant of that family ("A100" matches
// A100-40GB and A100-80GB).
func (c *Catalog) MatchGPUs(nameOrFamily string) []GPU {
	key := strings.ToLower(nameOrFamily)
	if i, ok := c.gpuByName[key]; ok {
		return []GPU{c.gpus[i]}
	}
	var out []GPU
	for _, i := range c.families[key] {
		out = append(out, c.gpus[i])
	}
	return out
}

// Region looks a region up.
func (c *Catalog) Region(provider, name string) (Region, bool) {
	i, ok := c.regionIdx[provider+"/"+name]
	if !ok {
		return Region{}, false
	}
	return c.regions[i], true
}

// InstanceType looks an instance type up.
func (c *Catalog) InstanceType(provider, name string) (InstanceType, bool) {
	i, ok := c.typeIdx[provider+"/"+name]
	if !ok {
		return InstanceType{}, false
	}
	return c.types[i], true
}

// RelativeThroughput returns how fast gpu is relative to a V100 for class,
// and false for an unknown GPU. A family name ("A100") stands for the
// family's first-listed variant (A100-40GB), so work measured "on A100"
// is read as measured on the smaller, slower one.
func (c *Catalog) RelativeThroughput(gpu, class string) (float64, bool) {
	g, ok := c.GPU(gpu)
	if !ok {
		matches := c.MatchGPUs(gpu)
		if len(matches) == 0 {
			return 0, false
		}
		g = matches[0]
	}
	return g.Throughput.For(class), true
}

// WorkSeconds scales a runtime measured on one GPU to another by their
// relative throughput for the class: work that takes refSeconds on refGPU
// is expected to take the returned seconds on gpu. False when it cannot be
// sized: no reference runtime, or a GPU without a usable figure.
func (c *Catalog) WorkSeconds(refSeconds float64, refGPU, gpu, class string) (float64, bool) {
	if !(refSeconds > 0) || refGPU == "" || gpu == "" {
		return 0, false
	}
	ref, ok1 := c.RelativeThroughput(refGPU, class)
	here, ok2 := c.RelativeThroughput(gpu, class)
	if !ok1 || !ok2 || !usable(ref) || !usable(here) {
		return 0, false
	}
	return refSeconds * ref / here, true
}

// usable reports whether a throughput figure can divide: positive and
// finite (NaN fails every comparison).
func usable(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// KnownGPU reports whether name is a GPU name or family.
func (c *Catalog) KnownGPU(name string) bool { return len(c.MatchGPUs(name)) > 0 }

// KnownProvider reports whether name is a provider in the catalog.
func (c *Catalog) KnownProvider(name string) bool { return slices.Contains(c.providers, name) }

// KnownRegion reports whether any provider has a region of that name.
func (c *Catalog) KnownRegion(name string) bool {
	for _, r := range c.regions {
		if r.Name == name {
			return true
		}
	}
	return false
}

// KnownGeography reports whether name is a geography of some region.
func (c *Catalog) KnownGeography(name string) bool { return slices.Contains(c.geos, name) }

// GeographyOf returns the geography of a provider's region.
func (c *Catalog) GeographyOf(provider, region string) string {
	r, ok := c.Region(provider, region)
	if !ok {
		return ""
	}
	return r.Geography
}

// SpotDiscount is the typical spot discount off on-demand, in percent, used
// when an instance type's price row has no spot figure. The figures are the
// middle of the ranges the providers advertise (AWS "up to 90%", Azure "up to
// 90%", GCP "60-91%") as observed for GPU types, which sit at the shallow
// end of those ranges.
func SpotDiscount(provider string) int {
	switch provider {
	case "aws":
		return 65
	case "azure":
		return 70
	case "gcp":
		return 65
	default:
		return 65
	}
}

// SpotPrice is the typical spot price of an instance type in a region: the
// price row's own figure, or on-demand less the provider's typical discount.
func SpotPrice(provider string, p Price) money.Micros {
	if p.Spot > 0 {
		return p.Spot
	}
	return p.OnDemand.Scale(int64(100-SpotDiscount(provider)), 100)
}
