package scheduler

import (
	"testing"
	"time"
	"unique"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

func (b *jobB) data(provider, region string, gb float64) *jobB {
	b.spec.Data = job.Data{Provider: provider, Region: region, SizeGB: gb}
	return b
}

// A job that declares its data pays its egress in any other region, once
// per attempt: on-demand where the data is ($3.06/h) against spot $1.06/h
// cheaper in another region, a short job stays with its data (the 500 GB
// cost $10 to read elsewhere, more than it saves), a long one goes where
// capacity is cheap (it saves more than that); a job without data is
// placed as before, and the placement says what its attempt will be
// charged for the data.
func TestDecideWeighsTheDatasetsEgress(t *testing.T) {
	offers := []providers.Offer{
		offer("aws", "us-east-1", "here", "V100", 1, "3.06").get(),
		offer("aws", "us-west-2", "there", "V100", 1, "2.00").spot("3.06").get(),
	}
	tests := []struct {
		name       string
		job        *jobB
		want       string
		wantEgress money.Micros
	}{
		{"no data, short", queued("j", "2h on V100"), "us-west-2", 0},
		{"no data, long", queued("j", "20h on V100"), "us-west-2", 0},
		{"500 GB with the dearer capacity, short", queued("j", "2h on V100").data("aws", "us-east-1", 500), "us-east-1", 0},
		{"500 GB with the dearer capacity, long", queued("j", "20h on V100").data("aws", "us-east-1", 500), "us-west-2", money.MustParse("10")},
		{"500 GB with the cheaper capacity", queued("j", "2h on V100").data("aws", "us-west-2", 500), "us-west-2", 0},
		{"1 GB with the dearer capacity, short", queued("j", "2h on V100").data("aws", "us-east-1", 1), "us-west-2", money.MustParse("0.02")},
		// Out of another cloud, both regions pay $0.09/GB: the cheaper
		// capacity wins.
		{"500 GB in another cloud", queued("j", "2h on V100").data("gcp", "us-central1", 500), "us-west-2", money.MustParse("45")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.job.get()
			plan := Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: offers, Throughput: testTP, Geography: geo, Rates: noRisk(offers)})
			if len(plan.Placements) != 1 {
				t.Fatalf("plan %+v", plan)
			}
			p := plan.Placements[0]
			if p.Offer.Region != tt.want || p.DataTransfer != tt.wantEgress {
				t.Fatalf("placed in %s, charged %s for the data; want %s, %s", p.Offer.Region, p.DataTransfer, tt.want, tt.wantEgress)
			}
			// The estimate is the same job's without data on the same
			// offer, and the data's egress on top.
			twin := *tt.job.spec
			twin.Data = job.Data{}
			tq := &QueuedJob{ID: "twin", Priority: 100, SubmittedAt: t0, Req: SpecRequirements(&twin)}
			snap := Snapshot{Now: t0, Offers: []providers.Offer{p.Offer}, Throughput: testTP, Geography: geo, Rates: noRisk(offers)}
			base := Explain(snap, tq)[0].Estimate
			if p.Estimate.Cost != base.Cost+tt.wantEgress || p.Estimate.Finish != base.Finish {
				t.Errorf("estimated %s, want %s + %s of egress", p.Estimate.Cost, base.Cost, tt.wantEgress)
			}
			if tt.job.spec.Data == (job.Data{}) && p.Offer.Region == "us-west-2" {
				// Without data, what it always cost: 2 minutes' boot and
				// the work at $2.00/h, with the periodic checkpoints.
				r := q.Req.Value()
				if min := bidding.CostToFinish(t0, p.Offer.Price, 1, 2*time.Minute, r.Work); p.Estimate.Cost < min.Cost || p.Estimate.Cost > min.Cost.Scale(101, 100) {
					t.Errorf("estimated %s, the work alone costs %s", p.Estimate.Cost, min.Cost)
				}
			}
			if p.Transfer != 0 {
				t.Errorf("a job with no checkpoint is charged %s for carrying it", p.Transfer)
			}
		})
	}
}

