package server

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// QuoteReport is a quote: what `spotwise quote FILE` prints, its JSON
// shape, and the answer of POST /v1/quote.
type QuoteReport struct {
	Job             QuoteJob                 `json:"job"`
	Book            QuoteBook                `json:"book"`
	Options         []QuoteOption            `json:"options"`
	Excluded        []QuoteExcluded          `json:"excluded"`
	Recommendations []bidding.Recommendation `json:"recommendations"`
	// Decision is what the scheduler's own cycle does with the job over
	// the same book: the placement it makes when the job is submitted,
	// if nothing changes meanwhile, or why the job would wait.
	Decision QuoteDecision `json:"decision"`
}

// QuoteDecision is where the scheduler would place a job now, with its
// estimate (the attempt's estimated runtime and cost), or, with Pending
// set, why it would wait.
type QuoteDecision struct {
	Offer        string       `json:"offer,omitempty"`
	Nodes        int          `json:"nodes,omitempty"`
	PricePerHour money.Micros `json:"price_per_hour,omitempty"`
	Runtime      job.Duration `json:"runtime,omitempty"`
	Cost         money.Micros `json:"cost,omitempty"`
	// DataTransfer is what the attempt would pay to read the job's input
	// data into the offer's region (part of Cost).
	DataTransfer money.Micros        `json:"data_transfer_cost,omitempty"`
	Finish       *time.Time          `json:"finish,omitempty"`
	Pending      []job.PendingReason `json:"pending,omitempty"`
}

type QuoteJob struct {
	Name        string     `json:"name"`
	Workload    string     `json:"workload"`
	Precision   string     `json:"precision"`
	Class       string     `json:"class"`
	Work        string     `json:"work"`
	Nodes       int        `json:"nodes"`
	GPUsPerNode int        `json:"gpus_per_node"`
	Purchase    string     `json:"purchase"`
	Deadline    *time.Time `json:"deadline,omitempty"`
	// CheckpointTime is how long one checkpoint takes (the default when
	// the spec does not say).
	CheckpointTime time.Duration `json:"checkpoint_time"`
	// Data is where the job's input data lives, when it says so.
	Data *job.Data `json:"data,omitempty"`
}

type QuoteBook struct {
	Source   string    `json:"source"`
	Seed     int64     `json:"seed"`
	At       time.Time `json:"at"`
	Offers   int       `json:"offers"`
	Feasible int       `json:"feasible"`
}

// QuoteOption is one ranked option. Hours are decimal hours; amounts are
// exact decimal dollars.
type QuoteOption struct {
	Rank                  int          `json:"rank"`
	Offer                 string       `json:"offer"`
	Provider              string       `json:"provider"`
	Region                string       `json:"region"`
	Zone                  string       `json:"zone"`
	InstanceType          string       `json:"instance_type"`
	GPU                   string       `json:"gpu"`
	GPUs                  int          `json:"gpus"`
	Nodes                 int          `json:"nodes"`
	Purchase              string       `json:"purchase"`
	PricePerHour          money.Micros `json:"price_per_hour"`
	RuntimeHours          float64      `json:"runtime_hours"`
	ExpectedRuntimeHours  float64      `json:"expected_runtime_hours"`
	Cost                  money.Micros `json:"cost"`
	ExpectedCost          money.Micros `json:"expected_cost"`
	InterruptionsPerHour  float64      `json:"interruptions_per_hour"`
	RateSource            string       `json:"rate_source"`
	ExpectedInterruptions float64      `json:"expected_interruptions"`
	PInterruption         float64      `json:"p_interruption"`
	CheckpointMinutes     float64      `json:"checkpoint_interval_minutes"`
	// NoticeSeconds is the offer's interruption notice; ShortNotice says
	// the job's checkpoint does not fit in it, so an interruption there
	// loses the work since the last periodic checkpoint.
	NoticeSeconds float64 `json:"notice_seconds"`
	ShortNotice   bool    `json:"short_notice"`
	// DataEgress is what each attempt on the offer pays to read the job's
	// input data into its region (part of ExpectedCost, with the reads
	// again after the interruptions expected).
	DataEgress    money.Micros `json:"data_egress,omitempty"`
	Finish        time.Time    `json:"finish"`
	MeetsDeadline bool         `json:"meets_deadline"`
	opt           bidding.Option
}

