package events_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

func newRecord(now time.Time) *job.Record {
	p := 100
	return &job.Record{
		ID:     job.NewID(now),
		Spec:   job.Spec{APIVersion: job.APIVersion, Name: "t", Team: "a", Priority: &p},
		Status: job.Status{State: job.Queued, SubmittedAt: now, UpdatedAt: now},
	}
}

func TestJobStoreRevisionChecks(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	s := b.Jobs()
	r := newRecord(time.Now())
	rev, err := s.Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, r); !errors.Is(err, events.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	got, grev, err := s.Get(ctx, r.ID)
	if err != nil || grev != rev || got.Status.State != job.Queued {
		t.Fatalf("get = %+v, %d, %v", got, grev, err)
	}
	// A writer holding a stale revision must not overwrite a newer write.
	got.Status.Message = "first"
	if _, err := s.Update(ctx, got, rev); err != nil {
		t.Fatal(err)
	}
	got.Status.Message = "stale"
	if _, err := s.Update(ctx, got, rev); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	if _, _, err := s.Get(ctx, job.NewID(time.Now())); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("missing job: %v, want ErrNotFound", err)
	}
}

func TestJobStoreConcurrentModifyLosesNoUpdate(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	s := b.Jobs()
	r := newRecord(time.Now())
	if _, err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, _, err := s.Modify(ctx, r.ID, func(r *job.Record) error {
					r.Status.Retries++
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, _, err := s.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Retries != writers*each {
		t.Fatalf("counter = %d after %d increments: updates were lost", got.Status.Retries, writers*each)
	}
}

func TestConsumerDropsGarbledAndRetriesFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := eventstest.NewBus(t, nil)
	id := job.NewID(time.Now())
	subj := events.AgentSubject(id, 1)
	var seen []float64
	var mu sync.Mutex
	var failOnce atomic.Bool
	failOnce.Store(true)
	stop, err := b.Consume(ctx, events.ConsumerConfig{Stream: events.StreamAgent, Durable: "test-agent", Subjects: []string{events.AllAgentReports}}, func(_ context.Context, m events.Message) error {
		rep := m.Payload.(*events.AgentReport)
		if rep.Progress == 0.5 && failOnce.CompareAndSwap(true, false) {
			return errors.New("transient")
		}
		mu.Lock()
		seen = append(seen, rep.Progress)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := b.PublishRaw(ctx, subj, []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishRaw(ctx, subj, []byte(`{"v":1,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":{"job_id":"`+id+`","attempt":0,"kind":"progress"}}`)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []float64{0.25, 0.5} {
		if err := b.Publish(ctx, subj, &events.AgentReport{JobID: id, Attempt: 1, InstanceID: "i-1", Kind: events.AgentProgress, Progress: p}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 {
			return errors.New("waiting for both good reports")
		}
		return nil
	})
	if g := b.Garbled(); g != 2 {
		t.Fatalf("garbled = %d, want 2", g)
	}
}

func TestDuplicatePublishIsDeduplicated(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	id := job.NewID(time.Now())
	ev := &events.JobEvent{JobID: id, Kind: events.KindPlacing, State: job.Placing, Attempt: 1}
	for range 3 {
		if err := b.Publish(ctx, events.JobEventsSubject(id), ev, events.WithID(id+"-placing-1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindRunning, State: job.Running, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := b.JobHistory(ctx, id, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Event.Kind != events.KindPlacing || h[1].Event.Kind != events.KindRunning {
		t.Fatalf("history = %+v, want placing then running", h)
	}
}

// Events published together are each stored, in order, once the call
// returns; one that cannot be stored is reported alone.
func TestPublishTogetherStoresEachBeforeReturning(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	id := job.NewID(time.Now())
	errs := b.PublishTogether(ctx,
		events.Outgoing{Subject: events.JobEventsSubject(id), Payload: &events.JobEvent{JobID: id, Kind: events.KindQueued, State: job.Queued}},
		events.Outgoing{Subject: "spotwise.nowhere.stored", Payload: &events.JobEvent{JobID: id, Kind: events.KindPlacing, State: job.Placing}},
		events.Outgoing{Subject: events.JobEventsSubject(id), Payload: &events.JobEvent{JobID: id, Kind: events.KindPlacing, State: job.Placing, Attempt: 1}, Opts: []events.PublishOption{events.WithID(id + "-p1")}},
		events.Outgoing{Subject: events.JobEventsSubject(id), Payload: &events.JobEvent{JobID: id, Kind: events.KindPlacing, State: job.Placing, Attempt: 1}, Opts: []events.PublishOption{events.WithID(id + "-p1")}})
	if len(errs) != 4 || errs[0] != nil || errs[1] == nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errors = %v, want only the second (no stream stores its subject)", errs)
	}
	h, err := b.JobHistory(ctx, id, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Event.Kind != events.KindQueued || h[1].Event.Kind != events.KindPlacing {
		t.Fatalf("history = %+v, want queued then placing (the repeat de-duplicated)", h)
	}
	// A context that ends before the acknowledgements says so.
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, err := range b.PublishTogether(done, events.Outgoing{Subject: events.JobEventsSubject(id), Payload: &events.JobEvent{JobID: id, Kind: events.KindRunning, State: job.Running}}) {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
	}
}

// A fork publishes and answers on a connection of its own: what it
// stores is the parent's, what it answers is listed with the parent's
// readings, and closing it leaves the parent as it was.
func TestForkPublishesAndAnswersOnItsOwnConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := eventstest.NewBus(t, nil)
	f, err := b.Fork("spotwise-test-fork")
	if err != nil {
		t.Fatal(err)
	}
	if f.Conn() == b.Conn() || f.Conn().Opts.Name != "spotwise-test-fork" {
		t.Fatalf("fork on connection %q, want one of its own", f.Conn().Opts.Name)
	}
	id := job.NewID(time.Now())
	if err := f.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindQueued, State: job.Queued}); err != nil {
		t.Fatal(err)
	}
	if h, err := b.JobHistory(ctx, id, nil, 0); err != nil || len(h) != 1 {
		t.Fatalf("history through the parent = %+v, %v: want the fork's event", h, err)
	}
	stop, err := f.Answer("spotwise.test.fork", func(data []byte) ([]byte, bool) { return append([]byte("fork:"), data...), true })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Request(ctx, "spotwise.test.fork", []byte("hi")); err != nil || string(got) != "fork:hi" {
		t.Fatalf("answer = %q, %v", got, err)
	}
	listed := func() bool {
		return slices.ContainsFunc(b.Readings(), func(r events.Reading) bool { return r.Name == "spotwise.test.fork" })
	}
	if !listed() {
		t.Fatalf("the parent's readings %+v miss the fork's answer", b.Readings())
	}
	stop()
	if listed() {
		t.Fatal("a stopped answer is still listed")
	}
	f.Close()
	if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPlacing, State: job.Placing, Attempt: 1}); err != nil {
		t.Fatalf("parent after the fork closed: %v", err)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := clock.Real{}
	b := eventstest.OpenBus(t, dir, "", clk)
	r := newRecord(time.Now())
	if _, err := b.Jobs().Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b2 := eventstest.OpenBus(t, dir, "", clk)
	got, _, err := b2.Jobs().Get(ctx, r.ID)
	if err != nil {
		t.Fatalf("job lost across restart: %v", err)
	}
	if got.ID != r.ID {
		t.Fatalf("got %s", got.ID)
	}
}

func TestRequestReply(t *testing.T) {
	b := eventstest.NewBus(t, nil)
	stop, err := b.Serve("spotwise.test.echo", func(_ context.Context, data []byte) []byte { return append([]byte("re:"), data...) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := b.Request(ctx, "spotwise.test.echo", []byte("hi"))
	if err != nil || string(got) != "re:hi" {
		t.Fatalf("reply %q, %v", got, err)
	}
}

// Watchers of the job bucket in one process see each version decoded
// once: the scheduler, the API and the ledger get the same record, with
// every version in order.
func TestWatchersShareEachDecodedVersion(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	s := b.Jobs()
	type seen struct {
		mu   sync.Mutex
		recs map[uint64]*job.Record
		msgs []string
	}
	watchers := make([]*seen, 3)
	for i := range watchers {
		w := &seen{recs: map[uint64]*job.Record{}}
		watchers[i] = w
		fn := func(c events.JobChange) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if c.Record != nil {
				w.recs[c.Revision] = c.Record
				w.msgs = append(w.msgs, c.Record.Status.Message)
			}
		}
		var stop func()
		var err error
		if i == 2 {
			stop, err = s.WatchFrom(ctx, 0, fn)
		} else {
			stop, err = s.Watch(ctx, fn, func() {})
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	r := newRecord(time.Now())
	if _, err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	want := []string{""}
	for n := range 5 {
		msg := fmt.Sprintf("version %d", n+2)
		_, rev, err := s.Modify(ctx, r.ID, func(x *job.Record) error { x.Status.Message = msg; return nil })
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, msg)
		// The next change starts from the version the watchers decoded
		// (a copy of it).
		testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
			w := watchers[0]
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.recs[rev] == nil {
				return fmt.Errorf("version %d not seen yet", rev)
			}
			return nil
		})
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		for i, w := range watchers {
			w.mu.Lock()
			got := slices.Clone(w.msgs)
			w.mu.Unlock()
			if !slices.Equal(got, want) {
				return fmt.Errorf("watcher %d saw %q, want %q", i, got, want)
			}
		}
		return nil
	})
	for rev, r := range watchers[0].recs {
		for i, w := range watchers[1:] {
			if w.recs[rev] != r {
				t.Errorf("watcher %d decoded version %d again", i+1, rev)
			}
		}
	}
	// Changing a record never changes the versions watchers hold: each
	// still says what it said when stored.
	revs := slices.Sorted(maps.Keys(watchers[0].recs))
	for i, rev := range revs {
		if got := watchers[0].recs[rev].Status.Message; i >= len(want) || got != want[i] {
			t.Errorf("version %d (the %d. stored) now holds message %q; stored as %q", rev, i+1, got, want[min(i, len(want)-1)])
		}
	}
}

// twoProcesses are the job stores of two processes on one NATS server,
// and a record the first one created.
func twoProcesses(t *testing.T) (a, b *events.JobStore, r *job.Record) {
	t.Helper()
	one := eventstest.OpenBus(t, t.TempDir(), "127.0.0.1:0", nil)
	other := eventstest.OpenBusConfig(t, events.Config{URL: one.ClientURL(), IdentityDir: one.Identity().Dir()}, nil)
	a, b = one.Jobs(), other.Jobs()
	r = newRecord(time.Now())
	if _, err := a.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return a, b, r
}

// TestModifyAfterAnotherProcessWroteSeesItsVersion: a process changes a
// job from the version it last wrote, without reading the store; when
// another process has written since, nothing of its write is lost, and a
// change judged unneeded on the version held is judged again on the
// stored one (fenced lifecycle events depend on it).
func TestModifyAfterAnotherProcessWroteSeesItsVersion(t *testing.T) {
	ctx := context.Background()
	a, b, r := twoProcesses(t)
	// The first process writes, and so holds the version it wrote.
	if _, _, err := a.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Attempt = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	// The other one writes attempt 2.
	if _, _, err := b.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Attempt = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	// An event of attempt 2 is nothing to a reader of the old version,
	// news to one of the stored one.
	seen := []int{}
	got, rev, err := a.Modify(ctx, r.ID, func(r *job.Record) error {
		seen = append(seen, r.Status.Attempt)
		if r.Status.Attempt < 2 {
			return events.ErrNoChange
		}
		r.Status.Message = "attempt 2 running"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Attempt != 2 || got.Status.Message != "attempt 2 running" {
		t.Fatalf("Modify returned attempt %d, message %q (fn saw attempts %v): the event was judged on an old version", got.Status.Attempt, got.Status.Message, seen)
	}
	if stored, srev, _ := a.Get(ctx, r.ID); srev != rev || stored.Status.Message != "attempt 2 running" {
		t.Fatalf("stored revision %d message %q, Modify said revision %d", srev, stored.Status.Message, rev)
	}
	// A verdict on the old version that refuses is judged again as well.
	if _, _, err := b.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Attempt = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("attempt 3 is unknown")
	if _, _, err := a.Modify(ctx, r.ID, func(r *job.Record) error {
		if r.Status.Attempt < 3 {
			return refused
		}
		r.Status.Retries++
		return nil
	}); err != nil {
		t.Fatalf("a change refused on the old version only: %v", err)
	}
	// And a change made on the old version is made again on the new one:
	// the other process's write is not lost.
	if _, _, err := b.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Message = "theirs"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Retries++; return nil }); err != nil {
		t.Fatal(err)
	}
	final, _, err := b.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status.Attempt != 3 || final.Status.Retries != 2 || final.Status.Message != "theirs" {
		t.Fatalf("final record: attempt %d, retries %d, message %q; want 3, 2, %q", final.Status.Attempt, final.Status.Retries, final.Status.Message, "theirs")
	}
}

// A change made from a version the caller holds: written on it when it is
// the latest (the change is not lost, nor made twice), made again on the
// stored version when another process wrote since (its write is not lost),
// judged again on the stored version when it writes nothing on the held
// one, and a version of another job is no starting point.
func TestModifyFromAHeldVersion(t *testing.T) {
	ctx := context.Background()
	a, b, r := twoProcesses(t)
	// The other process writes; this one holds that version, as a watch
	// would give it, but keeps none of its own.
	held, heldRev, err := b.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Attempt = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	// Marked, to tell that the change starts from it and not from a read.
	held.Status.Message = "as held"
	var saw []int
	var from string
	got, rev, err := a.ModifyFrom(ctx, r.ID, held, heldRev, func(r *job.Record) error {
		saw = append(saw, r.Status.Attempt)
		from = r.Status.Message
		r.Status.Retries++
		return nil
	})
	if err != nil || rev != heldRev+1 || got.Status.Attempt != 1 || got.Status.Retries != 1 || len(saw) != 1 || from != "as held" {
		t.Fatalf("from the latest version: %+v at %d (%v), fn saw attempts %v from %q", got.Status, rev, err, saw, from)
	}
	if held.Status.Retries != 0 {
		t.Fatal("the held version was changed")
	}

	// Held version now stale: the other process wrote attempt 2.
	if _, _, err := b.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Attempt = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	saw = nil
	got, _, err = a.ModifyFrom(ctx, r.ID, held, heldRev, func(r *job.Record) error {
		saw = append(saw, r.Status.Attempt)
		r.Status.Message = "mine"
		return nil
	})
	if err != nil || got.Status.Attempt != 2 || got.Status.Message != "mine" || got.Status.Retries != 1 || len(saw) != 2 {
		t.Fatalf("from a stale version: %+v (%v), fn saw attempts %v", got.Status, err, saw)
	}

	// Nothing to write on a stale held version: judged again on the
	// stored one.
	stale, staleRev, err := b.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Attempt = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	got, _, err = a.ModifyFrom(ctx, r.ID, stale, staleRev+100, func(r *job.Record) error {
		if r.Status.Attempt < 3 {
			return events.ErrNoChange
		}
		r.Status.Message = "attempt 3"
		return nil
	})
	if err != nil || got.Status.Message != "attempt 3" {
		t.Fatalf("a no-op on the held version: %+v (%v)", got.Status, err)
	}

	// Another job's version is not this one's starting point.
	r2 := newRecord(time.Now().Add(time.Millisecond))
	if _, err := a.Create(ctx, r2); err != nil {
		t.Fatal(err)
	}
	got, _, err = a.ModifyFrom(ctx, r2.ID, held, 1<<40, func(r *job.Record) error { r.Status.Message = "second"; return nil })
	if err != nil || got.ID != r2.ID || got.Status.Attempt != 0 || got.Status.Message != "second" {
		t.Fatalf("with another job's version: %s %+v (%v)", got.ID, got.Status, err)
	}
	final, _, err := b.Get(ctx, r.ID)
	if err != nil || final.Status.Attempt != 3 || final.Status.Retries != 1 || final.Status.Message != "attempt 3" {
		t.Fatalf("final record: %+v (%v)", final.Status, err)
	}
}

// BenchmarkModify: one change to a job's record, as the lifecycle makes
// them (the version this process last wrote is where it starts).
func BenchmarkModify(b *testing.B) {
	ctx := context.Background()
	s := eventstest.NewBus(b, nil).Jobs()
	r := newRecord(time.Now())
	if _, err := s.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := s.Modify(ctx, r.ID, func(r *job.Record) error { r.Status.Retries++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
