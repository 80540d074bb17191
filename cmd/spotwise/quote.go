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
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/job"
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
	output       string
	remote       bool
	client       clientFlags
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
			format, err := outputOf(cmd, f.output, f.json)
			if err != nil {
				return err
			}
			if f.commitment {
				q, err := f.commitmentQuote(catalog.Default())
				if err != nil {
					return err
				}
				if structured(format) {
					return writeData(out, format, q)
				}
				printCommitment(out, q)
				return nil
			}
			var rep *quoteReport
			if f.remote || f.client.server != "" {
				rep, err = serverQuote(cmd, args[0], f)
			} else {
				var data []byte
				if data, _, err = readSpec(cmd.InOrStdin(), args[0]); err == nil {
					rep, err = quoteSpec(cmd.Context(), data, f)
				}
			}
			if err != nil {
				return err
			}
			if structured(format) {
				return writeData(out, format, rep)
			}
			top := f.top
			if format == "wide" {
				top = 0
			}
			printQuote(out, rep, top)
			return nil
		},
	}
	fl := cmd.Flags()
	addOutputFlag(cmd, &f.output, &f.json)
	fl.StringVar(&f.client.server, "server", "", "ask this running server for the quote: its clock, offer book and learned rates (what it would then do)")
	fl.StringVar(&f.client.token, "token", "", "with --server or --remote: API token (env SPOTWISE_TOKEN, then the client config file)")
	fl.BoolVar(&f.remote, "remote", false, "ask the server the client config names (SPOTWISE_SERVER, the client config file), as --server does")
	fl.IntVar(&f.top, "top", 10, "show the best N options (0: all; -o wide shows all)")
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

// The report's types are the server's: a local quote and POST /v1/quote
// make the same report.
type (
	quoteReport   = server.QuoteReport
	quoteOption   = server.QuoteOption
	quoteExcluded = server.QuoteExcluded
)

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
	res := map[string]bidding.Reservation{}
	for _, id := range slices.Sorted(maps.Keys(reserved)) {
		offers = append(offers, reserved[id].offer)
		res[id] = reserved[id].Reservation
	}
	return server.Quote(server.QuoteInput{
		Spec: spec, Book: scheduler.Snapshot{Now: now, Offers: offers, Throughput: cat, Geography: cat.GeographyOf},
		Rate: func(o providers.Offer) (float64, string) {
			if r, ok := cloud.InterruptionRate(o.ID()); ok {
				return r, "provider"
			}
			return bidding.PriorRate(o.Provider, o.Purchase), "prior"
		},
		Reserved: res, Source: "simulated cloud over the bundled catalog", Seed: f.seed,
		Months: f.months, RunsPerMonth: f.runsPerMonth,
	}), nil
}

// serverQuote asks the running server for the quote: its clock, its
// scheduler's offer book and learned rates, so the quote is what it would
// then do with the job.
func serverQuote(cmd *cobra.Command, path string, f quoteFlags) (*quoteReport, error) {
	for _, local := range []string{"at", "seed", "reservations"} {
		if cmd.Flags().Changed(local) {
			return nil, fmt.Errorf("--%s applies to a local quote; the server quotes over its own clock and offer book (drop --server/--remote, or --%s)", local, local)
		}
	}
	f.client.output = "table" // the quote's format is its own -o
	c, err := f.client.client()
	if err != nil {
		return nil, err
	}
	data, ctype, err := readSpec(cmd.InOrStdin(), path)
	if err != nil {
		return nil, err
	}
	var rep quoteReport
	if err := c.Quote(cmd.Context(), data, ctype, f.months, f.runsPerMonth, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}
