package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func TestLaunchBootsAfterLatency(t *testing.T) {
	e := newEnv(t)
	rec, _, _ := watch(t, e.cloud)
	e.setAvailable(awsSmallOD, 10)
	o := e.offer(awsSmallOD)

	insts := e.launch(awsSmallOD, "job1-a1", 2)
	if len(insts) != 2 {
		t.Fatalf("%d instances, want 2", len(insts))
	}
	for n, in := range insts {
		switch {
		case in.State != providers.InstancePending:
			t.Errorf("node %d: state %s, want pending", n, in.State)
		case in.Node != n || in.JobID != "job-job1-a1" || in.Attempt != 1 || in.IdempotencyKey != "job1-a1":
			t.Errorf("node %d: launch not recorded: %+v", n, in)
		case in.Price != o.Price || !in.LaunchedAt.Equal(t0):
			t.Errorf("node %d: price %s at %s, want %s at %s", n, in.Price, in.LaunchedAt, o.Price, t0)
		case in.Provider != "aws" || in.Zone != "us-east-1b" || in.InstanceType != "g5.xlarge" || in.Purchase != providers.OnDemand:
			t.Errorf("node %d: placed wrong: %+v", n, in)
		case !strings.HasPrefix(in.ID, "i-") || len(in.ID) != 19:
			t.Errorf("node %d: ID %q, want i- and 17 hex digits", n, in.ID)
		}
	}
	if insts[0].ID == insts[1].ID {
		t.Fatal("two nodes share an ID")
	}
	if got := e.offer(awsSmallOD).Available; got != 8 {
		t.Errorf("available %d after launching 2 of 10", got)
	}
	rec.wait(t, "offers with capacity taken", func(ev providers.Event) bool {
		for _, of := range ev.Offers {
			if of.ID() == awsSmallOD && of.Available == 8 {
				return true
			}
		}
		return false
	})

	e.clk.Advance(o.LaunchLatency - time.Second)
	if s := e.instance(insts[0].ID).State; s != providers.InstancePending {
		t.Fatalf("state %s a second before the latency is over", s)
	}
	if n := e.runner.total(); n != 0 {
		t.Fatalf("runner started %d instances while pending", n)
	}
	e.clk.Advance(time.Second)
	for _, in := range insts {
		got := e.instance(in.ID)
		if got.State != providers.InstanceRunning || !got.RunningAt.Equal(t0.Add(o.LaunchLatency)) {
			t.Errorf("%s: %s since %s, want running since %s", in.ID, got.State, got.RunningAt, t0.Add(o.LaunchLatency))
		}
		ev := rec.wait(t, "running", instanceEvent(providers.EventInstanceRunning, in.ID))
		if !ev.Time.Equal(t0.Add(o.LaunchLatency)) || ev.Provider != "aws" || ev.Region != "us-east-1" {
			t.Errorf("running event %+v", ev)
		}
		e.runner.wait(t, in.ID, 1, 0)
	}
}

func TestLaunchBootsWithoutBeingAsked(t *testing.T) {
	// Nobody calls the cloud: its own timer notices the boot is over.
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 1)
	in := e.launch(awsSmallOD, "k", 1)[0]
	e.clk.Advance(e.offer(awsSmallOD).LaunchLatency)
	e.runner.wait(t, in.ID, 1, 0)
}

func TestLaunchIdempotent(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 10)
	first := e.launch(awsSmallOD, "job2-a1", 3)
	second := e.launch(awsSmallOD, "job2-a1", 3)
	if !slices.Equal(ids(first), ids(second)) {
		t.Fatalf("retry returned %v, want %v", ids(second), ids(first))
	}
	if got := e.offer(awsSmallOD).Available; got != 7 {
		t.Errorf("available %d, want 7: the retry bought again", got)
	}
	if n, _ := e.cloud.Instances(context.Background()); len(n) != 3 {
		t.Errorf("%d instances, want 3", len(n))
	}
	// Still the same instances once they have ended, and nothing bought.
	for _, in := range first {
		if err := e.cloud.Terminate(context.Background(), in.ID); err != nil {
			t.Fatal(err)
		}
	}
	third := e.launch(awsSmallOD, "job2-a1", 3)
	if !slices.Equal(ids(first), ids(third)) || third[0].State != providers.InstanceTerminated {
		t.Errorf("retry after the end returned %+v", third)
	}
	if got := e.offer(awsSmallOD).Available; got != 10 {
		t.Errorf("available %d, want 10", got)
	}
	// A different key buys.
	if other := e.launch(awsSmallOD, "job2-a2", 3); slices.Equal(ids(first), ids(other)) {
		t.Error("another key got the same instances")
	}
}

