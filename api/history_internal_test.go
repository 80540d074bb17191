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
func sameHistory(t *testing.T, h *histories, bus *events.Bus, id string, got []events.HistoryEntry) {
	t.Helper()
	want, err := bus.JobHistory(context.Background(), id, nil, historyLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("history of %s has %d events, the stream %d", id, len(got), len(want))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[id]; el != nil {
		for _, e := range el.Value.(*history).entries {
			if e.Envelope.Data != nil || e.Envelope.ID != "" {
				t.Fatalf("the cache keeps event %d of %s with its envelope (%d bytes of data): a view shows only its time", e.Seq, id, len(e.Envelope.Data))
			}
		}
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Event.Message != want[i].Event.Message || !got[i].Envelope.Time.Equal(want[i].Envelope.Time) || got[i].Event.JobID != id {
			t.Fatalf("event %d of %s is seq %d %q, the stream's seq %d %q", i, id, got[i].Seq, got[i].Event.Message, want[i].Seq, want[i].Event.Message)
		}
	}
}

// A cached history stays what the stream holds as events are added, past
// the limit of events a view shows, as other jobs push it out of the cache
// and bring it back, and with readers and a writer at once.
func TestCachedHistoriesAreWhatTheStreamHolds(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	h := newHistories(2, 1000, 2, 1000)
	ctx := context.Background()
	ids := []string{job.NewID(time.Now()), job.NewID(time.Now().Add(time.Millisecond)), job.NewID(time.Now().Add(2 * time.Millisecond))}

	if got, err := h.read(ctx, bus, ids[0], nil, false); err != nil || len(got) != 0 {
		t.Fatalf("a job with no history: %d events, %v", len(got), err)
	}
	publishEvents(t, bus, ids[0], 0, 3)
	got, err := h.read(ctx, bus, ids[0], nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameHistory(t, h, bus, ids[0], got)
	publishEvents(t, bus, ids[0], 3, 2)
	got, _ = h.read(ctx, bus, ids[0], nil, false)
	sameHistory(t, h, bus, ids[0], got)

	// Past what a view shows: the newest historyLimit.
	publishEvents(t, bus, ids[0], 5, historyLimit)
	got, _ = h.read(ctx, bus, ids[0], nil, false)
	sameHistory(t, h, bus, ids[0], got)
	if got[len(got)-1].Event.Message != fmt.Sprint(historyLimit+4) {
		t.Fatalf("newest event is %q", got[len(got)-1].Event.Message)
	}

	// Two more jobs in a cache of two: the first goes, and comes back right.
	for _, id := range ids[1:] {
		publishEvents(t, bus, id, 0, 2)
		got, _ := h.read(ctx, bus, id, nil, false)
		sameHistory(t, h, bus, id, got)
	}
	h.mu.Lock()
	_, cached := h.byID[ids[0]]
	n := h.lru.Len()
	h.mu.Unlock()
	if cached || n != 2 {
		t.Fatalf("cache of two holds %d, the least recently read still in: %v", n, cached)
	}
	publishEvents(t, bus, ids[0], historyLimit+5, 1)
	got, _ = h.read(ctx, bus, ids[0], nil, false)
	sameHistory(t, h, bus, ids[0], got)

	// The cache stays within its bound of events.
	h.mu.Lock()
	events, jobs := h.lru.events, h.lru.Len()
	h.mu.Unlock()
	if events > 1000 {
		t.Fatalf("cache holds %d events in %d histories, bound 1000", events, jobs)
	}

	// Readers while a writer adds events.
	readWhilePublishing(t, h, bus, ids[1], 2, 100)
	got, _ = h.read(ctx, bus, ids[1], nil, false)
	sameHistory(t, h, bus, ids[1], got)

	// A settled history (its job long finished) is read once more, then
	// taken from the cache without asking the stream.
	got, _ = h.read(ctx, bus, ids[2], nil, true)
	sameHistory(t, h, bus, ids[2], got)
	publishEvents(t, bus, ids[2], 2, 1)
	if again, _ := h.read(ctx, bus, ids[2], nil, true); len(again) != len(got) {
		t.Fatalf("a settled history was asked for again: %d events, then %d", len(got), len(again))
	}
	got, _ = h.read(ctx, bus, ids[2], nil, false)
	sameHistory(t, h, bus, ids[2], got)

	h.forget(ids[1])
	h.mu.Lock()
	_, cached = h.byID[ids[1]]
	h.mu.Unlock()
	if cached {
		t.Fatal("a deleted job's history is still cached")
	}
}

// followedState is whether the cache follows a job's history and holds
// how many events of it.
func followedState(h *histories, id string) (followed, checked bool, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[id]; el != nil {
		old := el.Value.(*history)
		return old.followed, old.checked, len(old.entries)
	}
	return false, false, 0
}

// waitFollowed waits until the follower holds n events of a job.
func waitFollowed(t *testing.T, h *histories, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		followed, _, got := followedState(h, id)
		if followed && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower holds %d events of %s (followed %v), want %d", got, id, followed, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func publishQueued(t *testing.T, bus *events.Bus, id string) {
	t.Helper()
	if err := bus.Publish(context.Background(), events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindQueued, State: job.Queued, Message: "queued"}); err != nil {
		t.Fatal(err)
	}
}

// The histories of jobs submitted while the cache follows the stream are
// kept from their first event on, and a read of one is what the stream
// holds: after the follower, ahead of it, when an event of the job was
// stored before its first one (a race with the submission), when the
// follower's own bound pushed it out, and with readers while events are
// added.
func TestFollowedHistoriesAreWhatTheStreamHolds(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	h := newHistories(2, 1000, 2, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopFollow, err := bus.FollowJobEvents(ctx, h.observe)
	if err != nil {
		t.Fatal(err)
	}
	defer stopFollow()
	now := time.Now()
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = job.NewID(now.Add(time.Duration(i) * time.Millisecond))
	}

	// Followed from "queued" on, then read: the read checks where the
	// history starts and asks for what is new.
	publishQueued(t, bus, ids[0])
	publishEvents(t, bus, ids[0], 0, 3)
	waitFollowed(t, h, ids[0], 4)
	got, err := h.read(ctx, bus, ids[0], nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameHistory(t, h, bus, ids[0], got)
	if followed, checked, _ := followedState(h, ids[0]); !followed || !checked {
		t.Fatalf("after a read: followed %v, checked %v; want both", followed, checked)
	}
	// Events after the read reach the cache through the follower.
	publishEvents(t, bus, ids[0], 3, 2)
	waitFollowed(t, h, ids[0], 6)
	got, _ = h.read(ctx, bus, ids[0], nil, false)
	sameHistory(t, h, bus, ids[0], got)
	// A read ahead of the follower: published and read at once.
	publishEvents(t, bus, ids[0], 5, 1)
	got, _ = h.read(ctx, bus, ids[0], nil, false)
	sameHistory(t, h, bus, ids[0], got)
	waitFollowed(t, h, ids[0], 7)
	got, _ = h.read(ctx, bus, ids[0], nil, false)
	sameHistory(t, h, bus, ids[0], got)
	// An event the cache has already (read before the follower came to
	// it) is not added twice.
	h.observe(got[len(got)-1])
	if _, _, n := followedState(h, ids[0]); n != 7 {
		t.Fatalf("an event seen twice: the cache holds %d events, want 7", n)
	}

	// An event of the job stored before its "queued": the follower starts
	// at "queued", the read finds an earlier first event and reads it all.
	publishEvents(t, bus, ids[1], 0, 1)
	publishQueued(t, bus, ids[1])
	publishEvents(t, bus, ids[1], 1, 1)
	waitFollowed(t, h, ids[1], 2)
	got, _ = h.read(ctx, bus, ids[1], nil, false)
	sameHistory(t, h, bus, ids[1], got)
	if len(got) != 3 {
		t.Fatalf("the history with an event before its first has %d events, want 3", len(got))
	}
	if followed, _, _ := followedState(h, ids[1]); followed {
		t.Fatal("a history found incomplete is still taken as followed")
	}

	// Followed histories nobody read are bounded apart from those read:
	// three more push the oldest of them out, not the ones read.
	for _, id := range ids[2:] {
		publishQueued(t, bus, id)
	}
	waitFollowed(t, h, ids[4], 1)
	h.mu.Lock()
	fresh, read := h.fresh.Len(), h.lru.Len()
	_, kept := h.byID[ids[2]]
	h.mu.Unlock()
	if fresh != 2 || read != 2 || kept {
		t.Fatalf("followed unread %d, read %d (bounds 2), the oldest unread kept: %v", fresh, read, kept)
	}
	got, _ = h.read(ctx, bus, ids[2], nil, false)
	sameHistory(t, h, bus, ids[2], got)

	// Readers while events are added.
	readWhilePublishing(t, h, bus, ids[3], 0, 100)
	waitFollowed(t, h, ids[3], 101)
	got, _ = h.read(ctx, bus, ids[3], nil, false)
	sameHistory(t, h, bus, ids[3], got)
}

// readWhilePublishing reads a job's history from 8 goroutines while n
// events are published: every read is the start of the history as the
// stream holds it in the end (what the stream held at some point), and no
// reader's reads go back.
func readWhilePublishing(t *testing.T, h *histories, bus *events.Bus, id string, from, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	reads := make([][][]uint64, 8)
	for r := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := h.read(ctx, bus, id, nil, false)
				if err != nil {
					t.Error(err)
					return
				}
				seqs := make([]uint64, len(got))
				for i, e := range got {
					seqs[i] = e.Seq
				}
				reads[r] = append(reads[r], seqs)
			}
		}()
	}
	publishEvents(t, bus, id, from, n)
	close(stop)
	wg.Wait()
	want, err := bus.JobHistory(ctx, id, nil, historyLimit)
	if err != nil {
		t.Fatal(err)
	}
	for r, mine := range reads {
		last := 0
		for _, seqs := range mine {
			if len(seqs) < last {
				t.Fatalf("reader %d went back from %d events to %d", r, last, len(seqs))
			}
			last = len(seqs)
			for i, seq := range seqs {
				if i >= len(want) || want[i].Seq != seq {
					t.Fatalf("reader %d read seq %d as event %d of %v: not the stream's history", r, seq, i, seqs)
				}
			}
		}
	}
}
