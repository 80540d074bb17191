package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/ledger"
)

const costsLong = `What the jobs you may see cost over a period, from the server's
ledger: per group (team by default), the spend, its share of the whole,
the savings against on-demand of the jobs that finished in the period
(each job's on-demand baseline for the work it did, less what it cost),
and the overhead (spend that belongs to no job: orphan instances,
teardown, reserved hours left idle), with a line of totals.

The period is --from and --to (RFC 3339, or a date 2026-12-01, or a month
2026-12, all UTC), or --since: the last 24h, 7d, ... up to --to or the
server's now (its clock, simulated or not). By default the last 24 hours.

What is printed (-o):
  table, wide   the report: one line per group and the totals
  json, yaml    the report as the API answers it (GET /v1/costs)
  csv           the report's groups, one row each
  focus         the ledger entries of the period as FOCUS 1.2 CSV, the
                FinOps format finance tools read (GET /v1/costs/entries)
With --entries, the ledger entries instead of the report: a table, json or
yaml as the API answers, csv with one column per field, or focus.

--svg FILE also draws the report's spend over time per group as a stacked
bar chart, a self-contained SVG file.`

// costsOutputs are the formats of costs -o: the other commands' and two
// of its own.
var costsOutputs = []string{"table", "wide", "json", "yaml", "csv", "focus"}

// costKeys are what costs may be grouped by: what the server groups by.
var costKeys = api.CostGroups

// costsFlags are the flags of `spotwise costs`, as given.
type costsFlags struct {
	client  clientFlags
	output  string
	groupBy string
	from    string
	to      string
	since   string
	bucket  string
	team    string
	job     string
	entries bool
	svg     string
}

// costsPlan is what a costs command will ask and print, its flags checked.
type costsPlan struct {
	query api.CostQuery
	// lastHours asks the server for the hours up to its now (--since
	// without --to).
	lastHours int
	output    string
	// entries lists ledger entries rather than the report.
	entries bool
	job     string
	svg     string
}

// needsReport: the report is printed, charted, or names the period of
// the entries (its end is the server's now).
func (p *costsPlan) needsReport() bool {
	return !p.entries || p.svg != "" || p.query.From.IsZero() || p.query.To.IsZero()
}

func newCostsCmd() *cobra.Command { return costsCommand(&costsFlags{}) }

