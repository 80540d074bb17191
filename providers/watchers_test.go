package providers

import (
	"context"
	"testing"
	"time"
)

func drain(q *EventQueue) []Event {
	var got []Event
	q.Deliver(context.Background(), func(e Event) { got = append(got, e) })
	return got
}

func TestWatchersCoalesceOffersButKeepEveryInstanceEvent(t *testing.T) {
	var ws Watchers
	q := ws.Open()
	offers := func(provider, region string, price int64) Event {
		return Event{Kind: EventOffers, Provider: provider, Region: region, Offers: []Offer{{Region: region}}, Time: time.Unix(price, 0)}
	}
	inst := func(id string) Event {
		return Event{Kind: EventInstanceRunning, Provider: "aws", Region: "us-east-1", Instance: &Instance{ID: id}}
	}
	ws.Emit(offers("aws", "us-east-1", 1))
	ws.Emit(inst("i-1"))
	ws.Emit(offers("aws", "eu-west-1", 2))
	ws.Emit(offers("azure", "us-east-1", 3)) // another provider's region of the same name
	ws.Emit(offers("aws", "us-east-1", 4))   // replaces the first, in its place
	ws.Emit(inst("i-2"))

	got := drain(q)
	var order []string
	for _, e := range got {
		if e.Kind == EventOffers {
			order = append(order, e.Provider+"/"+e.Region+"@"+e.Time.Format("05"))
		} else {
			order = append(order, e.Instance.ID)
		}
	}
	want := []string{"aws/us-east-1@04", "i-1", "aws/eu-west-1@02", "azure/us-east-1@03", "i-2"}
	if len(order) != len(want) {
		t.Fatalf("delivered %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("delivered %v, want %v", order, want)
		}
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("Ready had no value after events were pushed")
	}
	if more := drain(q); len(more) != 0 {
		t.Fatalf("delivered %d events twice", len(more))
	}
}

// A sink slower than the price steps still hears from every region: each
// step's news of a region waits in the place the region already had in
// line, so one pass over the queue reaches them all. (Moved to the back,
// every step lined the regions up in the same order again and a sink that
// delivered one region a step heard only from the first, forever: a
// region's jobs waited for offers that never came.)
func TestASlowSinkHearsFromEveryRegion(t *testing.T) {
	var ws Watchers
	q := ws.Open()
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1", "sa-east-1"}
	step := func(n int) {
		for _, r := range regions {
			ws.Emit(Event{Kind: EventOffers, Provider: "aws", Region: r, Time: time.Unix(int64(n), 0)})
		}
	}
	step(0)
	heard := map[string]int{}
	for n := 1; n <= 3*len(regions); n++ {
		// The sink delivers one event, and the prices move again.
		e, ok := q.pop()
		if !ok {
			t.Fatalf("step %d: nothing to deliver", n)
		}
		q.mu.Lock()
		q.delivering--
		q.mu.Unlock()
		heard[e.Region]++
		if e.Time.Unix() != int64(n-1) {
			t.Fatalf("step %d delivered %s's prices of step %d, not the newest", n, e.Region, e.Time.Unix())
		}
		step(n)
		if len(q.queue) > len(regions) {
			t.Fatalf("step %d: %d events waiting for %d regions", n, len(q.queue), len(regions))
		}
	}
	for _, r := range regions {
		if heard[r] != 3 {
			t.Errorf("%s delivered %d times in %d steps, want 3 (heard %v)", r, heard[r], 3*len(regions), heard)
		}
	}
}

func TestWatchersGiveEachQueueItsOwnCopy(t *testing.T) {
	var ws Watchers
	a, b := ws.Open(), ws.Open()
	ws.Emit(Event{Kind: EventOffers, Provider: "aws", Region: "r", Offers: []Offer{{Zone: "o1"}}})
	ws.Emit(Event{Kind: EventInstanceTerminated, Provider: "aws", Region: "r", Instance: &Instance{ID: "i-1"}})
	ga := drain(a)
	ga[0].Offers[0].Zone = "changed"
	ga[1].Instance.ID = "changed"
	gb := drain(b)
	if gb[0].Offers[0].Zone != "o1" || gb[1].Instance.ID != "i-1" {
		t.Fatalf("one sink's change reached another: %+v %+v", gb[0].Offers, gb[1].Instance)
	}
	if n := ws.Close(a); n != 1 {
		t.Fatalf("Close left %d open, want 1", n)
	}
	ws.Emit(Event{Kind: EventInstanceRunning, Instance: &Instance{ID: "i-2"}})
	if got := drain(a); len(got) != 0 {
		t.Fatalf("a closed queue still got %d events", len(got))
	}
	if got := drain(b); len(got) != 1 || ws.Len() != 1 {
		t.Fatalf("open queue got %d events, %d open", len(got), ws.Len())
	}
}

func TestDeliverStopsWhenContextEnds(t *testing.T) {
	var ws Watchers
	q := ws.Open()
	for range 3 {
		ws.Emit(Event{Kind: EventInstanceRunning, Instance: &Instance{ID: "i"}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	q.Deliver(ctx, func(Event) { n++; cancel() })
	if n != 1 {
		t.Fatalf("sink called %d times after its context ended, want 1", n)
	}
	if rest := drain(q); len(rest) != 2 {
		t.Fatalf("%d events left for a later Deliver, want 2", len(rest))
	}
}
