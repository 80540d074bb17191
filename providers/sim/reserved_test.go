package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

var (
	awsBigRes   = providers.OfferID("aws", "us-east-1", "us-east-1a", "p4de.24xlarge", providers.Reserved)
	awsSmallRes = providers.OfferID("aws", "us-east-1", "us-east-1a", "g5.xlarge", providers.Reserved)
)

// reservedEnv is a cloud with no seeded interruptions and two
// reservations: a capacity block of two p4de from t0+1h to t0+5h, and a
// year of one g5.xlarge that began an hour before t0 (no zone given: the
// region's first).
func reservedEnv(t *testing.T) *env {
	none := Interruptions{}
	return newEnv(t, func(o *Options) {
		o.Interruptions = &none
		o.Reservations = []providers.Reservation{
			{ID: "cb-1", Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p4de.24xlarge", Count: 2,
				CapacityBlock: true, Start: t0.Add(time.Hour), End: t0.Add(5 * time.Hour), Price: money.MustParse("20.5")},
			{ID: "r-year", Provider: "aws", Region: "us-east-1", InstanceType: "g5.xlarge", Count: 1,
				Start: t0.Add(-time.Hour), End: t0.Add(-time.Hour + 8760*time.Hour), Price: money.MustParse("0.6")},
		}
	})
}

// findOffer returns the offer with the ID among the cloud's offers now.
func findOffer(t *testing.T, c *Cloud, id string) (providers.Offer, bool) {
	t.Helper()
	offers, err := c.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if o.ID() == id {
			return o, true
		}
	}
	return providers.Offer{}, false
}

