package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// reserved makes an offer a reserved one: price 0 (paid for already),
// free slots, the term's end.
func (b *offerB) reserved(free int, until time.Duration) *offerB {
	b.o.Purchase, b.o.Price, b.o.Available = providers.Reserved, 0, free
	if until > 0 {
		b.o.Until = t0.Add(until)
	}
	return b
}

func TestReservedCapacityIsUsedFirst(t *testing.T) {
	od := func() *offerB { return offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06") }
	spot := od().spot("3.06")
	spot.o.Price = money.MustParse("0.97")
	for _, c := range []struct {
		name   string
		jobs   []*QueuedJob
		offers []providers.Offer
		want   []string // purchase option per job, in order; "" unplaced
	}{
		{"a free slot beats spot and on-demand",
			[]*QueuedJob{queued("a", "10h on V100").get()},
			[]providers.Offer{od().get(), spot.get(), od().reserved(1, 365*24*time.Hour).get()}, []string{"reserved"}},
		{"the slots full, the next job goes to spot",
			[]*QueuedJob{queued("a", "10h on V100").get(), queued("b", "10h on V100").get()},
			[]providers.Offer{od().get(), spot.get(), od().reserved(1, 0).get()}, []string{"reserved", "spot"}},
		{"the deadline policy's jobs take the slot before weighing spot",
			[]*QueuedJob{queued("a", "10h on V100").deadline(30 * time.Hour).get(), queued("b", "10h on V100").deadline(30 * time.Hour).get()},
			[]providers.Offer{od().get(), spot.get(), od().reserved(1, 0).get()}, []string{"reserved", "spot"}},
		{"on-demand jobs take it too",
			[]*QueuedJob{queued("a", "10h on V100").purchase(job.PurchaseOnDemand).get()},
			[]providers.Offer{od().get(), od().reserved(1, 0).get()}, []string{"reserved"}},
		{"spot-only jobs do not",
			[]*QueuedJob{queued("a", "10h on V100").purchase(job.PurchaseSpot).get()},
			[]providers.Offer{spot.get(), od().reserved(1, 0).get()}, []string{"spot"}},
		{"a term ending an hour in: 9 hours at on-demand cost more than spot",
			[]*QueuedJob{queued("a", "10h on V100").get()},
			[]providers.Offer{od().get(), spot.get(), od().reserved(2, time.Hour).get()}, []string{"spot"}},
		{"a term ending an hour in still beats on-demand for its first hour",
			[]*QueuedJob{queued("a", "10h on V100").get()},
			[]providers.Offer{od().get(), od().reserved(1, time.Hour).get()}, []string{"reserved"}},
		{"a job of more nodes than free slots does not fit",
			[]*QueuedJob{queued("a", "10h on V100").nodes(2).get()},
			[]providers.Offer{od().get(), od().reserved(1, 0).get()}, []string{"on-demand"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Two days of a spot market that rarely runs dry: the
			// deadline policy would take spot.
			var seen bidding.ZoneStats
			for range 48 {
				seen.Observe(true, 55*time.Minute)
				seen.Observe(false, 5*time.Minute)
			}
			seen.Observe(true, time.Hour)
			zones := map[ZoneKey]*bidding.ZoneStats{{"aws", "us-east-1a", "V100"}: &seen, {Zone: "*", GPU: "V100"}: &seen}
			plan := Decide(Snapshot{Now: t0, Jobs: c.jobs, Offers: c.offers, Throughput: testTP, Geography: geo,
				Rates: noRisk(c.offers), Policy: bidding.Spotwise{}, PolicyStep: time.Minute, Zones: zones})
			placed := map[string]Placement{}
			for _, p := range plan.Placements {
				placed[p.JobID] = p
			}
			for i, q := range c.jobs {
				if got := string(placed[q.ID].Offer.Purchase); got != c.want[i] {
					t.Fatalf("job %s on %q, want %q (plan %+v)", q.ID, got, c.want[i], plan)
				}
			}
		})
	}
}

// The cost of a run past the reservation's term is the on-demand price of
// the time it does not cover, as `quote --reservations` prices it.
func TestReservedEstimateCountsTheRunPastTheTerm(t *testing.T) {
	for _, c := range []struct {
		until time.Duration
		want  money.Micros
	}{
		{0, 0}, // no end known
		{20 * time.Hour, 0},
		// 2 min boot + 10 h, of which 1 h covered: 9 h 2 min at 3.06.
		{time.Hour, money.MustParse("3.06").ForDuration(9*time.Hour + 2*time.Minute)},
	} {
		t.Run(fmt.Sprint(c.until), func(t *testing.T) {
			o := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").reserved(1, c.until).get()
			plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{queued("a", "10h on V100").purchase(job.PurchaseOnDemand).get()},
				Offers: []providers.Offer{o}, Throughput: testTP, Geography: geo, Rates: noRisk([]providers.Offer{o})})
			if len(plan.Placements) != 1 || plan.Placements[0].Estimate.Cost != c.want {
				t.Fatalf("plan %+v, want the reserved offer at %s", plan, c.want)
			}
		})
	}
}
