package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

// Two servers on one bus: exactly one schedules; when it goes away the
// other takes over, at once after a clean stop and within the lease TTL
// after a crash.
func TestOneSchedulerAtATime(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			// A TTL long against a clean handover, whatever the load.
			r := newRig(t, rigOpt{noScheduler: true, leaseTTL: 3 * time.Second})
			cat := catalog.Default()
			mk := func(name string) *scheduler.Scheduler {
				return scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: eventstest.Logger(t).Named(name), Clouds: map[string]providers.Provider{"aws": r.cloud},
					Throughput: cat, Geography: cat.GeographyOf, ReconcileInterval: 100 * time.Millisecond, Debounce: time.Millisecond})
			}
			a, b := mk("a"), mk("b")
			actx, stopA := context.WithCancel(r.ctx)
			leaseA, leaseB := r.bus.Lease("scheduler", "a"), r.bus.Lease("scheduler", "b")
			aDone := make(chan struct{})
			r.goRun(func() { _ = leaseA.RunElected(actx, r.bus.LeaseTTL(), eventstest.Logger(t), a.Run); close(aDone) })
			testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				if leaseA.Terms() != 1 {
					return errors.New("a has not taken the lease")
				}
				return nil
			})
			if !crash {
				r.goRun(func() { _ = leaseB.RunElected(r.ctx, r.bus.LeaseTTL(), eventstest.Logger(t), b.Run) })
			}
			first := r.submit(t, oneGPU)
			r.waitState(t, first.ID, job.Placing)
			r.settle(t)
			if leaseB.Terms() != 0 || b.Stats().Placements != 0 {
				t.Fatalf("b scheduled while a held the lease: %+v", b.Stats())
			}
			stopA()
			<-aDone
			if crash {
				// a died without letting go: its lease stays until it
				// expires, and only then may b take over.
				ghost := r.bus.Lease("scheduler", "a")
				if ok, err := ghost.TryAcquire(r.ctx); !ok || err != nil {
					t.Fatalf("re-creating a's lease: %v, %v", ok, err)
				}
				r.goRun(func() { _ = leaseB.RunElected(r.ctx, r.bus.LeaseTTL(), eventstest.Logger(t), b.Run) })
			}
			stopped := time.Now()
			second := r.submit(t, oneGPU)
			r.waitState(t, second.ID, job.Placing)
			took := time.Since(stopped)
			// b counts a placement once its write returns, which may be
			// just after the watch shows the job placing.
			testutil.CheckFor(t, 2*time.Second, 5*time.Millisecond, func() error {
				if leaseB.Terms() != 1 || b.Stats().Placements < 1 {
					return fmt.Errorf("b did not take over: terms %d, %+v; a %+v; second %+v", leaseB.Terms(), b.Stats(), a.Stats(), r.get(t, second.ID).Status)
				}
				return nil
			})
			ttl := r.bus.LeaseTTL()
			if !crash && took > ttl {
				t.Fatalf("takeover after a clean stop took %s", took)
			}
			if crash && (took < ttl/2 || took > 3*ttl) {
				t.Fatalf("takeover after a crash took %s, want about the lease TTL %s", took, ttl)
			}
		})
	}
}

// A scheduler's writes carry its lease term: once a scheduler of a newer
// term has written a job, a deposed one's late write is refused and it
// steps down; a scheduler whose lease is no longer valid writes nothing.
func TestDeposedSchedulerCannotWrite(t *testing.T) {
	r := newRig(t, rigOpt{noScheduler: true})
	cat := catalog.Default()
	mk := func(term int64, valid func() bool) (*scheduler.Scheduler, chan error) {
		s := scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: eventstest.Logger(t), Clouds: map[string]providers.Provider{"aws": r.cloud},
			Throughput: cat, Geography: cat.GeographyOf, ReconcileInterval: 100 * time.Millisecond, Debounce: time.Millisecond,
			Term: term, LeaseValid: valid})
		done := make(chan error, 1)
		r.goRun(func() { done <- s.Run(r.ctx) })
		return s, done
	}
	old, done := mk(5, func() bool { return true })
	rec := r.submit(t, oneGPU)
	placed := r.waitState(t, rec.ID, job.Placing)
	if placed.Status.Term != 5 {
		t.Fatalf("the placement was written with term %d, want the scheduler's 5", placed.Status.Term)
	}
	// A scheduler of term 9 writes the job (here: by hand), then the old
	// one hears that its instance runs.
	if _, _, err := r.bus.Jobs().Modify(r.ctx, rec.ID, func(x *job.Record) error { x.Status.Term = 9; return nil }); err != nil {
		t.Fatal(err)
	}
	r.boot(t, rec.ID)
	select {
	case err := <-done:
		if !errors.Is(err, scheduler.ErrDeposed) {
			t.Fatalf("the deposed scheduler stopped with %v, want ErrDeposed", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the deposed scheduler did not step down")
	}
	if got := r.get(t, rec.ID); got.Status.State != job.Placing || got.Status.Term != 9 || old.Stats().DeposedWrites == 0 {
		t.Fatalf("the deposed scheduler wrote: %s, term %d, %d writes refused", got.Status.State, got.Status.Term, old.Stats().DeposedWrites)
	}

	// A lease that is no longer valid: nothing is written either.
	second := r.submit(t, oneGPU)
	_, done = mk(10, func() bool { return false })
	select {
	case err := <-done:
		if !errors.Is(err, scheduler.ErrDeposed) {
			t.Fatalf("the scheduler without a valid lease stopped with %v, want ErrDeposed", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the scheduler without a valid lease did not step down")
	}
	if got := r.get(t, second.ID); got.Status.State != job.Queued || got.Status.Attempt != 0 {
		t.Fatalf("a scheduler without a valid lease placed a job: %s, attempt %d", got.Status.State, got.Status.Attempt)
	}
}