func TestLaunchConcurrentRetries(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 4)
	req := e.request(awsSmallOD, "race", 4)
	results := make(chan []string, 8)
	for range 8 {
		go func() {
			insts, err := e.cloud.Launch(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			results <- ids(insts)
		}()
	}
	want := <-results
	for range 7 {
		if got := <-results; !slices.Equal(got, want) {
			t.Errorf("concurrent retry got %v, want %v", got, want)
		}
	}
}

func TestLaunchRefused(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 2)
	e.setAvailable(awsSmallSp, 5)
	e.setAvailable(awsBigSpot, 0)
	spot := e.offer(awsSmallSp)
	bogus := e.offer(awsSmallOD)
	bogus.Region = "nowhere-1"
	reserved := e.offer(awsSmallOD)
	reserved.Purchase = providers.Reserved

	tests := []struct {
		name     string
		req      providers.LaunchRequest
		capacity bool   // want an InsufficientCapacityError
		is       error  // want errors.Is
		reason   string // in the error
	}{
		{name: "more than available", req: e.request(awsSmallOD, "a", 3), capacity: true, reason: "2 available, 3 requested"},
		{name: "sold out spot", req: e.request(awsBigSpot, "b", 1), capacity: true, reason: "0 available"},
		{name: "spot above max price", req: withMax(e.request(awsSmallSp, "c", 1), spot.Price-1), capacity: true, reason: "above max price"},
		{name: "unknown offer", req: providers.LaunchRequest{IdempotencyKey: "d", Offer: bogus, Count: 1}, is: providers.ErrUnknownOffer},
		{name: "reserved", req: providers.LaunchRequest{IdempotencyKey: "e", Offer: reserved, Count: 1}, is: providers.ErrUnknownOffer},
		{name: "no key", req: e.request(awsSmallOD, "", 1), reason: "idempotency key"},
		{name: "no count", req: e.request(awsSmallOD, "f", 0), reason: "not positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insts, err := e.cloud.Launch(context.Background(), tt.req)
			if err == nil {
				t.Fatalf("launched %v", ids(insts))
			}
			if got := providers.IsInsufficientCapacity(err); got != tt.capacity {
				t.Errorf("IsInsufficientCapacity(%v) = %v", err, got)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v, want %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
		})
	}
	if got := e.offer(awsSmallOD).Available; got != 2 {
		t.Errorf("refusals took capacity: %d available", got)
	}
	// At or under the max price, and with no max (the on-demand price), spot sells.
	e.launch(awsSmallSp, "g", 1)
	if _, err := e.cloud.Launch(context.Background(), withMax(e.request(awsSmallSp, "h", 1), spot.Price)); err != nil {
		t.Errorf("launch at max price = spot price: %v", err)
	}
	if err := e.cloud.SetPrice(awsSmallSp, spot.OnDemandPrice+1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.Launch(context.Background(), e.request(awsSmallSp, "i", 1)); !providers.IsInsufficientCapacity(err) {
		t.Errorf("spot above on-demand with no max price: %v", err)
	}
}

func withMax(r providers.LaunchRequest, p money.Micros) providers.LaunchRequest {
	r.MaxPrice = p
	return r
}

