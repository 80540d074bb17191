package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

var t0 = time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)

func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

// spotRecord is a job running on two spot instances: i-1 whose price
// changed twice (as p4d spot went $6.01 -> $5.68 -> $5.49), i-2 ended by
// its provider at 45 minutes.
func spotRecord() *job.Record {
	r := &job.Record{ID: job.NewID(t0), Spec: job.Spec{Name: "train", Team: "vision", Labels: map[string]string{"project": "x"}}}
	r.Status.State = job.Running
	r.Status.Attempt = 1
	r.Status.Current = &job.Attempt{N: 1, LaunchedAt: at(0),
		Placement: job.Placement{Provider: "aws", Region: "us-east-2", Zone: "us-east-2c", InstanceType: "p4d.24xlarge", GPU: "A100", GPUs: 8,
			Nodes: 2, Purchase: "spot", PricePerHour: money.MustParse("6.01"), OnDemandPrice: money.MustParse("32.7726")},
		Spans: []job.Span{
			{Instance: "i-1", From: at(0), Prices: []money.PriceChange{{At: at(30), Price: money.MustParse("5.68")}, {At: at(60), Price: money.MustParse("5.49")}}},
			{Instance: "i-2", From: at(0), To: at(45)},
		}}
	return r
}

// stored reads a job's ledger subject: its entries in order.
func stored(t *testing.T, bus *events.Bus, id string) []ledger.Entry {
	t.Helper()
	es, _, garbled, err := ledger.Read(context.Background(), bus, events.LedgerJobSubject(id))
	if err != nil || garbled > 0 {
		t.Fatalf("reading the ledger: %v (%d garbled)", err, garbled)
	}
	return es
}

var sum = ledger.Sum

func record(t *testing.T, w *ledger.Writer, r *job.Record, want int) {
	t.Helper()
	n, err := w.Record(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("appended %d entries, want %d", n, want)
	}
}

// The writer appends each closed charge once, whatever writes it again (a
// repeat, a restarted writer, a second writer racing it), reverses a
// charge the record corrects, and the job's entries always sum to what
// the record bills for them; a spot instance across three prices is
// billed per segment.
func TestWriterAppendsEachChargeOnceAndReversesCorrections(t *testing.T) {
	clk := clock.NewFake(at(70))
	bus := eventstest.NewBus(t, clk)
	log := eventstest.Logger(t)
	w := ledger.NewWriter(bus, clk, log)
	r := spotRecord()

	// i-1's first two segments (closed by the price changes) and i-2.
	record(t, w, r, 3)
	record(t, w, r, 0)
	record(t, ledger.NewWriter(bus, clk, log), r, 0) // a restarted writer reads what is there
	es := stored(t, bus, r.ID)
	closed, open := ledger.Charges(r, clk.Now())
	if got, want := sum(es)+sum(open), r.CostAt(clk.Now()); got != want {
		t.Errorf("entries %s + open %s = %s, the record bills %s", sum(es), sum(open), got, want)
	}
	if len(closed) != 3 || len(open) != 1 || open[0].PricePerHour != money.MustParse("5.49") {
		t.Fatalf("closed %d, open %+v", len(closed), open)
	}
	if e := es[0]; e.ID != r.ID+"/a1/i-1/0" || e.Cost != money.MustParse("3.005") || e.ListCost != money.MustParse("16.3863") ||
		e.Team != "vision" || e.Purchase != "spot" || e.Zone != "us-east-2c" || e.Quantity != 0.5 {
		t.Errorf("first entry %+v", e)
	}

	// The instance ends at 80 minutes; i-2's end turns out to be 50.
	r.Status.Current.Spans[0].To = at(80)
	r.Status.Current.Spans[1].To = at(50)
	clk.Set(at(90))
	record(t, w, r, 3) // i-1's last segment; i-2 reversed and charged again
	es = stored(t, bus, r.ID)
	if got, want := sum(es), r.CostAt(clk.Now()); got != want {
		t.Errorf("after the end: entries sum to %s, the record bills %s", got, want)
	}
	var rev, v2 *ledger.Entry
	for i := range es {
		switch es[i].ID {
		case r.ID + "/a1/i-2/0~r":
			rev = &es[i]
		case r.ID + "/a1/i-2/0~v2":
			v2 = &es[i]
		}
	}
	if rev == nil || v2 == nil || rev.Reverses != r.ID+"/a1/i-2/0" || rev.Cost != -money.MustParse("6.01").ForDuration(45*time.Minute) ||
		v2.Cost != money.MustParse("6.01").ForDuration(50*time.Minute) {
		t.Fatalf("correction: reversal %+v, new version %+v", rev, v2)
	}

	// Two writers that both knew the subject race to append the next
	// change: one appends, the other finds it done.
	a, b := ledger.NewWriter(bus, clk, log), ledger.NewWriter(bus, clk, log)
	record(t, a, r, 0)
	record(t, b, r, 0)
	r.Status.Current.Spans[1].To = at(55)
	record(t, a, r, 2)
	record(t, b, r, 0)
	es = stored(t, bus, r.ID)
	if got, want := sum(es), r.CostAt(clk.Now()); got != want || len(es) != 8 {
		t.Errorf("after the race: %d entries summing to %s, the record bills %s", len(es), got, want)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.ID] {
			t.Errorf("entry %s stored twice", e.ID)
		}
		seen[e.ID] = true
	}

	// Every server's view follows the ledger to the same totals.
	v := ledger.NewView(log).KeepJobTotals()
	stop, err := v.Follow(context.Background(), bus)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	<-v.Ready()
	if got := v.JobTotal(r.ID); got != r.CostAt(clk.Now()) {
		t.Errorf("the view bills the job %s, the record %s", got, r.CostAt(clk.Now()))
	}
	// November's hour (23:00-24:00) and December's rest, exactly.
	nov, dec := v.MonthSpend("vision", at(0)), v.MonthSpend("vision", at(61))
	if nov+dec != r.CostAt(clk.Now()) || nov == 0 || dec == 0 {
		t.Errorf("November %s + December %s, want %s in all", nov, dec, r.CostAt(clk.Now()))
	}
	if got := v.Totals()[ledger.SpendKey{Team: "vision", Provider: "aws", Purchase: "spot"}]; got != r.CostAt(clk.Now()) {
		t.Errorf("spend metric total %s", got)
	}
	// A new entry reaches a view that is following.
	r.Status.Current.Spans = append(r.Status.Current.Spans, job.Span{Instance: "i-3", From: at(60), To: at(61)})
	record(t, w, r, 1)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if got := v.JobTotal(r.ID); got != r.CostAt(clk.Now()) {
			return fmt.Errorf("the view bills %s, the record %s", got, r.CostAt(clk.Now()))
		}
		return nil
	})
}

