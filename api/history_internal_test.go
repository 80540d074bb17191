package api

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
)

func publishEvents(t *testing.T, bus *events.Bus, id string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := bus.Publish(context.Background(), events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// sameHistory fails unless got is what the stream holds: the newest
// historyLimit events of the job, in order.
func sameHistory(t *testing.T, bus *events.Bus, id string, got []events.HistoryEntry) {
	t.Helper()
	want, err := bus.JobHistory(context.Background(), id, historyLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("history of %s has %d events, the stream %d", id, len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Event.Message != want[i].Event.Message {
			t.Fatalf("event %d of %s is seq %d %q, the stream's seq %d %q", i, id, got[i].Seq, got[i].Event.Message, want[i].Seq, want[i].Event.Message)
		}
	}
}

// A cached history stays what the stream holds as events are added, past
// the limit of events a view shows, as other jobs push it out of the cache
// and bring it back, and with readers and a writer at once.
func TestCachedHistoriesAreWhatTheStreamHolds(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	h := newHistories(2, 1000)
	ctx := context.Background()
	ids := []string{job.NewID(time.Now()), job.NewID(time.Now().Add(time.Millisecond)), job.NewID(time.Now().Add(2 * time.Millisecond))}

	if got, err := h.read(ctx, bus, ids[0], false); err != nil || len(got) != 0 {
		t.Fatalf("a job with no history: %d events, %v", len(got), err)
	}
	publishEvents(t, bus, ids[0], 0, 3)
	got, err := h.read(ctx, bus, ids[0], false)
	if err != nil {
		t.Fatal(err)
	}
	sameHistory(t, bus, ids[0], got)
	publishEvents(t, bus, ids[0], 3, 2)
	got, _ = h.read(ctx, bus, ids[0], false)
	sameHistory(t, bus, ids[0], got)

	// Past what a view shows: the newest historyLimit.
	publishEvents(t, bus, ids[0], 5, historyLimit)
	got, _ = h.read(ctx, bus, ids[0], false)
	sameHistory(t, bus, ids[0], got)
	if got[len(got)-1].Event.Message != fmt.Sprint(historyLimit+4) {
		t.Fatalf("newest event is %q", got[len(got)-1].Event.Message)
	}

	// Two more jobs in a cache of two: the first goes, and comes back right.
	for _, id := range ids[1:] {
		publishEvents(t, bus, id, 0, 2)
		got, _ := h.read(ctx, bus, id, false)
		sameHistory(t, bus, id, got)
	}
	h.mu.Lock()
	_, cached := h.byID[ids[0]]
	n := h.lru.Len()
	h.mu.Unlock()
	if cached || n != 2 {
		t.Fatalf("cache of two holds %d, the least recently read still in: %v", n, cached)
	}
	publishEvents(t, bus, ids[0], historyLimit+5, 1)
	got, _ = h.read(ctx, bus, ids[0], false)
	sameHistory(t, bus, ids[0], got)

	// The cache stays within its bound of events.
	h.mu.Lock()
	events, jobs := h.events, h.lru.Len()
	h.mu.Unlock()
	if events > 1000 {
		t.Fatalf("cache holds %d events in %d histories, bound 1000", events, jobs)
	}

	// Readers while a writer adds events: every read is a prefix of the
	// final history, ending no earlier than any read before it.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := h.read(ctx, bus, ids[1], false)
				if err != nil {
					t.Error(err)
					return
				}
				if n := len(got); n > 0 {
					if got[n-1].Seq < last {
						t.Errorf("a read went back from seq %d to %d", last, got[n-1].Seq)
						return
					}
					last = got[n-1].Seq
				}
			}
		}()
	}
	publishEvents(t, bus, ids[1], 2, 100)
	close(stop)
	wg.Wait()
	got, _ = h.read(ctx, bus, ids[1], false)
	sameHistory(t, bus, ids[1], got)

	// A settled history (its job long finished) is read once more, then
	// taken from the cache without asking the stream.
	got, _ = h.read(ctx, bus, ids[2], true)
	sameHistory(t, bus, ids[2], got)
	publishEvents(t, bus, ids[2], 2, 1)
	if again, _ := h.read(ctx, bus, ids[2], true); len(again) != len(got) {
		t.Fatalf("a settled history was asked for again: %d events, then %d", len(got), len(again))
	}
	got, _ = h.read(ctx, bus, ids[2], false)
	sameHistory(t, bus, ids[2], got)

	h.forget(ids[1])
	h.mu.Lock()
	_, cached = h.byID[ids[1]]
	h.mu.Unlock()
	if cached {
		t.Fatal("a deleted job's history is still cached")
	}
}
