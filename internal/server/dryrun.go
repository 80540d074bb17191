package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

// DryRun prices and plans without buying anything: it brings the
// configured providers up, prints the offers it would use (per provider
// and region, with where the prices came from), and the placement it
// would make for every job waiting in the queue, then stops.
func DryRun(ctx context.Context, cfg Config, out io.Writer, log *zap.Logger, opts ...Option) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{cfg: cfg, log: log, cancel: func() {}}
	for _, o := range opts {
		o(s)
	}
	defer s.Close()
	if err := s.openBus(ctx); err != nil {
		return err
	}
	cat := catalog.Default()
	clouds, err := s.buildClouds(ctx, cat, true)
	if err != nil {
		return err
	}
	defer clouds.close()
	now := s.clock.Now()

	var offers []providers.Offer
	fmt.Fprintf(out, "Dry run at %s: nothing will be launched.\n\nOffers\n", now.UTC().Format("2006-01-02 15:04:05 MST"))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PROVIDER\tREGION\tOFFERS\tSPOT\tON-DEMAND\tRESERVED\tCHEAPEST GPU-HOUR\tPRICES FROM")
	for _, p := range clouds.distinct {
		os, err := p.Offers(ctx)
		if err != nil {
			return fmt.Errorf("offers of %s: %w", p.Name(), err)
		}
		offers = append(offers, os...)
		for _, row := range summarize(os, clouds.source(p), clouds.regions(p)) {
			fmt.Fprintln(tw, row)
		}
	}
	_ = tw.Flush()
	printReserved(out, offers)

	queued, err := queuedJobs(ctx, s.bus)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nPlan for %d waiting job(s)\n", len(queued))
	if len(queued) == 0 {
		return nil
	}
	plan := scheduler.Decide(scheduler.Snapshot{Now: now, Jobs: queued, Offers: offers, Throughput: cat, Geography: cat.GeographyOf, Policy: defaultPolicy()})
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  JOB\tWOULD RUN ON\tPURCHASE\tPRICE/H\tRUNTIME\tEXPECTED COST")
	for _, p := range plan.Placements {
		o := p.Offer
		cost := p.Estimate.Cost.Human()
		if p.DataTransfer > 0 {
			// Reading the job's data into another region: once per attempt.
			cost += " (" + p.DataTransfer.Human() + " of it data egress)"
		}
		fmt.Fprintf(tw, "  %s\t%d x %s/%s %s\t%s\t%s\t%s\t%s\n", p.JobID, p.Nodes, o.Provider, o.Zone, o.InstanceType, o.Purchase,
			o.Price.MulInt(p.Nodes).Human(), p.Estimate.Runtime.Round(60e9), cost)
	}
	for _, p := range plan.Pending {
		fmt.Fprintf(tw, "  %s\tnot placed: %s\t\t\t\t\n", p.JobID, p.Reasons[len(p.Reasons)-1].Message)
	}
	return tw.Flush()
}

// summarize is one line per provider region: each region that has
// offers, and each region a real cloud is configured for (with none, the
// operator must see it).
func summarize(offers []providers.Offer, source func(region string) string, configured map[string][]string) []string {
	type key struct{ provider, region string }
	type agg struct {
		n, spot, od, res int
		best             providers.Offer
		bestPerGPU       float64
	}
	byRegion := map[key]*agg{}
	for _, o := range offers {
		k := key{o.Provider, o.Region}
		a := byRegion[k]
		if a == nil {
			a = &agg{}
			byRegion[k] = a
		}
		a.n++
		switch o.Purchase {
		case providers.Spot:
			a.spot++
		case providers.OnDemand:
			a.od++
		case providers.Reserved:
			a.res++
		}
		if per := o.Price.Dollars() / float64(max(1, o.GPUs)); a.bestPerGPU == 0 || per < a.bestPerGPU {
			a.best, a.bestPerGPU = o, per
		}
	}
	for provider, regions := range configured {
		for _, r := range regions {
			if k := (key{provider, r}); byRegion[k] == nil {
				byRegion[k] = &agg{}
			}
		}
	}
	keys := make([]key, 0, len(byRegion))
	for k := range byRegion {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.provider, b.provider); c != 0 {
			return c
		}
		return cmp.Compare(a.region, b.region)
	})
	var rows []string
	for _, k := range keys {
		a := byRegion[k]
		if a.n == 0 {
			rows = append(rows, fmt.Sprintf("  %s\t%s\t0\t0\t0\t0\tnone of the wanted types is sold here\t%s", k.provider, k.region, source(k.region)))
			continue
		}
		rows = append(rows, fmt.Sprintf("  %s\t%s\t%d\t%d\t%d\t%d\t$%.4f (%s %s)\t%s", k.provider, k.region, a.n, a.spot, a.od, a.res,
			a.bestPerGPU, a.best.InstanceType, a.best.Purchase, source(k.region)))
	}
	return rows
}

// queuedJobs reads the jobs waiting for capacity from the job bucket.
func queuedJobs(ctx context.Context, bus *events.Bus) ([]*scheduler.QueuedJob, error) {
	ids, err := bus.Jobs().Keys(ctx)
	if err != nil && !errors.Is(err, events.ErrNotFound) {
		return nil, err
	}
	var out []*scheduler.QueuedJob
	for _, id := range ids {
		r, _, err := bus.Jobs().Get(ctx, id)
		if err != nil || !r.NeedsPlacement() {
			continue
		}
		out = append(out, &scheduler.QueuedJob{ID: r.ID, Priority: r.Spec.Prio(), SubmittedAt: r.Status.SubmittedAt,
			DeadlineAt: r.Status.DeadlineAt, Progress: r.Status.Progress, Req: scheduler.RequirementsOf(r)})
	}
	slices.SortFunc(out, func(a, b *scheduler.QueuedJob) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return a.SubmittedAt.Compare(b.SubmittedAt)
	})
	return out, nil
}

// printReserved lists the reserved offers on sale: reserved capacity is
// used first, so the plan below puts jobs there before spot.
func printReserved(out io.Writer, offers []providers.Offer) {
	var reserved []providers.Offer
	for _, o := range offers {
		if o.Purchase == providers.Reserved {
			reserved = append(reserved, o)
		}
	}
	if len(reserved) == 0 {
		return
	}
	fmt.Fprintf(out, "\nReserved capacity (paid whether used or not: used first)\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  OFFER\tGPUS\tFREE\tUNTIL")
	for _, o := range reserved {
		until := "-"
		if !o.Until.IsZero() {
			until = o.Until.UTC().Format("2006-01-02 15:04 MST")
		}
		fmt.Fprintf(tw, "  %s\t%d x %s\t%d\t%s\n", o.ID(), o.GPUs, o.GPU, max(o.Available, 0), until)
	}
	_ = tw.Flush()
}