// An item of overhead is appended once however often it is offered: the
// second offer finds its subject taken.
func TestOverheadIsAppendedOnce(t *testing.T) {
	clk := clock.NewFake(at(70))
	bus := eventstest.NewBus(t, clk)
	e := ledger.Entry{ID: "overhead/i-1", Kind: ledger.Overhead, Category: ledger.OverheadOrphan, Start: at(0), End: at(30),
		PricePerHour: money.MustParse("2"), Cost: money.MustParse("1"), Instance: "i-1"}
	for i, want := range []bool{true, false, false} {
		got, err := ledger.AppendOverhead(context.Background(), bus, e)
		if err != nil || got != want {
			t.Fatalf("offer %d: appended %v (%v), want %v", i, got, err, want)
		}
	}
	es, _, _, err := ledger.Read(context.Background(), bus, events.LedgerOverheadSubject(e.ID))
	if err != nil || len(es) != 1 || es[0].Cost != e.Cost {
		t.Fatalf("stored %+v (%v), want the one entry", es, err)
	}
	bad := e
	bad.Cost = -1
	if _, err := ledger.AppendOverhead(context.Background(), bus, bad); err == nil {
		t.Error("a negative charge was appended")
	}
}

// A checkpoint carried to another region is a transfer charge of the
// attempt it moved to, made when that attempt's capacity was bought, in
// the job's bill and its entries alike; an attempt that bought nothing
// carried nothing.
func TestCheckpointCarriedBetweenRegionsIsATransferCharge(t *testing.T) {
	r := spotRecord()
	r.Spec.Checkpoint.SizeGB = 40
	moved := *r.Status.Current
	moved.N, moved.Transfer, moved.LaunchedAt = 2, money.MustParse("0.80"), at(90)
	moved.Placement.Region, moved.Placement.Zone = "us-west-2", "us-west-2a"
	moved.Spans = []job.Span{{Instance: "i-3", From: at(90)}}
	ended := *r.Status.Current
	ended.Spans = []job.Span{{Instance: "i-1", From: at(0), To: at(85), Prices: r.Status.Current.Spans[0].Prices}}
	ended.EndedAt, ended.Outcome = at(85), job.OutcomePreempted
	ended.Cost = money.Billed(at(0), at(85), money.MustParse("6.01"), ended.Spans[0].Prices)
	r.Status.Attempts, r.Status.Current, r.Status.Attempt, r.Status.EndedCost = []job.Attempt{ended}, &moved, 2, ended.Cost
	never := job.Attempt{N: 3, Transfer: money.MustParse("0.80"), Placement: moved.Placement}

	now := at(120)
	closed, open := ledger.Charges(r, now)
	var tr []ledger.Entry
	for _, e := range closed {
		if e.Kind == ledger.Transfer {
			tr = append(tr, e)
		}
	}
	if len(tr) != 1 || tr[0].ID != r.ID+"/a2/transfer" || tr[0].Cost != money.MustParse("0.80") || !tr[0].Start.Equal(at(90)) ||
		tr[0].Region != "us-west-2" || tr[0].Quantity != 40 || tr[0].Category != "checkpoint" {
		t.Fatalf("transfer entries %+v", tr)
	}
	if got, want := ledger.Sum(closed)+ledger.Sum(open), r.CostAt(now); got != want {
		t.Errorf("entries add to %s, the record bills %s", got, want)
	}
	r.Status.Previous = &never // placed, never launched: nothing carried yet
	closed2, _ := ledger.Charges(r, now)
	if len(closed2) != len(closed) {
		t.Errorf("an attempt that bought nothing is charged a transfer: %d entries, want %d", len(closed2), len(closed))
	}
}

