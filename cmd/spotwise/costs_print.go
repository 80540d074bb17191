package main

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/money"
)

// share is part's share of whole, for people ("61.2%"; "-" of nothing).
func share(part, whole money.Micros) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// amount is an amount for a table, "-" for none.
func amount(m money.Micros) string {
	if m == 0 {
		return "-"
	}
	return m.Human()
}

// periodText says what period a report covers, in UTC.
func periodText(from, to time.Time, bucket string) string {
	text := fmt.Sprintf("%s to %s UTC", from.UTC().Format("2006-01-02 15:04"), to.UTC().Format("2006-01-02 15:04"))
	if d, err := time.ParseDuration(bucket); err == nil {
		text += ", in steps of " + shortDuration(d)
	}
	return text
}

// shortDuration writes 24h as 1d and 1h0m0s as 1h.
func shortDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// printCosts prints a report: a line per group with its spend, share,
// savings and overhead, then the totals.
func printCosts(w io.Writer, r *api.CostSeries, wide bool) {
	fmt.Fprintf(w, "Spend by %s, %s\n\n", strings.ReplaceAll(r.GroupBy, ",", ", "), periodText(r.From, r.To, r.Bucket))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := strings.ToUpper(strings.ReplaceAll(r.GroupBy, ",", "/")) + "\tSPEND\tSHARE\tSAVINGS\tOVERHEAD"
	if wide {
		head += "\tFINISHED JOBS\tON-DEMAND BASELINE"
	}
	fmt.Fprintln(tw, head)
	var finished int
	var baseline money.Micros
	line := func(key string, total, savings, overhead money.Micros, fin int, base money.Micros) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s", key, total.Human(), share(total, r.Total), amount(savings), amount(overhead))
		if wide {
			fmt.Fprintf(tw, "\t%d\t%s", fin, amount(base))
		}
		fmt.Fprintln(tw)
	}
	for _, g := range r.Groups {
		line(g.Key, g.Total, g.Savings, g.Overhead, g.Finished, g.Baseline)
		finished += g.Finished
		baseline += g.Baseline
	}
	line("TOTAL", r.Total, r.Savings, r.Overhead, finished, baseline)
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d jobs billed in the period", r.Jobs)
	if finished > 0 {
		fmt.Fprintf(w, "; savings against on-demand are those of the %d that finished in it", finished)
	}
	fmt.Fprintln(w, ".")
	if r.Note != "" {
		fmt.Fprintf(w, "Note: %s\n", r.Note)
	}
}

// printReservedUse adds the reserved capacity's use to a report: paid over
// the reservations' terms so far, whatever the period, with what sat idle
// (overhead in the ledger) and the utilization.
func printReservedUse(w io.Writer, l *api.ReservationList) {
	fmt.Fprintf(w, "\nReserved capacity over its terms so far: %s paid, %s used, %s idle (overhead), %.1f%% utilized\n",
		l.Paid.Human(), l.Used.Human(), l.IdleCost.Human(), 100*l.Utilization)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range l.Reservations {
		fmt.Fprintf(tw, "  %s\t%s/%s %s x%d\t%.1f%% used\t%s idle\n", r.ID, r.Provider, r.Region, r.InstanceType, r.Count, 100*r.Utilization, r.IdleCost.Human())
	}
	_ = tw.Flush()
}

// costsCSVColumns are the columns of a report as CSV.
var costsCSVColumns = []string{"group_by", "key", "spend_usd", "share", "savings_usd", "overhead_usd", "finished_jobs", "baseline_usd", "from", "to"}

// writeCostsCSV writes a report's groups, one row each: exact amounts,
// the share as a fraction of the period's spend.
func writeCostsCSV(w io.Writer, r *api.CostSeries) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(costsCSVColumns); err != nil {
		return err
	}
	for _, g := range r.Groups {
		frac := ""
		if r.Total != 0 {
			frac = strconv.FormatFloat(float64(g.Total)/float64(r.Total), 'f', 6, 64)
		}
		if err := cw.Write([]string{r.GroupBy, g.Key, g.Total.Decimal(), frac, g.Savings.Decimal(), g.Overhead.Decimal(),
			strconv.Itoa(g.Finished), g.Baseline.Decimal(), stampOf(r.From), stampOf(r.To)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// printEntries prints ledger entries, one line each, then their sum.
func printEntries(w io.Writer, l *api.CostEntries, wide bool) {
	fmt.Fprintf(w, "Ledger entries, %s\n\n", periodText(l.From, l.To, ""))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "START\tEND\tKIND\tJOB\tTEAM\tWHERE\tPRICE/H\tCOST"
	if wide {
		head += "\tON-DEMAND\tID\tINSTANCE\tRECORDED"
	}
	fmt.Fprintln(tw, head)
	var cost, list money.Micros
	for _, e := range l.Entries {
		kind := string(e.Kind)
		if e.Category != "" {
			kind += "/" + e.Category
		}
		if e.Reverses != "" {
			kind += " (reversal)"
		}
		if e.Interrupted {
			kind += " (interrupted)"
		}
		job := "-"
		if e.JobID != "" {
			job = fmt.Sprintf("%s a%d", cmp.Or(e.JobName, e.JobID), e.Attempt)
		}
		where := strings.Join(strings.Fields(fmt.Sprintf("%s/%s %s %s", e.Provider, cmp.Or(e.Zone, e.Region), e.InstanceType, e.Purchase)), " ")
		price := "-"
		if e.PricePerHour != 0 {
			price = e.PricePerHour.Human()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", e.Start.UTC().Format("2006-01-02 15:04:05"), e.End.UTC().Format("2006-01-02 15:04:05"),
			kind, job, dash(e.Team), where, price, e.Cost.Human())
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", e.ListCost.Human(), e.ID, dash(cmp.Or(e.Instance, e.Reservation)), e.RecordedAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(tw)
		cost += e.Cost
		list += e.ListCost
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d entries: cost %s, on-demand equivalent %s\n", len(l.Entries), cost.Human(), list.Human())
}