// On spot with its interruption risk, every restart is a new attempt that
// reads the data again: the estimate counts the egress once and once more
// per expected interruption.
func TestDatasetEgressIsPaidAgainByRestarts(t *testing.T) {
	spot := offer("aws", "us-west-2", "there", "V100", 1, "2.00").spot("3.06").get()
	snap := Snapshot{Now: t0, Offers: []providers.Offer{spot}, Throughput: testTP, Geography: geo}
	with := queued("j", "20h on V100").data("aws", "us-east-1", 500).get()
	without := queued("j", "20h on V100").get()
	a, b := Explain(snap, with), Explain(snap, without)
	if len(a) != 1 || len(b) != 1 || a[0].Reason != "" || b[0].Reason != "" {
		t.Fatalf("verdicts %+v, %+v", a, b)
	}
	r := with.Req.Value()
	n := compileOffers(snap.Offers, snap.offerBase(), nil, nil, t0).compileNeeds(&r, testTP, &ruleCache{})
	cj := &compiledJob{q: with, needs: n, runtime: n.runtime}
	risk := bidding.ExpectedCost(bidding.RiskInput{Now: t0, PricePerHour: spot.Price, Nodes: 1, Startup: spot.LaunchLatency, Runtime: n.runtime[0],
		InterruptionsPerHour: bidding.PriorRate("aws", providers.Spot), Checkpoint: n.ckpt, Provider: "aws", Region: "us-west-2",
		NoticeWindow: spot.Notice(), Egress: cj.carryTo(&compiledOffer{region: 0}).data})
	egress := money.MustParse("10")
	if risk.Interruptions <= 0 {
		t.Fatalf("no interruptions expected on spot: %+v", risk)
	}
	if got, want := risk.DataEgress, egress+egress.Scale(int64(risk.Interruptions*1e6+0.5), 1e6); got != want {
		t.Errorf("expected egress %s, want %s for the first attempt and %.3f restarts", got, want, risk.Interruptions)
	}
	if diff := a[0].Estimate.Cost - b[0].Estimate.Cost; diff != risk.DataEgress {
		t.Errorf("the data adds %s to the estimate, want %s", diff, risk.DataEgress)
	}
}

// recordingPolicy answers like the policy it wraps and keeps what it was
// shown.
type recordingPolicy struct {
	bidding.Policy
	seen []bidding.PolicyState
}

func (p *recordingPolicy) Decide(s bidding.PolicyState) bidding.Choice {
	p.seen = append(p.seen, s)
	return p.Policy.Decide(s)
}

// The deadline policy is told what a move between regions costs: the
// checkpoint's carry and the data's egress to the dearest of the zones it
// weighs, since the new attempt reads the data again.
func TestDeadlinePolicySeesTheDatasetInAMovesCost(t *testing.T) {
	offers := []providers.Offer{
		offer("aws", "us-east-1", "od", "V100", 1, "3.06").get(),
		offer("aws", "us-east-1", "spot-east", "V100", 1, "0.97").spot("3.06").get(),
		offer("aws", "us-west-2", "spot-west", "V100", 1, "0.90").spot("3.06").get(),
	}
	for _, c := range []struct {
		name     string
		data     *job.Data
		ckptGB   float64
		wantMove money.Micros
	}{
		{"no data, no checkpoint", nil, 0, 0},
		{"500 GB of data in us-east-1", &job.Data{Provider: "aws", Region: "us-east-1", SizeGB: 500}, 0, money.MustParse("10")},
		{"data and a 50 GB checkpoint", &job.Data{Provider: "aws", Region: "us-east-1", SizeGB: 500}, 50, money.MustParse("11")},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := queued("j-a", "10h on V100").deadline(30 * time.Hour)
			if c.data != nil {
				b.data(c.data.Provider, c.data.Region, c.data.SizeGB)
			}
			q := b.get()
			if c.ckptGB > 0 {
				r := q.Req.Value()
				r.CkptProvider, r.CkptRegion, r.CkptGB = "aws", "us-east-1", c.ckptGB
				q.Req = unique.Make(r)
			}
			p := &recordingPolicy{Policy: bidding.Spotwise{}}
			Decide(Snapshot{Now: t0, Jobs: []*QueuedJob{q}, Offers: offers, Throughput: testTP, Geography: geo,
				Rates: noRisk(offers), Policy: p, PolicyStep: time.Minute})
			if len(p.seen) != 1 {
				t.Fatalf("the policy was asked %d times", len(p.seen))
			}
			if got := p.seen[0].MoveCost; got != c.wantMove {
				t.Errorf("a move costs %s to the policy, want %s", got, c.wantMove)
			}
		})
	}
}
