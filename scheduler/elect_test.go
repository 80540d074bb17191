package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

// crashy is a lease whose holder dies without letting go.
type crashy struct{ *events.Lease }

func (crashy) Release(context.Context) error { return nil }

// Two servers on one bus: exactly one schedules; when it goes away the
// other takes over, at once after a clean stop and within the lease TTL
// after a crash.
func TestOneSchedulerAtATime(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			r := newRig(t, rigOpt{noScheduler: true})
			cat := catalog.Default()
			mk := func(name string) *scheduler.Scheduler {
				return scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: eventstest.Logger(t).Named(name), Clouds: map[string]providers.Provider{"aws": r.cloud},
					Throughput: cat, Geography: cat.GeographyOf, ReconcileInterval: 100 * time.Millisecond, Debounce: time.Millisecond})
			}
			a, b := mk("a"), mk("b")
			actx, stopA := context.WithCancel(r.ctx)
			var leaseA scheduler.Leaser = r.bus.Lease("scheduler", "a")
			if crash {
				leaseA = crashy{r.bus.Lease("scheduler", "a")}
			}
			aDone := make(chan struct{})
			go func() { _ = a.RunElected(actx, leaseA, r.bus.LeaseTTL()); close(aDone) }()
			testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				if a.Stats().Terms != 1 {
					return errors.New("a has not taken the lease")
				}
				return nil
			})
			go func() { _ = b.RunElected(r.ctx, r.bus.Lease("scheduler", "b"), r.bus.LeaseTTL()) }()
			first := r.submit(t, oneGPU)
			r.waitState(t, first.ID, job.Placing)
			time.Sleep(300 * time.Millisecond)
			if b.Stats().Terms != 0 || b.Stats().Placements != 0 {
				t.Fatalf("b scheduled while a held the lease: %+v", b.Stats())
			}
			stopA()
			<-aDone
			stopped := time.Now()
			second := r.submit(t, oneGPU)
			r.waitState(t, second.ID, job.Placing)
			took := time.Since(stopped)
			if b.Stats().Terms != 1 || b.Stats().Placements < 1 {
				t.Fatalf("b did not take over: %+v", b.Stats())
			}
			limit := r.bus.LeaseTTL()
			if crash {
				limit = 3 * r.bus.LeaseTTL()
			}
			if took > limit {
				t.Fatalf("takeover took %s", took)
			}
		})
	}
}