func TestReservedOffersDuringTheirTerm(t *testing.T) {
	e := reservedEnv(t)
	if _, ok := findOffer(t, e.cloud, awsBigRes); ok {
		t.Fatal("the capacity block is sold before its term starts")
	}
	small := e.offer(awsSmallRes)
	if small.Price != 0 || small.Available != 1 || small.OnDemandPrice != money.MustParse("1.006") || !small.Until.Equal(t0.Add(8759*time.Hour)) {
		t.Fatalf("year reservation offer = price %s, available %d, on-demand %s, until %s; want 0, 1, 1.006, its end",
			small.Price, small.Available, small.OnDemandPrice, small.Until)
	}

	e.clk.Advance(time.Hour)
	big := e.offer(awsBigRes)
	if big.Price != 0 || big.Available != 2 || big.GPUs != 8 || !big.Until.Equal(t0.Add(5*time.Hour)) {
		t.Fatalf("capacity block offer = price %s, available %d, %d GPUs, until %s", big.Price, big.Available, big.GPUs, big.Until)
	}
	insts := e.launch(awsBigRes, "a", 1)
	if in := insts[0]; in.Purchase != providers.Reserved || in.Reservation != "cb-1" || in.Price != money.MustParse("20.5") {
		t.Fatalf("instance = %s on %q at %s/h, want reserved on cb-1 at the reservation's 20.5/h", in.Purchase, in.Reservation, in.Price)
	}
	if got := e.offer(awsBigRes).Available; got != 1 {
		t.Fatalf("available after one launch = %d, want 1", got)
	}
	if _, err := e.cloud.Launch(context.Background(), e.request(awsBigRes, "b", 2)); !providers.IsInsufficientCapacity(err) {
		t.Fatalf("launching 2 on the last free slot: %v, want a capacity error", err)
	}
	if err := e.cloud.Terminate(context.Background(), insts[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := e.offer(awsBigRes).Available; got != 2 {
		t.Fatalf("available after the terminate = %d, want 2 again", got)
	}
}

func TestReservationEndMovesItsInstancesOff(t *testing.T) {
	e := reservedEnv(t)
	rec, _, _ := watch(t, e.cloud)
	e.clk.Advance(time.Hour)
	in := e.launch(awsBigRes, "a", 1)[0]
	e.clk.Advance(time.Hour) // booted
	if got := e.instance(in.ID).State; got != providers.InstanceRunning {
		t.Fatalf("state = %s, want running", got)
	}

	// 30 minutes before the end: the notice, and the block is no longer
	// sold.
	e.clk.Advance(2*time.Hour + 30*time.Minute)
	ev := rec.wait(t, "maintenance notice", instanceEvent(providers.EventMaintenance, in.ID))
	if !ev.Deadline.Equal(t0.Add(5*time.Hour)) || ev.Reason != CauseReservationEnd || !ev.Time.Equal(t0.Add(4*time.Hour+30*time.Minute)) {
		t.Fatalf("notice at %s for %s (%q), want at 4h30m for the end at 5h", ev.Time.Sub(t0), ev.Deadline.Sub(t0), ev.Reason)
	}
	if _, ok := findOffer(t, e.cloud, awsBigRes); ok {
		t.Fatal("the capacity block is still sold within its last notice")
	}

	e.clk.Advance(30 * time.Minute)
	rec.wait(t, "instance terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
	got := e.instance(in.ID)
	if got.State != providers.InstanceTerminated || got.Reason != ReasonReservationEnded || !got.EndedAt.Equal(t0.Add(5*time.Hour)) {
		t.Fatalf("instance = %s (%q) at %s, want terminated at the end of the term", got.State, got.Reason, got.EndedAt.Sub(t0))
	}
}

func TestReservationsReportUseAndSurviveRestart(t *testing.T) {
	e := reservedEnv(t)
	e.clk.Advance(time.Hour)
	a := e.launch(awsBigRes, "a", 1)[0]
	e.clk.Advance(30 * time.Minute)
	b := e.launch(awsBigRes, "b", 1)[0]
	e.clk.Advance(time.Hour)
	if err := e.cloud.Terminate(context.Background(), a.ID); err != nil {
		t.Fatal(err)
	}

	// A restart counts the slot b still holds.
	e.cloud.Close()
	e.cloud = e.start()
	if got := e.offer(awsBigRes).Available; got != 1 {
		t.Fatalf("available after a restart = %d, want 1 (b holds a slot)", got)
	}
	st, err := e.cloud.Reservations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// By instance type: g5.xlarge first.
	if len(st) != 2 || st[0].Reservation.ID != "r-year" || st[1].Reservation.ID != "cb-1" || st[0].Reservation.Zone != "us-east-1a" {
		t.Fatalf("reservations = %+v, want r-year (in the region's first zone) then cb-1", st)
	}
	cb := st[1]
	if cb.InUse != 1 || cb.OfferID != awsBigRes || len(cb.Uses) != 2 || cb.Uses[0].Instance != a.ID || cb.Uses[1].Instance != b.ID ||
		!cb.Uses[0].To.Equal(t0.Add(150*time.Minute)) || !cb.Uses[1].To.IsZero() {
		t.Fatalf("cb-1 = in use %d, uses %+v", cb.InUse, cb.Uses)
	}
	// 1h30m of the term so far, 2 slots: a used 1h30m, b 1h; idle are
	// the second slot's first 30 minutes.
	u := cb.Reservation.Usage(cb.Uses, e.clk.Now())
	if u.Paid != money.MustParse("61.5") || u.Idle != money.MustParse("10.25") || len(u.Spans) != 1 || u.Spans[0].Slots != 1 {
		t.Fatalf("usage = paid %s idle %s spans %+v, want 61.5 paid and 10.25 idle", u.Paid, u.Idle, u.Spans)
	}
}

func TestReservationConfigErrors(t *testing.T) {
	ok := providers.Reservation{ID: "r", Provider: "aws", Region: "us-east-1", InstanceType: "g5.xlarge", Count: 1,
		Start: t0, End: t0.Add(time.Hour), Price: money.MustParse("0.6")}
	for _, tt := range []struct {
		name, want string
		rs         func() []providers.Reservation
	}{
		{"unknown type", "sells no aws p5.48xlarge", func() []providers.Reservation {
			r := ok
			r.InstanceType = "p5.48xlarge"
			return []providers.Reservation{r}
		}},
		{"zone not sold", "us-east-1c", func() []providers.Reservation {
			r := ok
			r.Zone = "us-east-1c"
			return []providers.Reservation{r}
		}},
		{"id twice", "used twice", func() []providers.Reservation { return []providers.Reservation{ok, ok} }},
		{"no count", "count", func() []providers.Reservation {
			r := ok
			r.Count = 0
			return []providers.Reservation{r}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(context.Background(), Options{Catalog: testCatalog(t), Clock: newEnv(t).clk, Reservations: tt.rs()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
