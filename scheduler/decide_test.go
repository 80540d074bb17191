package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unique"

	"github.com/spotwise/spotwise/bidding"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// throughputs is a small table relative to V100 (train-mixed).
type throughputs map[string]float64

func (t throughputs) RelativeThroughput(gpu, class string) (float64, bool) {
	v, ok := t[gpu]
	return v, ok
}

var testTP = throughputs{"V100": 1, "A100-40GB": 3, "A100-80GB": 3.3, "T4": 0.25, "H100": 6}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// offerB builds test offers.
type offerB struct{ o providers.Offer }

func offer(provider, region, itype, gpu string, gpus int, price string) *offerB {
	mem := map[string]int{"V100": 16, "A100-40GB": 40, "A100-80GB": 80, "T4": 16, "H100": 80}[gpu]
	return &offerB{providers.Offer{
		Provider: provider, Region: region, Zone: region + "a", InstanceType: itype,
		GPU: gpu, GPUs: gpus, GPUMemoryGB: mem, VCPUs: 8 * gpus, MemoryGiB: float64(60 * gpus),
		Purchase: providers.OnDemand, Price: money.MustParse(price), OnDemandPrice: money.MustParse(price),
		Available: -1, Capacity: providers.CapacityHigh, LaunchLatency: 2 * time.Minute,
	}}
}

func (b *offerB) spot(od string) *offerB {
	b.o.Purchase, b.o.OnDemandPrice = providers.Spot, money.MustParse(od)
	return b
}
func (b *offerB) avail(n int) *offerB  { b.o.Available = n; return b }
func (b *offerB) get() providers.Offer { return b.o }

// jobB builds queued test jobs.
type jobB struct {
	q    QueuedJob
	spec *job.Spec
}

func queued(id string, work string) *jobB {
	var w job.Work
	if err := w.UnmarshalJSON([]byte(`"` + work + `"`)); err != nil {
		panic(err)
	}
	p := 100
	s := &job.Spec{Name: id, Team: "t", Priority: &p, Resources: job.Resources{GPUsPerNode: 1, Nodes: 1}, Work: w, Purchase: job.PurchaseAuto, Workload: "training", Precision: "fp16"}
	return &jobB{QueuedJob{ID: id, Priority: 100, SubmittedAt: t0}, s}
}

func (b *jobB) gpus(n int) *jobB               { b.spec.Resources.GPUsPerNode = n; return b }
func (b *jobB) nodes(n int) *jobB              { b.spec.Resources.Nodes = n; return b }
func (b *jobB) accel(a ...string) *jobB        { b.spec.Resources.Accelerators = a; return b }
func (b *jobB) deadline(d time.Duration) *jobB { b.q.DeadlineAt = t0.Add(d); return b }
func (b *jobB) maxPrice(p string) *jobB        { b.spec.MaxPricePerHour = money.MustParse(p); return b }
func (b *jobB) purchase(p string) *jobB        { b.spec.Purchase = p; return b }
func (b *jobB) prio(p int) *jobB               { b.q.Priority = p; return b }
func (b *jobB) geos(g ...string) *jobB         { b.spec.Placement.Geographies = g; return b }
func (b *jobB) regions(r ...string) *jobB      { b.spec.Placement.Regions = r; return b }
func (b *jobB) get() *QueuedJob {
	q := b.q
	q.Req = SpecRequirements(b.spec)
	return &q
}

// noRisk gives every offer an interruption rate of zero: estimates are
// then exactly price x nodes x (boot + runtime).
func noRisk(offers []providers.Offer) map[string]float64 {
	m := map[string]float64{}
	for _, o := range offers {
		m[o.ID()] = 0
	}
	return m
}

func geo(provider, region string) string {
	if strings.HasPrefix(region, "eu") {
		return "eu"
	}
	return "us"
}

