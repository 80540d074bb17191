package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
)

func TestWatchStartsWithOffersPerRegion(t *testing.T) {
	e := newEnv(t)
	rec, _, _ := watch(t, e.cloud)
	want := map[string]int{"aws/us-east-1": 8, "aws/eu-west-1": 2, "gcp/us-central1": 6}
	testutil.CheckFor(t, 2*time.Second, time.Millisecond, func() error {
		if n := len(rec.all()); n != len(want) {
			return fmt.Errorf("%d initial events, want %d", n, len(want))
		}
		return nil
	})
	for _, ev := range rec.all() {
		region := ev.Provider + "/" + ev.Region
		if ev.Kind != providers.EventOffers || len(ev.Offers) != want[region] || !ev.Time.Equal(t0) {
			t.Errorf("initial event for %s: %s with %d offers at %s, want %d offers", region, ev.Kind, len(ev.Offers), ev.Time, want[region])
		}
		for _, o := range ev.Offers {
			if o.Provider != ev.Provider || o.Region != ev.Region {
				t.Errorf("offer %s in the event of %s", o.ID(), region)
			}
		}
		delete(want, region)
	}
	if len(want) != 0 {
		t.Errorf("no initial offers for %v", want)
	}
}

func TestWatchReportsChangesToEveryWatcher(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 6)
	recs := []*recorder{}
	for range 3 {
		rec, _, _ := watch(t, e.cloud)
		recs = append(recs, rec)
	}
	in := e.launch(awsSmallOD, "k", 1)[0]
	// (Waited for before the next change: a newer offers event of the
	// region replaces an undelivered older one.)
	for _, rec := range recs {
		rec.wait(t, "capacity taken", offerWith(awsSmallOD, func(o providers.Offer) bool { return o.Available == 5 }))
	}
	e.clk.Advance(e.offer(awsSmallOD).LaunchLatency)
	if err := e.cloud.Terminate(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs {
		t.Run(fmt.Sprint("watcher", i), func(t *testing.T) {
			rec.wait(t, "running", instanceEvent(providers.EventInstanceRunning, in.ID))
			rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
			rec.wait(t, "capacity back", offerWith(awsSmallOD, func(o providers.Offer) bool { return o.Available == 6 }))
			// Instance events arrive in the order they happened.
			var kinds []providers.EventKind
			for _, ev := range rec.all() {
				if ev.Instance != nil {
					kinds = append(kinds, ev.Kind)
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint([]providers.EventKind{providers.EventInstanceRunning, providers.EventInstanceTerminated}) {
				t.Errorf("instance events %v", kinds)
			}
		})
	}
}

func TestWatchAnnouncesABurstOfLaunchesTwice(t *testing.T) {
	// 200 launches a second would otherwise mean 200 full offer lists of
	// the region a second: the first launch after a quiet spell is told
	// at once, the rest of the burst together CountEvery later.
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 20)
	rec, _, _ := watch(t, e.cloud)
	rec.wait(t, "initial offers", offerWith(awsSmallOD, func(o providers.Offer) bool { return o.Available == 20 }))
	for i := range 5 {
		e.launch(awsSmallOD, fmt.Sprint("k", i), 1)
		e.clk.Advance(time.Second)
	}
	rec.wait(t, "the first launch", offerWith(awsSmallOD, func(o providers.Offer) bool { return o.Available == 19 }))
	counts := func() []int {
		var out []int
		for _, ev := range rec.all() {
			for _, o := range ev.Offers {
				if o.ID() == awsSmallOD {
					out = append(out, o.Available)
				}
			}
		}
		return out
	}
	if got := counts(); fmt.Sprint(got) != "[20 19]" {
		t.Fatalf("counts announced 4s into the burst: %v, want [20 19]", got)
	}
	e.clk.Advance(defaultCountEvery - 5*time.Second)
	rec.wait(t, "the rest of the burst", offerWith(awsSmallOD, func(o providers.Offer) bool { return o.Available == 15 }))
	e.clk.Advance(time.Minute)
	if got := counts(); fmt.Sprint(got) != "[20 19 15]" {
		t.Errorf("counts announced: %v, want [20 19 15]", got)
	}
}

func offerWith(id string, ok func(providers.Offer) bool) func(providers.Event) bool {
	return func(ev providers.Event) bool {
		for _, o := range ev.Offers {
			if o.ID() == id && ok(o) {
				return true
			}
		}
		return false
	}
}

func TestWatchReportsPriceSteps(t *testing.T) {
	e := newEnv(t)
	rec, _, _ := watch(t, e.cloud)
	e.clk.Advance(defaultPriceInterval)
	step := t0.Add(defaultPriceInterval)
	testutil.CheckFor(t, 2*time.Second, time.Millisecond, func() error {
		n := 0
		for _, ev := range rec.all() {
			if ev.Kind == providers.EventOffers && ev.Time.Equal(step) {
				n++
			}
		}
		if n != 3 {
			return fmt.Errorf("%d offers events at the step, want one per region", n)
		}
		return nil
	})
	now := map[string]providers.Offer{}
	for _, o := range mustOffers(t, e.cloud) {
		now[o.ID()] = o
	}
	for _, ev := range rec.all() {
		if ev.Time.Equal(step) {
			for _, o := range ev.Offers {
				if o.Price != now[o.ID()].Price {
					t.Errorf("%s: event says %s, Offers says %s", o.ID(), o.Price, now[o.ID()].Price)
				}
			}
		}
	}
}

func TestWatchSlowSink(t *testing.T) {
	// A sink that does not keep up never holds the cloud back, gets only
	// the newest offers of each region and every instance event.
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 1)
	release := make(chan struct{})
	got := make(chan providers.Event, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.cloud.Watch(ctx, func(ev providers.Event) {
		if len(got) == 0 {
			got <- ev
			<-release
			return
		}
		got <- ev
	})
	<-got
	in := e.launch(awsSmallOD, "k", 1)[0]
	for range 50 {
		e.clk.Advance(defaultPriceInterval)
		e.cloud.Offers(context.Background())
	}
	close(release)
	last := t0.Add(50 * defaultPriceInterval)
	testutil.CheckFor(t, 2*time.Second, time.Millisecond, func() error {
		if len(got) != 4 {
			return fmt.Errorf("%d events after the first, want 4", len(got))
		}
		return nil
	})
	offers := 0
	for range 4 {
		ev := <-got
		switch {
		case ev.Kind == providers.EventOffers:
			offers++
			if !ev.Time.Equal(last) {
				t.Errorf("stale offers of %s from %s", ev.Region, ev.Time)
			}
		case ev.Kind != providers.EventInstanceRunning || ev.Instance.ID != in.ID:
			t.Errorf("unexpected %s event", ev.Kind)
		}
	}
	if offers != 3 {
		t.Errorf("%d offers events, want 3 (one per region)", offers)
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	e := newEnv(t)
	_, cancel, done := watch(t, e.cloud)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch returned %v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return")
	}
	ctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := e.cloud.Watch(ctx, func(providers.Event) {}); err != nil {
		t.Errorf("Watch on an ended context returned %v", err)
	}
}

func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 2)
	_, _, done := watch(t, e.cloud)
	in := e.launch(awsSmallOD, "k", 1)[0]
	e.clk.Advance(e.offer(awsSmallOD).LaunchLatency)
	e.runner.wait(t, in.ID, 1, 0)
	e.launch(awsSmallOD, "pending", 1)

	e.cloud.Close()
	e.cloud.Close() // twice is fine
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Watch returned %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return after Close")
	}
	e.runner.wait(t, in.ID, 1, 1)
	if n := e.clk.Timers(); n != 0 {
		t.Errorf("%d timers left after Close", n)
	}
	e.clk.Advance(24 * time.Hour) // nothing wakes up
	if _, err := e.cloud.Offers(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Offers after Close: %v", err)
	}
	if _, err := e.cloud.Launch(context.Background(), providers.LaunchRequest{IdempotencyKey: "x", Count: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Launch after Close: %v", err)
	}
	if err := e.cloud.Watch(context.Background(), func(providers.Event) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
	testutil.CheckFor(t, 2*time.Second, 5*time.Millisecond, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before the cloud", n, before)
		}
		return nil
	})
}
