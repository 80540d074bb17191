package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/job"
)

// printQuote writes the report for people: the best top options, the
// excluded ones by reason, the advice.
func printQuote(w io.Writer, rep *quoteReport, top int) {
	j := rep.Job
	fmt.Fprintf(w, "Quote for %s: %s, %s x %s, %s %s (%s), purchase %s", j.Name, j.Work, plural(j.Nodes, "node"), plural(j.GPUsPerNode, "GPU"), j.Workload, j.Precision, j.Class, j.Purchase)
	if j.Deadline != nil {
		fmt.Fprintf(w, ", deadline %s (in %s)", j.Deadline.UTC().Format(time.RFC3339), humanDur(j.Deadline.Sub(rep.Book.At)))
	}
	seed := ""
	if rep.Book.Seed != 0 {
		seed = fmt.Sprintf(", seed %d", rep.Book.Seed)
	}
	fmt.Fprintf(w, "\nOffer book: %s%s, prices as of %s: %d offers, %d feasible\n\n",
		rep.Book.Source, seed, rep.Book.At.UTC().Format(time.RFC3339), rep.Book.Offers, rep.Book.Feasible)
	rows := rep.Options
	if top > 0 && len(rows) > top {
		rows = rows[:top]
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "No option: every offer is excluded (see below).")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		egressCol := ""
		if j.Data != nil {
			egressCol = "\tDATA EGRESS"
		}
		fmt.Fprintln(tw, "#\tPROVIDER\tREGION\tZONE\tINSTANCE\tGPUS\tPURCHASE\tPRICE/H\tRUNTIME\tEXPECTED COST\tRISK (INT. / P)\tDEADLINE"+egressCol)
		for _, o := range rows {
			nodes := ""
			if o.Nodes > 1 {
				nodes = fmt.Sprintf("%dx ", o.Nodes)
			}
			meets := "no"
			if o.MeetsDeadline {
				meets = "yes"
				if j.Deadline != nil {
					meets += " (" + humanDur(j.Deadline.Sub(o.Finish)) + " spare)"
				}
			}
			egress := ""
			if j.Data != nil {
				egress = "\t" + o.DataEgress.Human()
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s%s\t%dx %s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", o.Rank, o.Provider, o.Region, o.Zone, nodes, o.InstanceType,
				o.GPUs, o.GPU, o.Purchase, o.PricePerHour.Human(), humanDur(hoursDur(o.ExpectedRuntimeHours)), o.ExpectedCost.Human(),
				riskText(o), meets, egress)
		}
		_ = tw.Flush()
		if len(rep.Options) > len(rows) {
			fmt.Fprintf(w, "... and %d more (--top 0 shows all)\n", len(rep.Options)-len(rows))
		}
		fmt.Fprintln(w, "Expected cost and runtime include periodic checkpoints and, for each interruption, the restart, moving the checkpoint and, where the checkpoint does not fit in the notice (*), the work since the last periodic checkpoint.")
		if d := j.Data; d != nil {
			fmt.Fprintf(w, "The job's data (%g GB in %s %s) is read by every attempt: outside its region, each pays its egress (DATA EGRESS), in the expected cost once and again for each interruption.\n",
				d.SizeGB, d.Provider, d.Region)
		}
		for _, o := range rows {
			if o.ShortNotice {
				fmt.Fprintf(w, "* %s warns %s before taking the capacity back, less than the job's checkpoint takes (%s): an interruption there loses the work since the last periodic checkpoint (checkpoint.skip_short_notice: true leaves such offers out).\n",
					o.Provider+" spot", humanDur(time.Duration(o.NoticeSeconds*float64(time.Second))), humanDur(j.CheckpointTime))
				break
			}
		}
	}
	switch d := rep.Decision; {
	case d.Offer != "":
		egress := ""
		if d.DataTransfer > 0 {
			egress = fmt.Sprintf(" (%s of it reading the job's data there)", d.DataTransfer.Human())
		}
		fmt.Fprintf(w, "\nThe scheduler would place it now on %s (%s): %s/h, %s, %s to finish%s.\n", d.Offer, plural(d.Nodes, "node"),
			d.PricePerHour.MulInt(max(1, d.Nodes)).Human(), humanDur(d.Runtime.D()), d.Cost.Human(), egress)
	case len(d.Pending) > 0:
		fmt.Fprintf(w, "\nThe scheduler would not place it now: %s\n", d.Pending[len(d.Pending)-1].Message)
	}
	if len(rep.Excluded) > 0 {
		fmt.Fprintln(w, "\nExcluded:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, e := range rep.Excluded {
			fmt.Fprintf(tw, "  %s\t%d offers\t%s\te.g. %s (%s)\n", e.Reason, e.Offers, e.Meaning, e.Example, e.Detail)
		}
		_ = tw.Flush()
	}
	if len(rep.Recommendations) > 0 {
		fmt.Fprintln(w, "\nAdvice:")
		for _, r := range rep.Recommendations {
			fmt.Fprintf(w, "  - [%s] %s\n", r.Branch, r.Text)
		}
	}
}

func riskText(o quoteOption) string {
	if o.ExpectedInterruptions == 0 {
		return "none"
	}
	mark := ""
	if o.ShortNotice {
		mark = " *"
	}
	return fmt.Sprintf("%.3f / %.1f%%%s", o.ExpectedInterruptions, o.PInterruption*100, mark)
}

// workText writes a job's work the way people write it: "6h on V100".
func workText(w job.Work) string { return server.WorkText(w) }

func hoursDur(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

// humanDur writes a duration the way people do: "2h14m", "45s".
func humanDur(d time.Duration) string { return server.HumanDuration(d) }
