package sim

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// watcher is one Watch call's queue. The cloud never waits for a sink: it
// appends to the queue and the Watch goroutine delivers.
//
// The queue is bounded without losing anything that matters: an offers
// event carries the full offer list of its region, so a newer one replaces
// an undelivered older one of the same region (moved to the back, so no
// event is delivered ahead of one that happened before it). That leaves at
// most one offers event per region; instance events are never dropped, and
// there are only as many of them as instance transitions.
type watcher struct {
	mu     sync.Mutex
	queue  []providers.Event
	notify chan struct{} // has a value when queue may be non-empty
}

func (w *watcher) push(e providers.Event) {
	w.mu.Lock()
	if e.Kind == providers.EventOffers {
		w.queue = slices.DeleteFunc(w.queue, func(q providers.Event) bool {
			return q.Kind == providers.EventOffers && q.Provider == e.Provider && q.Region == e.Region
		})
	}
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// pop takes the oldest queued event. Events are taken one at a time so that
// everything not yet handed to the sink can still be coalesced.
func (w *watcher) pop() (providers.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return providers.Event{}, false
	}
	e := w.queue[0]
	w.queue[0] = providers.Event{}
	w.queue = w.queue[1:]
	return e, true
}

// Watch sends sink one EventOffers per region (the region's full offer
// list), then every change until ctx ends: offers events when prices move
// or capacity changes, instance events when instances start running, end or
// fail, and interruption events (spot interruption and maintenance notices
// with their Deadline, rebalance recommendations). Offers and instances
// carry the catalog provider's name, so (Event.Provider, Event.Region)
// names a region. sink is called from Watch's goroutine, one event at a
// time. Watch returns nil when ctx ends and ErrClosed if the cloud closes
// first.
func (c *Cloud) Watch(ctx context.Context, sink func(providers.Event)) error {
	w := &watcher{notify: make(chan struct{}, 1)}
	err := c.do(ctx, func(now time.Time) error {
		for _, rk := range c.regions {
			w.push(providers.Event{Kind: providers.EventOffers, Provider: rk.provider, Region: rk.region,
				Time: now, Offers: c.regionOffersLocked(rk, now)})
		}
		c.watchers[w] = struct{}{}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		c.mu.Lock()
		delete(c.watchers, w)
		c.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.done:
			return ErrClosed
		case <-w.notify:
		}
		for ctx.Err() == nil {
			e, ok := w.pop()
			if !ok {
				break
			}
			sink(e)
		}
	}
}

// emitLocked queues an event for every watcher, each with its own copy.
func (c *Cloud) emitLocked(e providers.Event) {
	for w := range c.watchers {
		e := e
		e.Offers = slices.Clone(e.Offers)
		if e.Instance != nil {
			inst := *e.Instance
			e.Instance = &inst
		}
		w.push(e)
	}
}

// emitInstanceLocked reports an instance transition that happened at t.
func (c *Cloud) emitInstanceLocked(kind providers.EventKind, in *instance, t time.Time) {
	inst := in.rec.Instance
	c.emitLocked(providers.Event{Kind: kind, Provider: inst.Provider, Region: inst.Region, Time: t,
		Instance: &inst, Reason: inst.Reason})
}
