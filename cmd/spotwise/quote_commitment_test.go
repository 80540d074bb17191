package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// workedExample is the example in `spotwise quote --help`.
var workedExample = []string{"--commitment", "--provider", "aws", "--region", "us-east-1",
	"--instance-type", "p4d.24xlarge", "--term", "3y", "--hourly", "18.676",
	"--on-demand-price", "32.776", "--penalty", "20%", "--end-month", "12"}

// TestCommitmentWorkedExample does the help text's example by hand, in
// micro-dollars, and checks that the command and the help text both say
// the same.
func TestCommitmentWorkedExample(t *testing.T) {
	const (
		hourly   = 18_676_000 // $18.676 in micro-dollars
		onDemand = 32_776_000 // $32.776
		hours    = 36 * 730   // 26,280
	)
	total := int64(hourly * hours)
	odTotal := int64(onDemand * hours)
	paid := int64(hourly * 12 * 730)
	owed := total - paid
	penalty := owed * 20 / 100
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"hours in 3 years", hours, 26_280},
		{"commitment, micro-dollars", total, 490_805_280_000},
		{"on-demand for every hour", odTotal, 861_353_280_000},
		{"break-even, basis points (floored)", total * 10_000 / odTotal, 5698},
		{"busy hours at break-even, tenths (floored)", total * 10 / onDemand, 149_745},
		{"effective price at 80%", total * 100 / (80 * hours), 23_345_000},
		{"paid after 12 months", paid, 163_601_760_000},
		{"still owed", owed, 327_203_520_000},
		{"penalty 20%", penalty, 65_440_704_000},
		{"total when ending", paid + penalty, 229_042_464_000},
	} {
		if c.got != c.want {
			t.Fatalf("by hand, %s = %d, want %d", c.name, c.got, c.want)
		}
	}
	// What the help text and the command print for those figures.
	want := []string{"26,280 h", "$490,805.28", "$861,353.28", "56.98%", "14,974.5 h", "$23.345", "$163,601.76", "$327,203.52", "$65,440.70", "$229,042.46"}
	out := mustQuote(t, workedExample...)
	help := newQuoteCmd().Long
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %s:\n%s", w, out)
		}
		if !strings.Contains(help, w) {
			t.Errorf("help text lacks %s", w)
		}
	}
	// The command in the help is the one tested.
	if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(help, "\\\n", " ")), " "), "spotwise quote "+strings.Join(workedExample, " ")) {
		t.Errorf("help text's command is not %v", workedExample)
	}
	for _, line := range []string{"Break-even: 56.98% utilization", "80%   ", "12 months  $163,601.76  $327,203.52  $65,440.70  $229,042.46"} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
}

func TestCommitmentJSON(t *testing.T) {
	out := mustQuote(t, append(workedExample, "-o", "json")...)
	// Amounts are exact decimal dollars: read them as written.
	var q struct {
		OnDemand  json.Number `json:"on_demand_price"`
		Total     json.Number `json:"total"`
		TermHours int         `json:"term_hours"`
		BreakEven struct {
			Utilization float64     `json:"utilization"`
			Busy        int64       `json:"busy"`
			PaysOff     bool        `json:"pays_off"`
			Saving      json.Number `json:"saving_if_always_busy"`
		} `json:"break_even"`
		Effective []struct {
			Utilization float64     `json:"utilization"`
			PerBusyHour json.Number `json:"per_busy_hour"`
		} `json:"effective"`
		EndEarly []struct {
			Month   float64     `json:"month"`
			Penalty json.Number `json:"penalty"`
			Total   json.Number `json:"total"`
		} `json:"end_early"`
	}
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if q.OnDemand != "32.776000" || q.Total != "490805.280000" || q.TermHours != 26280 {
		t.Errorf("commitment JSON: %+v", q)
	}
	if b := q.BreakEven; !b.PaysOff || b.Utilization < 0.5698 || b.Utilization > 0.5699 || b.Saving != "370548.000000" || b.Busy != 53_908_318e9 {
		t.Errorf("break-even: %+v", b)
	}
	if len(q.Effective) != 6 || q.Effective[1].Utilization != 0.8 || q.Effective[1].PerBusyHour != "23.345000" {
		t.Errorf("effective: %+v", q.Effective)
	}
	if len(q.EndEarly) != 1 || q.EndEarly[0].Month != 12 || q.EndEarly[0].Penalty != "65440.704000" || q.EndEarly[0].Total != "229042.464000" {
		t.Errorf("end early: %+v", q.EndEarly)
	}
}

func TestCommitmentFlags(t *testing.T) {
	ok := []struct {
		name string
		args []string
		want []string
	}{
		{"on-demand price and provider from the catalog", []string{"--instance-type", "p4d.24xlarge", "--region", "us-east-1", "--discount", "40%"},
			[]string{"aws p4d.24xlarge in us-east-1, 1-year term (8,760 h)", "on-demand at $21.9576/h", "Break-even: 60.00% utilization", "4 months", "8 months"}},
		{"upfront with a discount", []string{"--instance-type", "p4d.24xlarge", "--region", "us-east-1", "--discount", "0.4", "--upfront", "50000", "--penalty", "0.2"},
			[]string{"upfront $50,000.00, then $7.4668/h", "penalty 20% of what is still owed"}},
		{"all upfront, several instances", []string{"--on-demand-price", "10", "--upfront", "52560", "--instances", "3", "--utilization", "60%,90%"},
			[]string{"3 x instance, 1-year term", "$157,680.00 in all", "Break-even: 60.00%", "90%", "-33.3%"}},
		{"never pays off", []string{"--on-demand-price", "10", "--hourly", "12"}, []string{"Never pays off", "(120.00% of on-demand)"}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			out := mustQuote(t, append([]string{"--commitment"}, tt.args...)...)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"no price", []string{"--on-demand-price", "10"}, "--hourly, --discount or --upfront"},
		{"both hourly and discount", []string{"--on-demand-price", "10", "--hourly", "5", "--discount", "40%"}, "not both"},
		{"bad term", []string{"--on-demand-price", "10", "--hourly", "5", "--term", "2y"}, "--term"},
		{"bad penalty", []string{"--on-demand-price", "10", "--hourly", "5", "--penalty", "lots"}, "--penalty"},
		{"penalty above 100%", []string{"--on-demand-price", "10", "--hourly", "5", "--penalty", "150%"}, "penalty"},
		{"no on-demand price", []string{"--hourly", "5"}, "--on-demand-price"},
		{"unknown instance type", []string{"--instance-type", "p9.huge", "--region", "us-east-1", "--hourly", "5"}, "not in the catalog"},
		{"no price in that region", []string{"--instance-type", "p4d.24xlarge", "--region", "mars-1", "--hourly", "5"}, "no price"},
		{"upfront above the term", []string{"--on-demand-price", "1", "--discount", "50%", "--upfront", "100000"}, "upfront"},
		{"utilization 0", []string{"--on-demand-price", "10", "--hourly", "5", "--utilization", "0%"}, "utilization"},
		{"utilization as a whole number", []string{"--on-demand-price", "10", "--hourly", "5", "--utilization", "60"}, "60%"},
		{"end after the term", []string{"--on-demand-price", "10", "--hourly", "5", "--end-month", "13"}, "month 13"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runQuote(t, append([]string{"--commitment"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q\n%s", err, tt.want, out)
			}
		})
	}
}