type QuoteExcluded struct {
	Reason  string `json:"reason"`
	Meaning string `json:"meaning"`
	Offers  int    `json:"offers"`
	Example string `json:"example"`
	Detail  string `json:"detail"`
}

// reasonMeaning says what each of the pipeline's reason codes means.
var reasonMeaning = map[string]string{
	"gpu-type":    "GPU type not accepted",
	"gpu-memory":  "too little GPU memory",
	"gpu-count":   "too few GPUs per node",
	"vcpus":       "too few vCPUs",
	"memory":      "too little memory",
	"region":      "placement rules exclude the region",
	"purchase":    "purchase option not allowed",
	"max-price":   "above the max price",
	"unavailable": "marked unavailable",
	"capacity":    "no capacity for the nodes",
	"deadline":    "cannot finish by the deadline",
}

// QuoteInput is what a quote is made over.
type QuoteInput struct {
	Spec job.Spec
	// Book is the offer book and what the scheduler knows at Book.Now:
	// the simulated cloud's for a local quote, the running scheduler's
	// (Scheduler.Book) for a server's. Reserved offers are in it.
	Book scheduler.Snapshot
	// Rate is an offer's interruption rate and where it comes from; nil:
	// Book.Rates ("scheduler"), else the provider's prior.
	Rate func(providers.Offer) (float64, string)
	// Reserved is the reserved capacity already bought, by offer ID: its
	// idle hours cost nothing more.
	Reserved map[string]bidding.Reservation
	// Source says where the offer book comes from; Seed is the simulated
	// cloud's seed (0 for a server's book).
	Source string
	Seed   int64
	// Months and RunsPerMonth: a job that comes back, for the
	// budget-horizon advice.
	Months       int
	RunsPerMonth float64
}

// Quote ranks every way to run a job by expected cost to finish,
// interruptions included: the scheduler's own placement pipeline
// (scheduler.Explain) over the book, re-scored with each offer's risk,
// then the options excluded, by reason, and the decision rules' advice.
func Quote(in QuoteInput) *QuoteReport {
	spec, snap := &in.Spec, in.Book
	now := snap.Now
	if in.RunsPerMonth == 0 {
		in.RunsPerMonth = 1
	}
	deadline := spec.Deadline.Resolve(now)
	q := &scheduler.QueuedJob{ID: "quote", Priority: spec.Prio(), SubmittedAt: now, DeadlineAt: deadline, Req: scheduler.SpecRequirements(spec)}
	verdicts := scheduler.Explain(snap, q)

	rep := &QuoteReport{
		Job: QuoteJob{Name: spec.Name, Workload: spec.Workload, Precision: spec.Precision, Class: spec.Class(), Work: WorkText(spec.Work),
			Nodes: spec.Resources.Nodes, GPUsPerNode: spec.Resources.GPUsPerNode, Purchase: spec.Purchase,
			CheckpointTime: spec.Checkpoint.Time()},
		Book: QuoteBook{Source: in.Source, Seed: in.Seed, At: now, Offers: len(snap.Offers)},
	}
	if !deadline.IsZero() {
		rep.Job.Deadline = &deadline
	}
	if d := spec.Data; d.Declared() {
		rep.Job.Data = &d
	}
	jr := bidding.JobRisk{Now: now, Nodes: spec.Resources.Nodes, Deadline: deadline, Checkpoint: bidding.Checkpointing{
		Disabled: spec.Checkpoint.Disabled, Time: spec.Checkpoint.Duration.D(), Interval: spec.Checkpoint.Interval.D(), SizeGB: spec.Checkpoint.SizeGB}}
	rate := in.Rate
	if rate == nil {
		rate = func(o providers.Offer) (float64, string) {
			if r, ok := snap.Rates[o.ID()]; ok {
				return r, "scheduler"
			}
			return bidding.PriorRate(o.Provider, o.Purchase), "prior"
		}
	}
	score := func(v scheduler.Verdict, restart *providers.Offer) bidding.Option {
		r, src := rate(v.Offer)
		opt := jr.Score(v.Offer, v.Estimate, r, src, restart)
		if res, ok := in.Reserved[v.Offer.ID()]; ok {
			// Idle reserved hours are free; what the reservation does not
			// cover (the term ending mid-run) is paid at on-demand.
			over, _ := res.MarginalCost(spec.Resources.Nodes, opt.Risk.Startup+opt.Risk.Runtime)
			opt.Risk.Cost += over
			opt.Risk.Base.Cost += over
		}
		return opt
	}
	// Feasible verdicts come first, cheapest to finish first: a restart
	// lands on the best of them in another zone.
	var feasible []providers.Offer
	for _, v := range verdicts {
		if v.Reason == "" {
			feasible = append(feasible, v.Offer)
		}
	}
	rep.Book.Feasible = len(feasible)
	var opts []bidding.Option
	var others []bidding.Option // excluded only by the purchase policy: for the spot-vs-on-demand fact
	for _, v := range verdicts {
		switch v.Reason {
		case "":
			var restart *providers.Offer
			if j := bidding.RestartTarget(feasible, len(opts)); j >= 0 {
				restart = &feasible[j]
			}
			opts = append(opts, score(v, restart))
			continue
		case "purchase":
			others = append(others, score(v, nil))
		}
		rep.addExcluded(v, spec.Resources.Nodes)
	}
	bidding.RankOptions(opts)
	for i, o := range opts {
		row := quoteRow(i+1, o, spec.Resources.Nodes)
		if d := spec.Data; d.Declared() {
			_, row.DataEgress = bidding.Transfer(d.Provider, d.Region, o.Offer.Provider, o.Offer.Region, d.SizeGB)
		}
		rep.Options = append(rep.Options, row)
	}
	rep.Recommendations = bidding.Recommend(bidding.DecisionRules, quoteFacts(spec, rep, append(slices.Clone(opts), others...), snap, in))
	decide := snap
	decide.Jobs = []*scheduler.QueuedJob{q}
	plan := scheduler.Decide(decide)
	for _, p := range plan.Placements {
		finish := p.Estimate.Finish
		rep.Decision = QuoteDecision{Offer: p.Offer.ID(), Nodes: p.Nodes, PricePerHour: p.Offer.Price, Runtime: job.Duration(p.Estimate.Runtime),
			Cost: p.Estimate.Cost, DataTransfer: p.DataTransfer, Finish: &finish}
	}
	for _, p := range plan.Pending {
		rep.Decision.Pending = p.Reasons
	}
	return rep
}

