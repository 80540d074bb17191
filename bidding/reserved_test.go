package bidding

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// seedsP4d is the seeds' AWS example: p4d.24xlarge at $32.776/h on-demand,
// $18.676/h on a 3-year reservation (43% off), with Tencent's 20% penalty
// for ending early.
func seedsP4d() Commitment {
	return Commitment{Provider: "aws", Region: "us-east-1", InstanceType: "p4d.24xlarge", Instances: 1,
		Term: Term3Year, Hourly: money.MustParse("18.676"), Penalty: 20 * Percent}
}

func TestCommitmentShareParse(t *testing.T) {
	ok := []struct {
		in   string
		want Share
		text string
	}{
		{"20%", 200_000, "20%"},
		{"0.2", 200_000, "20%"},
		{" 43.5 % ", 435_000, "43.5%"},
		{"56.9807%", 569_807, "56.9807%"},
		{"1", Whole, "100%"},
		{"0%", 0, "0%"},
	}
	for _, tt := range ok {
		got, err := ParseShare(tt.in)
		if err != nil || got != tt.want || got.String() != tt.text {
			t.Errorf("ParseShare(%q) = %d (%s), %v; want %d (%s)", tt.in, got, got, err, tt.want, tt.text)
		}
	}
	for _, bad := range []string{"", "%", "-5%", "abc", "$1", "12.34567%", "0.1234567", "1e-3"} {
		if got, err := ParseShare(bad); err == nil {
			t.Errorf("ParseShare(%q) = %v, want an error", bad, got)
		}
	}
}

// TestCommitmentBreakEvenByHand is the worked example of `spotwise quote
// --commitment`'s help, done by hand:
//
//	3 years = 36 x 730 h = 26,280 h
//	commitment: 26,280 h x $18.676 = $490,805.28
//	on-demand for the same hours: 26,280 h x $32.776 = $861,353.28
//	break-even: $490,805.28 / $32.776 = 14,974.53 h of 26,280 h = 56.98%
//	  (= 18.676 / 32.776: with no upfront, the hourly ratio)
//	busy 80%: $490,805.28 / (0.8 x 26,280 h) = $23.345/h; 50%: $37.352/h
//	ending after 12 months: paid 8,760 h x $18.676 = $163,601.76,
//	  still owed $327,203.52, penalty 20% = $65,440.704,
//	  total $229,042.464, saved $261,762.816 against running the term out.
func TestCommitmentBreakEvenByHand(t *testing.T) {
	c := seedsP4d()
	od := money.MustParse("32.776")
	if got := c.Total(); got != money.MustParse("490805.28") {
		t.Errorf("total = %s, want $490,805.28", got.Decimal())
	}
	be, err := c.BreakEven(od)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(be.Utilization-18.676/32.776) > 1e-12 || !be.PaysOff {
		t.Errorf("break-even = %v (pays off %v), want %v", be.Utilization, be.PaysOff, 18.676/32.776)
	}
	// 490805.28 x 3600 / 32.776 = 53,908,317.3 s, rounded up.
	if want := 53_908_318 * time.Second; be.Busy != want {
		t.Errorf("busy = %v, want %v", be.Busy, want)
	}
	if be.Saving != money.MustParse("370548") {
		t.Errorf("saving = %s, want $370,548.00", be.Saving.Decimal())
	}
	eff := []struct {
		u    Share
		want string
	}{{Whole, "18.676"}, {80 * Percent, "23.345"}, {50 * Percent, "37.352"}}
	for _, tt := range eff {
		got, ok := c.EffectiveHourly(tt.u)
		if !ok || got != money.MustParse(tt.want) {
			t.Errorf("effective at %s = %s, %v; want $%s", tt.u, got.Decimal(), ok, tt.want)
		}
	}
	if _, ok := c.EffectiveHourly(0); ok {
		t.Error("effective price at 0% utilization should not exist")
	}
	end, err := c.EndEarly(12 * HoursPerMonth * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := Termination{At: 8760 * time.Hour, Month: 12, Paid: money.MustParse("163601.76"), Owed: money.MustParse("327203.52"),
		Penalty: money.MustParse("65440.704"), Total: money.MustParse("229042.464"), Saved: money.MustParse("261762.816")}
	if end != want {
		t.Errorf("ending at month 12:\n got %+v\nwant %+v", end, want)
	}
}

func TestCommitmentBreakEven(t *testing.T) {
	od := money.MustParse("10")
	tests := []struct {
		name    string
		c       Commitment
		util    float64
		paysOff bool
	}{
		{"all upfront 1y at 40% off", Commitment{Term: Term1Year, Upfront: money.MustParse("52560")}, 0.6, true},
		{"half upfront 3y at 60% off", Commitment{Term: Term3Year, Upfront: money.MustParse("52560"), Hourly: money.MustParse("2")}, 0.4, true},
		{"dearer than on-demand", Commitment{Term: Term1Year, Hourly: money.MustParse("12")}, 1.2, false},
		{"instances do not change the break-even", Commitment{Term: Term1Year, Instances: 5, Hourly: money.MustParse("7")}, 0.7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be, err := tt.c.BreakEven(od)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(be.Utilization-tt.util) > 1e-12 || be.PaysOff != tt.paysOff {
				t.Errorf("break-even %v (pays off %v), want %v (%v)", be.Utilization, be.PaysOff, tt.util, tt.paysOff)
			}
			// At the break-even, the commitment and on-demand cost the same.
			hours := time.Duration(tt.c.Term.Hours()) * time.Hour
			if d := od.ForDuration(be.Busy) - tt.c.PerInstance(); d < 0 || d > od.ForDuration(time.Second) {
				t.Errorf("on-demand for %v = %s, commitment %s", be.Busy, od.ForDuration(be.Busy), tt.c.PerInstance())
			}
			if u := float64(be.Busy) / float64(hours); math.Abs(u-tt.util) > 1e-6 {
				t.Errorf("busy %v is %v of the term, want %v", be.Busy, u, tt.util)
			}
		})
	}
	if _, err := (Commitment{Term: Term1Year, Hourly: 1}).BreakEven(0); err == nil {
		t.Error("break-even without an on-demand price accepted")
	}
}

