package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// finishedRecord is spotRecord's job, finished at 75 minutes with every
// instance's end reported: its bill is final.
func finishedRecord() *job.Record {
	r := spotRecord()
	a := *r.Status.Current
	a.Spans = []job.Span{{Instance: "i-1", From: at(0), To: at(75), Prices: a.Spans[0].Prices}, {Instance: "i-2", From: at(0), To: at(45)}}
	a.EndedAt, a.Outcome = at(75), job.OutcomeSucceeded
	a.Cost = money.Billed(at(0), at(75), money.MustParse("6.01"), a.Spans[0].Prices) + money.MustParse("6.01").ForDuration(45*time.Minute)
	r.Status.Current, r.Status.Attempts, r.Status.EndedCost = nil, []job.Attempt{a}, a.Cost
	r.Status.State, r.Status.FinishedAt = job.Succeeded, at(75)
	return r
}

func follow(t *testing.T, bus *events.Bus) *ledger.View {
	t.Helper()
	v := ledger.NewView(eventstest.Logger(t)).KeepJobTotals()
	stop, err := v.Follow(context.Background(), bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	<-v.Ready()
	return v
}

func ledgerJobs(t *testing.T, bus *events.Bus) []string {
	t.Helper()
	ids, _, err := bus.LedgerJobs(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A job's sealed charges leave its own subject and are counted once: by a
// view that saw them before the seal, by one that reads only the seal,
// and when a crash between the seal and the purge sealed them twice. The
// writer reads a sealed job's seals, so a correction that comes after
// reverses and charges again what was sealed, and appends nothing twice.
func TestSealedChargesAreCountedOnce(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(at(80))
	bus := eventstest.NewBus(t, clk)
	log := eventstest.Logger(t)
	r := finishedRecord()
	closed, open := ledger.Charges(r, clk.Now())
	want := r.CostAt(clk.Now())
	if len(open) != 0 || ledger.Sum(closed) != want || len(closed) < 3 {
		t.Fatalf("the fixture's bill is not final: %d closed summing to %s, %d open, the record bills %s", len(closed), ledger.Sum(closed), len(open), want)
	}
	record(t, ledger.NewWriter(bus, clk, log), r, len(closed))
	live := follow(t, bus)

	n, err := ledger.Seal(ctx, bus, r.ID)
	if err != nil || n != len(closed) {
		t.Fatalf("sealed %d charges (%v), want %d", n, err, len(closed))
	}
	if es := stored(t, bus, r.ID); len(es) != 0 || slices.Contains(ledgerJobs(t, bus), r.ID) {
		t.Fatalf("the job's subject still holds %d charges after the seal", len(es))
	}
	// A crash between a seal and its purge: the next round seals the
	// same charges again.
	seals, err := bus.LedgerSubject(ctx, events.LedgerSealedSubject(r.ID))
	if err != nil || len(seals) != 1 {
		t.Fatalf("%d seal messages (%v), want 1", len(seals), err)
	}
	if _, err := bus.PublishLedgerSeal(ctx, r.ID, seals[0].Data, ""); err != nil {
		t.Fatal(err)
	}
	// Another job's charge after both: once the live view has it, it has
	// been through the seals.
	other := ledger.Entry{ID: "overhead/i-9", Kind: ledger.Overhead, Category: ledger.OverheadOrphan, Start: at(0), End: at(30),
		PricePerHour: money.MustParse("2"), Cost: money.MustParse("1"), Instance: "i-9"}
	if _, err := ledger.AppendOverhead(ctx, bus, other); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if live.Len() != len(closed)+1 {
			return fmt.Errorf("the live view holds %d charges, want %d", live.Len(), len(closed)+1)
		}
		return nil
	})
	fresh := follow(t, bus)
	for name, v := range map[string]*ledger.View{"the view that saw the charges before the seal": live, "a view that read only the seals": fresh} {
		if got := v.JobTotal(r.ID); got != want || v.Len() != len(closed)+1 || v.Garbled() != 0 {
			t.Errorf("%s bills the job %s in %d charges (%d garbled), the record %s in %d", name, got, v.Len(), v.Garbled(), want, len(closed))
		}
		if got := v.Totals()[ledger.SpendKey{Team: "vision", Provider: "aws", Purchase: "spot"}]; got != want {
			t.Errorf("%s: spend metric total %s, want %s", name, got, want)
		}
	}

	// An hour on, i-2's end turns out to be 50 minutes: a writer that
	// never saw the job reads its seals, reverses the sealed charge and
	// charges it again, and appends nothing else.
	clk.Set(at(75).Add(ledger.SealAfter + time.Minute))
	w := ledger.NewWriter(bus, clk, log)
	record(t, w, r, 0)
	r.Status.Attempts[0].Spans[1].To = at(50)
	r.Status.Attempts[0].Cost += money.MustParse("6.01").ForDuration(5 * time.Minute)
	r.Status.EndedCost = r.Status.Attempts[0].Cost
	want = r.CostAt(clk.Now())
	record(t, w, r, 2)
	record(t, ledger.NewWriter(bus, clk, log), r, 0)
	es := stored(t, bus, r.ID)
	if len(es) != 2 || es[0].Reverses != r.ID+"/a1/i-2/0" || es[1].ID != r.ID+"/a1/i-2/0~v2" {
		t.Fatalf("after the correction the job's subject holds %+v, want the reversal and the new version", es)
	}
	if _, err := ledger.Seal(ctx, bus, r.ID); err != nil {
		t.Fatal(err)
	}
	after := follow(t, bus)
	if got := after.JobTotal(r.ID); got != want || after.Len() != len(closed)+3 {
		t.Errorf("after the correction, sealed twice over: a view bills %s in %d charges, the record %s", got, after.Len(), want)
	}
}

// sealRig is a store and a ledger writer at 80 minutes, for the sealer.
type sealRig struct {
	t   *testing.T
	ctx context.Context
	clk *clock.Fake
	bus *events.Bus
	w   *ledger.Writer
}

func newSealRig(t *testing.T) *sealRig {
	clk := clock.NewFake(at(80))
	bus := eventstest.NewBus(t, clk)
	return &sealRig{t: t, ctx: context.Background(), clk: clk, bus: bus, w: ledger.NewWriter(bus, clk, eventstest.Logger(t))}
}

// put stores a record and its charges, and returns its revision.
func (g *sealRig) put(r *job.Record) uint64 {
	g.t.Helper()
	rev, err := g.bus.Jobs().Create(g.ctx, r)
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.w.Record(g.ctx, r); err != nil {
		g.t.Fatal(err)
	}
	return rev
}

// saveCursor saves the writer's place as its Run does.
func (g *sealRig) saveCursor(rev uint64) {
	g.t.Helper()
	if _, err := g.bus.Meta().Put(g.ctx, "ledger.cursor", []byte(strconv.FormatUint(rev, 10))); err != nil {
		g.t.Fatal(err)
	}
}

// The sealer seals what is final and only that: a job finished over an
// hour ago whose instances' ends are all reported, and a job removed from
// the store; never a running job, one finished lately, one with a version
// the ledger's writer has not read yet, nor anything before the writer
// has saved its place.
func TestSealerSealsFinalBillsOnly(t *testing.T) {
	g := newSealRig(t)
	ctx, clk, bus, put, log := g.ctx, g.clk, g.bus, g.put, eventstest.Logger(t)
	running := spotRecord()
	put(running)
	old, gone := finishedRecord(), finishedRecord()
	gone.ID = job.NewID(at(1))
	put(old)
	put(gone)
	if _, err := bus.DeleteJobs(ctx, []string{gone.ID}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Set(at(75).Add(ledger.SealAfter + time.Minute))
	recent := finishedRecord()
	recent.ID = job.NewID(at(2))
	recent.Status.FinishedAt = clk.Now().Add(-10 * time.Minute)
	put(recent)
	written, err := bus.JobLastRevision(ctx, recent.ID)
	if err != nil {
		t.Fatal(err)
	}
	unread := finishedRecord()
	unread.ID = job.NewID(at(3))
	unreadRev := put(unread)
	all := []string{running.ID, old.ID, gone.ID, recent.ID, unread.ID}
	slices.Sort(all)
	if got := ledgerJobs(t, bus); !slices.Equal(got, all) {
		t.Fatalf("the ledger lists the jobs %v, want %v", got, all)
	}

	s := ledger.NewSealer(bus, clk, log)
	if n, err := s.Round(ctx, 100); err != nil || n != 0 {
		t.Fatalf("before the writer saved its place: sealed %d (%v)", n, err)
	}
	g.saveCursor(written)
	if n, err := s.Round(ctx, 100); err != nil || n != 2 {
		t.Fatalf("sealed %d (%v), want the finished job and the removed one", n, err)
	}
	left := []string{running.ID, recent.ID, unread.ID}
	slices.Sort(left)
	if got := ledgerJobs(t, bus); !slices.Equal(got, left) {
		t.Fatalf("after a round the ledger lists %v, want %v", got, left)
	}
	g.saveCursor(unreadRev)
	if n, err := s.Round(ctx, 100); err != nil || n != 1 || slices.Contains(ledgerJobs(t, bus), unread.ID) {
		t.Fatalf("once the writer read it: sealed %d (%v), the ledger lists %v", n, err, ledgerJobs(t, bus))
	}
	// Every charge is still there, once.
	v := follow(t, bus)
	for _, r := range []*job.Record{old, gone, unread} {
		if got := v.JobTotal(r.ID); got != r.CostAt(clk.Now()) {
			t.Errorf("job %s: the view bills %s, the record %s", r.ID, got, r.CostAt(clk.Now()))
		}
	}
}

// A garbled message on a job's subject is sealed as it was: a view
// skips and counts it either way, and sums the rest.
func TestGarbledChargeIsSealedAsGarbled(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(at(80))
	bus := eventstest.NewBus(t, clk)
	r := finishedRecord()
	closed, _ := ledger.Charges(r, clk.Now())
	record(t, ledger.NewWriter(bus, clk, eventstest.Logger(t)), r, len(closed))
	es, last, _, err := ledger.Read(ctx, bus, events.LedgerJobSubject(r.ID))
	if err != nil || len(es) != len(closed) {
		t.Fatal(err)
	}
	if _, err := bus.AppendLedger(ctx, events.LedgerJobSubject(r.ID), []byte("\x00not json"), "", last); err != nil {
		t.Fatal(err)
	}
	if n, err := ledger.Seal(ctx, bus, r.ID); err != nil || n != len(closed)+1 {
		t.Fatalf("sealed %d (%v), want %d", n, err, len(closed)+1)
	}
	v := follow(t, bus)
	if v.Garbled() != 1 || v.JobTotal(r.ID) != r.CostAt(clk.Now()) {
		t.Fatalf("a view of the seal: %d garbled, the job billed %s; want 1 and %s", v.Garbled(), v.JobTotal(r.ID), r.CostAt(clk.Now()))
	}
	if got, garbled, err := ledger.ReadJob(ctx, bus, r.ID); err != nil || garbled != 1 || ledger.Sum(got) != r.CostAt(clk.Now()) {
		t.Fatalf("ReadJob: %s in %d entries, %d garbled (%v)", ledger.Sum(got), len(got), garbled, err)
	}
}

// Rounds that may seal only a few jobs each go on where the last one
// stopped, past the jobs it kept, and come back to the start: every job
// due is sealed in as many rounds as the limit takes, and those not due
// stay.
func TestSealerRoundsGoOnWhereTheLastStopped(t *testing.T) {
	g := newSealRig(t)
	var due, live []string
	for i := range 9 {
		r := finishedRecord()
		if i%3 == 1 {
			r = spotRecord() // running: never sealed
		}
		r.ID = job.NewID(at(i))
		g.saveCursor(g.put(r))
		if i%3 == 1 {
			live = append(live, r.ID)
		} else {
			due = append(due, r.ID)
		}
	}
	g.clk.Set(at(75).Add(ledger.SealAfter + time.Minute))
	ctx, bus := g.ctx, g.bus
	s := ledger.NewSealer(bus, g.clk, eventstest.Logger(t))
	sealed := 0
	for round := 1; sealed < len(due); round++ {
		if round > 10 {
			t.Fatalf("%d of %d jobs sealed after 10 rounds of 2", sealed, len(due))
		}
		n, err := s.Round(ctx, 2)
		if err != nil || n > 2 {
			t.Fatalf("round %d: sealed %d (%v), at most 2", round, n, err)
		}
		sealed += n
	}
	slices.Sort(live)
	if got := ledgerJobs(t, bus); !slices.Equal(got, live) {
		t.Fatalf("left on their own subjects %v, want the running jobs %v", got, live)
	}
	if n, err := s.Round(ctx, 2); err != nil || n != 0 || s.Left.Load() != int64(len(live)) {
		t.Fatalf("a round with nothing due sealed %d (%v), counts %d left", n, err, s.Left.Load())
	}
}

// The sealer seals the histories of jobs finished for good, as it seals
// their charges: the record names the seals and prints its bill, the
// history reads as before, and the job's subject is gone. The writer,
// shown the sealed version, appends nothing; shown a correction after
// it, it bills the correction. An event stored after the seal is sealed
// by a later round, and the history reads whole.
func TestSealerSealsFinishedHistories(t *testing.T) {
	g := newSealRig(t)
	ctx, clk, bus, put := g.ctx, g.clk, g.bus, g.put
	running, old, recent := spotRecord(), finishedRecord(), finishedRecord()
	cancelled := &job.Record{ID: job.NewID(at(4)), Spec: job.Spec{Name: "never ran", Team: "vision"}}
	cancelled.Status.State, cancelled.Status.FinishedAt = job.Cancelled, at(5)
	old.ID, recent.ID = job.NewID(at(1)), job.NewID(at(2))
	publish := func(r *job.Record, msg string) {
		t.Helper()
		if err := bus.Publish(ctx, events.JobEventsSubject(r.ID), &events.JobEvent{JobID: r.ID, Kind: events.KindPending, State: r.Status.State, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*job.Record{running, old, cancelled, recent} {
		publish(r, "submitted")
		publish(r, "the end")
	}
	put(running)
	put(old)
	put(cancelled)
	clk.Set(at(75).Add(ledger.SealAfter + time.Minute))
	recent.Status.FinishedAt = clk.Now().Add(-10 * time.Minute)
	last := put(recent)
	before, err := bus.JobHistory(ctx, old.ID, nil, 0)
	if err != nil || len(before) != 2 {
		t.Fatalf("history before: %d events, %v", len(before), err)
	}

	s := ledger.NewSealer(bus, clk, eventstest.Logger(t))
	if n, err := s.Histories(ctx, 100); err != nil || n != 0 {
		t.Fatalf("before the writer saved its place: sealed %d (%v)", n, err)
	}
	g.saveCursor(last)
	if n, err := s.Histories(ctx, 100); err != nil || n != 2 {
		t.Fatalf("sealed %d histories (%v), want the old job's and the cancelled one's", n, err)
	}
	ids, _, err := bus.JobHistories(ctx, 0)
	want := []string{running.ID, recent.ID}
	slices.Sort(want)
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("jobs with a history subject: %v (%v), want %v", ids, err, want)
	}
	if s.HistoriesLeft.Load() != 2 {
		t.Errorf("histories left: %d, want 2", s.HistoriesLeft.Load())
	}
	sealedOld, rev, err := bus.Jobs().Get(ctx, old.ID)
	if err != nil || len(sealedOld.SealedHistory()) != 1 || sealedOld.Status.Sealed.Bill == 0 {
		t.Fatalf("the old job's record after the seal: %+v, %v", sealedOld.Status.Sealed, err)
	}
	if r, _, err := bus.Jobs().Get(ctx, cancelled.ID); err != nil || len(r.SealedHistory()) != 1 || r.Status.Sealed.Bill != 0 {
		t.Fatalf("the cancelled job's record after the seal: %+v, %v", r.Status.Sealed, err)
	}
	got, err := bus.JobHistory(ctx, old.ID, sealedOld.SealedHistory(), 0)
	if err != nil || len(got) != 2 || got[0].Seq != before[0].Seq || got[1].Seq != before[1].Seq || got[1].Event.Message != "the end" {
		t.Fatalf("the sealed history: %+v, %v", got, err)
	}

	charges := len(stored(t, bus, old.ID))
	fresh := ledger.NewWriter(bus, clk, eventstest.Logger(t))
	if n, err := fresh.Record(ctx, sealedOld); err != nil || n != 0 {
		t.Fatalf("the writer shown the sealed version appended %d (%v)", n, err)
	}
	corrected := sealedOld.Clone()
	corrected.Status.Attempts[0].Spans[1].To = at(50)
	if _, err := bus.Jobs().Update(ctx, corrected, rev); err != nil {
		t.Fatal(err)
	}
	if n, err := fresh.Record(ctx, corrected); err != nil || n == 0 {
		t.Fatalf("a correction after the seal: the writer appended %d (%v)", n, err)
	}
	if got := len(stored(t, bus, old.ID)); got <= charges {
		t.Fatalf("the ledger holds %d charges of the job after the correction, %d before", got, charges)
	}

	publish(old, "late")
	cur, err := bus.JobLastRevision(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	g.saveCursor(cur)
	if n, err := s.Histories(ctx, 100); err != nil || n != 1 {
		t.Fatalf("the event after the seal: sealed %d (%v)", n, err)
	}
	r, _, err := bus.Jobs().Get(ctx, old.ID)
	if err != nil || len(r.SealedHistory()) != 2 {
		t.Fatalf("the record after the second seal: %+v, %v", r.Status.Sealed, err)
	}
	if got, err := bus.JobHistory(ctx, old.ID, r.SealedHistory(), 0); err != nil || len(got) != 3 || got[2].Event.Message != "late" {
		t.Fatalf("the history sealed twice: %d events, %v", len(got), err)
	}
}

// A sealer given a view of the jobs passes over, without reading their
// records, the jobs it holds as not finished or finished too recently
// (a round over a large queue reads none): here the view lags the
// bucket, so jobs whose records are due wait for it; jobs it does not
// hold are read and sealed as always.
func TestSealerPassesOverJobsItsViewHoldsAsNotDue(t *testing.T) {
	g := newSealRig(t)
	var ids []string
	for i := range 3 {
		r := finishedRecord()
		r.ID = job.NewID(at(i))
		g.saveCursor(g.put(r))
		ids = append(ids, r.ID)
	}
	g.clk.Set(at(75).Add(ledger.SealAfter + time.Minute))
	lagging, recent := ids[0], ids[1] // ids[2]: not in the view
	view := map[string]time.Time{lagging: {}, recent: g.clk.Now().Add(-time.Minute)}
	s := ledger.NewSealer(g.bus, g.clk, eventstest.Logger(t))
	s.FinishedAt = func(id string) (time.Time, bool) {
		at, ok := view[id]
		return at, ok
	}
	if n, err := s.Round(g.ctx, 100); err != nil || n != 1 {
		t.Fatalf("sealed %d (%v), want only the job the view does not hold", n, err)
	}
	want := []string{lagging, recent}
	slices.Sort(want)
	if got := ledgerJobs(t, g.bus); !slices.Equal(got, want) {
		t.Fatalf("left on their own subjects %v, want %v", got, want)
	}
	// The view catches up: both are due.
	view[lagging] = at(1)
	view[recent] = at(1)
	if n, err := s.Round(g.ctx, 100); err != nil || n != 2 || len(ledgerJobs(t, g.bus)) != 0 {
		t.Fatalf("once the view caught up: sealed %d (%v), left %v", n, err, ledgerJobs(t, g.bus))
	}
}