func TestDecide(t *testing.T) {
	type want struct {
		placed  map[string]string // job -> offer instance type@region/purchase
		pending map[string]string // job -> reason code that must appear
	}
	cases := []struct {
		name        string
		jobs        []*QueuedJob
		offers      []providers.Offer
		unavailable map[string]time.Time
		want        want
	}{{
		name: "cheapest to finish beats cheapest per hour (the seeds' BERT example)",
		jobs: []*QueuedJob{queued("j-bert", "6h on V100").gpus(8).get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.16xlarge", "V100", 8, "8.00").get(),
			offer("aws", "us-east-1", "p4d.24xlarge", "A100-40GB", 8, "12.00").get(),
		},
		want: want{placed: map[string]string{"j-bert": "p4d.24xlarge@us-east-1/on-demand"}},
	}, {
		name: "spot is chosen under auto when it is cheaper",
		jobs: []*QueuedJob{queued("j-a", "2h on V100").get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "0.97").spot("3.06").get(),
		},
		want: want{placed: map[string]string{"j-a": "p3.2xlarge@us-east-1/spot"}},
	}, {
		name: "on-demand policy never takes spot",
		jobs: []*QueuedJob{queued("j-a", "2h on V100").purchase(job.PurchaseOnDemand).get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "0.97").spot("3.06").get(),
		},
		want: want{placed: map[string]string{"j-a": "p3.2xlarge@us-east-1/on-demand"}},
	}, {
		name: "deadline rules out the slow cheap GPU",
		jobs: []*QueuedJob{queued("j-a", "4h on V100").deadline(3 * time.Hour).get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "g4dn.xlarge", "T4", 1, "0.10").get(),
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "1.00").get(),
			offer("aws", "us-east-1", "p4d-1", "A100-40GB", 1, "5.00").get(),
		},
		want: want{placed: map[string]string{"j-a": "p4d-1@us-east-1/on-demand"}},
	}, {
		name: "no offer meets the deadline: pending with deadline reason",
		jobs: []*QueuedJob{queued("j-a", "40h on V100").deadline(2 * time.Hour).get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "1.00").get(),
		},
		want: want{pending: map[string]string{"j-a": "deadline"}},
	}, {
		name: "max price filters offers",
		jobs: []*QueuedJob{queued("j-a", "1h on V100").maxPrice("2.00").get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
		},
		want: want{pending: map[string]string{"j-a": "max-price"}},
	}, {
		name: "capacity taken by a higher-priority job is not offered again",
		jobs: []*QueuedJob{
			queued("j-high", "1h on V100").prio(500).get(),
			queued("j-low", "1h on V100").prio(10).get(),
		},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "cheap", "V100", 1, "1.00").avail(1).get(),
			offer("aws", "us-east-1", "dear", "V100", 1, "2.00").avail(1).get(),
		},
		want: want{placed: map[string]string{"j-high": "cheap@us-east-1/on-demand", "j-low": "dear@us-east-1/on-demand"}},
	}, {
		name: "multi-node needs capacity for every node",
		jobs: []*QueuedJob{queued("j-a", "1h on V100").nodes(4).get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "small", "V100", 1, "1.00").avail(3).get(),
			offer("aws", "us-west-2", "small", "V100", 1, "1.10").avail(4).get(),
		},
		want: want{placed: map[string]string{"j-a": "small@us-west-2/on-demand"}},
	}, {
		name: "geography rules keep an EU job in the EU",
		jobs: []*QueuedJob{queued("j-eu", "1h on V100").geos("eu").get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
			offer("aws", "eu-west-1", "p3.2xlarge", "V100", 1, "3.31").get(),
		},
		want: want{placed: map[string]string{"j-eu": "p3.2xlarge@eu-west-1/on-demand"}},
	}, {
		name: "region patterns",
		jobs: []*QueuedJob{queued("j-r", "1h on V100").regions("us-west-*").get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
			offer("aws", "us-west-2", "p3.2xlarge", "V100", 1, "3.50").get(),
		},
		want: want{placed: map[string]string{"j-r": "p3.2xlarge@us-west-2/on-demand"}},
	}, {
		name: "accelerator family matches every memory variant",
		jobs: []*QueuedJob{queued("j-a", "1h on V100").accel("A100").get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "v", "V100", 1, "0.50").get(),
			offer("aws", "us-east-1", "a80", "A100-80GB", 1, "4.00").get(),
		},
		want: want{placed: map[string]string{"j-a": "a80@us-east-1/on-demand"}},
	}, {
		name: "offers marked unavailable are skipped",
		jobs: []*QueuedJob{queued("j-a", "1h on V100").get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "ice", "V100", 1, "1.00").get(),
			offer("aws", "us-east-1", "ok", "V100", 1, "2.00").get(),
		},
		unavailable: map[string]time.Time{providers.OfferID("aws", "us-east-1", "us-east-1a", "ice", providers.OnDemand): t0.Add(time.Minute)},
		want:        want{placed: map[string]string{"j-a": "ok@us-east-1/on-demand"}},
	}, {
		name: "GPU count per node is a hard limit",
		jobs: []*QueuedJob{queued("j-a", "1h on V100").gpus(8).get()},
		offers: []providers.Offer{
			offer("aws", "us-east-1", "p3.8xlarge", "V100", 4, "12.24").get(),
		},
		want: want{pending: map[string]string{"j-a": "gpu-count"}},
	}, {
		name:   "no offers yet",
		jobs:   []*QueuedJob{queued("j-a", "1h on V100").get()},
		offers: nil,
		want:   want{pending: map[string]string{"j-a": "no-offers"}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Decide(Snapshot{Now: t0, Jobs: c.jobs, Offers: c.offers, Unavailable: c.unavailable, Throughput: testTP, Geography: geo})
			got := map[string]string{}
			for _, p := range plan.Placements {
				got[p.JobID] = p.Offer.InstanceType + "@" + p.Offer.Region + "/" + string(p.Offer.Purchase)
			}
			for id, w := range c.want.placed {
				if got[id] != w {
					t.Errorf("job %s placed on %q, want %q", id, got[id], w)
				}
			}
			if len(got) != len(c.want.placed) {
				t.Errorf("placed %v, want %v", got, c.want.placed)
			}
			pend := map[string][]job.PendingReason{}
			for _, p := range plan.Pending {
				pend[p.JobID] = p.Reasons
			}
			for id, code := range c.want.pending {
				found := false
				for _, r := range pend[id] {
					if r.Code == code && r.Message != "" {
						found = true
					}
				}
				if !found {
					t.Errorf("job %s pending reasons %+v lack %q", id, pend[id], code)
				}
			}
		})
	}
}