func TestCommitmentHourlyForDiscount(t *testing.T) {
	// 40% off $21.957642 = $13.174585/h (rounded); $50,000 upfront over 8,760 h is
	// $5.707763/h (rounded), leaving $7.466822/h.
	got, err := HourlyForDiscount(money.MustParse("21.957642"), 40*Percent, money.MustParse("50000"), Term1Year)
	if err != nil || got != money.MustParse("7.466822") {
		t.Errorf("hourly = %s, %v; want $7.466822", got.Decimal(), err)
	}
	got, err = HourlyForDiscount(money.MustParse("32.776"), 43*Percent, 0, Term3Year)
	if err != nil || got != money.MustParse("18.68232") {
		t.Errorf("43%% off $32.776 = %s, %v; want $18.68232", got.Decimal(), err)
	}
	if _, err := HourlyForDiscount(money.MustParse("10"), 50*Percent, money.MustParse("50000"), Term1Year); err == nil ||
		!strings.Contains(err.Error(), "upfront") {
		t.Errorf("an upfront above the whole term: %v", err)
	}
	for _, d := range []Share{-1, Whole} {
		if _, err := HourlyForDiscount(money.MustParse("10"), d, 0, Term1Year); err == nil {
			t.Errorf("discount %s accepted", d)
		}
	}
}