// What a job's instances cost after the job ended, while they shut down,
// is the job's and overhead (teardown): the segment is cut at the end, and
// the two parts add up to it exactly.
func TestTeardownPastTheJobsEndIsOverhead(t *testing.T) {
	r := spotRecord()
	a := *r.Status.Current
	a.Spans = []job.Span{{Instance: "i-1", From: at(0), To: at(75), Prices: a.Spans[0].Prices}}
	a.EndedAt, a.Outcome = at(75), job.OutcomeSucceeded
	a.Cost = money.Billed(at(0), at(75), money.MustParse("6.01"), a.Spans[0].Prices)
	r.Status.Current, r.Status.Attempts, r.Status.EndedCost = nil, []job.Attempt{a}, a.Cost
	r.Status.State, r.Status.FinishedAt = job.Succeeded, at(70)
	closed, open := ledger.Charges(r, at(90))
	if len(open) != 0 || ledger.Sum(closed) != r.CostAt(at(90)) {
		t.Fatalf("entries %s (%d open), the record bills %s", ledger.Sum(closed), len(open), r.CostAt(at(90)))
	}
	var td []ledger.Entry
	for _, e := range closed {
		if e.Category == ledger.OverheadTeardown {
			td = append(td, e)
		} else if e.End.After(at(70)) {
			t.Errorf("usage after the job's end: %+v", e)
		}
	}
	if len(td) != 1 || td[0].Kind != ledger.Overhead || td[0].JobID != r.ID || !td[0].Start.Equal(at(70)) || !td[0].End.Equal(at(75)) ||
		td[0].ID != r.ID+"/a1/i-1/2/teardown" {
		t.Fatalf("teardown %+v", td)
	}
	// $5.49/h from 60 to 75: 10 minutes of it usage, 5 teardown, the two
	// adding up to the segment's one rounding.
	if got, want := td[0].Cost, money.MustParse("5.49").ForDuration(15*time.Minute)-money.MustParse("5.49").ForDuration(10*time.Minute); got != want {
		t.Errorf("teardown cost %s, want %s", got, want)
	}
}

// Keeping a job's checkpoint is a storage charge from its first
// checkpoint to the job's end, at the object-storage list price, in the
// job's cost and its entries alike: open while the job runs, closed when
// it ends.
func TestCheckpointStorageIsCharged(t *testing.T) {
	r := spotRecord()
	r.Status.Current.Spans = []job.Span{{Instance: "i-1", From: at(0)}}
	r.Status.Checkpoint = &job.CheckpointRef{Attempt: 1, Step: 10, Size: 200e9, At: at(10)}
	r.Status.CheckpointSince = at(10)
	perHour := money.StorageCost(money.ObjectStoragePerGBMonth, 200, time.Hour)
	if perHour != money.MustParse("0.006301") { // 200 GB x $0.023 / 730 h
		t.Fatalf("200 GB for an hour costs %s", perHour)
	}
	_, open := ledger.Charges(r, at(70))
	var st *ledger.Entry
	for i := range open {
		if open[i].Kind == ledger.Storage {
			st = &open[i]
		}
	}
	if st == nil || st.Cost != r.StorageAt(at(70)) || st.Cost != money.StorageCost(money.ObjectStoragePerGBMonth, 200, time.Hour) || st.ID != r.ID+"/storage" {
		t.Fatalf("open storage %+v, the record bills %s for it", st, r.StorageAt(at(70)))
	}
	// The job ends at 130: the storage closes there, whatever time it is.
	a := *r.Status.Current
	a.Spans[0].To, a.EndedAt, a.Outcome = at(130), at(130), job.OutcomeSucceeded
	a.Cost = money.Billed(at(0), at(130), money.MustParse("6.01"), nil)
	r.Status.Current, r.Status.Attempts, r.Status.EndedCost = nil, []job.Attempt{a}, a.Cost
	r.Status.State, r.Status.FinishedAt = job.Succeeded, at(130)
	closed, open := ledger.Charges(r, at(500))
	if len(open) != 0 || ledger.Sum(closed) != r.CostAt(at(500)) || r.StorageAt(at(500)) != money.StorageCost(money.ObjectStoragePerGBMonth, 200, 2*time.Hour) {
		t.Fatalf("entries %s (%d open), the record bills %s with %s of storage", ledger.Sum(closed), len(open), r.CostAt(at(500)), r.StorageAt(at(500)))
	}
}