func TestDecideEstimatesAndReasons(t *testing.T) {
	// 6 h on V100 with 8 GPUs on A100 (3x): 2 h of work + 2 min boot at
	// $12/h = $24.40.
	bert := []providers.Offer{offer("aws", "us-east-1", "p4d.24xlarge", "A100-40GB", 8, "12.00").get()}
	plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{queued("j-bert", "6h on V100").gpus(8).get()},
		Offers: bert, Throughput: testTP, Geography: geo, Rates: noRisk(bert)})
	if len(plan.Placements) != 1 {
		t.Fatalf("plan = %+v", plan)
	}
	est := plan.Placements[0].Estimate
	if est.Runtime != 2*time.Hour || est.Cost != money.MustParse("24.40") || !est.Finish.Equal(t0.Add(2*time.Hour+2*time.Minute)) {
		t.Fatalf("estimate = %+v", est)
	}

	// A job no offer fits explains each rejection with counts and numbers.
	three := []providers.Offer{
		offer("aws", "us-east-1", "t4", "T4", 1, "0.50").get(),
		offer("aws", "us-east-1", "v-dear", "V100", 1, "3.06").get(),
		offer("aws", "us-east-1", "v-cheap", "V100", 1, "1.00").get(),
	}
	plan = Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{queued("j-x", "10h on V100").accel("V100").maxPrice("2.00").deadline(5 * time.Hour).get()},
		Offers: three, Throughput: testTP, Geography: geo, Rates: noRisk(three)})
	if len(plan.Pending) != 1 {
		t.Fatalf("plan = %+v", plan)
	}
	msgs := map[string]string{}
	for _, r := range plan.Pending[0].Reasons {
		msgs[r.Code] = r.Message
		if r.Offers != 1 {
			t.Errorf("reason %s counts %d offers, want 1", r.Code, r.Offers)
		}
	}
	for code, frag := range map[string]string{"gpu-type": "wants V100", "max-price": "$3.06/h", "deadline": "5h2m late"} {
		if !strings.Contains(msgs[code], frag) {
			t.Errorf("reason %s = %q, want it to mention %q", code, msgs[code], frag)
		}
	}
}

func TestDecideSpotMaxPriceNeverAboveOnDemand(t *testing.T) {
	plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{queued("j-a", "1h on V100").maxPrice("9.00").get()},
		Offers:     []providers.Offer{offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "0.97").spot("3.06").get()},
		Throughput: testTP, Geography: geo})
	if len(plan.Placements) != 1 || plan.Placements[0].MaxPrice != money.MustParse("3.06") {
		t.Fatalf("plan = %+v", plan)
	}
}

