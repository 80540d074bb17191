package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// The listing's index (listing.go) answers what walking every instance the
// cloud keeps answers, whatever launches, ends, prunes and restarts came
// before, while other calls list at the same time (run with -race: the
// ended instances are copied outside the cloud's lock).
func TestListingMatchesEveryInstanceKept(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			// Few price steps: a spot instance left running for weeks
			// is repriced at each, and that is not what is tested.
			e := newEnv(t, func(o *Options) { o.PriceInterval = 24 * time.Hour })
			e.setAvailable(awsSmallOD, 1000)
			e.setAvailable(awsSmallSp, 1000)
			rng := rand.New(rand.NewPCG(seed, 7))

			var mu sync.Mutex
			cloud := e.cloud
			defer listAgain(func() bool {
				mu.Lock()
				c := cloud
				mu.Unlock()
				got, err := c.InstancesSince(context.Background(), time.Time{})
				if err != nil {
					return true // closed by a restart
				}
				for k := 1; k < len(got); k++ {
					if compareInstances(got[k-1], got[k]) >= 0 {
						t.Errorf("listing out of order or repeated at %d: %s, %s", k, got[k-1].ID, got[k].ID)
						return false
					}
				}
				return true
			})()

			var live []string // launched, perhaps ended since
			jobs := map[string]string{}
			ctx := context.Background()
			for step := range 200 {
				switch op := rng.IntN(10); {
				case op < 4:
					offer := awsSmallOD
					if rng.IntN(2) == 0 {
						offer = awsSmallSp
					}
					// Spot capacity an interruption took is held a while:
					// a launch may be refused.
					insts, err := e.cloud.Launch(ctx, e.request(offer, fmt.Sprintf("k%d", rng.IntN(400)), 1+rng.IntN(3)))
					if _, refused := errors.AsType[*providers.InsufficientCapacityError](err); err != nil && !refused {
						t.Fatal(err)
					}
					for _, in := range insts {
						live = append(live, in.ID)
						jobs[in.ID] = in.JobID
					}
				case op < 6 && len(live) > 0:
					id := live[rng.IntN(len(live))]
					if rng.IntN(2) == 0 {
						_ = e.cloud.Terminate(ctx, id)
					} else {
						_ = e.cloud.FailInstance(id, "")
					}
				case op < 7 && len(live) > 0:
					_, _ = e.cloud.PreemptJob(jobs[live[rng.IntN(len(live))]])
				case op < 9:
					spans := []time.Duration{time.Minute, time.Hour, 26 * time.Hour, Retention / 2, KeyRetention / 3}
					e.clk.Advance(spans[rng.IntN(len(spans))])
				default:
					e.cloud.Close()
					c := e.start()
					mu.Lock()
					e.cloud, cloud = c, c
					mu.Unlock()
					e.setAvailable(awsSmallOD, 1000)
					e.setAvailable(awsSmallSp, 1000)
				}
				now := e.clk.Now()
				for _, since := range []time.Time{{}, now.Add(-time.Hour), now.Add(-Retention / 2), now.Add(-Retention)} {
					got, err := e.cloud.InstancesSince(ctx, since)
					if err != nil {
						t.Fatal(err)
					}
					if want := walkedSince(e.cloud, since); !slices.Equal(listed(got), want) {
						t.Fatalf("step %d, since %s: listed %v, want %v", step, since, listed(got), want)
					}
				}
			}
		})
	}
}

// walkedSince lists as the cloud did before it kept an index: every
// instance it keeps, walked under its lock.
func walkedSince(c *Cloud, since time.Time) []string {
	c.mu.Lock()
	var out []providers.Instance
	for _, in := range c.insts {
		if i := in.rec.Instance; !in.rec.Pruned && (!i.State.Ended() || !i.EndedAt.Before(since)) {
			out = append(out, i)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, compareInstances)
	return listed(out)
}

func listed(insts []providers.Instance) []string {
	out := make([]string, len(insts))
	for k, i := range insts {
		out[k] = fmt.Sprintf("%s %s %s", i.ID, i.State, i.EndedAt.Format(time.RFC3339Nano))
	}
	return out
}

// listAgain calls list on a goroutine of its own, again and again, until it
// returns false or the function listAgain returns is called (which waits
// for it).
func listAgain(list func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if !list() {
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
