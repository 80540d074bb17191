package scheduler

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// A backlog no offer passes the static filters of (here, a price cap
// below every price) is looked at again when what the offers are changes,
// not each time capacity comes back, which is most of what moves a busy
// book; one whose deadline has passed is still looked at, and found
// hopeless.
func TestBacklogThatFitsNowhereIsLookedAtWhenTheOffersChange(t *testing.T) {
	cat := catalog.Default()
	capped, err := job.Parse([]byte("name: capped\nteam: t\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\nmax_price_per_hour: 0.01\n"), cat)
	if err != nil {
		t.Fatal(err)
	}
	dated, err := job.Parse([]byte("name: dated\nteam: t\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\nmax_price_per_hour: 0.02\n"), cat)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	o := Options{Clock: clk}
	o.defaults()
	s := &Scheduler{o: o, book: newBook(), index: map[string]*entry{}, kickC: make(chan struct{}, 1), metrics: o.Metrics,
		work: &pool{}, calls: &pool{}, ends: &pool{}, holds: map[string]map[string]teamHolds{}, teamOf: map[string]string{}, capped: map[string]*job.Record{}}
	s.tp = testTP
	s.pub, s.log = discard{}, zap.NewNop()
	defer s.wg.Wait()
	feed := func(price string, available int) {
		off := offer("aws", "us-east-1", "g4dn.xlarge", "T4", 1, price).get()
		off.Available = available
		s.book.replace("aws", "us-east-1", []providers.Offer{off})
	}
	feed("0.60", 2)
	var ids []string
	for i, spec := range []job.Spec{capped, capped, dated} {
		id := job.NewID(t0.Add(time.Duration(i)))
		ids = append(ids, id)
		var deadline time.Time
		if i == 2 {
			deadline = t0.Add(3 * time.Hour)
		}
		s.onJobChange(events.JobChange{ID: id, Revision: uint64(i + 1), Record: &job.Record{ID: id, Spec: spec,
			Status: job.Status{State: job.Queued, SubmittedAt: t0, DeadlineAt: deadline}}})
	}
	if len(s.index) != 3 || s.q.len() != 3 {
		t.Fatalf("%d jobs indexed, %d queued", len(s.index), s.q.len())
	}
	ctx := context.Background()
	looked := func(step string, want ...bool) {
		t.Helper()
		s.cycle(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, id := range ids {
			e := s.index[id]
			if e == nil || e.queued == nil || e.pending == nil {
				t.Fatalf("%s: job %d is not pending", step, i)
			}
			if got := e.seen == s.lookedAt; got != want[i] {
				t.Errorf("%s: job %d looked at: %v, want %v", step, i, got, want[i])
			}
		}
	}
	looked("first cycle", true, true, true)
	feed("0.60", 1)
	feed("0.60", 2) // capacity back: every pending job used to be looked at again
	looked("capacity back", false, false, false)
	feed("0.50", 2) // a lower price: a cap might pass now
	looked("price moved", true, true, true)
	clk.Advance(4 * time.Hour)
	feed("0.50", 1)
	feed("0.50", 2)
	looked("deadline passed", false, false, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.index[ids[2]]; e.hopeless == 0 {
		t.Error("the job past its deadline was not found hopeless")
	}
}

// discard takes the history entries a cycle publishes (their reasons),
// which this test does not read.
type discard struct{}

func (discard) Publish(context.Context, string, events.Payload, ...events.PublishOption) error {
	return nil
}
