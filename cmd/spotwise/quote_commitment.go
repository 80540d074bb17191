package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/catalog"
)

// commitmentQuote builds the commitment quote from the flags.
func (f quoteFlags) commitmentQuote(cat *catalog.Catalog) (bidding.CommitmentQuote, error) {
	var errs []error
	bad := func(flag string, err error) { errs = append(errs, fmt.Errorf("--%s: %w", flag, err)) }
	term, err := bidding.ParseTerm(f.term)
	if err != nil {
		bad("term", err)
	}
	c := bidding.Commitment{Provider: f.provider, Region: f.region, InstanceType: f.instanceType, Instances: f.instances, Term: term}
	if c.Upfront, err = money.Parse(f.upfront); err != nil {
		bad("upfront", err)
	}
	if c.Penalty, err = bidding.ParseShare(f.penalty); err != nil {
		bad("penalty", err)
	}
	od, err := f.onDemandPrice(cat, &c)
	if err != nil {
		errs = append(errs, err)
	}
	switch {
	case f.hourly != "" && f.discount != "":
		errs = append(errs, errors.New("give --hourly or --discount, not both"))
	case f.hourly != "":
		if c.Hourly, err = money.Parse(f.hourly); err != nil {
			bad("hourly", err)
		}
	case f.discount != "":
		d, err := bidding.ParseShare(f.discount)
		if err != nil {
			bad("discount", err)
		} else if len(errs) == 0 {
			if c.Hourly, err = bidding.HourlyForDiscount(od, d, c.Upfront, term); err != nil {
				bad("discount", err)
			}
		}
	case c.Upfront == 0:
		errs = append(errs, errors.New("give the commitment's price: --hourly, --discount or --upfront"))
	}
	var us []bidding.Share
	for _, s := range f.utilizations {
		u, err := bidding.ParseShare(s)
		if err == nil && !strings.Contains(s, "%") && u > bidding.Whole {
			err = fmt.Errorf("%q: write a share as 60%% or 0.6", s)
		}
		if err != nil {
			bad("utilization", err)
		}
		us = append(us, u)
	}
	if len(errs) > 0 {
		return bidding.CommitmentQuote{}, errors.Join(errs...)
	}
	return bidding.QuoteCommitment(c, od, us, f.endMonths)
}

// onDemandPrice is --on-demand-price, or the catalog's price of the
// instance type in the region; it fills in the provider from the instance
// type when it is the only one selling it.
func (f quoteFlags) onDemandPrice(cat *catalog.Catalog, c *bidding.Commitment) (money.Micros, error) {
	if c.Provider == "" && c.InstanceType != "" {
		var found []string
		for _, it := range cat.InstanceTypes() {
			if it.Name == c.InstanceType {
				found = append(found, it.Provider)
			}
		}
		if len(found) == 1 {
			c.Provider = found[0]
		}
	}
	if f.onDemand != "" {
		p, err := money.Parse(f.onDemand)
		if err != nil {
			return 0, fmt.Errorf("--on-demand-price: %w", err)
		}
		if p <= 0 {
			return 0, errors.New("--on-demand-price: must be positive")
		}
		return p, nil
	}
	if c.InstanceType == "" || c.Region == "" {
		return 0, errors.New("give --on-demand-price, or --instance-type and --region to take it from the catalog")
	}
	it, ok := cat.InstanceType(c.Provider, c.InstanceType)
	if !ok {
		return 0, fmt.Errorf("--instance-type: %s %q is not in the catalog; give --on-demand-price", c.Provider, c.InstanceType)
	}
	p, ok := it.PriceIn(c.Region)
	if !ok {
		return 0, fmt.Errorf("--region: the catalog has no price for %s in %s; give --on-demand-price", c.InstanceType, c.Region)
	}
	return p.OnDemand, nil
}

func printCommitment(w io.Writer, q bidding.CommitmentQuote) {
	c := q.Commitment
	shape := strings.TrimSpace(strings.Join([]string{c.Provider, c.InstanceType}, " "))
	if shape == "" {
		shape = "instance"
	}
	if c.Region != "" {
		shape += " in " + c.Region
	}
	fmt.Fprintf(w, "Commitment: %d x %s, %d-year term (%s h)\n", max(1, c.Instances), shape, c.Term.Months()/12, commas(q.TermHours))
	fmt.Fprintf(w, "  upfront %s, then %s/h per instance: %s in all\n", dollars(c.Upfront), price4(c.Hourly), dollars(q.Total))
	fmt.Fprintf(w, "  on-demand at %s/h for every hour of the term: %s\n", price4(q.OnDemand), dollars(q.OnDemandTotal))
	be := q.BreakEven
	if be.PaysOff {
		fmt.Fprintf(w, "Break-even: %.2f%% utilization (%s h busy of %s h per instance, %.1f of %d months); fully used it saves %s per instance (%.1f%% off).\n",
			be.Utilization*100, hoursText(be.Busy), commas(q.TermHours), be.Busy.Hours()/bidding.HoursPerMonth, c.Term.Months(), dollars(be.Saving), be.Discount*100)
	} else {
		fmt.Fprintf(w, "Never pays off: even fully used it costs %s more per instance than on-demand (%.2f%% of on-demand).\n", dollars(-be.Saving), be.Utilization*100)
	}
	fmt.Fprintln(w, "\nEffective price per busy hour:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  UTILIZATION\tPER BUSY HOUR\tVS ON-DEMAND\tON-DEMAND FOR THOSE HOURS\tSAVING")
	for _, e := range q.Effective {
		fmt.Fprintf(tw, "  %s\t%s\t%+.1f%%\t%s\t%s\n", e.Utilization, price4(e.PerBusyHour), roundPct(e.VsOnDemand), dollars(e.OnDemandCost), dollars(e.Saving))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nEnding early (penalty %s of what is still owed; the upfront is not refunded):\n", c.Penalty)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AFTER\tPAID\tSTILL OWED\tPENALTY\tTOTAL\tSAVED VS RUNNING IT OUT")
	for _, t := range q.EndEarly {
		fmt.Fprintf(tw, "  %g months\t%s\t%s\t%s\t%s\t%s\n", t.Month, dollars(t.Paid), dollars(t.Owed), dollars(t.Penalty), dollars(t.Total), dollars(t.Saved))
	}
	_ = tw.Flush()
}

// dollars writes an amount in cents with thousands separators:
// "$490,805.28".
func dollars(m money.Micros) string {
	s := m.Round(2).Format(2)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	s = strings.TrimPrefix(s, "$")
	whole, frac, _ := strings.Cut(s, ".")
	return sign + "$" + groupDigits(whole) + "." + frac
}

// price4 writes an hourly price to four decimals at most: "$18.676",
// "$31.1267".
func price4(m money.Micros) string { return m.Round(4).Format(2) }

// hoursText writes a duration in hours with one decimal: "14,974.5".
func hoursText(d time.Duration) string {
	tenths := int64(d.Hours()*10 + 0.5)
	return fmt.Sprintf("%s.%d", commas(tenths/10), tenths%10)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func commas(n int64) string { return groupDigits(fmt.Sprint(n)) }

func groupDigits(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// roundPct is a share in percent to one decimal, without "-0.0".
func roundPct(x float64) float64 {
	p := math.Round(x*1000) / 10
	if p == 0 {
		return 0
	}
	return p
}
