package scheduler

import (
	"cmp"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// QueuedJob is a queued job as a scheduling cycle sees it: only what
// placement needs, so a large queue stays small in memory.
type QueuedJob struct {
	ID          string
	Priority    int
	SubmittedAt time.Time
	// Team owns the job (for its alerts' routing).
	Team       string
	DeadlineAt time.Time
	// Progress is the fraction of the work already done and kept.
	Progress float64
	// Req is what the job needs; jobs with the same needs share one value.
	Req unique.Handle[Requirements]
	// Moving is set for a job leaving capacity it ran on (a notice, a
	// move): its replacement carries on a running job, which the team's
	// budget does not hold back.
	Moving bool
	// Running is set for a running job weighed for a move (nil for a job
	// to place): what it holds and since when.
	Running *Running
	// Except are the offers the job may not go to; nil for most jobs.
	Except *Exceptions
	// CostSoFar is what the job has cost so far: with its max_cost_usd,
	// what an offer may be expected to cost.
	CostSoFar money.Micros

	// e is the scheduler's entry for the job while it is queued there, and
	// attempt the record's attempt count this was built from.
	e       *entry
	attempt int
}

// Running is what a running job weighed for a move holds now.
type Running struct {
	// GPU and GPUs are the GPU type and count it holds (its team's quota
	// counts them already).
	GPU  string
	GPUs int
	// OnDemandSince is set for a job running on on-demand capacity that
	// the deadline policy is asked about: since when it has run there
	// (its changeover counts from then).
	OnDemandSince time.Time
	// SpotSince and Offer are set for a job running on spot that the
	// deadline policy is asked about: since when it has run on the offer
	// (its zone is the policy's current choice).
	SpotSince time.Time
	Offer     string
}

// Exceptions are offers or scopes of offers (providers.ScopeKey) a job may
// not be placed on.
type Exceptions struct {
	// Excluded are those a provider refused the job for good;
	// ExcludedWhy the providers' reasons.
	Excluded    []string
	ExcludedWhy []string
	// Avoid are those the job is leaving (under notice, or moved off):
	// its replacement goes elsewhere.
	Avoid []string
}

// held is the GPU type and count a running job weighed for a move holds
// (none for a job to place).
func (q *QueuedJob) held() (string, int) {
	if q.Running == nil {
		return "", 0
	}
	return q.Running.GPU, q.Running.GPUs
}

// runningOffer is the spot offer a job the deadline policy weighs runs on
// ("" for any other job).
func (q *QueuedJob) runningOffer() string {
	if q.Running == nil {
		return ""
	}
	return q.Running.Offer
}

// Requirements is the placement-relevant part of a job spec, in a
// comparable form (lists joined with commas) so that identical needs are
// stored once however many jobs have them, and compiled once per cycle.
type Requirements struct {
	Accelerators   string
	MinGPUMemoryGB int
	GPUsPerNode    int
	Nodes          int
	MinVCPUs       int
	MinMemoryGiB   int
	Purchase       string
	MaxPrice       money.Micros
	// MaxCost caps the whole job's cost (max_cost_usd); zero: no cap.
	MaxCost money.Micros
	// Work is the whole job's wall time on RefGPU for Class.
	Work   time.Duration
	RefGPU string
	Class  string
	// Placement rules, comma-joined.
	Providers, DenyProviders, Regions, DenyRegions, Geographies string
	// Where the job's checkpoint was written and how big it is: moving
	// to another region or cloud costs its transfer.
	CkptProvider, CkptRegion string
	CkptGB                   float64
	// Where the job's input data lives and how big it is (its spec's
	// data): every attempt placed in another region or cloud pays its
	// egress.
	DataProvider, DataRegion string
	DataGB                   float64
	// How the job checkpoints, for the risk of interruptions.
	CkptDisabled bool
	CkptTime     time.Duration
	CkptInterval time.Duration
	CkptSizeGB   float64
	// SkipShortNotice leaves out offers whose notice window is shorter
	// than the checkpoint takes.
	SkipShortNotice bool
}

// RequirementsOf extracts a record's placement needs.
func RequirementsOf(r *job.Record) unique.Handle[Requirements] {
	req := requirements(&r.Spec)
	// A job that has made progress resumes from a checkpoint written where
	// it last ran.
	if r.Status.Checkpoint != nil && r.Status.Progress > 0 {
		last := r.Status.Previous
		if last == nil && len(r.Status.Attempts) > 0 {
			last = &r.Status.Attempts[len(r.Status.Attempts)-1]
		}
		if last != nil {
			req.CkptProvider, req.CkptRegion = last.Placement.Provider, last.Placement.Region
			req.CkptGB = r.Spec.Checkpoint.SizeGB
			if req.CkptGB == 0 && r.Status.Checkpoint.Size > 0 {
				req.CkptGB = float64(r.Status.Checkpoint.Size) / 1e9
			}
		}
	}
	return unique.Make(req)
}

// SpecRequirements extracts a spec's placement needs (a job that has not
// run yet).
func SpecRequirements(s *job.Spec) unique.Handle[Requirements] { return unique.Make(requirements(s)) }

func requirements(s *job.Spec) Requirements {
	r := s.Resources
	p := s.Placement
	j := func(l []string) string { return strings.Join(l, ",") }
	req := Requirements{
		Accelerators: j(r.Accelerators), MinGPUMemoryGB: r.MinGPUMemoryGB, GPUsPerNode: max(1, r.GPUsPerNode), Nodes: max(1, r.Nodes),
		MinVCPUs: r.MinVCPUs, MinMemoryGiB: r.MinMemoryGiB, Purchase: s.Purchase, MaxPrice: s.MaxPricePerHour, MaxCost: s.MaxCost,
		Work: s.Work.ReferenceDuration(s.TotalGPUs()), RefGPU: s.Work.ReferenceGPU, Class: s.Class(),
		Providers: j(p.Providers), DenyProviders: j(p.DenyProviders), Regions: j(p.Regions), DenyRegions: j(p.DenyRegions), Geographies: j(p.Geographies),
		CkptDisabled: s.Checkpoint.Disabled, CkptTime: s.Checkpoint.Duration.D(), CkptInterval: s.Checkpoint.Interval.D(), CkptSizeGB: s.Checkpoint.SizeGB,
		SkipShortNotice: s.Checkpoint.SkipShortNotice,
	}
	if s.Data.Declared() {
		req.DataProvider, req.DataRegion, req.DataGB = s.Data.Provider, s.Data.Region, s.Data.SizeGB
	}
	return req
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

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// compiledOffer is an offer with its names turned into small indexes.
type compiledOffer struct {
	offer  *providers.Offer
	id     string
	gpu    int // index into gpus
	region int // index into regions
	// The offer's shape, which every job's static filter reads
	// (needs.staticReason): here, not behind offer, whose struct is
	// elsewhere in memory (its first read, a cache miss per job and
	// offer, was 11% of a cycle's CPU profile; the median cycle over
	// 10,000 jobs went from about 62 to 60 ms).
	gpuMem, gpus, vcpus int32
	memGiB              float64
	purchase            uint8
	price               money.Micros
	startup             time.Duration
	notice              time.Duration // how long before taking it back the provider warns
	available           int           // -1 unknown; decremented as the cycle places jobs
	blocked             bool
	// rate is how often the offer's capacity is taken back, per
	// instance-hour.
	rate float64
	// keys are the scope keys that cover the offer (shared, read only).
	keys []string
}

// excludedFor reports whether any of a job's exclusions covers the offer.
func (o *compiledOffer) excludedFor(excluded []string) bool {
	for _, k := range o.keys {
		if slices.Contains(excluded, k) {
			return true
		}
	}
	return false
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
	ptrs    []*compiledOffer // the groups' offers, group after group
	// byID finds an offer by ID; set when running jobs are weighed.
	byID map[string]*compiledOffer
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

// compileOffers lays a book's offers (their counts, less what taken says
// launches took since) and the capacity marks in force at now over its
// base.
//
// The result is for one cycle (or one explanation): release hands its
// memory to the next, which at a couple of hundred cycles a second and
// thousands of offers is most of what the scheduler would otherwise
// allocate.
func compileOffers(offers []providers.Offer, base *offerBase, unavailable map[string]time.Time, taken map[string]int, now time.Time) *compiledOffers {
	co := compiledPool.Get().(*compiledOffers)
	co.gpuIdx, co.regions, co.geos, co.byID = base.gpuIdx, base.regions, base.geos, nil
	co.all = resize(co.all, len(offers))
	co.groups = resize(co.groups, len(base.groups))
	co.ptrs = resize(co.ptrs, len(offers))
	ix := base.ix
	blocked := ix.blocked(unavailable, now)
	for i := range offers {
		o, p := &offers[i], &base.per[i]
		avail := o.Available
		if o.Capacity == providers.CapacityNone {
			avail = 0
		}
		co.all[i] = compiledOffer{
			offer: o, id: ix.ids[i], keys: ix.keys[i], gpu: int(p.gpu), region: int(p.region), purchase: purchaseBit(o.Purchase),
			gpuMem: clamp32(o.GPUMemoryGB), gpus: clamp32(o.GPUs), vcpus: clamp32(o.VCPUs), memGiB: o.MemoryGiB,
			price: o.Price, startup: o.LaunchLatency, notice: o.Notice(), available: avail,
			blocked: blocked != nil && blocked[i], rate: p.rate,
		}
	}
	// Launches took from a few offers: find those by ID (the first of an
	// offer's scope keys) rather than look every offer up.
	for id, n := range taken {
		if n <= 0 {
			continue
		}
		for _, i := range ix.byKey[id] {
			if c := &co.all[i]; c.available > 0 {
				c.available = max(0, c.available-n)
			}
		}
	}
	ptrs := co.ptrs
	for gi, g := range base.groups {
		members := ptrs[:len(g.members):len(g.members)]
		ptrs = ptrs[len(g.members):]
		for j, m := range g.members {
			members[j] = &co.all[m]
		}
		co.groups[gi] = gpuGroup{name: g.name, offers: members, minStartup: g.minStartup}
	}
	return co
}

// compiledPool holds compiled books' memory between cycles.
var compiledPool = sync.Pool{New: func() any { return new(compiledOffers) }}

// release gives co's memory back for another cycle's book; neither co nor
// any of its offers may be used after. What it points into (the book it
// was compiled from) is let go.
func (co *compiledOffers) release() {
	clear(co.all)
	clear(co.ptrs)
	clear(co.groups)
	co.gpuIdx, co.regions, co.geos, co.byID = nil, nil, nil, nil
	compiledPool.Put(co)
}

// resize is s with length n, its array reused when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// compiledJob is a queued job's constraints over one cycle's offer book.
type compiledJob struct {
	q *QueuedJob
	*needs
	runtime  []time.Duration // by group index: remaining runtime
	deadline time.Time
	// team is the job's team when it has GPU quotas (nil: none);
	// quotaKeys are, by group index, the quota entries of the GPU types.
	team      *teamUse
	quotaKeys []string
	// overCost is the least expected cost to finish among the offers
	// that would take the job past its max_cost_usd (explain's message).
	overCost money.Micros
}

// affordable reports whether finishing at an expected cost keeps the job
// within its max_cost_usd.
func (cj *compiledJob) affordable(est bidding.Estimate) bool {
	return cj.maxCost <= 0 || cj.q.CostSoFar+est.Cost <= cj.maxCost
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

// needs is a Requirements compiled against one cycle's offer book;
// shared by every job with the same requirements.
type needs struct {
	gpus      []bool          // by group index: acceptable GPU type
	runtime   []time.Duration // by group index: full work's runtime
	regions   []bool          // by region index: allowed
	purchases uint8
	accels    []string
	nodes     int
	perNode   int
	minMem    int
	minVCPUs  int
	minRAM    float64
	maxPrice  money.Micros
	maxCost   money.Micros
	purchase  string
	// skipShort: the job wants no offer whose notice is shorter than its
	// checkpoint (ckpt.Time).
	skipShort bool
	// err is set when the job cannot be sized on a GPU type (no
	// throughput figure): it is reported, not placed.
	err string

	// filter is shared by the needs whose static filters are the same
	// (most differ only in their work): the offers that pass them, for
	// the search of an offer (cheapest); baseFilter likewise, the offers
	// the on-demand baseline looks at. Nil outside a cycle's decide.
	filter, baseFilter *offerFilter

	// The static scan, done once and only when a job with these needs is
	// left unplaced: what the filters that do not change within a cycle
	// reject, and the offers that pass them.
	scanned      bool
	static       [numReasons]int
	cands        [][]*compiledOffer // by group, cheapest first
	cheapestOver money.Micros       // cheapest offer over the max price; -1 if none
	staticMsgs   [numReasons]string
	staticOnly   []job.PendingReason

	// carry is, by region index, what an attempt there pays to bring in
	// the job's checkpoint and input data (nil when there is neither).
	carry []regionCarry
	// ckptRegion is the region (provider/region) of the job's
	// checkpoint, "" when it has none.
	ckptRegion string
	ckpt       bidding.Checkpointing

	// baseline is the on-demand baseline of a job with these needs and
	// no progress, once baselined (see onDemandBaseline).
	baseline  money.Micros
	baselined bool
}

// regionCarry is what an attempt in one region pays to bring in what the
// job needs: moving its checkpoint there (time and egress), and reading
// its input data there (egress, every attempt).
type regionCarry struct {
	moveTime time.Duration
	moveCost money.Micros
	data     money.Micros
}

// carryTo is what an attempt on offer o pays to bring in the job's
// checkpoint and data (zero when there is nothing to bring).
func (n *needs) carryTo(o *compiledOffer) regionCarry {
	if n.carry == nil {
		return regionCarry{}
	}
	return n.carry[o.region]
}

func (co *compiledOffers) compileNeeds(r *Requirements, tp bidding.ThroughputTable, rules *ruleCache) *needs {
	n := &needs{gpus: make([]bool, len(co.groups)), runtime: make([]time.Duration, len(co.groups)), accels: split(r.Accelerators),
		nodes: r.Nodes, perNode: r.GPUsPerNode, minMem: r.MinGPUMemoryGB, minVCPUs: r.MinVCPUs,
		minRAM: float64(r.MinMemoryGiB), maxPrice: r.MaxPrice, maxCost: r.MaxCost, purchase: r.Purchase}
	switch r.Purchase {
	case job.PurchaseSpot:
		n.purchases = 1
	case job.PurchaseOnDemand:
		n.purchases = 2 | 4
	default:
		n.purchases = 1 | 2 | 4
	}
	for gi := range co.groups {
		name := co.groups[gi].name
		ok := len(n.accels) == 0
		for _, a := range n.accels {
			if gpuMatches(a, name) {
				ok = true
				break
			}
		}
		if !ok {
			continue
		}
		rt, err := bidding.Runtime(tp, r.Work, r.RefGPU, name, r.Class)
		if err != nil {
			n.err = err.Error()
			continue
		}
		n.gpus[gi] = true
		n.runtime[gi] = rt
	}
	n.regions = rules.allowed(r, co)
	n.ckpt = bidding.Checkpointing{Disabled: r.CkptDisabled, Time: r.CkptTime, Interval: r.CkptInterval, SizeGB: r.CkptSizeGB}
	if n.ckpt.Time <= 0 {
		n.ckpt.Time = bidding.DefaultCheckpointTime
	}
	n.skipShort = r.SkipShortNotice && !r.CkptDisabled
	if r.CkptProvider != "" {
		n.ckptRegion = r.CkptProvider + "/" + r.CkptRegion
	}
	moves, data := r.CkptProvider != "" && r.CkptGB > 0, r.DataProvider != "" && r.DataGB > 0
	if moves || data {
		n.carry = make([]regionCarry, len(co.regions))
		for i, rg := range co.regions {
			c := &n.carry[i]
			if moves {
				c.moveTime, c.moveCost = bidding.Transfer(r.CkptProvider, r.CkptRegion, rg.provider, rg.region, r.CkptGB)
			}
			if data {
				_, c.data = bidding.Transfer(r.DataProvider, r.DataRegion, rg.provider, rg.region, r.DataGB)
			}
		}
	}
	return n
}

func (co *compiledOffers) compileJob(q *QueuedJob, nd *needs) *compiledJob {
	cj := &compiledJob{q: q, needs: nd, runtime: nd.runtime, deadline: q.DeadlineAt}
	if q.Progress > 0 {
		left := 1 - min(q.Progress, 1)
		cj.runtime = make([]time.Duration, len(nd.runtime))
		for i, rt := range nd.runtime {
			cj.runtime[i] = bidding.ScaleDuration(rt, left)
		}
	}
	return cj
}

// offerFilter is what the static filters of some needs let through (or,
// for the on-demand baseline, what it looks at), listed once two walks
// asked (a single walk goes through the book, up to the first offer it
// cannot beat, for less).
type offerFilter struct {
	pass  func(*needs, *compiledOffer) bool
	walks int
	cands [][]*compiledOffer // by group, cheapest first; nil until listed
	// scan is, for the search's filters, the static scan that the needs
	// sharing them copy (needs.staticScan); nil until one asked.
	scan *needs
}

// filterKey is what needs.staticReason reads.
type filterKey struct {
	gpus                     string // needs.gpus, a byte a group
	regions                  *bool  // the rule cache's shared mask
	perNode, minMem, minVCPU int
	minRAM                   float64
	purchases                uint8
	maxPrice                 money.Micros
	skipShort                bool
	ckptTime                 time.Duration
}

// filters shares offerFilters between the needs of one cycle: those for
// the search of an offer (cheapest) and those for the on-demand baseline.
type filters struct {
	search, baseline filterSet
}

// filterSet is the offerFilters of one kind, by key.
type filterSet map[filterKey]*offerFilter

func newFilters() filters {
	return filters{search: filterSet{}, baseline: filterSet{}}
}

// set gives needs n the filters of the needs before it with the same
// static filters, if any.
func (fs filters) set(n *needs) {
	k := filterKey{perNode: n.perNode, minMem: n.minMem, minVCPU: n.minVCPUs, minRAM: n.minRAM}
	if len(n.regions) > 0 {
		k.regions = &n.regions[0]
	}
	g := make([]byte, len(n.gpus))
	for i, ok := range n.gpus {
		if ok {
			g[i] = 1
		}
	}
	k.gpus = string(g)
	// The baseline looks at every on-demand offer of the job's shape and
	// regions, whatever its purchase option, price cap and checkpoint.
	n.baseFilter = fs.baseline.of(k, baselineCandidate)
	k.purchases, k.maxPrice, k.skipShort, k.ckptTime = n.purchases, n.maxPrice, n.skipShort, n.ckpt.Time
	n.filter = fs.search.of(k, func(n *needs, o *compiledOffer) bool { return n.staticReason(o) == reasonNone })
}

func (m filterSet) of(k filterKey, pass func(*needs, *compiledOffer) bool) *offerFilter {
	f := m[k]
	if f == nil {
		f = &offerFilter{pass: pass}
		m[k] = f
	}
	return f
}

// baselineCandidate reports whether the on-demand baseline of needs n
// looks at offer o.
func baselineCandidate(n *needs, o *compiledOffer) bool {
	if o.purchase != purchaseBit(providers.OnDemand) {
		return false
	}
	switch n.staticReason(o) {
	case reasonNone, reasonPurchase, reasonMaxPrice, reasonShortNotice:
		return true
	}
	return false
}

// offers are the offers of group gi that a walk for needs n goes
// through: those the filter passes once listed (listed true), else every
// one. A walk counts from its first call (walk).
func (f *offerFilter) offers(co *compiledOffers, n *needs, gi int) (offers []*compiledOffer, listed bool) {
	if f == nil || f.cands == nil {
		return co.groups[gi].offers, false
	}
	return f.cands[gi], true
}

// walk counts a walk for needs n, listing the offers the filter passes
// at the second.
func (f *offerFilter) walk(co *compiledOffers, n *needs) {
	if f == nil {
		return
	}
	if f.walks++; f.walks < 2 || f.cands != nil {
		return
	}
	f.cands = make([][]*compiledOffer, len(co.groups))
	for gi := range co.groups {
		if !n.gpus[gi] {
			continue
		}
		for _, o := range co.groups[gi].offers {
			if f.pass(n, o) {
				f.cands[gi] = append(f.cands[gi], o)
			}
		}
	}
}

// ruleCache shares region masks between jobs with the same placement
// rules (most jobs have none), so compiling a large queue stays cheap.
type ruleCache struct {
	all   []bool
	byKey map[[5]string][]bool
}

func (rc *ruleCache) allowed(r *Requirements, co *compiledOffers) []bool {
	key := [5]string{r.Providers, r.DenyProviders, r.Regions, r.DenyRegions, r.Geographies}
	if key == ([5]string{}) {
		if rc.all == nil {
			rc.all = make([]bool, len(co.regions))
			for i := range rc.all {
				rc.all[i] = true
			}
		}
		return rc.all
	}
	if m, ok := rc.byKey[key]; ok {
		return m
	}
	p := &job.PlacementRules{Providers: split(r.Providers), DenyProviders: split(r.DenyProviders), Regions: split(r.Regions), DenyRegions: split(r.DenyRegions), Geographies: split(r.Geographies)}
	m := make([]bool, len(co.regions))
	for i, rg := range co.regions {
		m[i] = regionAllowed(p, rg.provider, rg.region, co.geos[i])
	}
	if rc.byKey == nil {
		rc.byKey = map[[5]string][]bool{}
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

// clamp32 is v as an int32, the nearest one when out of range (an offer's
// GPU memory, GPUs or vCPUs: never near either end).
func clamp32(v int) int32 {
	return int32(max(min(v, math.MaxInt32), math.MinInt32))
}