// A job resuming from a checkpoint counts what moving it costs: a
// slightly cheaper offer in another region loses to staying put when the
// checkpoint is big, and wins when it is small.
func TestDecideCountsCheckpointTransfer(t *testing.T) {
	offers := []providers.Offer{
		offer("aws", "us-east-1", "here", "V100", 1, "3.06").get(),
		offer("aws", "us-west-2", "there", "V100", 1, "3.00").get(),
	}
	for _, c := range []struct {
		gb   float64
		want string
	}{{0, "us-west-2"}, {1, "us-west-2"}, {500, "us-east-1"}} {
		t.Run(fmt.Sprintf("%vGB", c.gb), func(t *testing.T) {
			b := queued("j-moving", "2h on V100")
			q := b.get()
			r := q.Req.Value()
			r.CkptProvider, r.CkptRegion, r.CkptGB = "aws", "us-east-1", c.gb
			q.Req = unique.Make(r)
			plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: offers, Throughput: testTP, Geography: geo, Rates: noRisk(offers)})
			if len(plan.Placements) != 1 || plan.Placements[0].Offer.Region != c.want {
				t.Fatalf("placed %+v, want %s", plan.Placements, c.want)
			}
			// The placement carries what the move is charged (nothing
			// where the checkpoint is).
			_, wantTransfer := bidding.Transfer("aws", "us-east-1", "aws", c.want, c.gb)
			if got := plan.Placements[0].Transfer; got != wantTransfer {
				t.Errorf("the placement charges %s for the move, want %s", got, wantTransfer)
			}
			if c.want == "us-west-2" && c.gb > 0 {
				// 1 GB across regions: $0.02 and 4 s more.
				est := plan.Placements[0].Estimate
				base := bidding.CostToFinish(t0, money.MustParse("3.00"), 1, 2*time.Minute+4*time.Second, 2*time.Hour)
				if est.Cost != base.Cost+money.MustParse("0.02") {
					t.Fatalf("cost %s, want %s + $0.02 transfer", est.Cost, base.Cost)
				}
			}
		})
	}
}

func TestExplainRanksWhatDecideWouldChoose(t *testing.T) {
	offers := fourGPUs()
	q := queued("j-bert", "6h on V100").gpus(8).maxPrice("50.00").get()
	snap := Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: offers, Throughput: testTP, Geography: geo}
	got := Explain(snap, q)
	var order []string
	for _, v := range got {
		order = append(order, v.Offer.InstanceType+":"+v.Reason)
	}
	want := []string{"p4d.24xlarge:", "p3.16xlarge:", "g4dn.12xlarge:gpu-count", "p5.48xlarge:max-price"}
	if !slices.Equal(order, want) {
		t.Fatalf("verdicts %v, want %v", order, want)
	}
	plan := Decide(snap)
	if plan.Placements[0].Offer.InstanceType != got[0].Offer.InstanceType || plan.Placements[0].Estimate != got[0].Estimate {
		t.Fatalf("Explain's first %+v differs from Decide's choice %+v", got[0], plan.Placements[0])
	}
}

// Spot that is taken back often costs more to finish than its hourly
// price says: with a high enough interruption rate, on-demand wins.
func TestDecideCountsInterruptionRisk(t *testing.T) {
	offers := []providers.Offer{
		offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
		offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "1.20").spot("3.06").get(),
	}
	spotID := offers[1].ID()
	for _, c := range []struct {
		rate   float64 // interruptions per instance-hour
		noCkpt bool    // the job cannot checkpoint
		want   providers.PurchaseOption
	}{
		{0.001, false, providers.Spot},
		{3, false, providers.Spot}, // checkpoints every few minutes keep spot cheaper
		{0.001, true, providers.Spot},
		{0.2, true, providers.OnDemand}, // every interruption starts a 20-hour job over
	} {
		t.Run(fmt.Sprintf("rate %v, checkpoints %v", c.rate, !c.noCkpt), func(t *testing.T) {
			rates := noRisk(offers)
			rates[spotID] = c.rate
			b := queued("j-a", "20h on V100")
			b.spec.Checkpoint.Disabled = c.noCkpt
			q := b.get()
			plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: offers, Throughput: testTP, Geography: geo, Rates: rates})
			if len(plan.Placements) != 1 || plan.Placements[0].Offer.Purchase != c.want {
				t.Fatalf("placed %+v, want %s", plan.Placements, c.want)
			}
		})
	}
}

