package scheduler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// benchBook builds n offers over five GPU types, 20 regions, three zones
// and both purchase options, with prices spread as real books are.
func benchBook(n int, rng *rand.Rand) []providers.Offer {
	gpus := []struct {
		name  string
		price int64 // micro-dollars per GPU-hour on demand
	}{{"T4", 526_000}, {"V100", 3_060_000}, {"A100-40GB", 4_100_000}, {"A100-80GB", 5_120_000}, {"H100", 12_290_000}}
	offers := make([]providers.Offer, 0, n)
	for i := range n {
		g := gpus[i%len(gpus)]
		count := []int{1, 4, 8}[(i/len(gpus))%3]
		region := fmt.Sprintf("region-%02d", (i/15)%20)
		if (i/15)%20 < 5 {
			region = fmt.Sprintf("eu-%02d", (i/15)%20)
		}
		od := money.Micros(g.price * int64(count))
		od = od.Scale(int64(90+rng.IntN(30)), 100)
		o := offer("aws", region, fmt.Sprintf("%s-x%d-%d", g.name, count, i), g.name, count, "1").get()
		o.Zone = fmt.Sprintf("%s%c", region, 'a'+rune(i%3))
		o.Price, o.OnDemandPrice = od, od
		if i%2 == 0 {
			o.Purchase = providers.Spot
			o.Price = od.Scale(int64(25+rng.IntN(40)), 100)
		}
		o.Available = 5 + rng.IntN(20)
		offers = append(offers, o)
	}
	return offers
}

func benchJobs(n int, rng *rand.Rand) []*QueuedJob {
	accels := [][]string{nil, {"A100"}, {"V100", "A100"}, {"H100"}, {"T4"}, {"A100", "H100"}}
	jobs := make([]*QueuedJob, n)
	for i := range jobs {
		b := queued(fmt.Sprintf("j-%06d", i), fmt.Sprintf("%dh on V100", 1+rng.IntN(48))).
			gpus([]int{1, 4, 8}[rng.IntN(3)]).accel(accels[rng.IntN(len(accels))]...).prio(rng.IntN(1000))
		switch i % 10 {
		case 0:
			b.geos("eu")
		case 1:
			b.deadline(72 * time.Hour)
		case 2:
			b.purchase(job.PurchaseSpot)
		case 3:
			b.maxPrice("40.00")
		}
		b.q.SubmittedAt = t0.Add(time.Duration(i) * time.Millisecond)
		jobs[i] = b.get()
	}
	return jobs
}

// BenchmarkCycle10kJobs2kOffers is the target: one scheduling cycle
// placing 10,000 queued jobs over 2,000 offers in under 100 ms on one
// core. Each iteration runs cycleRuns cycles back to back, as the
// scheduler does, and times each (ns/op is all of them): cycle-ms is the
// median cycle, cycle-max-ms the slowest. make bench runs one iteration,
// and a single cycle measured alone ranged from 64 to 102 ms on the same
// code (a collection, another process, landing in it or not).
func BenchmarkCycle10kJobs2kOffers(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	offers := benchBook(2000, rng)
	jobs := benchJobs(10_000, rng)
	geoFn := func(p, r string) string { return map[bool]string{true: "eu", false: "us"}[r[:2] == "eu"] }
	// One core, whatever -cpu says; and one cycle before the measured
	// ones, as the scheduler runs them back to back (without it, one
	// iteration measured the first cycle's allocations).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	Decide(Snapshot{Now: t0, Jobs: jobs, Offers: offers, Throughput: testTP, Geography: geoFn})
	b.ReportAllocs()
	var placed, pending int
	var took []time.Duration
	var last Plan
	for b.Loop() {
		for range cycleRuns {
			began := time.Now()
			// The arrays of the cycle before, as the scheduler's cycle
			// hands them.
			plan := Decide(Snapshot{Now: t0, Jobs: jobs, Offers: offers, Throughput: testTP, Geography: geoFn,
				pending: last.Pending[:0], placed: last.Placements[:0]})
			took = append(took, time.Since(began))
			placed, pending = len(plan.Placements), len(plan.Pending)
			last = plan
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, "cycle-ms")
	b.ReportMetric(float64(took[len(took)-1])/1e6, "cycle-max-ms")
	b.ReportMetric(float64(placed), "placed")
	b.ReportMetric(float64(pending), "pending")
}

// cycleRuns is how many cycles an iteration of BenchmarkCycle10kJobs2kOffers
// times.
const cycleRuns = 5
