package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/providers/sim"
	"github.com/spotwise/spotwise/scheduler"
)

const quoteLong = `For a job spec, rank every way to run it by expected cost to finish,
interruptions included: the scheduler's own placement pipeline
(scheduler.Explain) over an offer book, re-scored with the risk of each
offer (rate x runtime x work lost, restart and checkpoint move). Then the
options the pipeline excluded, by reason, and the advice of the seeds'
decision tree (task type, scale, budget horizon, compliance).

The offer book is the simulated cloud over the bundled catalog (list
prices; spot prices as the simulation has them at --at, by default now,
for --seed). Give --months and --runs-per-month for a job that comes back,
so the budget-horizon advice can weigh a reservation.

With --commitment (no FILE), weigh a reserved / committed-use term against
on-demand: the break-even utilization, the effective price of a busy hour
at a few utilizations, and the cost of ending early.

Worked example (the seeds' p4d.24xlarge: $32.776/h on-demand, $18.676/h
reserved for 3 years, 20% penalty for ending early):

  spotwise quote --commitment --provider aws --region us-east-1 \
      --instance-type p4d.24xlarge --term 3y --hourly 18.676 \
      --on-demand-price 32.776 --penalty 20% --end-month 12

  3 years = 36 x 730 h = 26,280 h
  commitment: 26,280 h x $18.676 = $490,805.28
  on-demand for every hour: 26,280 h x $32.776 = $861,353.28
  break-even: $490,805.28 / $861,353.28 = 56.98% utilization
    (14,974.5 h busy; below that, on-demand would have cost less)
  busy 80%: $490,805.28 / (0.8 x 26,280 h) = $23.345 per busy hour
  ending after 12 months: paid 8,760 h x $18.676 = $163,601.76,
    still owed $327,203.52, penalty 20% = $65,440.70,
    total $229,042.46`

type quoteFlags struct {
	json         bool
	top          int
	seed         int64
	at           string
	months       int
	runsPerMonth float64
	reservations string

	commitment                      bool
	provider, region, instanceType  string
	term, upfront, hourly, discount string
	penalty, onDemand               string
	instances                       int
	utilizations                    []string
	endMonths                       []int
}

