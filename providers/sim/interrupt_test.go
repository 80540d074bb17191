package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// More offer IDs of the test catalog.
var (
	euBigSpot  = providers.OfferID("aws", "eu-west-1", "eu-west-1a", "p4de.24xlarge", providers.Spot)
	gcpSpotA   = providers.OfferID("gcp", "us-central1", "us-central1-a", "a2-ultragpu-1g", providers.Spot)
	gcpSpotC   = providers.OfferID("gcp", "us-central1", "us-central1-c", "a2-ultragpu-1g", providers.Spot)
	awsBigODEU = providers.OfferID("aws", "eu-west-1", "eu-west-1a", "p4de.24xlarge", providers.OnDemand)
)

// model sets the cloud's interruption model.
func model(m Interruptions) func(*Options) { return func(o *Options) { o.Interruptions = &m } }

// quiet turns every seeded interruption off, for tests of the manual path.
var quiet = model(Interruptions{})

// boot launches count instances of an offer, with capacity for them, and
// lets them boot.
func (e *env) boot(offerID, key string, count int) []providers.Instance {
	e.t.Helper()
	if avail := e.offer(offerID).Available; avail < count {
		e.setAvailable(offerID, count)
	}
	insts := e.launch(offerID, key, count)
	e.clk.Advance(e.offer(offerID).LaunchLatency)
	for _, in := range insts {
		e.runner.wait(e.t, in.ID, 1, 0)
	}
	return insts
}

// record is the cloud's record of an instance, brought up to the clock.
func (e *env) record(id string) record {
	e.t.Helper()
	mustOffers(e.t, e.cloud) // any call brings the cloud up to the clock
	e.cloud.mu.Lock()
	defer e.cloud.mu.Unlock()
	in, ok := e.cloud.insts[id]
	if !ok {
		e.t.Fatalf("no instance %s", id)
	}
	return in.rec
}

// advanceUntil moves the clock by step until done holds, at most limit.
func (e *env) advanceUntil(step, limit time.Duration, what string, done func() bool) {
	e.t.Helper()
	for end := e.clk.Now().Add(limit); !done(); e.clk.Advance(step) {
		if e.clk.Now().After(end) {
			e.t.Fatalf("no %s within %s", what, limit)
		}
	}
}

// kinds lists the kinds of the instance events of one instance.
func (r *recorder) kinds(id string) []providers.EventKind {
	var out []providers.EventKind
	for _, ev := range r.all() {
		if ev.Instance != nil && ev.Instance.ID == id {
			out = append(out, ev.Kind)
		}
	}
	return out
}

