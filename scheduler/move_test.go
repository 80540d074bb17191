package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// eachSpotT4 calls fn with every single-T4 spot offer of the cloud.
func (r *rig) eachSpotT4(t *testing.T, fn func(id string) error) {
	t.Helper()
	offers, err := r.cloud.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if o.GPU == "T4" && o.GPUs == 1 && o.Purchase == providers.Spot {
			if err := fn(o.ID()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// setSpotT4 gives every single-T4 spot offer n instances of capacity.
func (r *rig) setSpotT4(t *testing.T, n int) {
	t.Helper()
	r.eachSpotT4(t, func(id string) error { return r.cloud.SetAvailable(id, n) })
}

// A job the deadline policy put on on-demand while spot was gone goes
// back to spot once spot has been back for a while: it checkpoints where
// it runs, the on-demand instance is released, and the job resumes on spot
// from its checkpoint. A job that asked for on-demand stays there.
func TestJobOnOnDemandReturnsToSpotWhenItIsBack(t *testing.T) {
	r := newRig(t, rigOpt{workload: true}) // the scheduler asks bidding.Spotwise
	r.setSpotT4(t, 0)
	r.settle(t) // the scheduler has heard that spot is gone
	auto := r.submit(t, "name: auto\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 10h on T4\ndeadline: 13h\npurchase: auto\ncheckpoint: {duration: 30s}\n")
	fixed := r.submit(t, "name: fixed\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 10h on T4\ndeadline: 13h\npurchase: on-demand\ncheckpoint: {duration: 30s}\n")

	// No spot anywhere: the policy waits a little, then bridges with
	// on-demand.
	rec := r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "on on-demand", func(x *job.Record) bool {
		return x.Status.State == job.Running && x.Status.Current.Placement.Purchase == string(providers.OnDemand)
	}, auto.ID)
	odAttempt := *rec.Status.Current
	r.waitState(t, fixed.ID, job.Running)
	rec = r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "progress on on-demand", func(x *job.Record) bool { return x.Status.Progress >= 0.1 }, auto.ID)
	if rec.Status.Current.N != odAttempt.N || slices.ContainsFunc(rec.Status.Attempts, func(a job.Attempt) bool { return a.Outcome == "moved" }) {
		t.Fatalf("the job moved before spot came back: attempt %d, ended %+v", rec.Status.Current.N, rec.Status.Attempts)
	}

	// Spot is back: after the policy's hysteresis the job checkpoints and
	// moves; the on-demand instance goes.
	r.setSpotT4(t, 10)
	rec = r.advanceUntil(t, time.Minute, 3*time.Hour, "back on spot", func(x *job.Record) bool {
		return x.Status.Current != nil && x.Status.Current.Placement.Purchase == string(providers.Spot) && x.Status.State == job.Running
	}, auto.ID)
	a := rec.Status.Current
	if a.N != odAttempt.N+1 {
		t.Fatalf("on spot in attempt %d, want %d (one move from the on-demand attempt %d)", a.N, odAttempt.N+1, odAttempt.N)
	}
	ended := rec.Status.Attempts[len(rec.Status.Attempts)-1]
	if ended.N != odAttempt.N || ended.Outcome != "moved" || ended.Cost <= 0 {
		t.Fatalf("the on-demand attempt ended as %+v; want attempt %d closed as moved and billed", ended, odAttempt.N)
	}
	if a.StartProgress < 0.1 || rec.Status.Checkpoint == nil || rec.Status.Checkpoint.Attempt != odAttempt.N {
		t.Fatalf("resumed on spot from %.2f (checkpoint %+v); want the checkpoint taken on on-demand (>= 0.10)", a.StartProgress, rec.Status.Checkpoint)
	}
	if rec.Status.WorkLost > 0 {
		t.Fatalf("the move lost %s of work", rec.Status.WorkLost.D())
	}
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		for _, in := range r.instancesFor(t, auto.ID) {
			if in.IdempotencyKey == odAttempt.LaunchKey && !in.State.Ended() {
				return fmt.Errorf("on-demand instance %s still %s after the move", in.ID, in.State)
			}
		}
		h := r.history(t, auto.ID)
		for _, k := range []string{events.KindMove, events.KindMigrating, events.KindTerminated} {
			if !slices.Contains(h, k) {
				return fmt.Errorf("history %v has no %s", h, k)
			}
		}
		return nil
	})
	if got := r.get(t, fixed.ID); got.Status.Attempt != 1 || got.Status.State != job.Running {
		t.Fatalf("the job that asked for on-demand moved: %s, attempt %d", got.Status.State, got.Status.Attempt)
	}

	// It finishes on spot, before its deadline.
	rec = r.advanceUntil(t, 10*time.Minute, 13*time.Hour, "finished", func(x *job.Record) bool { return x.Status.State.Terminal() }, auto.ID)
	if rec.Status.State != job.Succeeded || rec.Status.FinishedAt.After(rec.Status.DeadlineAt) {
		for _, a := range rec.Status.Attempts {
			t.Logf("attempt %d %s %s %s: %s to %s, %s (notice %+v)", a.N, a.Placement.Zone, a.Placement.Purchase, a.Placement.PricePerHour, a.RunningAt, a.EndedAt, a.Outcome, a.Notice)
		}
		h, _ := r.bus.JobHistory(r.ctx, auto.ID, nil, 0)
		for _, e := range h {
			if e.Event.Kind != events.KindProgress {
				t.Logf("%s %s attempt %d: %s", e.Envelope.Time.Format("15:04:05"), e.Event.Kind, e.Event.Attempt, e.Event.Message)
			}
		}
		t.Fatalf("job %s at %s, deadline %s", rec.Status.State, rec.Status.FinishedAt, rec.Status.DeadlineAt)
	}
}