func quoteRow(rank int, o bidding.Option, nodes int) QuoteOption {
	r := o.Risk
	return QuoteOption{
		Rank: rank, Offer: o.Offer.ID(), Provider: o.Offer.Provider, Region: o.Offer.Region, Zone: o.Offer.Zone,
		InstanceType: o.Offer.InstanceType, GPU: o.Offer.GPU, GPUs: o.Offer.GPUs, Nodes: nodes, Purchase: string(o.Offer.Purchase),
		PricePerHour: o.Offer.Price, RuntimeHours: r.Base.Runtime.Hours(), ExpectedRuntimeHours: r.Runtime.Hours(),
		Cost: r.Base.Cost, ExpectedCost: r.Cost,
		InterruptionsPerHour: o.Rate, RateSource: o.RateSource,
		ExpectedInterruptions: r.Interruptions, PInterruption: r.PAny, CheckpointMinutes: r.Interval.Minutes(),
		NoticeSeconds: o.Offer.Notice().Seconds(), ShortNotice: r.ShortNotice && r.Interruptions > 0,
		Finish: r.Finish, MeetsDeadline: o.MeetsDeadline, opt: o,
	}
}

func (rep *QuoteReport) addExcluded(v scheduler.Verdict, nodes int) {
	if n := len(rep.Excluded); n > 0 && rep.Excluded[n-1].Reason == v.Reason {
		rep.Excluded[n-1].Offers++
		return
	}
	o := v.Offer
	detail := fmt.Sprintf("%dx %s, %s/h", o.GPUs, o.GPU, o.Price.Human())
	switch v.Reason {
	case "capacity":
		detail += fmt.Sprintf(", %d available for %s", max(o.Available, 0), plural(nodes, "node"))
	case "deadline":
		if rep.Job.Deadline != nil {
			detail += fmt.Sprintf(", would finish %s late", HumanDuration(v.Estimate.Finish.Sub(*rep.Job.Deadline)))
		}
	}
	rep.Excluded = append(rep.Excluded, QuoteExcluded{Reason: v.Reason, Meaning: reasonMeaning[v.Reason], Offers: 1, Example: o.ID(), Detail: detail})
}

