package sim

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spotwise/spotwise/providers"
)

// outcome names what a launch call came back with, the way the scheduler
// reads it.
func outcome(t *testing.T, err error) string {
	t.Helper()
	_, refused := providers.AsLaunchRefused(err)
	switch {
	case err == nil:
		return "launched"
	case providers.IsInsufficientCapacity(err):
		return "capacity"
	case refused:
		return "permanent"
	case errors.Is(err, ErrLaunchUnknown):
		return "unknown"
	}
	t.Fatalf("unexpected launch error: %v", err)
	return ""
}

func withFaults(f Faults) func(*Options) { return func(o *Options) { o.Faults = &f } }

// TestFaultsInjectEachKindAtItsShare launches many times with every fault
// on: each kind comes at about its share, in the form the scheduler
// branches on, and nothing is bought by a refusal or a lost request.
func TestFaultsInjectEachKindAtItsShare(t *testing.T) {
	const n = 2000
	e := newEnv(t, withFaults(Faults{Capacity: 0.2, Permanent: 0.1, Unknown: 0.2, UnknownLaunched: 0.5}))
	e.setAvailable(awsSmallOD, 10*n)
	got := map[string]int{}
	launchedAnyway := 0
	for i := range n {
		key := fmt.Sprintf("job%d-a1", i)
		insts, err := e.cloud.Launch(context.Background(), e.request(awsSmallOD, key, 1))
		kind := outcome(t, err)
		got[kind]++
		have, lerr := e.cloud.InstancesByKey(context.Background(), key)
		if lerr != nil {
			t.Fatal(lerr)
		}
		switch kind {
		case "launched":
			if len(insts) != 1 || len(have) != 1 {
				t.Fatalf("%s: launched %d, cloud has %d", key, len(insts), len(have))
			}
		case "capacity", "permanent":
			if len(have) != 0 {
				t.Fatalf("%s: refused (%v) yet the cloud has %d instances", key, err, len(have))
			}
		case "unknown":
			launchedAnyway += len(have)
		}
	}
	for kind, share := range map[string]float64{"capacity": 0.2, "permanent": 0.1, "unknown": 0.2, "launched": 0.5} {
		if lo, hi := int(share*n*0.8), int(share*n*1.2); got[kind] < lo || got[kind] > hi {
			t.Errorf("%s: %d of %d launches, want about %.0f", kind, got[kind], n, share*n)
		}
	}
	// Half of the unknown outcomes bought their instances all the same.
	if u := got["unknown"]; launchedAnyway < u/4 || launchedAnyway > 3*u/4 {
		t.Errorf("%d of %d unknown outcomes launched, want about half", launchedAnyway, u)
	}
}

// TestFaultsUnknownOutcomeIsResolvedByTheKey: after an unknown outcome,
// asking again with the same key returns what the cloud has (the launch
// that went through) or launches now, and never buys twice or refuses a
// launch the cloud served.
func TestFaultsUnknownOutcomeIsResolvedByTheKey(t *testing.T) {
	e := newEnv(t, withFaults(Faults{Capacity: 0.1, Permanent: 0.1, Unknown: 0.5, UnknownLaunched: 0.5}))
	e.setAvailable(awsSmallOD, 10_000)
	sawLaunched, sawNot := false, false
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("job%d-a1", i)
		_, err := e.cloud.Launch(context.Background(), e.request(awsSmallOD, key, 2))
		if outcome(t, err) != "unknown" {
			continue
		}
		before, _ := e.cloud.InstancesByKey(context.Background(), key)
		if len(before) > 0 {
			sawLaunched = true
		} else {
			sawNot = true
		}
		var insts []providers.Instance
		for try := 0; ; try++ {
			if try == 50 {
				t.Fatalf("%s: still unknown after 50 retries", key)
			}
			insts, err = e.cloud.Launch(context.Background(), e.request(awsSmallOD, key, 2))
			if k := outcome(t, err); k == "launched" {
				break
			} else if k != "unknown" && len(before) > 0 {
				t.Fatalf("%s: a served launch retried is refused: %v", key, err)
			} else if k != "unknown" {
				break // a new launch may be refused
			}
		}
		after, _ := e.cloud.InstancesByKey(context.Background(), key)
		if len(after) > 2 || (len(before) > 0 && (len(insts) != 2 || insts[0].ID != before[0].ID)) {
			t.Fatalf("%s: before %v, retry returned %v, cloud has %v", key, ids(before), ids(insts), ids(after))
		}
	}
	if !sawLaunched || !sawNot {
		t.Errorf("unknown outcomes: some launched %v, some not %v; want both", sawLaunched, sawNot)
	}
}

// TestFaultsAreSeeded: two clouds with the same seed asked the same
// launches inject the same faults; another seed, others.
func TestFaultsAreSeeded(t *testing.T) {
	run := func(seed int64) string {
		e := newEnv(t, withFaults(Faults{Capacity: 0.2, Permanent: 0.1, Unknown: 0.2, UnknownLaunched: 0.5}),
			func(o *Options) { o.Seed = seed })
		e.setAvailable(awsSmallOD, 1000)
		out := ""
		for i := range 100 {
			key := fmt.Sprintf("job%d-a1", i%60) // some keys asked twice
			_, err := e.cloud.Launch(context.Background(), e.request(awsSmallOD, key, 1))
			out += outcome(t, err)[:1]
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Errorf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 inject the same faults: %s", a)
	}
}

func TestFaultsOutOfRangeAreRefused(t *testing.T) {
	for _, f := range []Faults{{Capacity: -0.1}, {Unknown: 1.5}, {Capacity: 0.6, Permanent: 0.6}, {Unknown: 0.1, UnknownLaunched: 2}} {
		o := newEnv(t).opts
		o.Faults = &f
		if c, err := New(context.Background(), o); err == nil {
			c.Close()
			t.Errorf("%+v accepted", f)
		}
	}
}
