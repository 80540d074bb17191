package api

import (
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
)

// A client that does not keep up is let go, told why, while the others
// get every event: the hub never waits for anyone.
func TestHubDropsASlowClientWithoutStallingOthers(t *testing.T) {
	clk := clock.NewFake(base)
	bus := eventstest.NewBus(t, clk)
	svc := NewService(bus, nil, clk, nil).WithStreams(StreamOptions{Buffer: 4})
	slow, quick := &watcher{}, &watcher{}
	for _, w := range []*watcher{slow, quick} {
		if err := svc.hub.add(w); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(svc.hub.Close)
	// The quick client has room for everything: however its reader is
	// scheduled, it is never the one behind.
	svc.hub.mu.Lock()
	quick.ch = make(chan watchItem, 64)
	svc.hub.mu.Unlock()
	id := job.NewID(base)
	const n = 40
	got := make(chan int, 1)
	go func() {
		count := 0
		for count < n {
			select {
			case <-quick.ch:
				count++
			case <-quick.gone:
				got <- -1
				return
			}
		}
		got <- count
	}()
	for range n {
		if err := bus.Publish(t.Context(), events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: job.KindProgress, State: job.Running}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case c := <-got:
		if c != n {
			t.Fatalf("the quick client got %d of %d events", c, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the quick client stalled")
	}
	select {
	case <-slow.gone:
		if slow.why != EndSlow {
			t.Errorf("the slow client was let go for %q", slow.why)
		}
	default:
		t.Fatal("the slow client is still registered")
	}
	if open := svc.OpenStreams(); open != 1 {
		t.Errorf("%d streams counted open, want 1", open)
	}
}
