package api

import (
	"container/list"
	"context"
	"sync"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// historyLimit is how many of a job's newest events a view shows.
const historyLimit = 500

// histories holds the histories of the jobs read lately, each with the
// stream sequence of its newest event, so that reading a job again asks
// the stream only for what came after (one request, most often answered
// "nothing new") instead of reading the whole history.
//
// With the follower of every job's events (the hub's), it also holds the
// histories of the jobs submitted since, from their first event on, kept
// current as their events are stored: the first read of a job submitted
// lately (the page of a job just submitted, or running) is then a check
// and a request for what is new, not a read of its whole history.
//
// Both are bounded in jobs and events, the least recently read (or, for
// the followed ones not read yet, changed) going first; apart, so that a
// stream of submissions does not push out what readers read. The followed
// ones are kept fewer: objects that live for a while during a burst of
// submissions keep part-used pages of the heap after it.
type histories struct {
	mu    sync.Mutex
	byID  map[string]*list.Element
	lru   historyList // histories read, the most recently read first
	fresh historyList // followed, not read yet, the most recently changed first
}

// historyList is a list of *history with the number of events they hold,
// and its bounds.
type historyList struct {
	list.List
	events             int
	maxJobs, maxEvents int
}

// history is one job's cached history. Its entries are never changed once
// stored (an update stores a new slice, or appends past its end), so a
// reader may keep them.
type history struct {
	id      string
	entries []events.HistoryEntry // oldest first
	last    uint64                // the stream sequence read up to
	// settled: read when the job had been finished a while (see read).
	settled bool
	// followed: the follower started this history at the job's first
	// event, whose sequence is first, and adds every event of the job it
	// sees. checked: a read found first to be the first event the stream
	// holds for the job (an event stored just before the job's first one,
	// in a race with the submission, would be missing otherwise).
	followed bool
	first    uint64
	checked  bool
	// unread: in fresh (followed, not read yet) rather than lru.
	unread bool
}

// newHistories holds at most maxJobs histories read and maxEvents events
// in them, and at most followJobs and followEvents followed ones not read.
func newHistories(maxJobs, maxEvents, followJobs, followEvents int) *histories {
	h := &histories{byID: map[string]*list.Element{}}
	h.lru.maxJobs, h.lru.maxEvents = maxJobs, maxEvents
	h.fresh.maxJobs, h.fresh.maxEvents = followJobs, followEvents
	return h
}

// observe takes one stored job event from the follower: it starts the
// history of a job at its first event ("queued", stored at submission)
// and adds to the histories it follows. Events come in stream order.
func (h *histories) observe(e events.HistoryEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := e.Event.JobID
	el := h.byID[id]
	if el == nil {
		if e.Event.Kind != events.KindQueued {
			return
		}
		n := &history{id: id, entries: []events.HistoryEntry{compact(e, id)}, last: e.Seq, followed: true, first: e.Seq, unread: true}
		h.byID[id] = h.fresh.PushFront(n)
		h.fresh.events++
		h.trim(&h.fresh)
		return
	}
	old := el.Value.(*history)
	if !old.followed || e.Seq <= old.last {
		return
	}
	n := *old
	// Appended past the end the readers of old see: they keep theirs.
	n.entries = append(old.entries, compact(e, old.id))
	if len(n.entries) > historyLimit {
		n.entries = n.entries[len(n.entries)-historyLimit:]
	}
	n.last = e.Seq
	el.Value = &n
	l := h.listOf(&n)
	l.events += len(n.entries) - len(old.entries)
	l.MoveToFront(el)
	h.trim(l)
}

// compact is an event as the cache keeps it (see slim), leaving e, which
// the follower shares with the event streams, as it is.
func compact(e events.HistoryEntry, id string) events.HistoryEntry {
	ev := *e.Event
	e.Event = &ev
	slim(&e, id)
	return e
}

// slim keeps of an event what a view shows (its time and the event), with
// the job's ID and the kind shared rather than each event's own copies:
// thousands of histories are cached, those followed added to as their
// jobs change, and what they keep is what a burst of submissions leaves
// behind in the heap.
func slim(e *events.HistoryEntry, id string) {
	e.Envelope = events.Envelope{Time: e.Envelope.Time}
	e.Event.JobID = id
	if k, ok := kindNames[e.Event.Kind]; ok {
		e.Event.Kind = k
	}
}

// kindNames maps each job event kind to one shared copy of its name.
var kindNames = func() map[string]string {
	m := make(map[string]string, len(job.Kinds))
	for _, k := range job.Kinds {
		m[k] = k
	}
	return m
}()

func (h *histories) listOf(n *history) *historyList {
	if n.unread {
		return &h.fresh
	}
	return &h.lru
}

// read returns a job's history, newest historyLimit events, as the
// stream has it now (sealed: the seals of it the job's record names). When the stream does not answer it returns what it
// had, with the error.
//
// settled says the job has been finished, its record unchanged, for a
// while: its history is complete, and once read in that state it is not
// asked for again. (Asking the stream whether an old job's history has
// anything new costs a load from disk of the part of the store where it
// was written, every time.)
func (h *histories) read(ctx context.Context, bus *events.Bus, id string, sealed []uint64, settled bool) ([]events.HistoryEntry, error) {
	var base history
	h.mu.Lock()
	if el := h.byID[id]; el != nil {
		base = *el.Value.(*history)
		h.touch(el)
	}
	h.mu.Unlock()
	if settled && base.settled {
		return base.entries, nil
	}
	if base.followed && !base.checked {
		first, ok, err := bus.JobHistoryStart(ctx, id, sealed)
		if err != nil {
			return nil, err
		}
		if ok && first == base.first {
			base.checked = true
		} else {
			// Not the whole history: read it all.
			h.forgetIf(id, base.first)
			base = history{}
		}
	}
	newer, err := bus.JobHistoryAfter(ctx, id, sealed, base.last, historyLimit)
	for i := range newer {
		// Decoded by this read alone: slimmed in place.
		slim(&newer[i], id)
	}
	if err == nil && len(newer) == 0 && base.id != "" && (settled || base.followed) {
		n := base
		n.settled = settled
		h.store(&n)
	}
	if err != nil || len(newer) == 0 {
		if err == nil && base.id == "" {
			// Nothing stored yet: nothing to keep either.
			return nil, nil
		}
		return base.entries, err
	}
	merged := append(base.entries[:len(base.entries):len(base.entries)], newer...)
	if len(merged) > historyLimit {
		merged = merged[len(merged)-historyLimit:]
	}
	n := base
	n.id, n.entries, n.last, n.settled = id, merged, newer[len(newer)-1].Seq, settled
	h.store(&n)
	return merged, nil
}

// touch marks a history read: a followed one not read yet joins the
// histories read. h.mu is held.
func (h *histories) touch(el *list.Element) {
	old := el.Value.(*history)
	if !old.unread {
		h.lru.MoveToFront(el)
		return
	}
	h.fresh.Remove(el)
	h.fresh.events -= len(old.entries)
	n := *old
	n.unread = false
	h.byID[n.id] = h.lru.PushFront(&n)
	h.lru.events += len(n.entries)
	h.trim(&h.lru)
}

// store keeps a history read from the stream, unless another read (or
// the follower) stored a newer one meanwhile. A followed history stays
// followed: it holds every event up to its last, and the follower adds
// the ones after. A history read while none was cached is not followed:
// events the follower saw meanwhile would be missing.
func (h *histories) store(n *history) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[n.id]; el != nil {
		old := el.Value.(*history)
		followed := old.followed && old.first == n.first
		if followed && n.checked {
			old.checked = true
		}
		if old.last > n.last || (old.last == n.last && (old.settled || !n.settled)) {
			return
		}
		n.followed, n.unread = followed, old.unread
		n.checked = n.checked || old.checked
		l := h.listOf(old)
		l.events += len(n.entries) - len(old.entries)
		el.Value = n
		l.MoveToFront(el)
		h.trim(l)
		return
	}
	n.followed, n.unread = false, false
	h.byID[n.id] = h.lru.PushFront(n)
	h.lru.events += len(n.entries)
	h.trim(&h.lru)
}

// trim drops the least recently used histories of l past the bounds.
// h.mu is held.
func (h *histories) trim(l *historyList) {
	for l.Len() > 1 && (l.Len() > l.maxJobs || l.events > l.maxEvents) {
		h.drop(l.Back())
	}
}

func (h *histories) drop(el *list.Element) {
	old := el.Value.(*history)
	l := h.listOf(old)
	l.Remove(el)
	delete(h.byID, old.id)
	l.events -= len(old.entries)
}

// forgetIf drops a job's followed history started at first (found not to
// be the whole history).
func (h *histories) forgetIf(id string, first uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[id]; el != nil && el.Value.(*history).first == first {
		h.drop(el)
	}
}

// forget drops a job's history (the job was deleted).
func (h *histories) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[id]; el != nil {
		h.drop(el)
	}
}