func newQuoteCmd() *cobra.Command {
	var f quoteFlags
	cmd := &cobra.Command{
		Use:   "quote FILE | quote --commitment [flags]",
		Short: "Rank where a job finishes cheapest, risk included; or weigh a reserved term against on-demand",
		Long:  quoteLong,
		// Errors say what is wrong; the usage would bury it.
		SilenceUsage: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.commitment && len(args) > 0 {
				return errors.New("--commitment weighs a term, not a job: give no FILE")
			}
			if f.commitment {
				return nil
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if f.commitment {
				q, err := f.commitmentQuote(catalog.Default())
				if err != nil {
					return err
				}
				if f.json {
					return writeJSON(out, q)
				}
				printCommitment(out, q)
				return nil
			}
			data, _, err := readSpec(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			rep, err := quoteSpec(cmd.Context(), data, f)
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(out, rep)
			}
			printQuote(out, rep, f.top)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print JSON for scripts")
	fl.IntVar(&f.top, "top", 10, "show the best N options (0: all)")
	fl.Int64Var(&f.seed, "seed", 1, "seed of the simulated offer book")
	fl.StringVar(&f.at, "at", "", "prices as of this time (RFC 3339; default now)")
	fl.IntVar(&f.months, "months", 0, "budget horizon: months the job keeps coming back (0: one-off)")
	fl.Float64Var(&f.runsPerMonth, "runs-per-month", 1, "how often the job runs in a month, with --months")
	fl.StringVar(&f.reservations, "reservations", "", "reserved capacity already bought (YAML, see examples/reservations/): its idle hours are paid for, so they cost nothing more")
	fl.BoolVar(&f.commitment, "commitment", false, "weigh a reserved/committed term against on-demand instead")
	fl.StringVar(&f.provider, "provider", "", "commitment: provider (default: the instance type's)")
	fl.StringVar(&f.region, "region", "", "commitment: region (for the catalog's on-demand price)")
	fl.StringVar(&f.instanceType, "instance-type", "", "commitment: instance type")
	fl.StringVar(&f.term, "term", "1y", "commitment: term, 1y or 3y")
	fl.StringVar(&f.upfront, "upfront", "0", "commitment: paid upfront per instance ($)")
	fl.StringVar(&f.hourly, "hourly", "", "commitment: billed per instance-hour of the term ($)")
	fl.StringVar(&f.discount, "discount", "", "commitment: discount off on-demand instead of --hourly (40% or 0.4)")
	fl.StringVar(&f.penalty, "penalty", "0%", "commitment: early-termination penalty, share of what is still owed")
	fl.StringVar(&f.onDemand, "on-demand-price", "", "commitment: on-demand price per hour (default: the catalog's)")
	fl.IntVar(&f.instances, "instances", 1, "commitment: instances covered")
	fl.StringSliceVar(&f.utilizations, "utilization", nil, "commitment: utilizations to price (default 100,80,60,50,40,25%)")
	fl.IntSliceVar(&f.endMonths, "end-month", nil, "commitment: months to price ending early at (default a third and two thirds in)")
	return cmd
}

// quoteReport is what `spotwise quote FILE` prints, and its JSON shape.
type quoteReport struct {
	Job             quoteJob                 `json:"job"`
	Book            quoteBook                `json:"book"`
	Options         []quoteOption            `json:"options"`
	Excluded        []quoteExcluded          `json:"excluded"`
	Recommendations []bidding.Recommendation `json:"recommendations"`
}

type quoteJob struct {
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
}

type quoteBook struct {
	Source   string    `json:"source"`
	Seed     int64     `json:"seed"`
	At       time.Time `json:"at"`
	Offers   int       `json:"offers"`
	Feasible int       `json:"feasible"`
}

// quoteOption is one ranked option. Hours are decimal hours; amounts are
// exact decimal dollars.
type quoteOption struct {
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
	NoticeSeconds float64   `json:"notice_seconds"`
	ShortNotice   bool      `json:"short_notice"`
	Finish        time.Time `json:"finish"`
	MeetsDeadline bool      `json:"meets_deadline"`
	opt           bidding.Option
}

type quoteExcluded struct {
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

// quoteSpec builds the report for a job spec over the simulated offer book.
func quoteSpec(ctx context.Context, data []byte, f quoteFlags) (*quoteReport, error) {
	cat := catalog.Default()
	spec, err := job.Parse(data, cat)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	if f.at != "" {
		if now, err = time.Parse(time.RFC3339, f.at); err != nil {
			return nil, fmt.Errorf("--at: %w", err)
		}
	}
	cloud, err := sim.New(ctx, sim.Options{Catalog: cat, Clock: clock.NewFake(now), Seed: f.seed})
	if err != nil {
		return nil, err
	}
	defer cloud.Close()
	offers, err := cloud.Offers(ctx)
	if err != nil {
		return nil, err
	}
	reserved, err := loadReservations(f.reservations, cat, offers)
	if err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(reserved)) {
		offers = append(offers, reserved[id].offer)
	}
	deadline := spec.Deadline.Resolve(now)
	snap := scheduler.Snapshot{Now: now, Offers: offers, Throughput: cat, Geography: cat.GeographyOf}
	q := &scheduler.QueuedJob{ID: "quote", Priority: spec.Prio(), SubmittedAt: now, DeadlineAt: deadline, Req: scheduler.SpecRequirements(&spec)}
	verdicts := scheduler.Explain(snap, q)

	rep := &quoteReport{
		Job: quoteJob{Name: spec.Name, Workload: spec.Workload, Precision: spec.Precision, Class: spec.Class(), Work: workText(spec.Work),
			Nodes: spec.Resources.Nodes, GPUsPerNode: spec.Resources.GPUsPerNode, Purchase: spec.Purchase,
			CheckpointTime: spec.Checkpoint.Time()},
		Book: quoteBook{Source: "simulated cloud over the bundled catalog", Seed: f.seed, At: now, Offers: len(offers)},
	}
	if !deadline.IsZero() {
		rep.Job.Deadline = &deadline
	}
	jr := bidding.JobRisk{Now: now, Nodes: spec.Resources.Nodes, Deadline: deadline, Checkpoint: bidding.Checkpointing{
		Disabled: spec.Checkpoint.Disabled, Time: spec.Checkpoint.Duration.D(), Interval: spec.Checkpoint.Interval.D(), SizeGB: spec.Checkpoint.SizeGB}}
	rate := func(o providers.Offer) (float64, string) {
		if r, ok := cloud.InterruptionRate(o.ID()); ok {
			return r, "provider"
		}
		return bidding.PriorRate(o.Provider, o.Purchase), "prior"
	}
	score := func(v scheduler.Verdict, restart *providers.Offer) bidding.Option {
		r, src := rate(v.Offer)
		opt := jr.Score(v.Offer, v.Estimate, r, src, restart)
		if res, ok := reserved[v.Offer.ID()]; ok {
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
		rep.Options = append(rep.Options, optionRow(i+1, o, spec.Resources.Nodes))
	}
	rep.Recommendations = bidding.Recommend(bidding.DecisionRules, quoteFacts(&spec, rep, append(slices.Clone(opts), others...), snap, f))
	return rep, nil
}

func optionRow(rank int, o bidding.Option, nodes int) quoteOption {
	r := o.Risk
	return quoteOption{
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

func (rep *quoteReport) addExcluded(v scheduler.Verdict, nodes int) {
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
			detail += fmt.Sprintf(", would finish %s late", humanDur(v.Estimate.Finish.Sub(*rep.Job.Deadline)))
		}
	}
	rep.Excluded = append(rep.Excluded, quoteExcluded{Reason: v.Reason, Meaning: reasonMeaning[v.Reason], Offers: 1, Example: o.ID(), Detail: detail})
}

// quoteFacts gathers what the decision rules look at.
func quoteFacts(spec *job.Spec, rep *quoteReport, opts []bidding.Option, snap scheduler.Snapshot, f quoteFlags) bidding.Facts {
	fs := bidding.Facts{
		Workload: spec.Workload, Precision: spec.Precision, Purchase: spec.Purchase,
		Nodes: spec.Resources.Nodes, GPUs: spec.TotalGPUs(), Checkpoints: !spec.Checkpoint.Disabled,
		HorizonMonths: f.months, RunsPerMonth: f.runsPerMonth, Geographies: spec.Placement.Geographies, Slack: -1,
	}
	if len(rep.Options) > 0 {
		best := rep.Options[0].opt
		r := best.Risk
		fs.GPUHours = r.Base.Runtime.Hours() * float64(spec.TotalGPUs())
		fs.Utilization = f.runsPerMonth * r.Runtime.Hours() / bidding.HoursPerMonth
		fs.MonthlySpend = r.Cost.Scale(int64(f.runsPerMonth*1000+0.5), 1000)
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
