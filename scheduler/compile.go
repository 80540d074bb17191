package scheduler

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/internal/money"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// QueuedJob is a queued job as a scheduling cycle sees it: only what
// placement needs, so a large queue stays small in memory.
type QueuedJob struct {
	ID          string
	Priority    int
	SubmittedAt time.Time
	DeadlineAt  time.Time
	// Progress is the fraction of the work already done and kept.
	Progress float64
	// Spec holds the placement-relevant fields of the job's spec.
	Spec *job.Spec
}

// queueLess orders the queue: higher priority first, then first come first
// served, then by ID for a stable order.
func queueLess(a, b *QueuedJob) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// placementSpec keeps the fields of a spec that placement reads and drops
// the rest (command, env, labels), which can be large.
func placementSpec(s *job.Spec) *job.Spec {
	c := *s
	c.Labels, c.Image, c.Command, c.Env = nil, "", nil, nil
	c.Checkpoint.Command = nil
	return &c
}

// compiledOffer is an offer with its names turned into small indexes.
type compiledOffer struct {
	offer     *providers.Offer
	gpu       int // index into gpus
	region    int // index into regions
	purchase  uint8
	price     money.Micros
	startup   time.Duration
	available int // -1 unknown; decremented as the cycle places jobs
	blocked   bool
}

// gpuGroup is every offer of one GPU type, cheapest first.
type gpuGroup struct {
	name       string
	offers     []*compiledOffer
	minStartup time.Duration
}

type regionKey struct{ provider, region string }

// compiledOffers is the offer book of one cycle, grouped by GPU type.
type compiledOffers struct {
	groups  []gpuGroup
	gpuIdx  map[string]int
	regions []regionKey
	geos    []string // geography of each region
	all     []compiledOffer
}

func purchaseBit(p providers.PurchaseOption) uint8 {
	switch p {
	case providers.Spot:
		return 1
	case providers.OnDemand:
		return 2
	case providers.Reserved:
		return 4
	}
	return 0
}

func compileOffers(offers []providers.Offer, now time.Time, unavailable map[string]time.Time, geography func(provider, region string) string) *compiledOffers {
	co := &compiledOffers{gpuIdx: map[string]int{}, all: make([]compiledOffer, len(offers))}
	regionIdx := map[regionKey]int{}
	for i := range offers {
		o := &offers[i]
		g, ok := co.gpuIdx[o.GPU]
		if !ok {
			g = len(co.groups)
			co.gpuIdx[o.GPU] = g
			co.groups = append(co.groups, gpuGroup{name: o.GPU, minStartup: o.LaunchLatency})
		}
		rk := regionKey{o.Provider, o.Region}
		r, ok := regionIdx[rk]
		if !ok {
			r = len(co.regions)
			regionIdx[rk] = r
			co.regions = append(co.regions, rk)
			geo := ""
			if geography != nil {
				geo = geography(o.Provider, o.Region)
			}
			co.geos = append(co.geos, geo)
		}
		until, marked := unavailable[o.ID()]
		avail := o.Available
		if o.Capacity == providers.CapacityNone {
			avail = 0
		}
		co.all[i] = compiledOffer{
			offer: o, gpu: g, region: r, purchase: purchaseBit(o.Purchase),
			price: o.Price, startup: o.LaunchLatency, available: avail,
			blocked: marked && now.Before(until),
		}
		grp := &co.groups[g]
		grp.offers = append(grp.offers, &co.all[i])
		grp.minStartup = min(grp.minStartup, o.LaunchLatency)
	}
	for gi := range co.groups {
		slices.SortFunc(co.groups[gi].offers, func(a, b *compiledOffer) int {
			if c := cmp.Compare(a.price, b.price); c != 0 {
				return c
			}
			return cmp.Compare(a.offer.ID(), b.offer.ID())
		})
	}
	return co
}

// compiledJob is a queued job's constraints as bit sets and per-GPU-type
// runtimes over one cycle's offer book.
type compiledJob struct {
	q         *QueuedJob
	gpus      []bool          // by group index: acceptable GPU type
	runtime   []time.Duration // by group index: remaining runtime
	regions   []bool          // by region index: allowed
	purchases uint8
	nodes     int
	perNode   int
	minMem    int
	minVCPUs  int
	minRAM    float64
	maxPrice  money.Micros
	deadline  time.Time
	// err is set when the job cannot be sized on a GPU type (no
	// throughput figure): it is reported, not placed.
	err string
}

