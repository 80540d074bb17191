package scheduler_test

import (
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// A deadline job on spot is the deadline policy's to move, as
// `spotwise simulate` measures it: when the zone it runs in becomes
// clearly dearer than others that are there, it checkpoints and moves to
// one of them; when the difference would not pay for the move, or moves
// for price are off, it stays.
func TestDeadlinePolicyMovesOffAnExpensiveZone(t *testing.T) {
	for _, c := range []struct {
		name   string
		factor int64 // the price where it runs, in per mille of every other zone's
		off    bool
		moves  bool
	}{
		{"3.5x dearer where it runs", 3500, false, true},
		// 0.2% of 7 hours at $0.16/h is less than the two minutes of
		// changeover a move pays for.
		{"dearer by less than the move costs", 1002, false, false},
		{"3.5x dearer, but moves for price are off", 3500, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOpt{workload: true, arbitrage: scheduler.Arbitrage{Off: c.off}})
			spec := "name: a\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 10h on T4\ndeadline: 20h\npurchase: auto\ncheckpoint: {duration: 30s}\n"
			rec := r.runToRunning(t, spec)
			first := *rec.Status.Current
			if first.Placement.Purchase != string(providers.Spot) {
				t.Fatalf("placed on %s, want spot", first.Placement.Purchase)
			}
			// Every single-T4 spot offer at the job's price, pinned; then
			// its own at factor per mille of it.
			base := first.Placement.PricePerHour
			r.eachSpotT4(t, func(id string) error {
				if id == first.Placement.OfferID {
					return r.cloud.SetPrice(id, base.Scale(c.factor, 1000))
				}
				return r.cloud.SetPrice(id, base)
			})
			if !c.moves {
				r.advanceUntil(t, 10*time.Minute, 3*time.Hour, "two hours later", func(x *job.Record) bool {
					return r.clk.Now().Sub(first.RunningAt) >= 2*time.Hour
				}, rec.ID)
				r.settle(t)
				if got := r.get(t, rec.ID); got.Status.Attempt != 1 || slices.Contains(r.history(t, rec.ID), events.KindMove) {
					t.Fatalf("moved: %s, attempt %d (%s)", got.Status.State, got.Status.Attempt, got.Status.Message)
				}
				return
			}
			rec = r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "moved and running", func(x *job.Record) bool {
				return x.Status.Current != nil && x.Status.Current.N == 2 && x.Status.State == job.Running
			}, rec.ID)
			a := rec.Status.Current
			if a.Placement.Zone == first.Placement.Zone || a.Placement.Purchase != string(providers.Spot) || a.Placement.PricePerHour != base {
				t.Fatalf("moved to %s %s at %s/h; want spot in another zone at %s/h", a.Placement.Zone, a.Placement.Purchase, a.Placement.PricePerHour, base)
			}
			ended := rec.Status.Attempts[len(rec.Status.Attempts)-1]
			if ended.N != 1 || ended.Outcome != "moved" || ended.Notice == nil || ended.Notice.Kind != scheduler.NoticeCheaper {
				t.Fatalf("first attempt ended %+v; want moved, for price", ended)
			}
			if a.StartProgress <= 0 || rec.Status.WorkLost > 0 {
				t.Fatalf("resumed at %.2f, %s lost", a.StartProgress, rec.Status.WorkLost.D())
			}
		})
	}
}
