package events_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
)

// A history longer than one request's batch comes back whole and in order,
// from the start or from any sequence on, with another job's events in
// between left out and a garbled entry skipped.
func TestJobHistoryPagesThroughLongHistories(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	id, other := job.NewID(time.Now()), job.NewID(time.Now().Add(time.Millisecond))
	const n = 700
	for i := range n {
		if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := b.Publish(ctx, events.JobEventsSubject(other), &events.JobEvent{JobID: other, Kind: events.KindPending, State: job.Queued}); err != nil {
				t.Fatal(err)
			}
		}
		if i == 400 {
			if err := b.PublishRaw(ctx, events.JobEventsSubject(id), []byte("{garbled")); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := b.JobHistory(ctx, id, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("history has %d events, want %d", len(all), n)
	}
	for i, e := range all {
		if e.Event.Message != fmt.Sprint(i) || e.Event.JobID != id || (i > 0 && e.Seq <= all[i-1].Seq) {
			t.Fatalf("event %d is %+v (seq %d)", i, e.Event, e.Seq)
		}
	}
	newest, err := b.JobHistory(ctx, id, nil, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(newest) != 500 || newest[0].Seq != all[200].Seq || newest[499].Seq != all[n-1].Seq {
		t.Fatalf("the newest 500 are %d events from seq %d", len(newest), newest[0].Seq)
	}
	after, err := b.JobHistoryAfter(ctx, id, nil, all[349].Seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != n-350 || after[0].Seq != all[350].Seq {
		t.Fatalf("after event 349: %d events from seq %d", len(after), after[0].Seq)
	}
	none, err := b.JobHistoryAfter(ctx, id, nil, all[n-1].Seq, 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("after the newest: %d events, %v", len(none), err)
	}
	unknown, err := b.JobHistory(ctx, job.NewID(time.Now().Add(time.Second)), nil, 0)
	if err != nil || len(unknown) != 0 {
		t.Fatalf("a job with no history: %d events, %v", len(unknown), err)
	}
}

// A replay of every job's events hands over what the stream held before it
// was made, oldest first and marked old, says when it has caught up (after
// the last of them, garbled ones included), then goes on with new events
// marked new.
func TestReplayJobEventsCatchesUpThenFollows(t *testing.T) {
	ctx := t.Context()
	b := eventstest.NewBus(t, nil)
	id := job.NewID(time.Now())
	publish := func(msg string) {
		t.Helper()
		if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		publish(fmt.Sprint("old ", i))
	}
	if err := b.PublishRaw(ctx, events.JobEventsSubject(id), []byte("{garbled")); err != nil {
		t.Fatal(err)
	}
	type got struct {
		msg string
		old bool
	}
	seen := make(chan got, 16)
	caught := make(chan int, 1)
	n := 0
	stop, err := b.ReplayJobEvents(ctx, func(e events.HistoryEntry, old bool) {
		n++
		seen <- got{e.Event.Message, old}
	}, func() { caught <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	publish("new")
	want := []got{{"old 0", true}, {"old 1", true}, {"old 2", true}, {"new", false}}
	for i, w := range want {
		select {
		case g := <-seen:
			if g != w {
				t.Fatalf("event %d: %+v, want %+v", i, g, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d (%+v) never came", i, w)
		}
	}
	select {
	case at := <-caught:
		if at != 3 {
			t.Errorf("caught up after %d events, want after the 3 stored before (and the garbled one)", at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never caught up")
	}

	// On an empty stream it has caught up at once.
	empty := eventstest.NewBus(t, nil)
	now := make(chan struct{}, 1)
	stop2, err := empty.ReplayJobEvents(ctx, func(events.HistoryEntry, bool) {}, func() { now <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	select {
	case <-now:
	case <-time.After(10 * time.Second):
		t.Fatal("an empty stream's replay never caught up")
	}
}