// With a deadline and purchase policy auto, the deadline policy decides:
// spot while the deadline leaves room, waiting for spot when none is there
// and the slack allows, on-demand when the slack runs short.
func TestDecideAsksTheDeadlinePolicy(t *testing.T) {
	od := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get()
	spot := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "0.97").spot("3.06").get()
	noSpot := spot
	noSpot.Available, noSpot.Capacity = 0, providers.CapacityNone
	for _, c := range []struct {
		name     string
		deadline time.Duration // for 10 h of work
		offers   []providers.Offer
		want     string // purchase option, or the pending reason code
	}{
		{"spot with room", 30 * time.Hour, []providers.Offer{od, spot}, "spot"},
		{"no spot, room to wait", 30 * time.Hour, []providers.Offer{od, noSpot}, "waiting-for-spot"},
		{"no spot, no room to wait", 10*time.Hour + 10*time.Minute, []providers.Offer{od, noSpot}, "on-demand"},
		// If spot went at once, on-demand could no longer finish after two
		// changeovers (2 x 2 min > 3 min of slack).
		{"spot, but too tight to risk it", 10*time.Hour + 3*time.Minute, []providers.Offer{od, spot}, "on-demand"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := queued("j-a", "10h on V100").deadline(c.deadline).get()
			// Two days of this market: capacity for 50 minutes, then gone
			// for 10, again and again; gone for a minute now.
			var seen bidding.ZoneStats
			for range 48 {
				seen.Observe(true, 50*time.Minute)
				seen.Observe(false, 10*time.Minute)
			}
			seen.Observe(true, 50*time.Minute)
			seen.Observe(false, time.Minute)
			zones := map[ZoneKey]*bidding.ZoneStats{{"aws", "us-east-1a", "V100"}: &seen, {Zone: "*", GPU: "V100"}: &seen}
			plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: c.offers, Throughput: testTP, Geography: geo,
				Rates: noRisk(c.offers), Policy: bidding.Spotwise{}, PolicyStep: time.Minute, Zones: zones})
			got := ""
			if len(plan.Placements) == 1 {
				got = string(plan.Placements[0].Offer.Purchase)
			} else if len(plan.Pending) == 1 {
				got = plan.Pending[0].Reasons[0].Code
			}
			if got != c.want {
				t.Fatalf("got %q, want %q (plan %+v)", got, c.want, plan)
			}
		})
	}
}

// An offer whose notice is shorter than the job's checkpoint is scored
// with the work an interruption there would lose; a job that asks for it
// (checkpoint.skip_short_notice) is kept off such offers, with the reason.
func TestShortNoticeOffers(t *testing.T) {
	// The same GPU on AWS spot (2 minutes' notice) and, a little cheaper,
	// Azure spot (30 seconds); the job's checkpoint takes 2 minutes.
	aws := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "1.00").spot("3.06").get()
	azure := offer("azure", "eastus", "Standard_NC6s_v3", "V100", 1, "0.99").spot("3.06").get()
	rates := map[string]float64{aws.ID(): 0.05, azure.ID(): 0.05}
	mk := func(skip bool) *QueuedJob {
		b := queued("j", "20h on V100").purchase(job.PurchaseSpot)
		b.spec.Checkpoint = job.Checkpoint{Duration: job.Duration(2 * time.Minute), SkipShortNotice: skip}
		return b.get()
	}
	snap := Snapshot{Now: t0, Offers: []providers.Offer{aws, azure}, Throughput: testTP, Geography: geo, Rates: rates}

	snap.Jobs = []*QueuedJob{mk(false)}
	plan := Decide(snap)
	if len(plan.Placements) != 1 || plan.Placements[0].Offer.ID() != aws.ID() {
		t.Fatalf("placed %+v; want the AWS offer: the Azure one is cheaper by the hour, but each interruption there loses the work since the last checkpoint", plan.Placements)
	}
	v := Explain(snap, snap.Jobs[0])
	for _, x := range v {
		if x.Offer.ID() == azure.ID() && (x.Reason != "" || x.Estimate.Cost <= v[0].Estimate.Cost) {
			t.Fatalf("the Azure offer: %+v; want it feasible and dearer to finish than AWS (%s)", x, v[0].Estimate.Cost)
		}
	}

	snap.Offers = []providers.Offer{azure}
	snap.Jobs = []*QueuedJob{mk(true)}
	plan = Decide(snap)
	if len(plan.Placements) != 0 || len(plan.Pending) != 1 {
		t.Fatalf("a job that skips short notices was placed: %+v", plan)
	}
	r := plan.Pending[0].Reasons
	if len(r) == 0 || r[0].Code != "short-notice" || !strings.Contains(r[0].Message, "2m") {
		t.Fatalf("pending reasons %+v; want short-notice naming the checkpoint's 2m", r)
	}
}