func TestCommitmentEndEarly(t *testing.T) {
	c := Commitment{Term: Term1Year, Instances: 2, Upfront: money.MustParse("1000"), Hourly: money.MustParse("1"), Penalty: 50 * Percent}
	// Per instance: $1,000 + $8,760 = $9,760; two instances $19,520.
	tests := []struct {
		at                          time.Duration
		paid, owed, penalty, thenAt string
	}{
		{0, "2000", "17520", "8760", "10760"},
		{6 * HoursPerMonth * time.Hour, "10760", "8760", "4380", "15140"},
		{c.Term.Duration(), "19520", "0", "0", "19520"},
		{2 * c.Term.Duration(), "19520", "0", "0", "19520"},
	}
	for _, tt := range tests {
		got, err := c.EndEarly(tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if got.Paid != money.MustParse(tt.paid) || got.Owed != money.MustParse(tt.owed) ||
			got.Penalty != money.MustParse(tt.penalty) || got.Total != money.MustParse(tt.thenAt) {
			t.Errorf("at %v: %+v; want paid %s owed %s penalty %s total %s", tt.at, got, tt.paid, tt.owed, tt.penalty, tt.thenAt)
		}
		if got.Saved != got.Owed-got.Penalty {
			t.Errorf("at %v: saved %s, want owed - penalty", tt.at, got.Saved)
		}
	}
	if _, err := c.EndEarly(-time.Hour); err == nil {
		t.Error("ending before the start accepted")
	}
	bad := []Commitment{{Term: "2y", Hourly: 1}, {Term: Term1Year}, {Term: Term1Year, Hourly: 1, Penalty: 2 * Whole}, {Term: Term1Year, Hourly: -1}}
	for _, b := range bad {
		if _, err := b.EndEarly(0); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}

func TestReservedMarginalCost(t *testing.T) {
	od := money.MustParse("32.776")
	tests := []struct {
		name        string
		free        int
		left        time.Duration
		nodes       int
		billed      time.Duration
		want, price string
		covered     time.Duration
	}{
		{"idle reservation covers the run: sunk, free", 2, 100 * time.Hour, 1, 2 * time.Hour, "0", "0", 2 * time.Hour},
		{"a node beyond the idle instances pays on-demand", 2, 100 * time.Hour, 3, 2 * time.Hour, "65.552", "10.925333", 4 * time.Hour},
		{"the term ends mid-run", 1, 4 * time.Hour, 1, 10 * time.Hour, "196.656", "19.6656", 4 * time.Hour},
		{"no idle instances", 0, 100 * time.Hour, 1, time.Hour, "32.776", "32.776", 0},
		{"term over", 4, 0, 2, time.Hour, "65.552", "32.776", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Reservation{Commitment: seedsP4d(), Free: tt.free, Left: tt.left, Overflow: od}
			cost, covered := r.MarginalCost(tt.nodes, tt.billed)
			if cost != money.MustParse(tt.want) || covered != tt.covered {
				t.Errorf("cost %s covering %v; want $%s covering %v", cost.Decimal(), covered, tt.want, tt.covered)
			}
			if p := r.MarginalPrice(tt.nodes, tt.billed); p != money.MustParse(tt.price) {
				t.Errorf("price %s/h, want $%s", p.Decimal(), tt.price)
			}
			// The price reproduces the cost through the scheduler's own
			// arithmetic, to within rounding.
			via := CostToFinish(t0, r.MarginalPrice(tt.nodes, tt.billed), tt.nodes, 0, tt.billed).Cost
			if d := via - cost; d < -money.Micros(tt.nodes) || d > money.Micros(tt.nodes) {
				t.Errorf("via CostToFinish %s, marginal %s", via.Decimal(), cost.Decimal())
			}
			est := r.CostToFinish(t0, tt.nodes, time.Minute, tt.billed-time.Minute)
			if est.Cost != cost || !est.Finish.Equal(t0.Add(tt.billed)) {
				t.Errorf("CostToFinish = %+v", est)
			}
		})
	}
}

// TestReservedUsedFirst: with the scheduler's ranking by cost to finish,
// an idle reservation wins over the cheapest spot offer.
func TestReservedUsedFirst(t *testing.T) {
	r := Reservation{Commitment: seedsP4d(), Free: 1, Left: 1000 * time.Hour, Overflow: money.MustParse("32.776")}
	reserved := r.CostToFinish(t0, 1, 2*time.Minute, 2*time.Hour)
	spot := CostToFinish(t0, money.MustParse("7.8799"), 1, 2*time.Minute, 2*time.Hour)
	if reserved.Cost != 0 || reserved.Cost >= spot.Cost {
		t.Errorf("reserved %s, spot %s: the idle reservation should be used first", reserved.Cost, spot.Cost)
	}
}

func TestCommitQuote(t *testing.T) {
	q, err := QuoteCommitment(seedsP4d(), money.MustParse("32.776"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.TermHours != 26280 || q.Total != money.MustParse("490805.28") || q.OnDemandTotal != money.MustParse("861353.28") {
		t.Errorf("quote totals: %+v", q)
	}
	if len(q.Effective) != len(DefaultUtilizations) || q.Effective[1].PerBusyHour != money.MustParse("23.345") {
		t.Errorf("effective prices: %+v", q.Effective)
	}
	// At 50% busy the commitment costs more than on-demand would have.
	for _, e := range q.Effective {
		if (e.Utilization.Float() >= q.BreakEven.Utilization) != (e.Saving >= 0) {
			t.Errorf("at %s: saving %s, break-even %v", e.Utilization, e.Saving, q.BreakEven.Utilization)
		}
	}
	if len(q.EndEarly) != 2 || q.EndEarly[0].Month != 12 || q.EndEarly[1].Month != 24 {
		t.Errorf("end early: %+v", q.EndEarly)
	}
	if _, err := QuoteCommitment(seedsP4d(), money.MustParse("32.776"), []Share{0}, nil); err == nil {
		t.Error("0% utilization accepted")
	}
	if _, err := QuoteCommitment(seedsP4d(), money.MustParse("32.776"), nil, []int{37}); err == nil {
		t.Error("month 37 of a 3-year term accepted")
	}
}
