package providers

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

func TestReservationUsage(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	use := func(from, to int) ReservationUse {
		u := ReservationUse{From: at(from)}
		if to >= 0 {
			u.To = at(to)
		}
		return u
	}
	span := func(from, to, slots int, cost money.Micros) IdleSpan {
		return IdleSpan{From: at(from), To: at(to), Slots: slots, Cost: cost}
	}
	// $0.100001 an instance-hour: 20 minutes cost 33333.67 micro-dollars,
	// so spans that do not telescope would drift.
	const price = money.Micros(100_001)
	res := func(count, start, end int) Reservation {
		return Reservation{ID: "r", Provider: "aws", Region: "us-east-1", InstanceType: "p4d.24xlarge", Count: count,
			Start: at(start), End: at(end), Price: price}
	}
	for _, tt := range []struct {
		name  string
		r     Reservation
		uses  []ReservationUse
		asOf  int
		spans []IdleSpan
		paid  money.Micros
		hours [3]float64 // paid, used, idle
	}{
		{name: "never used", r: res(2, 0, 600), asOf: 600,
			spans: []IdleSpan{span(0, 600, 2, 2*1_000_010)}, paid: 2_000_020, hours: [3]float64{20, 0, 20}},
		{name: "overlapping uses, one still running", r: res(2, 0, 600),
			uses: []ReservationUse{use(60, 300), use(180, 420), use(400, -1)}, asOf: 480,
			// busy 0 | 1 | 2 | 1 | 2 | 1 over 0-60-180-300-400-420-480
			spans: []IdleSpan{span(0, 60, 2, 200_002), span(60, 180, 1, 200_002), span(300, 400, 1, 166_668), span(420, 480, 1, 100_001)},
			paid:  1_600_016, hours: [3]float64{16, 28.0 / 3, 20.0 / 3}},
		{name: "more instances than slots leave none idle", r: res(1, 0, 240),
			uses: []ReservationUse{use(0, 120), use(60, 180)}, asOf: 300,
			spans: []IdleSpan{span(180, 240, 1, 100_001)}, paid: 400_004, hours: [3]float64{4, 3, 1}},
		{name: "uses outside the term count for nothing", r: res(1, 60, 120),
			uses: []ReservationUse{use(0, 90), use(150, 200)}, asOf: 200,
			// from the start: 30 minutes cost 50000.5, rounded to 50001
			spans: []IdleSpan{span(90, 120, 1, 50_000)}, paid: 100_001, hours: [3]float64{1, 0.5, 0.5}},
		{name: "adjacent uses merge the idle spans around them", r: res(3, 0, 120),
			uses: []ReservationUse{use(0, 60), use(60, 120)}, asOf: 120,
			spans: []IdleSpan{span(0, 120, 2, 400_004)}, paid: 600_006, hours: [3]float64{6, 2, 4}},
		{name: "before the term starts", r: res(2, 60, 120), uses: []ReservationUse{use(0, 30)}, asOf: 30,
			spans: []IdleSpan{}, paid: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.r.Usage(tt.uses, at(tt.asOf))
			if len(u.Spans) != len(tt.spans) {
				t.Fatalf("idle spans = %+v, want %+v", u.Spans, tt.spans)
			}
			var sum money.Micros
			for i, sp := range u.Spans {
				if w := tt.spans[i]; !sp.From.Equal(w.From) || !sp.To.Equal(w.To) || sp.Slots != w.Slots || sp.Cost != w.Cost {
					t.Errorf("span %d = %s..%s x%d %s, want %s..%s x%d %s", i, sp.From.Sub(t0), sp.To.Sub(t0), sp.Slots, sp.Cost,
						w.From.Sub(t0), w.To.Sub(t0), w.Slots, w.Cost)
				}
				sum += sp.Cost
			}
			if u.Paid != tt.paid || u.Idle != sum || u.Used+u.Idle != u.Paid {
				t.Errorf("paid %s used %s idle %s (spans sum to %s), want paid %s = used + idle", u.Paid, u.Used, u.Idle, sum, tt.paid)
			}
			got := [3]float64{u.PaidHours, u.UsedHours, u.IdleHours}
			for i := range got {
				if math.Abs(got[i]-tt.hours[i]) > 1e-9 {
					t.Errorf("hours (paid, used, idle) = %v, want %v", got, tt.hours)
					break
				}
			}
			if want := tt.hours[1] / tt.hours[0]; tt.hours[0] > 0 && math.Abs(u.Utilization-want) > 1e-9 {
				t.Errorf("utilization = %v, want %v", u.Utilization, want)
			}
		})
	}
}

func TestReservationValidate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ok := Reservation{ID: "cb-1", Provider: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge", Count: 1,
		Start: t0, End: t0.Add(24 * time.Hour), Price: money.MustParse("31.464")}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid reservation refused: %v", err)
	}
	for _, tt := range []struct {
		field string
		edit  func(*Reservation)
	}{
		{"id:", func(r *Reservation) { r.ID = "" }},
		{"instance_type:", func(r *Reservation) { r.InstanceType = "" }},
		{"count:", func(r *Reservation) { r.Count = 0 }},
		{"start:", func(r *Reservation) { r.Start = time.Time{} }},
		{"end:", func(r *Reservation) { r.End = r.Start }},
		{"price_per_hour:", func(r *Reservation) { r.Price = 0 }},
	} {
		r := ok
		tt.edit(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: got %v, want an error naming the field", tt.field, err)
		}
	}
}
