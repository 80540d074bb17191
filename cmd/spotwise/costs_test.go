package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

// costsPlanOf parses a costs command line as the command does.
func costsPlanOf(t *testing.T, now time.Time, args ...string) (*costsPlan, error) {
	t.Helper()
	f := &costsFlags{}
	if err := costsCommand(f).ParseFlags(args); err != nil {
		return nil, err
	}
	return f.plan(now)
}

func TestCostsFlags(t *testing.T) {
	now := time.Date(2031, 3, 14, 9, 30, 0, 0, time.UTC)
	day := func(d int) time.Time { return time.Date(2031, 3, d, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		args []string
		// want is the plan; wantErr a part of the error instead.
		want    costsPlan
		wantErr string
	}{
		{args: nil, want: costsPlan{output: "table", query: api.CostQuery{GroupBy: "team", Bucket: time.Hour}}},
		{args: []string{"--group-by", "Provider, purchase,job", "--since", "7d", "--team", "nlp"},
			want: costsPlan{output: "table", lastHours: 168, query: api.CostQuery{GroupBy: "provider,purchase,job", Team: "nlp", Bucket: 24 * time.Hour}}},
		{args: []string{"--from", "2031-03-01", "--to", "2031-03-02T12:00:00Z", "--bucket", "30m", "-o", "csv"},
			want: costsPlan{output: "csv", query: api.CostQuery{GroupBy: "team", From: day(1), To: day(2).Add(12 * time.Hour), Bucket: 30 * time.Minute}}},
		// A month is its first instant; a long period gets daily steps.
		{args: []string{"--from", "2031-02", "--to", "2031-03", "-o", "focus"},
			want: costsPlan{output: "focus", entries: true, query: api.CostQuery{GroupBy: "team", From: time.Date(2031, 2, 1, 0, 0, 0, 0, time.UTC), To: day(1), Bucket: 24 * time.Hour}}},
		// --since up to --to is a period the client knows.
		{args: []string{"--since", "48h", "--to", "2031-03-10", "--entries", "-o", "csv", "--job", "j-1"},
			want: costsPlan{output: "csv", entries: true, job: "j-1", query: api.CostQuery{GroupBy: "team", From: day(8), To: day(10), Bucket: time.Hour}}},
		// --from alone runs to the server's now: the bucket is picked on
		// the client's clock.
		{args: []string{"--from", "2031-03-01"}, want: costsPlan{output: "table", query: api.CostQuery{GroupBy: "team", From: day(1), Bucket: 24 * time.Hour}}},
		{args: []string{"--to", "2031-03-10"}, want: costsPlan{output: "table", query: api.CostQuery{GroupBy: "team", From: day(9), To: day(10), Bucket: time.Hour}}},
		{args: []string{"--entries", "--svg", "x.svg", "--group-by", "gpu", "--bucket", "1d"},
			want: costsPlan{output: "table", entries: true, svg: "x.svg", query: api.CostQuery{GroupBy: "gpu", Bucket: 24 * time.Hour}}},

		{args: []string{"-o", "xml"}, wantErr: `unknown output format "xml" (-o): choose one of table, wide, json, yaml, csv, focus`},
		{args: []string{"--group-by", "team,colour"}, wantErr: `--group-by: "colour" is not one of team, provider, purchase, region, gpu, job`},
		{args: []string{"--group-by", "team,,gpu"}, wantErr: "an empty key"},
		{args: []string{"--group-by", "gpu,GPU"}, wantErr: `"gpu" given twice`},
		{args: []string{"--since", "24h", "--from", "2031-03-01"}, wantErr: "--since and --from both say where the period starts"},
		{args: []string{"--since", "90m"}, wantErr: `--since: "90m" is not a whole number of hours`},
		{args: []string{"--since", "yesterday"}, wantErr: `--since: "yesterday" is not a duration`},
		{args: []string{"--since", "400d"}, wantErr: "longer than the 366 days"},
		{args: []string{"--from", "2031-03-02", "--to", "2031-03-01"}, wantErr: "--from 2031-03-02T00:00:00Z is not before --to 2031-03-01T00:00:00Z"},
		{args: []string{"--from", "last tuesday"}, wantErr: `--from: "last tuesday" is not a time`},
		{args: []string{"--bucket", "30s"}, wantErr: `--bucket: "30s" is not a duration of a minute or more`},
		{args: []string{"--job", "j-1"}, wantErr: "--job picks one job's ledger entries: add --entries"},
		{args: []string{"-o", "focus", "--group-by", "gpu"}, wantErr: "--group-by applies to the report"},
		{args: []string{"--entries", "--bucket", "1h"}, wantErr: "--bucket applies to the report's series"},
		{args: []string{"--svg", "-"}, wantErr: "--svg: name a file"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := costsPlanOf(t, now, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				if code := exitCode(err); code != exitGeneric {
					t.Errorf("exit code %d for bad flags, want %d", code, exitGeneric)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != tt.want {
				t.Errorf("plan\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

// report is two teams' spend over three hours, with savings and
// overhead.
func report() *api.CostSeries {
	from := time.Date(2031, 3, 14, 6, 0, 0, 0, time.UTC)
	r := &api.CostSeries{Overhead: 1_250_000}
	r.GroupBy, r.From, r.To, r.Bucket, r.Jobs = "team", from, from.Add(3*time.Hour), "1h0m0s", 3
	r.Starts = []time.Time{from, from.Add(time.Hour), from.Add(2 * time.Hour)}
	r.Groups = []api.CostGroup{
		{Key: "vision", Total: 30_000_001, Series: []money.Micros{10_000_000, 20_000_001, 0}, Finished: 1, Baseline: 50_000_000, Savings: 20_000_000, Overhead: 1_000_000},
		{Key: "nlp, research", Total: 10_000_000, Series: []money.Micros{0, 4_000_000, 6_000_000}},
	}
	r.Total, r.Savings = 40_000_001, 20_000_000
	return r
}

func TestPrintCosts(t *testing.T) {
	tests := []struct {
		name string
		wide bool
		want []string
	}{
		{"table", false, []string{
			"Spend by team, 2031-03-14 06:00 to 2031-03-14 09:00 UTC, in steps of 1h",
			"TEAM           SPEND   SHARE  SAVINGS  OVERHEAD",
			"vision         $30.00  75.0%  $20.00   $1.00",
			"nlp, research  $10.00  25.0%  -        -",
			"TOTAL          $40.00  100.0% $20.00   $1.25",
			"3 jobs billed in the period; savings against on-demand are those of the 1 that finished in it.",
		}},
		{"wide", true, []string{
			"TEAM           SPEND   SHARE  SAVINGS  OVERHEAD  FINISHED JOBS  ON-DEMAND BASELINE",
			"vision         $30.00  75.0%  $20.00   $1.00     1              $50.00",
			"TOTAL          $40.00  100.0% $20.00   $1.25     1              $50.00",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			printCosts(&buf, report(), tt.wide)
			got := strings.Split(buf.String(), "\n")
			for _, w := range tt.want {
				found := false
				for _, l := range got {
					// tabwriter pads with spaces: compare words.
					found = found || strings.Join(strings.Fields(l), " ") == strings.Join(strings.Fields(w), " ")
				}
				if !found {
					t.Errorf("no line %q in\n%s", w, buf.String())
				}
			}
		})
	}
}

func TestWriteCostsCSV(t *testing.T) {
	var buf bytes.Buffer
	if err := writeCostsCSV(&buf, report()); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		costsCSVColumns,
		{"team", "vision", "30.000001", "0.750000", "20.000000", "1.000000", "1", "50.000000", "2031-03-14T06:00:00Z", "2031-03-14T09:00:00Z"},
		{"team", "nlp, research", "10.000000", "0.250000", "0.000000", "0.000000", "0", "0.000000", "2031-03-14T06:00:00Z", "2031-03-14T09:00:00Z"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(recs), len(want), buf.String())
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d: %q, want %q", i, recs[i], want[i])
		}
	}
}

func TestPrintEntries(t *testing.T) {
	t0 := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	spot := ledger.Entry{ID: "j-1/a2/i-1/1", Kind: ledger.Usage, Start: t0, End: t0.Add(90 * time.Minute), PricePerHour: 5_680_001,
		Cost: 8_520_002, ListCost: 49_159_200, Provider: "aws", Zone: "us-east-2c", InstanceType: "p4d.24xlarge", Purchase: "spot",
		Instance: "i-1", JobID: "j-1", JobName: "bert", Attempt: 2, Team: "vision", Interrupted: true, RecordedAt: t0.Add(2 * time.Hour)}
	orphan := ledger.Entry{ID: "orphan/i-9", Kind: ledger.Overhead, Category: ledger.OverheadOrphan, Start: t0, End: t0.Add(time.Hour),
		PricePerHour: 3_000_000, Cost: 3_000_000, ListCost: 3_000_000, Provider: "azure", Region: "eastus", InstanceType: "NC24ads", Purchase: "on-demand", Instance: "i-9"}
	l := &api.CostEntries{From: t0, To: t0.Add(24 * time.Hour), Entries: []ledger.Entry{spot, orphan, spot.Reversal(t0.Add(3 * time.Hour))}}
	tests := []struct {
		name string
		wide bool
		want []string
	}{
		{"table", false, []string{
			"START END KIND JOB TEAM WHERE PRICE/H COST",
			"2031-03-14 09:00:00 2031-03-14 10:30:00 usage (interrupted) bert a2 vision aws/us-east-2c p4d.24xlarge spot $5.68 $8.52",
			"2031-03-14 09:00:00 2031-03-14 10:00:00 overhead/orphan - - azure/eastus NC24ads on-demand $3.00 $3.00",
			"2031-03-14 09:00:00 2031-03-14 10:30:00 usage (reversal) (interrupted) bert a2 vision aws/us-east-2c p4d.24xlarge spot $5.68 -$8.52",
			"3 entries: cost $3.00, on-demand equivalent $3.00",
		}},
		{"wide", true, []string{
			"START END KIND JOB TEAM WHERE PRICE/H COST ON-DEMAND ID INSTANCE RECORDED",
			"2031-03-14 09:00:00 2031-03-14 10:30:00 usage (interrupted) bert a2 vision aws/us-east-2c p4d.24xlarge spot $5.68 $8.52 $49.16 j-1/a2/i-1/1 i-1 2031-03-14T11:00:00Z",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			printEntries(&buf, l, tt.wide)
			var got []string
			for _, line := range strings.Split(buf.String(), "\n") {
				got = append(got, strings.Join(strings.Fields(line), " "))
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					t.Errorf("no line %q in\n%s", w, buf.String())
				}
			}
		})
	}
}

// fakeCosts serves /v1/costs (the report given) and /v1/costs/entries
// (the entries given) as the API does, recording what was asked.
func fakeCosts(t *testing.T, rep *api.CostSeries, entries []ledger.Entry) (*httptest.Server, *[]string) {
	t.Helper()
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		var body any = rep
		if r.URL.Path == "/v1/costs/entries" {
			from, _ := time.Parse(time.RFC3339, r.URL.Query().Get("from"))
			to, _ := time.Parse(time.RFC3339, r.URL.Query().Get("to"))
			body = api.CostEntries{From: from, To: to, Entries: entries}
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

// Entries are fetched for the period asked, or, when its end is the
// server's now, for the period the report names; each format writes
// them whole.
func TestCostsEntriesOutputs(t *testing.T) {
	t0 := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	spot := ledger.Entry{ID: "j-1/a2/i-1/1", Kind: ledger.Usage, Start: t0, End: t0.Add(90 * time.Minute), PricePerHour: 5_680_001,
		Cost: 8_520_002, ListCost: 49_159_200, Provider: "aws", Zone: "us-east-2c", Region: "us-east-2", InstanceType: "p4d.24xlarge", Purchase: "spot",
		Instance: "i-1", JobID: "j-1", JobName: "bert", Attempt: 2, Team: "vision", RecordedAt: t0.Add(2 * time.Hour)}
	idle := ledger.Entry{ID: "reserved-idle/cr-1/1", Kind: ledger.Overhead, Category: ledger.OverheadReservedIdle, Start: t0, End: t0.Add(time.Hour),
		PricePerHour: 3_000_000, Cost: 3_000_000, ListCost: 3_000_000, Provider: "azure", Region: "eastus", InstanceType: "NC24ads", Purchase: "reserved", Reservation: "cr-1"}
	entries := []ledger.Entry{spot, idle}
	rep := report()
	reportPeriod := "from=" + url.QueryEscape(rep.From.Format(time.RFC3339)) + "&to=" + url.QueryEscape(rep.To.Format(time.RFC3339))
	tests := []struct {
		args  []string
		asked []string
		check func(t *testing.T, out string)
	}{
		{[]string{"-o", "focus"}, []string{"/v1/costs?bucket=1h0m0s&group_by=team", "/v1/costs/entries?" + reportPeriod}, func(t *testing.T, out string) {
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil || len(recs) != 3 || strings.Join(recs[0], ",") != strings.Join(ledger.FOCUSColumns(), ",") {
				t.Fatalf("not the FOCUS export of 2 entries (%v):\n%s", err, out)
			}
			col := slices.Index(recs[0], "CommitmentDiscountStatus")
			if recs[1][col] != "" || recs[2][col] != "Unused" {
				t.Errorf("commitment status %q, %q", recs[1][col], recs[2][col])
			}
		}},
		{[]string{"--entries", "-o", "csv", "--from", "2031-03-14", "--to", "2031-03-15", "--job", "j-1", "--team", "vision"},
			[]string{"/v1/costs/entries?from=2031-03-14T00%3A00%3A00Z&job=j-1&team=vision&to=2031-03-15T00%3A00%3A00Z"}, func(t *testing.T, out string) {
				recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
				if err != nil || len(recs) != 3 || recs[1][0] != spot.ID || recs[2][0] != idle.ID {
					t.Fatalf("not the plain CSV of 2 entries (%v):\n%s", err, out)
				}
			}},
		{[]string{"--entries", "-o", "json", "--since", "24h"}, []string{"/v1/costs?bucket=1h0m0s&group_by=team&hours=24", "/v1/costs/entries?" + reportPeriod}, func(t *testing.T, out string) {
			var l api.CostEntries
			if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Entries) != 2 || l.Entries[0].Cost != spot.Cost || !l.From.Equal(rep.From) {
				t.Errorf("json %+v (%v):\n%s", l, err, out)
			}
		}},
		{[]string{"--entries", "--to", "2031-03-15"}, []string{"/v1/costs/entries?from=2031-03-14T00%3A00%3A00Z&to=2031-03-15T00%3A00%3A00Z"}, func(t *testing.T, out string) {
			if !strings.Contains(words(out), "2 entries: cost $11.52, on-demand equivalent $52.16") {
				t.Errorf("table:\n%s", out)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			srv, asked := fakeCosts(t, rep, entries)
			cmd := newCostsCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append([]string{"--server", srv.URL, "--token", "tok"}, tt.args...))
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			if err := cmd.ExecuteContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			if strings.Join(*asked, "\n") != strings.Join(tt.asked, "\n") {
				t.Errorf("asked\n%s\nwant\n%s", strings.Join(*asked, "\n"), strings.Join(tt.asked, "\n"))
			}
			tt.check(t, out.String())
		})
	}
}

// The report ends with the reserved capacity's use, for a caller who may
// read it: paid, used, idle and utilized, in all and per reservation.
func TestPrintReservedUse(t *testing.T) {
	l := &api.ReservationList{Paid: money.MustParse("14.40"), Used: money.MustParse("4.80"), IdleCost: money.MustParse("9.60"), Utilization: 1.0 / 3,
		Reservations: []api.ReservationView{{ID: "r-t4", Provider: "aws", Region: "us-east-1", InstanceType: "g4dn.xlarge", Count: 2,
			Utilization: 1.0 / 3, IdleCost: money.MustParse("9.60")}}}
	var buf bytes.Buffer
	printReservedUse(&buf, l)
	for _, want := range []string{
		"Reserved capacity over its terms so far: $14.40 paid, $4.80 used, $9.60 idle (overhead), 33.3% utilized",
		"r-t4 aws/us-east-1 g4dn.xlarge x2 33.3% used $9.60 idle",
	} {
		if !strings.Contains(words(buf.String()), want) {
			t.Errorf("no %q in:\n%s", want, buf.String())
		}
	}
}
