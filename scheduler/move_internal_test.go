package scheduler

import (
	"os"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// A move must pay for itself against the cost of finishing the same work
// where the job runs: the 4-node pre-training example, resumed at half its
// work on one $27.45/h on-demand offer, once moved to an identical offer
// in another zone "to save $1,180" (staying was priced from an estimate of
// the whole job). It stays put; it moves when the other offer really is
// much cheaper.
func TestMovesThatPay(t *testing.T) {
	b, err := os.ReadFile("../examples/llm-pretrain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.Default()
	spec, err := job.Parse(b, cat)
	if err != nil {
		t.Fatal(err)
	}
	price := money.MustParse("27.44705")
	here := offer("aws", "us-east-1", "p4de.24xlarge", "A100-80GB", 8, "27.44705").get()
	here.Zone = "us-east-1c"
	// The same offer in another zone, a few cents cheaper: the pipeline
	// prefers it, and only the price of the move says no.
	there := here
	there.Zone, there.Price = "us-east-1d", price-money.MustParse("0.05")
	start := t0.Add(-3 * time.Hour)
	rec := &job.Record{ID: job.NewID(t0), Spec: spec, Status: job.Status{
		State: job.Running, SubmittedAt: start.Add(-24 * time.Hour), Attempt: 2, Progress: 0.55,
		Checkpoint: &job.CheckpointRef{Attempt: 1, Step: 100, Progress: 0.5},
		Current: &job.Attempt{N: 2, LaunchKey: "x-a2", PlacedAt: start, LaunchedAt: start, RunningAt: start,
			Placement: job.Placement{OfferID: here.ID(), Provider: "aws", Region: "us-east-1", Zone: here.Zone, InstanceType: here.InstanceType,
				GPU: here.GPU, GPUs: 8, Nodes: 4, Purchase: string(providers.OnDemand), PricePerHour: price},
			// An estimate of the whole job (64 h on 32 A100s) on an attempt
			// that started at half the work: scaled from it, staying
			// looks twice as dear as it is.
			EstimatedRuntime: job.Duration(64 * time.Hour), StartProgress: 0.5},
	}}
	s := &Scheduler{o: Options{Arbitrage: Arbitrage{Saving: DefaultArbitrageSaving, MinStay: DefaultArbitrageMinStay}}}
	snap := func(offers ...providers.Offer) Snapshot {
		return Snapshot{Now: t0, Offers: offers, Throughput: cat, Geography: cat.GeographyOf, Rates: map[string]float64{}}
	}
	if got := s.decideMoves(snap(here, there), []*job.Record{rec}); len(got) != 0 {
		t.Fatalf("moved to an offer of about the same price: %+v", got)
	}
	cheap := there
	cheap.Price = price.Scale(40, 100)
	got := s.decideMoves(snap(here, cheap), []*job.Record{rec})
	if len(got) != 1 || got[0].to != cheap.ID() {
		t.Fatalf("moves %+v; want one to the offer at 40%% of the price", got)
	}
	if m := got[0]; m.expect >= m.staying || float64(m.expect) > 0.8*float64(m.staying) {
		t.Fatalf("expected %s to finish after the move, %s staying: the move must save at least 20%%", m.expect, m.staying)
	}
}

// A move to another region pays the job's data's egress again (its new
// attempt reads the data there); a move within the data's region does
// not. The pre-training example, half done on $27.45/h on-demand in
// us-east-1 where its 120 TB of data live, is offered capacity at 40% of
// the price: in another zone of its region it moves, in another region
// it stays (the $2,400 of egress eats the saving), and without data it
// moves there too.
func TestMovesPayTheDatasetAgain(t *testing.T) {
	b, err := os.ReadFile("../examples/llm-pretrain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.Default()
	price := money.MustParse("27.44705")
	here := offer("aws", "us-east-1", "p4de.24xlarge", "A100-80GB", 8, "27.44705").get()
	here.Zone = "us-east-1c"
	sameRegion := here
	sameRegion.Zone, sameRegion.Price = "us-east-1d", price.Scale(40, 100)
	otherRegion := offer("aws", "us-west-2", "p4de.24xlarge", "A100-80GB", 8, "27.44705").get()
	otherRegion.Zone, otherRegion.Price = "us-west-2b", price.Scale(40, 100)
	for _, c := range []struct {
		name  string
		data  job.Data
		cheap providers.Offer
		moves bool
	}{
		{"data here, cheaper in another zone of its region", job.Data{Provider: "aws", Region: "us-east-1", SizeGB: 120_000}, sameRegion, true},
		{"data here, cheaper in another region", job.Data{Provider: "aws", Region: "us-east-1", SizeGB: 120_000}, otherRegion, false},
		{"no data, cheaper in another region", job.Data{}, otherRegion, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := job.Parse(b, cat)
			if err != nil {
				t.Fatal(err)
			}
			spec.Data = c.data
			start := t0.Add(-3 * time.Hour)
			rec := &job.Record{ID: job.NewID(t0), Spec: spec, Status: job.Status{
				State: job.Running, SubmittedAt: start.Add(-24 * time.Hour), Attempt: 2, Progress: 0.55,
				Checkpoint: &job.CheckpointRef{Attempt: 1, Step: 100, Progress: 0.5},
				Current: &job.Attempt{N: 2, LaunchKey: "x-a2", PlacedAt: start, LaunchedAt: start, RunningAt: start,
					Placement: job.Placement{OfferID: here.ID(), Provider: "aws", Region: "us-east-1", Zone: here.Zone, InstanceType: here.InstanceType,
						GPU: here.GPU, GPUs: 8, Nodes: 4, Purchase: string(providers.OnDemand), PricePerHour: price},
					EstimatedRuntime: job.Duration(32 * time.Hour), StartProgress: 0.5},
			}}
			s := &Scheduler{o: Options{Arbitrage: Arbitrage{Saving: DefaultArbitrageSaving, MinStay: DefaultArbitrageMinStay}}}
			snap := Snapshot{Now: t0, Offers: []providers.Offer{here, c.cheap}, Throughput: cat, Geography: cat.GeographyOf, Rates: map[string]float64{}}
			got := s.decideMoves(snap, []*job.Record{rec})
			if moved := len(got) == 1 && got[0].to == c.cheap.ID(); moved != c.moves || (!c.moves && len(got) != 0) {
				t.Fatalf("moves %+v; want a move to %s: %v", got, c.cheap.ID(), c.moves)
			}
		})
	}
}