// A backlog of jobs alike that fit no offer (here: all under the cheapest
// price) is looked at once per cycle, not once per job: each waits with the
// same reasons a lone one would get, and one whose deadline has passed is
// hopeless all the same.
func TestBacklogOfJobsAlikeWaitsForTheSameReasons(t *testing.T) {
	offers := []providers.Offer{
		offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get(),
		offer("aws", "us-west-2", "p3.2xlarge", "V100", 1, "2.90").get(),
	}
	lone := queued("j-lone", "2h on V100").maxPrice("0.50").get()
	want := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{lone}, Offers: offers, Throughput: testTP}).Pending
	if len(want) != 1 || want[0].Reasons[0].Code != "max-price" {
		t.Fatalf("a lone job under every price waits for %+v", want)
	}
	var jobs []*QueuedJob
	for i := range 50 {
		b := queued(fmt.Sprintf("j-%03d", i), "2h on V100").maxPrice("0.50")
		if i == 49 {
			b.deadline(-time.Hour)
		}
		jobs = append(jobs, b.get())
	}
	plan := Decide(Snapshot{Now: t0, Jobs: jobs, Offers: offers, Throughput: testTP})
	if len(plan.Placements) != 0 || len(plan.Pending) != len(jobs) {
		t.Fatalf("%d placed, %d pending of %d", len(plan.Placements), len(plan.Pending), len(jobs))
	}
	for i, p := range plan.Pending {
		if !reflect.DeepEqual(p.Reasons, want[0].Reasons) {
			t.Fatalf("job %d waits for %+v, a lone one for %+v", i, p.Reasons, want[0].Reasons)
		}
		if p.Hopeless != (i == 49) {
			t.Fatalf("job %d hopeless %v", i, p.Hopeless)
		}
	}
}

// A job's first placement carries its on-demand baseline: its whole work
// at the cheapest on-demand offer that meets its needs, whatever it is
// placed on and whatever purchase option it asked for; offers it cannot
// use (another GPU it did not allow) do not count.
func TestDecideCarriesTheOnDemandBaseline(t *testing.T) {
	od := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "3.06").get()
	dearOD := offer("azure", "eastus", "NC6s_v3", "V100", 1, "3.50").get()
	t4OD := offer("aws", "us-east-1", "g4dn.xlarge", "T4", 1, "0.10").get() // cheap, but not allowed
	spot := offer("aws", "us-east-1", "p3.2xlarge", "V100", 1, "0.97").spot("3.06").get()
	offers := []providers.Offer{od, dearOD, t4OD, spot}
	// 10 h of V100 work and the 2-minute boot at $3.06/h.
	want := money.MustParse("3.06").ForDuration(10*time.Hour + 2*time.Minute)
	for _, purchase := range []string{job.PurchaseSpot, job.PurchaseAuto, job.PurchaseOnDemand} {
		q := queued("j-"+purchase, "10h on V100").accel("V100").purchase(purchase).get()
		plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: offers, Throughput: testTP, Geography: geo, Rates: noRisk(offers)})
		if len(plan.Placements) != 1 || plan.Placements[0].Baseline != want {
			t.Fatalf("%s: placed %+v; want the baseline %s", purchase, plan.Placements, want)
		}
		placed := *q
		placed.attempt = 1 // placed before: the baseline is the record's already
		plan = Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{&placed}, Offers: offers, Throughput: testTP, Geography: geo, Rates: noRisk(offers)})
		if len(plan.Placements) != 1 || plan.Placements[0].Baseline != 0 {
			t.Fatalf("%s, placed again: baseline %s, want none", purchase, plan.Placements[0].Baseline)
		}
	}
}

