package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func TestPrintReservations(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := providers.Reservation{ID: "cb-1", Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p4d.24xlarge",
		Count: 2, CapacityBlock: true, Start: t0, End: t0.Add(48 * time.Hour), Price: money.MustParse("20")}
	// One slot used for 6 of the first 10 hours.
	u := r.Usage([]providers.ReservationUse{{From: t0.Add(2 * time.Hour), To: t0.Add(8 * time.Hour)}}, t0.Add(10*time.Hour))
	l := api.NewReservationList(t0.Add(10*time.Hour), []api.ReservationView{api.ReservationViewOf(r, 0, u, true)})
	for _, tt := range []struct {
		wide bool
		want []string
	}{
		{false, []string{"cb-1", "capacity-block", "aws/us-east-1a", "p4d.24xlarge", "0/2", "active", "2026-12-03 00:00",
			"$400.00", "$120.00", "$280.00", "30.0%", "TOTAL", "Idle spans of cb-1", "2026-12-01T00:00:00Z", "2026-12-01T02:00:00Z"}},
		{true, []string{"START", "2026-12-01 00:00", "20.0", "14.0"}},
	} {
		var b strings.Builder
		if err := printReservations(&b, l, tt.wide); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("wide=%v: output lacks %q:\n%s", tt.wide, w, b.String())
			}
		}
	}
	var b strings.Builder
	if err := printReservations(&b, api.NewReservationList(t0, nil), false); err != nil || !strings.Contains(b.String(), "No reservations configured") {
		t.Errorf("no reservations: %q, %v", b.String(), err)
	}
}