// threeClouds is a catalog with one zone and one instance type per
// provider, for what differs between providers.
func threeClouds(t *testing.T) *catalog.Catalog {
	t.Helper()
	tp := catalog.Throughput{TrainMixed: 1, TrainFP32: 1, Inference: 1}
	gpus := []catalog.GPU{{Name: "A10G", Family: "A10G", Vendor: "nvidia", MemoryGB: 24, Throughput: tp}}
	regions := []catalog.Region{
		{Provider: "aws", Name: "us-east-1", Geography: "us", Zones: []string{"us-east-1a"}},
		{Provider: "azure", Name: "eastus", Geography: "us", Zones: []string{"eastus-1"}},
		{Provider: "gcp", Name: "us-central1", Geography: "us", Zones: []string{"us-central1-a"}},
	}
	var types []catalog.InstanceType
	for _, r := range regions {
		types = append(types, catalog.InstanceType{Provider: r.Provider, Name: r.Provider + "-a10", GPU: "A10G", GPUs: 1,
			VCPUs: 8, MemoryGiB: 32, Prices: []catalog.Price{{Region: r.Name, OnDemand: money.MustParse("1.50")}}})
	}
	c, err := catalog.New(gpus, regions, types, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNoticeWindow(t *testing.T) {
	for provider, want := range map[string]time.Duration{"aws": 2 * time.Minute, "azure": 30 * time.Second,
		"gcp": 30 * time.Second, "oracle": 30 * time.Second} {
		if got := NoticeWindow(provider); got != want {
			t.Errorf("NoticeWindow(%s) = %s, want %s", provider, got, want)
		}
	}
}

// A notice, then the end exactly one notice window later: events in order,
// the runner stopped at the deadline, the capacity held back a while.
func TestPreemptionEndsAtDeadline(t *testing.T) {
	for _, tt := range []struct {
		provider, region, zone string
		window                 time.Duration
	}{
		{"aws", "us-east-1", "us-east-1a", 120 * time.Second},
		{"azure", "eastus", "eastus-1", 30 * time.Second},
		{"gcp", "us-central1", "us-central1-a", 30 * time.Second},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			e := newEnv(t, quiet, func(o *Options) { o.Catalog = threeClouds(t) })
			rec, _, _ := watch(t, e.cloud)
			offerID := providers.OfferID(tt.provider, tt.region, tt.zone, tt.provider+"-a10", providers.Spot)
			e.setAvailable(offerID, 3)
			in := e.boot(offerID, "k", 1)[0]
			sent := e.clk.Now()
			if err := e.cloud.Preempt(in.ID); err != nil {
				t.Fatal(err)
			}
			ev := rec.wait(t, "notice", instanceEvent(providers.EventSpotInterruption, in.ID))
			if !ev.Time.Equal(sent) || !ev.Deadline.Equal(sent.Add(tt.window)) || ev.Reason != CauseManual || ev.Provider != tt.provider {
				t.Errorf("notice at %s with deadline %s (%q), want at %s with deadline %s", ev.Time, ev.Deadline, ev.Reason, sent, sent.Add(tt.window))
			}
			e.clk.Advance(tt.window - time.Second)
			if got := e.instance(in.ID); got.State != providers.InstanceRunning {
				t.Fatalf("%s a second before the deadline", got.State)
			}
			if _, stops, _ := e.runner.counts(in.ID); stops != 0 {
				t.Fatal("runner stopped before the deadline")
			}
			e.clk.Advance(time.Second)
			got := e.instance(in.ID)
			if got.State != providers.InstanceTerminated || got.Reason != ReasonReclaimed || !got.EndedAt.Equal(ev.Deadline) {
				t.Errorf("at the deadline: %s (%q) at %s", got.State, got.Reason, got.EndedAt)
			}
			e.runner.wait(t, in.ID, 1, 1)
			end := rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
			if end.Reason != ReasonReclaimed || !end.Time.Equal(ev.Deadline) {
				t.Errorf("terminated event %+v", end)
			}
			want := []providers.EventKind{providers.EventInstanceRunning, providers.EventSpotInterruption, providers.EventInstanceTerminated}
			if got := rec.kinds(in.ID); !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			// The spot pool shrank: the capacity stays away for a while.
			if got := e.offer(offerID).Available; got != 2 {
				t.Errorf("available %d after the preemption, want 2", got)
			}
			held := e.record(in.ID).HeldUntil
			if d := held.Sub(ev.Deadline); d < holdMin || d > holdMax {
				t.Errorf("capacity held %s after the deadline, want %s..%s", d, holdMin, holdMax)
			}
			e.clk.Set(held.Add(-time.Second))
			if got := e.offer(offerID).Available; got != 2 {
				t.Errorf("available %d before the hold is over, want 2", got)
			}
			e.clk.Advance(time.Second)
			if got := e.offer(offerID).Available; got != 3 {
				t.Errorf("available %d once the hold is over, want 3", got)
			}
			rec.wait(t, "capacity back", offerWith(offerID, func(o providers.Offer) bool { return o.Available == 3 }))
		})
	}
}

