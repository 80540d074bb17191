package providers

import (
	"context"
	"slices"
	"sync"
)

// Watchers is the fan-out behind a provider's Watch: every open Watch call
// has its own queue, and the provider never waits for a sink. Emit
// appends to every queue and each Watch goroutine delivers from its own.
//
// A queue stays bounded without losing anything that matters: an offers
// event carries the full offer list of its region, so a newer one replaces
// an undelivered older one of the same provider and region (moved to the
// back, so nothing is delivered ahead of what happened before it). That
// leaves at most one offers event per region; instance and interruption
// events are never dropped, and there are only as many of them as
// transitions and notices.
//
// The zero value is ready to use; its methods are safe for concurrent use.
type Watchers struct {
	mu     sync.Mutex
	queues map[*EventQueue]struct{}
}

// Open registers a new queue; Emit reaches it until Close.
func (ws *Watchers) Open() *EventQueue {
	q := &EventQueue{ready: make(chan struct{}, 1)}
	ws.mu.Lock()
	if ws.queues == nil {
		ws.queues = map[*EventQueue]struct{}{}
	}
	ws.queues[q] = struct{}{}
	ws.mu.Unlock()
	return q
}

// Close unregisters q and returns how many queues are still open.
func (ws *Watchers) Close(q *EventQueue) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.queues, q)
	return len(ws.queues)
}

// Pending counts the events emitted and not yet handled: waiting in a
// queue or in a sink's hands. Tests read it to know that every event a
// provider emitted has been carried on before they move time on.
func (ws *Watchers) Pending() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for q := range ws.queues {
		q.mu.Lock()
		n += len(q.queue) + q.delivering
		q.mu.Unlock()
	}
	return n
}

// Len is how many queues are open.
func (ws *Watchers) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.queues)
}

// Emit queues e on every open queue, each with its own copy of the offers
// and the instance, so no sink can change what another one sees.
func (ws *Watchers) Emit(e Event) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for q := range ws.queues {
		q.Push(e.clone())
	}
}

func (e Event) clone() Event {
	e.Offers = slices.Clone(e.Offers)
	if e.Instance != nil {
		inst := *e.Instance
		e.Instance = &inst
	}
	return e
}

// EventQueue is one Watch call's queue of undelivered events.
type EventQueue struct {
	mu    sync.Mutex
	queue []Event
	ready chan struct{} // has a value when queue may be non-empty
	// delivering counts the events taken from queue whose sink has not
	// returned yet.
	delivering int
}

// Push appends e; an offers event replaces, in its place in line, an
// undelivered one of the same provider and region. In its place: when the
// sink is slower than prices move (a busy server, a fast simulated
// cloud), every region's news is still delivered within one pass over the
// queue. Moved to the back, the regions of every price step lined up in
// the same order again, and the sink only ever got to the first few.
func (q *EventQueue) Push(e Event) {
	q.mu.Lock()
	i := -1
	if e.Kind == EventOffers {
		i = slices.IndexFunc(q.queue, func(o Event) bool {
			return o.Kind == EventOffers && o.Provider == e.Provider && o.Region == e.Region
		})
	}
	if i >= 0 {
		q.queue[i] = e
	} else {
		q.queue = append(q.queue, e)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Ready has a value when events may be waiting; then call Deliver.
func (q *EventQueue) Ready() <-chan struct{} { return q.ready }

// Deliver hands the waiting events to sink, oldest first, until the queue
// is empty or ctx ends. Events are taken one at a time so that whatever
// has not reached the sink yet can still be coalesced.
func (q *EventQueue) Deliver(ctx context.Context, sink func(Event)) {
	for ctx.Err() == nil {
		e, ok := q.pop()
		if !ok {
			return
		}
		sink(e)
		q.mu.Lock()
		q.delivering--
		q.mu.Unlock()
	}
}

func (q *EventQueue) pop() (Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		return Event{}, false
	}
	e := q.queue[0]
	q.queue[0] = Event{}
	q.queue = q.queue[1:]
	q.delivering++ // in the same step: never counted as neither
	return e, true
}