// A move whose checkpoint never comes is given up: the job stays where it
// runs, and the operator hears of the failed checkpoint.
func TestMoveWithoutCheckpointIsGivenUp(t *testing.T) {
	r := newRig(t, rigOpt{}) // no agent: nobody answers checkpoint requests
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s, move_on_rebalance: true}\n")
	in := r.instancesFor(t, rec.ID)[0]
	if err := r.bus.Publish(r.ctx, events.InterruptionsSubject(in.Provider, in.Region), &events.Interruption{Kind: providers.EventRebalance, Instance: in}); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, rec.ID, job.Checkpointing)
	rec = r.advanceUntil(t, time.Minute, 30*time.Minute, "given up", func(x *job.Record) bool { return x.Status.State == job.Running }, rec.ID)
	if rec.Status.Attempt != 1 || rec.Status.Current.Notice != nil {
		t.Fatalf("after giving up: attempt %d, notice %+v; want attempt 1 and no notice", rec.Status.Attempt, rec.Status.Current.Notice)
	}
	if got := r.instancesFor(t, rec.ID); len(got) != 1 || got[0].State.Ended() {
		t.Fatalf("instances after a given-up move: %+v", got)
	}
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if !slices.Contains(r.history(t, rec.ID), events.KindCheckpointFailed) {
			return errors.New("no checkpoint-failed in the history")
		}
		return nil
	})
}

// A spot interruption during a move of the job's own is not taken for a
// duplicate: the job is handled as preempted, with the notice's deadline.
func TestNoticeOverridesAMoveInProgress(t *testing.T) {
	r := newRig(t, rigOpt{}) // no agent: the move's checkpoint does not come
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s, move_on_rebalance: true}\n")
	in := r.instancesFor(t, rec.ID)[0]
	subject := events.InterruptionsSubject(in.Provider, in.Region)
	if err := r.bus.Publish(r.ctx, subject, &events.Interruption{Kind: providers.EventRebalance, Instance: in}); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, rec.ID, job.Checkpointing)
	deadline := r.clk.Now().Add(2 * time.Minute)
	if err := r.bus.Publish(r.ctx, subject, &events.Interruption{Kind: providers.EventSpotInterruption, Instance: in, Deadline: deadline}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		got := r.get(t, rec.ID)
		p := got.Status.Previous
		if p == nil || p.Notice == nil || p.Notice.Kind != string(providers.EventSpotInterruption) || !p.Notice.Deadline.Equal(deadline) || got.Status.Preemptions != 1 {
			return fmt.Errorf("job %s (%s), previous %+v, %d preemptions", got.Status.State, got.Status.Message, p, got.Status.Preemptions)
		}
		return nil
	})
}

// A running job moves when a clearly cheaper place appears, the move's own
// cost counted, once it has run a while where it is; a small saving or
// arbitrage turned off leaves it alone.
func TestRunningJobMovesToClearlyCheaperCapacity(t *testing.T) {
	for _, c := range []struct {
		name   string
		factor int64 // the other zones' new price, in percent of the job's
		off    bool
		moves  bool
	}{
		{"much cheaper elsewhere", 40, false, true},
		{"a little cheaper elsewhere", 90, false, false},
		{"much cheaper but arbitrage is off", 40, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOpt{workload: true, arbitrage: scheduler.Arbitrage{Off: c.off}})
			spec := "name: a\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 10h on T4\npurchase: spot\ncheckpoint: {duration: 30s}\n"
			rec := r.runToRunning(t, spec)
			first := *rec.Status.Current
			// Every other single-T4 spot offer drops to factor% of the
			// job's price, pinned.
			target := first.Placement.PricePerHour.Scale(c.factor, 100)
			r.eachSpotT4(t, func(id string) error {
				if id == first.Placement.OfferID {
					return nil
				}
				return r.cloud.SetPrice(id, target)
			})
			// Not before it has run an hour there.
			r.advance(t, 30*time.Minute)
			if got := r.get(t, rec.ID); got.Status.Attempt != 1 || got.Status.State != job.Running {
				t.Fatalf("moved after 30 minutes: %s, attempt %d", got.Status.State, got.Status.Attempt)
			}
			if !c.moves {
				r.advanceUntil(t, 10*time.Minute, 2*time.Hour, "an hour later", func(x *job.Record) bool {
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
			if a.Placement.OfferID == first.Placement.OfferID || a.Placement.PricePerHour != target {
				t.Fatalf("moved to %s at %s/h; want another zone at %s/h", a.Placement.OfferID, a.Placement.PricePerHour, target)
			}
			ended := rec.Status.Attempts[len(rec.Status.Attempts)-1]
			if ended.N != 1 || ended.Outcome != "moved" || a.StartProgress <= 0 || rec.Status.WorkLost > 0 {
				t.Fatalf("first attempt %+v; resumed at %.2f, %s lost", ended, a.StartProgress, rec.Status.WorkLost.D())
			}
			testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				for _, in := range r.instancesFor(t, rec.ID) {
					if in.IdempotencyKey == first.LaunchKey && !in.State.Ended() {
						return fmt.Errorf("the first instance %s is still %s", in.ID, in.State)
					}
				}
				return nil
			})
		})
	}
}