// quoteFacts gathers what the decision rules look at.
func quoteFacts(spec *job.Spec, rep *QuoteReport, opts []bidding.Option, snap scheduler.Snapshot, f QuoteInput) bidding.Facts {
	fs := bidding.Facts{
		Workload: spec.Workload, Precision: spec.Precision, Purchase: spec.Purchase,
		Nodes: spec.Resources.Nodes, GPUs: spec.TotalGPUs(), Checkpoints: !spec.Checkpoint.Disabled,
		HorizonMonths: f.Months, RunsPerMonth: f.RunsPerMonth, Geographies: spec.Placement.Geographies, Slack: -1,
	}
	if len(rep.Options) > 0 {
		best := rep.Options[0].opt
		r := best.Risk
		fs.GPUHours = r.Base.Runtime.Hours() * float64(spec.TotalGPUs())
		fs.Utilization = f.RunsPerMonth * r.Runtime.Hours() / bidding.HoursPerMonth
		fs.MonthlySpend = r.Cost.Scale(int64(f.RunsPerMonth*1000+0.5), 1000)
		fs.BestPurchase = string(best.Offer.Purchase)
		fs.Best = fmt.Sprintf("%s %s (%dx %s) in %s %s", best.Offer.Purchase, best.Offer.InstanceType, best.Offer.GPUs, best.Offer.GPU, best.Offer.Provider, best.Offer.Region)
		if d := rep.Job.Deadline; d != nil && r.Runtime > 0 {
			fs.Slack = float64(d.Sub(r.Finish)) / float64(r.Runtime)
		}
	}
	// Best spot against best on-demand, each expected to meet the deadline.
	var spot, od *bidding.Option
	for i := range opts {
		o := &opts[i]
		if !o.MeetsDeadline {
			continue
		}
		switch o.Offer.Purchase {
		case providers.Spot:
			if spot == nil || o.Risk.Cost < spot.Risk.Cost {
				spot = o
			}
		case providers.OnDemand:
			if od == nil || o.Risk.Cost < od.Risk.Cost {
				od = o
			}
		}
	}
	if spot != nil && od != nil && od.Risk.Cost > 0 {
		fs.SpotSaving = 1 - float64(spot.Risk.Cost)/float64(od.Risk.Cost)
		fs.SpotPAny = spot.Risk.PAny
	}
	fs.Regions, fs.AllRegions, fs.Areas = regionsAllowed(spec, snap)
	return fs
}

// regionsAllowed counts the regions of the offer book the job's placement
// rules allow, by asking the scheduler's pipeline about a job with the same
// rules and no other demands: what it rejects for "region" is what the
// rules exclude.
func regionsAllowed(spec *job.Spec, snap scheduler.Snapshot) (allowed, all, geos int) {
	probe := job.Spec{Resources: job.Resources{GPUsPerNode: 1, Nodes: 1}, Purchase: job.PurchaseAuto,
		Work: job.Work{Duration: job.Duration(time.Hour), ReferenceGPU: "V100"}, Placement: spec.Placement}
	q := &scheduler.QueuedJob{ID: "probe", SubmittedAt: snap.Now, Req: scheduler.SpecRequirements(&probe)}
	in, every, areas := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, v := range scheduler.Explain(snap, q) {
		key := v.Offer.Provider + "/" + v.Offer.Region
		every[key] = true
		if v.Reason != "region" {
			in[key] = true
			areas[snap.Geography(v.Offer.Provider, v.Offer.Region)] = true
		}
	}
	return len(in), len(every), len(areas)
}

// WorkText is a spec's work as people say it ("2h on V100").
func WorkText(w job.Work) string {
	if w.Duration > 0 {
		return HumanDuration(w.Duration.D()) + " on " + w.ReferenceGPU
	}
	return w.String()
}

// HumanDuration writes a duration the way people do: "2h14m", "45s".
func HumanDuration(d time.Duration) string {
	if d >= time.Minute || d <= -time.Minute {
		d = d.Round(time.Minute)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		return "0s"
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
