package sim

import (
	"context"
	"time"

	"github.com/spotwise/spotwise/providers"
)

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
	var w *providers.EventQueue
	err := c.do(ctx, func(now time.Time) error {
		w = c.watchers.Open()
		for _, rk := range c.regions {
			w.Push(providers.Event{Kind: providers.EventOffers, Provider: rk.provider, Region: rk.region,
				Time: now, Offers: c.regionOffersLocked(rk, now)})
		}
		return nil
	})
	if w != nil {
		defer c.watchers.Close(w)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.done:
			return ErrClosed
		case <-w.Ready():
		}
		w.Deliver(ctx, sink)
	}
}

// emitInstanceLocked reports an instance transition that happened at t.
func (c *Cloud) emitInstanceLocked(kind providers.EventKind, in *instance, t time.Time) {
	c.repriceLocked(in, t)
	inst := in.rec.Instance
	c.emitLocked(providers.Event{Kind: kind, Provider: inst.Provider, Region: inst.Region, Time: t,
		Instance: &inst, Reason: inst.Reason})
}

// Busy reports whether an event the cloud emitted has not been handled
// yet by its Watch's sink (queued, or being handed over). Tests that drive
// a fake clock wait for it before they move time on.
// A record write still to be done counts: the events it holds back are on
// their way.
func (c *Cloud) Busy() bool { return c.watchers.Pending() > 0 || c.bh.pending.Load() > 0 }