// costsCommand is the costs command, its flags parsed into f.
func costsCommand(f *costsFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "costs",
		Short: "Spend per team, provider, purchase option, region, GPU or job over a period, with savings and overhead; FOCUS export; SVG chart",
		Long:  costsLong,
		Example: `  spotwise costs                                  # the last 24 hours per team
  spotwise costs --group-by provider,purchase --since 7d
  spotwise costs --from 2026-11 --to 2026-12 -o focus > november.focus.csv
  spotwise costs --entries --job j-01m8... -o csv
  spotwise costs --since 48h --bucket 4h --svg spend.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := f.plan(time.Now())
			if err != nil {
				return err
			}
			c, err := f.client.client()
			if err != nil {
				return err
			}
			return runCosts(cmd, c, p)
		},
	}
	// The connection flags are every client command's; -o is costs' own,
	// with more formats.
	var scratch cobra.Command
	f.client.register(&scratch)
	for _, name := range []string{"server", "token"} {
		cmd.Flags().AddFlag(scratch.Flags().Lookup(name))
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "table", "output format: "+strings.Join(costsOutputs, ", ")+" (focus: the entries as FOCUS CSV)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(costsOutputs, cobra.ShellCompDirectiveNoFileComp))
	fl.StringVar(&f.groupBy, "group-by", "team", "group by one or more of "+strings.Join(costKeys, ", ")+" (comma-separated)")
	_ = cmd.RegisterFlagCompletionFunc("group-by", cobra.FixedCompletions(costKeys, cobra.ShellCompDirectiveNoFileComp))
	fl.StringVar(&f.from, "from", "", "start of the period: RFC 3339, a date (2026-12-01) or a month (2026-12), UTC")
	fl.StringVar(&f.to, "to", "", "end of the period, excluded (default: the server's now)")
	fl.StringVar(&f.since, "since", "", "the period is this long, up to --to or now: whole hours or days (24h, 7d; default 24h)")
	fl.StringVar(&f.bucket, "bucket", "", "width of each step of the series (1h, 4h, 1d; at least 1m; default 1h, 1d beyond 3 days)")
	fl.StringVar(&f.team, "team", "", "only this team's spend (default: every team you may see)")
	fl.StringVar(&f.job, "job", "", "with --entries or -o focus: only this job's entries")
	fl.BoolVar(&f.entries, "entries", false, "list the ledger entries of the period instead of the report")
	fl.StringVar(&f.svg, "svg", "", "also write the spend over time per group as an SVG chart to this file")
	return cmd
}

// plan checks the flags and works out what to ask; now is the client's
// clock, used only to pick a default bucket width.
func (f *costsFlags) plan(now time.Time) (*costsPlan, error) {
	p := &costsPlan{output: f.output, job: f.job, svg: f.svg, query: api.CostQuery{Team: f.team}}
	if !slices.Contains(costsOutputs, f.output) {
		return nil, fmt.Errorf("unknown output format %q (-o): choose one of %s", f.output, strings.Join(costsOutputs, ", "))
	}
	p.entries = f.entries || f.output == "focus"
	keys, err := parseCostKeys(f.groupBy)
	if err != nil {
		return nil, err
	}
	p.query.GroupBy = strings.Join(keys, ",")
	if f.svg == "-" || (f.svg != "" && strings.TrimSpace(f.svg) == "") {
		return nil, fmt.Errorf("--svg: name a file to write the chart to")
	}
	if p.entries && p.svg == "" {
		if f.groupBy != "team" {
			return nil, fmt.Errorf("--group-by applies to the report and its --svg chart; entries are listed one per charge")
		}
		if f.bucket != "" {
			return nil, fmt.Errorf("--bucket applies to the report's series and its --svg chart; entries are listed one per charge")
		}
	}
	if f.job != "" && !p.entries {
		return nil, fmt.Errorf("--job picks one job's ledger entries: add --entries (or -o focus); the report groups per job with --group-by job")
	}
	if f.from != "" {
		if p.query.From, err = parseWhen("--from", f.from); err != nil {
			return nil, err
		}
	}
	if f.to != "" {
		if p.query.To, err = parseWhen("--to", f.to); err != nil {
			return nil, err
		}
	}
	var span time.Duration
	if f.since != "" {
		if f.from != "" {
			return nil, fmt.Errorf("--since and --from both say where the period starts: give one")
		}
		if span, err = parseSince(f.since); err != nil {
			return nil, err
		}
		if !p.query.To.IsZero() {
			p.query.From = p.query.To.Add(-span)
		} else {
			p.lastHours = int(span / time.Hour)
		}
	}
	if !p.query.From.IsZero() && !p.query.To.IsZero() && !p.query.From.Before(p.query.To) {
		return nil, fmt.Errorf("--from %s is not before --to %s", stampOf(p.query.From), stampOf(p.query.To))
	}
	if !p.query.To.IsZero() && p.query.From.IsZero() && f.since == "" {
		// The server's default period is the 24 hours before --to.
		p.query.From = p.query.To.Add(-24 * time.Hour)
	}
	if f.bucket != "" {
		if p.query.Bucket, err = parseBucket(f.bucket); err != nil {
			return nil, err
		}
	} else {
		// Hourly steps for a few days, daily ones beyond: a long period
		// in hours is more than a chart or the server takes.
		switch {
		case span == 0 && !p.query.From.IsZero():
			span = cmpTime(p.query.To, now).Sub(p.query.From)
		case span == 0:
			span = 24 * time.Hour
		}
		p.query.Bucket = time.Hour
		if span > 72*time.Hour {
			p.query.Bucket = 24 * time.Hour
		}
	}
	return p, nil
}

// parseCostKeys reads --group-by: known keys, each once.
func parseCostKeys(s string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(s, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		switch {
		case k == "":
			return nil, fmt.Errorf("--group-by %q: an empty key (group by %s)", s, strings.Join(costKeys, ", "))
		case !slices.Contains(costKeys, k):
			return nil, fmt.Errorf("--group-by: %q is not one of %s", k, strings.Join(costKeys, ", "))
		case slices.Contains(keys, k):
			return nil, fmt.Errorf("--group-by: %q given twice", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// parseWhen reads a point in time: RFC 3339, a date or a month (UTC).
func parseWhen(flag, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02", "2006-01"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: %q is not a time: give RFC 3339 (2026-12-03T10:00:00Z), a date (2026-12-03) or a month (2026-12)", flag, s)
}

// maxSince is the longest period the server reports in one answer.
const maxSince = 8784 * time.Hour

// parseSince reads --since: whole hours or days, which is what the
// server's clock can be asked for.
func parseSince(s string) (time.Duration, error) {
	d, err := parseDays(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--since: %q is not a duration (24h, 7d)", s)
	case d < time.Hour || d%time.Hour != 0:
		return 0, fmt.Errorf("--since: %q is not a whole number of hours (24h, 7d)", s)
	case d > maxSince:
		return 0, fmt.Errorf("--since: %q is longer than the %d days one report covers", s, maxSince/(24*time.Hour))
	}
	return d, nil
}

// parseBucket reads --bucket: a minute or more.
func parseBucket(s string) (time.Duration, error) {
	d, err := parseDays(s)
	if err != nil || d < time.Minute {
		return 0, fmt.Errorf("--bucket: %q is not a duration of a minute or more (15m, 1h, 1d)", s)
	}
	return d, nil
}

// parseDays is time.ParseDuration that also takes whole days ("7d").
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100_000 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func cmpTime(t, or time.Time) time.Time {
	if t.IsZero() {
		return or
	}
	return t
}

func stampOf(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// runCosts asks the server and prints what the plan says.
func runCosts(cmd *cobra.Command, c *api.Client, p *costsPlan) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	var rep *api.CostSeries
	if p.needsReport() {
		var err error
		if rep, err = c.Costs(ctx, p.query, p.lastHours); err != nil {
			return err
		}
	}
	if p.svg != "" {
		if err := writeCostsSVGFile(p.svg, rep); err != nil {
			return err
		}
		if !structured(p.output) && p.output != "csv" && p.output != "focus" {
			defer fmt.Fprintf(cmd.ErrOrStderr(), "chart written to %s\n", p.svg)
		}
	}
	if !p.entries {
		switch p.output {
		case "json", "yaml":
			return writeData(out, p.output, rep)
		case "csv":
			return writeCostsCSV(out, rep)
		}
		printCosts(out, rep, p.output == "wide")
		// The reserved capacity's utilization, for a caller who may read
		// it (the platform's viewers and operators; a team's members are
		// refused, and see none).
		if l, err := c.Reservations(ctx, false); err == nil && len(l.Reservations) > 0 {
			printReservedUse(out, l)
		}
		return nil
	}
	from, to := p.query.From, p.query.To
	if rep != nil {
		from, to = rep.From, rep.To
	}
	l, err := c.CostEntries(ctx, from, to, p.query.Team, p.job)
	if err != nil {
		return err
	}
	switch p.output {
	case "focus":
		return ledger.WriteFOCUS(out, l.Entries)
	case "csv":
		return ledger.WriteCSV(out, l.Entries)
	case "json", "yaml":
		return writeData(out, p.output, l)
	}
	printEntries(out, l, p.output == "wide")
	return nil
}

// writeCostsSVGFile writes the chart to a file, whole or not at all.
func writeCostsSVGFile(path string, s *api.CostSeries) error {
	var b strings.Builder
	if err := writeCostsSVG(&b, s); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--svg: %w", err)
	}
	return nil
}
