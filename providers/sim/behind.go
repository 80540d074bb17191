package sim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// The cloud writes its instance records behind its lock, not under it: a
// change queues the record (the latest version of each instance wins) and
// one writer stores what is queued, many records at once, while launches,
// terminations and listings go on. What callers and watchers see is as if
// every write were made in place:
//
//   - a call returns once the writes it made (and any made before them)
//     are done: a launch or termination that returned is stored, so a
//     restart neither buys it again nor brings it back;
//   - an event waits for the writes queued before it: a watcher never
//     hears of a change a crash could undo;
//   - a launch whose records could not be stored is undone before anyone
//     is told it happened, as if the cloud had refused it;
//   - Close stores whatever is still queued.

// storeWriters bounds the record writes under way at once.
const storeWriters = 64

// queuedWrite is an instance's record to store (b), or to delete (b nil).
type queuedWrite struct {
	id string
	in *instance
	b  []byte
}

// heldEvent is an event that waits for the writes queued before it.
type heldEvent struct {
	e     providers.Event
	after uint64
}

// behind is the cloud's queue of record writes; its fields are under the
// cloud's mu, but pending.
type behind struct {
	queue   map[string]queuedWrite // by instance ID
	seq     uint64                 // writes queued so far
	done    uint64                 // every write queued up to here is done (stored or failed)
	held    []heldEvent
	flushed *sync.Cond // on mu: done moved on
	kick    chan struct{}
	quit    chan struct{} // closed by Close: store what is queued and stop
	stopped chan struct{} // closed when the writer has stopped
	// pending counts writes queued or under way and events held, for Busy.
	pending atomic.Int64
}

func (c *Cloud) startWriter() {
	c.bh = behind{queue: map[string]queuedWrite{}, flushed: sync.NewCond(&c.mu),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	go c.writer()
}

// queueLocked queues the write of an instance's record (or its delete).
func (c *Cloud) queueLocked(id string, in *instance, b []byte) {
	c.bh.seq++
	if _, ok := c.bh.queue[id]; !ok {
		c.bh.pending.Add(1)
	}
	c.bh.queue[id] = queuedWrite{id: id, in: in, b: b}
	select {
	case c.bh.kick <- struct{}{}:
	default:
	}
}

// emitLocked queues an event for every watcher, each with its own copy,
// once the writes queued before it are done.
func (c *Cloud) emitLocked(e providers.Event) {
	if c.store == nil || (c.bh.done == c.bh.seq && len(c.bh.held) == 0) {
		c.watchers.Emit(e)
		return
	}
	c.bh.held = append(c.bh.held, heldEvent{e: e, after: c.bh.seq})
	c.bh.pending.Add(1)
}

// awaitLocked waits, mu held (and released while it waits), until the
// writes queued up to seq are done.
func (c *Cloud) awaitLocked(seq uint64) {
	for c.store != nil && c.bh.done < seq {
		c.bh.flushed.Wait()
	}
}

// writer stores queued records until Close, then what is left.
func (c *Cloud) writer() {
	defer close(c.bh.stopped)
	for {
		select {
		case <-c.bh.kick:
			c.writeQueued()
		case <-c.bh.quit:
			for c.writeQueued() {
			}
			return
		}
	}
}

// writeQueued stores everything queued, several records at once, then
// undoes the launches that could not be stored and lets the events that
// waited for these writes go. It reports whether anything was queued.
func (c *Cloud) writeQueued() bool {
	c.mu.Lock()
	if len(c.bh.queue) == 0 {
		c.mu.Unlock()
		return false
	}
	batch := make([]queuedWrite, 0, len(c.bh.queue))
	for _, w := range c.bh.queue {
		batch = append(batch, w)
	}
	clear(c.bh.queue)
	upTo := c.bh.seq
	c.mu.Unlock()

	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	sem := make(chan struct{}, storeWriters)
	for i, w := range batch {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), storeTimeout)
			defer cancel()
			if w.b == nil {
				errs[i] = c.store.Delete(ctx, storeKey(w.id))
			} else {
				_, errs[i] = c.store.Put(ctx, storeKey(w.id), w.b)
			}
		}()
	}
	wg.Wait()

	c.mu.Lock()
	for i, w := range batch {
		c.wroteLocked(w, errs[i])
	}
	c.bh.done = upTo
	n := 0
	for n < len(c.bh.held) && c.bh.held[n].after <= upTo {
		c.watchers.Emit(c.bh.held[n].e)
		n++
	}
	c.bh.held = slices.Delete(c.bh.held, 0, n)
	c.bh.pending.Add(-int64(len(batch) + n))
	c.bh.flushed.Broadcast()
	c.mu.Unlock()
	return true
}

// wroteLocked takes the outcome of one write.
func (c *Cloud) wroteLocked(w queuedWrite, err error) {
	_, newer := c.bh.queue[w.id]
	if w.b == nil {
		if err != nil {
			c.log.Warn("old instance record not deleted", zap.String("instance", w.id), zap.Error(err))
		}
		return
	}
	in := w.in
	if err == nil {
		in.unstored = false
		if c.unsaved[w.id] == in {
			delete(c.unsaved, w.id)
		}
		return
	}
	if in.unstored && !newer {
		// Its launch never was: nothing of it is left, here or stored.
		c.log.Warn("launch not stored, undone", zap.String("instance", w.id), zap.Error(err))
		c.unlaunchLocked(in)
		return
	}
	if !newer && c.insts[w.id] == in {
		c.unsaved[w.id] = in // written again by the cloud's next call
	}
	c.log.Warn("instance record not stored, will retry", zap.String("instance", w.id), zap.Error(err))
}

// unlaunchLocked undoes the launch of an instance whose record could not
// be stored: it leaves the cloud as if it had never been bought.
func (c *Cloud) unlaunchLocked(in *instance) {
	id := in.rec.Instance.ID
	if c.insts[id] != in {
		return
	}
	in.undone = true
	if !in.rec.Instance.State.Ended() {
		c.holdSlotsLocked(&in.rec.Instance, -1)
		if o, ok := c.offers[in.rec.Offer]; ok {
			o.live--
			c.counted[o.region] = true
		}
		if in.stop != nil {
			c.fx.stops = append(c.fx.stops, in.stop)
			in.stop = nil
		}
	}
	c.forgetLocked(in)
	c.queueLocked(id, nil, nil) // another node of its launch may be stored
}

// forgetLocked drops an instance from memory.
func (c *Cloud) forgetLocked(in *instance) {
	i := in.rec.Instance
	delete(c.insts, i.ID)
	delete(c.unsaved, i.ID)
	c.unlistLocked(in)
	in.gone = true
	ids := slices.DeleteFunc(c.byKey[i.IdempotencyKey], func(x string) bool { return x == i.ID })
	if len(ids) == 0 {
		delete(c.byKey, i.IdempotencyKey)
	} else {
		c.byKey[i.IdempotencyKey] = ids
	}
}

// stopWriter stores what is queued and stops the writer.
func (c *Cloud) stopWriter() {
	if c.store == nil {
		return
	}
	close(c.bh.quit)
	<-c.bh.stopped
}