func TestTerminate(t *testing.T) {
	e := newEnv(t)
	rec, _, _ := watch(t, e.cloud)
	e.setAvailable(awsSmallOD, 5)
	latency := e.offer(awsSmallOD).LaunchLatency
	running := e.launch(awsSmallOD, "run", 1)[0]
	e.clk.Advance(latency)
	e.runner.wait(t, running.ID, 1, 0)
	pending := e.launch(awsSmallOD, "pend", 1)[0]
	if got := e.offer(awsSmallOD).Available; got != 3 {
		t.Fatalf("available %d, want 3", got)
	}

	e.clk.Advance(time.Minute)
	end := e.clk.Now()
	for _, id := range []string{running.ID, pending.ID} {
		if err := e.cloud.Terminate(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		got := e.instance(id)
		if got.State != providers.InstanceTerminated || got.Reason != ReasonTerminated || !got.EndedAt.Equal(end) {
			t.Errorf("%s after Terminate: %+v", id, got)
		}
		ev := rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, id))
		if ev.Reason != ReasonTerminated || ev.Instance.State != providers.InstanceTerminated {
			t.Errorf("event %+v", ev)
		}
	}
	e.runner.wait(t, running.ID, 1, 1)
	if got := e.offer(awsSmallOD).Available; got != 5 {
		t.Errorf("available %d after terminating both, want 5", got)
	}
	// The terminated pending instance never boots.
	e.clk.Advance(latency)
	if s, _, _ := e.runner.counts(pending.ID); s != 0 || e.instance(pending.ID).State != providers.InstanceTerminated {
		t.Error("terminated pending instance booted")
	}
	if err := e.cloud.Terminate(context.Background(), running.ID); err != nil {
		t.Errorf("terminating an ended instance: %v", err)
	}
	if err := e.cloud.Terminate(context.Background(), "i-nope"); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("terminating an unknown instance: %v, want ErrUnknownInstance", err)
	}
}

func TestFailInstance(t *testing.T) {
	tests := []struct {
		name      string
		boot      bool
		reason    string
		wantKind  providers.EventKind
		wantWhy   string
		wantStops int
	}{
		{name: "running", boot: true, reason: "GPU fell off the bus", wantKind: providers.EventInstanceTerminated, wantWhy: "GPU fell off the bus", wantStops: 1},
		{name: "pending", reason: "no host", wantKind: providers.EventInstanceFailed, wantWhy: "no host"},
		{name: "default reason", boot: true, wantKind: providers.EventInstanceTerminated, wantWhy: ReasonFailed, wantStops: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rec, _, _ := watch(t, e.cloud)
			e.setAvailable(gcpOD, 1)
			in := e.launch(gcpOD, "k", 1)[0]
			starts := 0
			if tt.boot {
				e.clk.Advance(e.offer(gcpOD).LaunchLatency)
				starts = 1
				e.runner.wait(t, in.ID, starts, 0)
			}
			if err := e.cloud.FailInstance(in.ID, tt.reason); err != nil {
				t.Fatal(err)
			}
			ev := rec.wait(t, string(tt.wantKind), instanceEvent(tt.wantKind, in.ID))
			if ev.Reason != tt.wantWhy || ev.Instance.State != providers.InstanceFailed {
				t.Errorf("event %+v", ev)
			}
			if got := e.instance(in.ID); got.State != providers.InstanceFailed || got.Reason != tt.wantWhy {
				t.Errorf("instance %+v", got)
			}
			e.runner.wait(t, in.ID, starts, tt.wantStops)
			if got := e.offer(gcpOD).Available; got != 1 {
				t.Errorf("available %d, want the capacity back", got)
			}
			if err := e.cloud.FailInstance(in.ID, "again"); err != nil {
				t.Errorf("failing an ended instance: %v", err)
			}
			if err := e.cloud.FailInstance("i-nope", ""); !errors.Is(err, ErrUnknownInstance) {
				t.Errorf("failing an unknown instance: %v", err)
			}
		})
	}
}

// An instance's agent credential is kept while it may still be needed (a
// restarted cloud starts the runner again) and dropped, in memory and in
// the store, once the instance ends.
func TestEndedInstanceKeepsNoAgentCredential(t *testing.T) {
	e := newEnv(t)
	req := e.request(awsSmallOD, "creds", 1)
	req.Workload.AgentCredentials = "-----BEGIN NATS USER JWT-----\nsecret\n"
	insts, err := e.cloud.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := insts[0].ID
	stored := func() string { b, _, _ := e.store.Get(context.Background(), storeKey(id)); return string(b) }
	if !strings.Contains(stored(), "secret") {
		t.Fatal("a live instance's record lost its agent credential")
	}
	if err := e.cloud.Terminate(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored(), "secret") {
		t.Error("the ended instance's stored record still holds its agent credential")
	}
	e.cloud.mu.Lock()
	defer e.cloud.mu.Unlock()
	if c := e.cloud.insts[id].rec.Workload.AgentCredentials; c != "" {
		t.Error("the ended instance still holds its agent credential in memory")
	}
}