// Cycles and explanations reuse the memory of compiled books: many at once,
// over books of different sizes, each decides what it decides alone.
func TestCyclesAtOnceDecideAsAlone(t *testing.T) {
	big := fourGPUs()
	small := []providers.Offer{offer("aws", "us-west-2", "p3.16xlarge", "V100", 8, "7.00").avail(1).get()}
	snaps := []Snapshot{
		{Now: t0, Jobs: []*QueuedJob{queued("a", "6h on V100").gpus(8).maxPrice("50.00").get(), queued("b", "1h on V100").gpus(4).get()}, Offers: big, Throughput: testTP, Geography: geo},
		{Now: t0, Jobs: []*QueuedJob{queued("c", "6h on V100").gpus(8).get(), queued("d", "6h on V100").gpus(8).get()}, Offers: small, Throughput: testTP, Geography: geo},
	}
	for i := range 200 { // long enough that cycles overlap
		snaps[0].Jobs = append(snaps[0].Jobs, queued(fmt.Sprint("e", i), "2h on T4").accel("T4").gpus(4).maxPrice("1.00").get())
	}
	type result struct {
		plan     Plan
		verdicts []Verdict
	}
	run := func(s Snapshot) result { return result{Decide(s), Explain(s, s.Jobs[0])} }
	alone := []result{run(snaps[0]), run(snaps[1])}
	if len(alone[1].plan.Placements) != 1 || len(alone[1].plan.Pending) != 1 {
		t.Fatalf("the small book places %d and leaves %d pending, want 1 and 1", len(alone[1].plan.Placements), len(alone[1].plan.Pending))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				i := g % 2
				got := run(snaps[i])
				if !reflect.DeepEqual(got, alone[i]) {
					errs <- fmt.Sprintf("book %d: %+v, alone %+v", i, got, alone[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// fourGPUs are an offer each of four GPU types, in one region.
func fourGPUs() []providers.Offer {
	return []providers.Offer{
		offer("aws", "us-east-1", "p3.16xlarge", "V100", 8, "8.00").get(),
		offer("aws", "us-east-1", "p4d.24xlarge", "A100-40GB", 8, "12.00").get(),
		offer("aws", "us-east-1", "g4dn.12xlarge", "T4", 4, "3.91").get(),
		offer("aws", "us-east-1", "p5.48xlarge", "H100", 8, "98.32").get(),
	}
}

// The on-demand baseline stops walking a GPU type's offers early and is
// shared by jobs alike; it is the same as the cheapest of every offer
// that qualifies, looked at one by one. Books with boots that differ
// (a cheaper hour can lose to a shorter boot), jobs with progress (their
// own runtime) and jobs alike in one cycle.
func TestOnDemandBaselineIsTheCheapestOfEveryQualifyingOffer(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		offers := benchBook(300, rng)
		for i := range offers {
			offers[i].LaunchLatency = time.Duration(rng.IntN(40)) * time.Minute
			if rng.IntN(4) == 0 { // prices close together: boots decide
				offers[i].Price = offers[i].Price.Scale(100, 100+int64(rng.IntN(3)))
			}
		}
		jobs := benchJobs(200, rng)
		for _, q := range jobs {
			if rng.IntN(3) == 0 {
				q.Progress = rng.Float64()
			}
		}
		s := Snapshot{Now: t0, Offers: offers, Throughput: testTP}
		co := compileOffers(s.Offers, s.offerBase(), nil, nil, t0)
		rules := &ruleCache{}
		compiled := map[unique.Handle[Requirements]]*needs{}
		for _, q := range jobs {
			nd, ok := compiled[q.Req]
			if !ok {
				r := q.Req.Value()
				nd = co.compileNeeds(&r, s.Throughput, rules)
				compiled[q.Req] = nd
			}
			cj := co.compileJob(q, nd)
			var want money.Micros
			for gi := range co.groups {
				for _, o := range co.groups[gi].offers {
					if !cj.gpus[gi] || o.purchase != purchaseBit(providers.OnDemand) {
						continue
					}
					switch cj.staticReason(o) {
					case reasonNone, reasonPurchase, reasonMaxPrice, reasonShortNotice:
					default:
						continue
					}
					if c := o.price.MulInt(cj.nodes).ForDuration(cj.runtime[gi] + o.startup); want == 0 || c < want {
						want = c
					}
				}
			}
			if got := co.onDemandBaseline(cj); got != want {
				t.Fatalf("seed %d, job %s (progress %.2f): baseline %s, want %s", seed, q.ID, q.Progress, got, want)
			}
		}
		co.release()
	}
}