// An instance under notice that spotwise terminates early (after its
// checkpoint) still does not give its capacity back: the pool shrank.
func TestTerminatedUnderNoticeHoldsCapacity(t *testing.T) {
	e := newEnv(t, quiet)
	e.setAvailable(awsSmallSp, 2)
	in := e.boot(awsSmallSp, "k", 1)[0]
	if err := e.cloud.Preempt(in.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(30 * time.Second)
	if err := e.cloud.Terminate(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.instance(in.ID); got.Reason != ReasonTerminated {
		t.Errorf("reason %q, want %q", got.Reason, ReasonTerminated)
	}
	if got := e.offer(awsSmallSp).Available; got != 1 {
		t.Errorf("available %d, want 1", got)
	}
	e.clk.Advance(holdMax + NoticeWindow("aws"))
	if got := e.offer(awsSmallSp).Available; got != 2 {
		t.Errorf("available %d after the hold, want 2", got)
	}
}

func TestInterruptionRateAndBucket(t *testing.T) {
	m := DefaultInterruptions()
	m.RateScale = 50
	e := newEnv(t, model(m))
	buckets := map[string]bool{}
	for _, b := range advisorBuckets {
		buckets[b.label] = true
	}
	for _, o := range mustOffers(t, e.cloud) {
		rate, ok := e.cloud.InterruptionRate(o.ID())
		bucket := e.cloud.AdvisorBucket(o.ID())
		of := e.cloud.offers[o.ID()]
		want := m.MaintenancePerHour + m.FailuresPerHour
		if o.Purchase == providers.Spot {
			want += of.hazard*50 + m.StormsPerDay/24
			if !buckets[bucket] || bucketOf(of.hazard) != bucket {
				t.Errorf("%s: bucket %q for %.2g per hour", o.ID(), bucket, of.hazard)
			}
		} else if bucket != "" {
			t.Errorf("%s: on-demand bucket %q", o.ID(), bucket)
		}
		if !ok || math.Abs(rate-want) > 1e-12 {
			t.Errorf("%s: rate %v %v, want %v", o.ID(), rate, ok, want)
		}
	}
	if _, ok := e.cloud.InterruptionRate("aws/nowhere/x/y/spot"); ok || e.cloud.AdvisorBucket("aws/nowhere/x/y/spot") != "" {
		t.Error("an unknown offer has a rate")
	}
	// Over many offers every bucket is drawn, with rates within it.
	seen := map[string]int{}
	for i := range 2000 {
		label, rate := advisorDraw(3, fmt.Sprint("offer-", i))
		seen[label]++
		if bucketOf(rate) != label {
			t.Fatalf("rate %v drawn for bucket %s is in %s", rate, label, bucketOf(rate))
		}
	}
	for label := range buckets {
		if seen[label] < 200 {
			t.Errorf("bucket %s drawn %d times in 2000", label, seen[label])
		}
	}
}

func TestInterruptionOptionsChecked(t *testing.T) {
	for name, m := range map[string]Interruptions{
		"negative scale":  {RateScale: -1},
		"share above one": {RebalanceShare: 1.5},
		"NaN storms":      {StormsPerDay: math.NaN()},
		"infinite fails":  {FailuresPerHour: math.Inf(1)},
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := New(context.Background(), Options{Catalog: testCatalog(t), Clock: clock.NewFake(t0), Interruptions: &m}); err == nil {
				c.Close()
				t.Fatal("accepted")
			}
		})
	}
}

// The cloud goes to sleep between interruptions: one timer, armed for the
// next thing due, not for every slot.
func TestOneTimer(t *testing.T) {
	e := newEnv(t, model(Interruptions{RateScale: 3000, StormsPerDay: 2}))
	launchMix(e)
	for range 20 {
		e.clk.Advance(17 * time.Minute)
		e.cloud.Offers(context.Background())
		testutil.CheckFor(t, 2*time.Second, time.Millisecond, func() error {
			if n := e.clk.Timers(); n != 1 {
				return fmt.Errorf("%d timers", n)
			}
			return nil
		})
	}
}
