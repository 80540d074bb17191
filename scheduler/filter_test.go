package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// The candidates that needs with the same static filters share only spare
// walking past offers those filters rule out: every plan is the one each
// job's own walk of the whole book makes, offers running out as the cycle
// fills them, blocked ones, price caps, regions and deadlines included,
// and so is every on-demand baseline.
func TestSharedFiltersPlanAsEveryJobAlone(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			offers := benchBook(100+rng.IntN(400), rng)
			for i := range offers {
				offers[i].Available = rng.IntN(6) // some run out at once, most within the cycle
				if rng.IntN(10) == 0 {
					offers[i].Available = -1 // not known
				}
			}
			jobs := benchJobs(200+rng.IntN(1500), rng)
			unavailable := map[string]time.Time{}
			for range 5 {
				o := offers[rng.IntN(len(offers))]
				unavailable[providers.ScopeKey(providers.ScopeOffer, o)] = t0.Add(time.Hour)
			}
			geo := func(p, r string) string { return map[bool]string{true: "eu", false: "us"}[r[:2] == "eu"] }
			snap := func() Snapshot {
				return Snapshot{Now: t0, Jobs: jobs, Offers: offers, Unavailable: unavailable, Throughput: testTP, Geography: geo}
			}
			shared := Decide(snap())
			unshared := snap()
			unshared.unshared = true
			alone := Decide(unshared)
			if len(shared.Placements) == 0 || len(alone.Pending) == 0 {
				t.Fatalf("%d placed, %d pending: the case tests nothing", len(shared.Placements), len(alone.Pending))
			}
			if got, want := placed(shared), placed(alone); !reflect.DeepEqual(got, want) {
				t.Errorf("placements differ: %d with the shared candidates, %d without", len(got), len(want))
				for id, w := range want {
					if got[id] != w {
						t.Errorf("job %s: %+v, alone %+v", id, got[id], w)
						break
					}
				}
			}
			if got, want := waiting(shared), waiting(alone); !reflect.DeepEqual(got, want) {
				t.Errorf("pending reasons differ")
			}
		})
	}
}

type placedOn struct {
	offer          string
	cost, baseline money.Micros
}

func placed(p Plan) map[string]placedOn {
	out := map[string]placedOn{}
	for _, pl := range p.Placements {
		out[pl.JobID] = placedOn{pl.Offer.ID(), pl.Estimate.Cost, pl.Baseline}
	}
	return out
}

func waiting(p Plan) map[string]string {
	out := map[string]string{}
	for _, pd := range p.Pending {
		out[pd.JobID] = fmt.Sprint(pd.Reasons)
	}
	return out
}