// gpuMatches reports whether an accelerator entry names gpu by its exact
// name or its family (the part before the first '-': "A100" matches
// "A100-80GB").
func gpuMatches(entry, gpu string) bool {
	if strings.EqualFold(entry, gpu) {
		return true
	}
	fam, _, _ := strings.Cut(gpu, "-")
	return strings.EqualFold(entry, fam)
}

func (co *compiledOffers) compileJob(q *QueuedJob, tp bidding.ThroughputTable, rules *ruleCache) *compiledJob {
	s := q.Spec
	cj := &compiledJob{
		q:        q,
		gpus:     make([]bool, len(co.groups)),
		runtime:  make([]time.Duration, len(co.groups)),
		nodes:    max(1, s.Resources.Nodes),
		perNode:  max(1, s.Resources.GPUsPerNode),
		minMem:   s.Resources.MinGPUMemoryGB,
		minVCPUs: s.Resources.MinVCPUs,
		minRAM:   float64(s.Resources.MinMemoryGiB),
		maxPrice: s.MaxPricePerHour,
		deadline: q.DeadlineAt,
	}
	switch s.Purchase {
	case job.PurchaseSpot:
		cj.purchases = 1
	case job.PurchaseOnDemand:
		cj.purchases = 2 | 4
	default:
		cj.purchases = 1 | 2 | 4
	}
	remaining := s.Work.ReferenceDuration(s.TotalGPUs())
	if q.Progress > 0 {
		remaining = bidding.ScaleDuration(remaining, 1-min(q.Progress, 1))
	}
	class := s.Class()
	for gi := range co.groups {
		name := co.groups[gi].name
		ok := len(s.Resources.Accelerators) == 0
		for _, a := range s.Resources.Accelerators {
			if gpuMatches(a, name) {
				ok = true
				break
			}
		}
		if !ok {
			continue
		}
		rt, err := bidding.Runtime(tp, remaining, s.Work.ReferenceGPU, name, class)
		if err != nil {
			cj.err = err.Error()
			continue
		}
		cj.gpus[gi] = true
		cj.runtime[gi] = rt
	}
	cj.regions = rules.allowed(&s.Placement, co)
	return cj
}

// ruleCache shares region masks between jobs with the same placement rules
// (most jobs have none), so compiling a large queue stays cheap.
type ruleCache struct {
	all   []bool
	byKey map[string][]bool
}

func (rc *ruleCache) allowed(p *job.PlacementRules, co *compiledOffers) []bool {
	if len(p.Providers) == 0 && len(p.DenyProviders) == 0 && len(p.Regions) == 0 && len(p.DenyRegions) == 0 && len(p.Geographies) == 0 {
		if rc.all == nil {
			rc.all = make([]bool, len(co.regions))
			for i := range rc.all {
				rc.all[i] = true
			}
		}
		return rc.all
	}
	key := strings.Join(p.Providers, ",") + "|" + strings.Join(p.DenyProviders, ",") + "|" +
		strings.Join(p.Regions, ",") + "|" + strings.Join(p.DenyRegions, ",") + "|" + strings.Join(p.Geographies, ",")
	if m, ok := rc.byKey[key]; ok {
		return m
	}
	m := make([]bool, len(co.regions))
	for i, r := range co.regions {
		m[i] = regionAllowed(p, r.provider, r.region, co.geos[i])
	}
	if rc.byKey == nil {
		rc.byKey = map[string][]bool{}
	}
	rc.byKey[key] = m
	return m
}

func regionAllowed(p *job.PlacementRules, provider, region, geo string) bool {
	if len(p.Providers) > 0 && !slices.Contains(p.Providers, provider) {
		return false
	}
	if slices.Contains(p.DenyProviders, provider) {
		return false
	}
	if len(p.Geographies) > 0 && !slices.Contains(p.Geographies, geo) {
		return false
	}
	if len(p.Regions) > 0 && !matchAny(p.Regions, region) {
		return false
	}
	return !matchAny(p.DenyRegions, region)
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}
