package ledger

import (
	"math"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func TestReservedIdleEntries(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := providers.Reservation{ID: "cb-1", Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p4d.24xlarge",
		Count: 2, Start: t0, End: t0.Add(24 * time.Hour), Price: money.MustParse("0.100001")}
	// Two slots; one used 20 minutes to 1h40m: idle are both slots for
	// 20 minutes, one for 80 minutes, both again after.
	asOf := t0.Add(3 * time.Hour)
	u := r.Usage([]providers.ReservationUse{{From: t0.Add(20 * time.Minute), To: t0.Add(100 * time.Minute)}}, asOf)
	entries := ReservedIdle(r, u.Spans, money.MustParse("0.5"), asOf)
	if len(entries) != 3 {
		t.Fatalf("entries = %+v, want one per idle span (3)", entries)
	}
	var sum money.Micros
	var hours float64
	ids := map[string]bool{}
	for _, e := range entries {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
		if e.Kind != Overhead || e.Category != OverheadReservedIdle || e.Reservation != "cb-1" || e.Purchase != "reserved" || e.JobID != "" || ids[e.ID] {
			t.Errorf("entry %+v", e)
		}
		ids[e.ID] = true
		sum += e.Cost
		hours += e.Quantity
	}
	if sum != u.Idle || sum != u.Paid-u.Used || math.Abs(hours-(2*3-80.0/60)) > 1e-9 {
		t.Errorf("entries cost %s for %v slot-hours; idle is %s", sum, hours, u.Idle)
	}
	// The middle span: one slot for 80 minutes, 0.5/h on demand.
	if m := entries[1]; m.ListCost != money.MustParse("0.5").ForDuration(80*time.Minute) || math.Abs(m.Quantity-80.0/60) > 1e-9 {
		t.Errorf("middle entry %+v", m)
	}
	if again := ReservedIdle(r, u.Spans, money.MustParse("0.5"), asOf); again[0].ID != entries[0].ID || again[2].Cost != entries[2].Cost {
		t.Error("the same spans made other entries")
	}
}
