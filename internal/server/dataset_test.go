package server

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// A job whose data lives in one region and which may only run in another
// pays the data's egress once per attempt it launches: the quote says so,
// the attempts record it, preempted once and relaunched it has one
// dataset transfer entry per launched attempt, its entries add up to its
// cost_usd and, its transfers aside, to what the cloud charged for its
// instances; the cost report by kind and category shows the dataset's
// egress apart from the checkpoint's.
func TestDatasetEgressIsBilledPerAttempt(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	c := clientOf(s)
	ctx := t.Context()
	start := s.Clock().Now().Add(-time.Hour)

	// Where it runs (a region with spot capacity for its GPUs) and where
	// its data lives (another region of the same cloud).
	offers, err := s.Cloud().Offers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var provider, runs, data string
	for _, o := range offers {
		if o.Purchase == providers.Spot && o.Available > 0 && slices.Contains([]string{"A100", "H100", "L4", "A10G"}, o.GPU) {
			provider, runs = o.Provider, o.Region
			break
		}
	}
	for _, o := range offers {
		if o.Provider == provider && o.Region != runs {
			data = o.Region
			break
		}
	}
	if runs == "" || data == "" {
		t.Fatalf("no two regions of one cloud in the book (%d offers)", len(offers))
	}
	const gb = 250
	_, egress := bidding.Transfer(provider, data, provider, runs, gb)
	if egress <= 0 {
		t.Fatalf("no egress from %s to %s", data, runs)
	}
	spec := fmt.Appendf(nil, `name: data-train
team: nlp
command: [train]
resources: {gpus_per_node: 1, accelerators: [A100, H100, L4, A10G]}
work: 3h on A100
deadline: 48h
purchase: spot
placement: {regions: [%s]}
data: {provider: %s, region: %s, size_gb: %d}
`, runs, provider, data, gb)

	var quote QuoteReport
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		quote = QuoteReport{}
		post(t, s, "/v1/quote", "application/yaml", spec, &quote)
		if quote.Decision.Offer == "" {
			return fmt.Errorf("no decision yet (pending %v)", quote.Decision.Pending)
		}
		return nil
	})
	if quote.Decision.DataTransfer != egress || quote.Job.Data == nil || len(quote.Options) == 0 {
		t.Fatalf("quote: decision %+v, job data %+v", quote.Decision, quote.Job.Data)
	}
	for _, o := range quote.Options {
		if o.DataEgress != egress || o.ExpectedCost <= egress {
			t.Errorf("option %s: %s of egress in an expected %s, want %s", o.Offer, o.DataEgress, o.ExpectedCost, egress)
		}
	}

	v, _, err := c.Submit(ctx, spec, "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, v.ID, job.Running, 60*time.Second)
	if _, err := s.Cloud().PreemptJob(v.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, v.ID, job.Succeeded, 120*time.Second)

	var r *job.Record
	var es []ledger.Entry
	var bill money.Micros
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		all, _ := s.Cloud().Instances(ctx)
		bill = 0
		for _, in := range all {
			if in.JobID != v.ID {
				continue
			}
			if !in.State.Ended() {
				return fmt.Errorf("instance %s still %s", in.ID, in.State)
			}
			bill += in.Bill(in.EndedAt)
		}
		var err error
		if r, _, err = s.Bus().Jobs().Get(ctx, v.ID); err != nil {
			return err
		}
		if r.Status.Current != nil || r.Status.Previous != nil {
			return fmt.Errorf("job still holds an attempt")
		}
		es = jobLedger(t, s.Bus(), v.ID)
		if got := total(es); got != r.CostAt(s.Clock().Now()) {
			return fmt.Errorf("the ledger holds %s, the record bills %s", got, r.CostAt(s.Clock().Now()))
		}
		return nil
	})

	launched, carried := 0, money.Micros(0)
	for _, a := range r.Status.Attempts {
		if a.Placement.Region != runs {
			t.Errorf("attempt %d ran in %s, not %s", a.N, a.Placement.Region, runs)
		}
		if a.DataTransfer != egress {
			t.Errorf("attempt %d records %s of data egress, want %s", a.N, a.DataTransfer, egress)
		}
		if !a.LaunchedAt.IsZero() {
			launched++
			carried += a.Transfer
		}
	}
	if launched < 2 {
		t.Fatalf("%d attempts launched; the test preempts the job once", launched)
	}
	datasets := map[string]ledger.Entry{}
	for _, e := range ledger.Fold(es) {
		if e.Kind == ledger.Transfer && e.Category == ledger.CategoryDataset {
			datasets[e.ID] = e
		}
	}
	if len(datasets) != launched {
		t.Errorf("%d dataset entries for %d launched attempts: %+v", len(datasets), launched, datasets)
	}
	for _, e := range datasets {
		if e.Cost != egress || e.Provider != provider || e.Region != data || e.Quantity != gb {
			t.Errorf("dataset entry %+v", e)
		}
	}
	now := s.Clock().Now()
	read := egress.MulInt(launched)
	if cost := r.CostAt(now); cost-read-carried-r.StorageAt(now) != bill {
		t.Errorf("billed %s (%s reading the data, %s carrying the checkpoint, %s storing it), the cloud charged %s for the instances",
			cost, read, carried, r.StorageAt(now), bill)
	}

	// The report by kind and category: the data's egress apart.
	var series api.CostSeries
	q := fmt.Sprintf("/v1/costs?group_by=kind,category&from=%s&to=%s&bucket=1h", start.Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	getJSON(t, s, q, &series)
	var dataset *api.CostGroup
	for i := range series.Groups {
		if series.Groups[i].Key == "transfer/dataset" {
			dataset = &series.Groups[i]
		}
	}
	if dataset == nil || dataset.Total != read {
		t.Errorf("transfer/dataset in the report: %+v, want %s (groups %+v)", dataset, read, series.Groups)
	}
}
