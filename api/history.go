package api

import (
	"container/list"
	"context"
	"sync"

	"github.com/spotwise/spotwise/events"
)

// historyLimit is how many of a job's newest events a view shows.
const historyLimit = 500

// histories holds the histories of the jobs read lately, each with the
// stream sequence of its newest event, so that reading a job again asks
// the stream only for what came after (one request, most often answered
// "nothing new") instead of reading the whole history. It holds at most
// maxJobs histories and maxEvents events, the least recently read going
// first.
type histories struct {
	mu        sync.Mutex
	maxJobs   int
	maxEvents int
	events    int
	byID      map[string]*list.Element
	lru       list.List // of *history, the most recently read first
}

// history is one job's cached history. Its entries are never changed once
// stored (an update stores a new slice), so a reader may keep them.
type history struct {
	id      string
	entries []events.HistoryEntry // oldest first
	last    uint64                // the stream sequence read up to
	// settled: read when the job had been finished a while (see read).
	settled bool
}

func newHistories(maxJobs, maxEvents int) *histories {
	return &histories{maxJobs: maxJobs, maxEvents: maxEvents, byID: map[string]*list.Element{}}
}

// read returns a job's history, newest historyLimit events, as the
// stream has it now. When the stream does not answer it returns what it
// had, with the error.
//
// settled says the job has been finished, its record unchanged, for a
// while: its history is complete, and once read in that state it is not
// asked for again. (Asking the stream whether an old job's history has
// anything new costs a load from disk of the part of the store where it
// was written, every time.)
func (h *histories) read(ctx context.Context, bus *events.Bus, id string, settled bool) ([]events.HistoryEntry, error) {
	var base history
	h.mu.Lock()
	if el := h.byID[id]; el != nil {
		base = *el.Value.(*history)
		h.lru.MoveToFront(el)
	}
	h.mu.Unlock()
	if settled && base.settled {
		return base.entries, nil
	}
	newer, err := bus.JobHistoryAfter(ctx, id, base.last, historyLimit)
	if err == nil && len(newer) == 0 && base.id != "" && settled {
		h.store(&history{id: id, entries: base.entries, last: base.last, settled: true})
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
	h.store(&history{id: id, entries: merged, last: newer[len(newer)-1].Seq, settled: settled})
	return merged, nil
}

// store keeps a history, unless another read stored a newer one
// meanwhile.
func (h *histories) store(n *history) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[n.id]; el != nil {
		old := el.Value.(*history)
		if old.last > n.last || (old.last == n.last && (old.settled || !n.settled)) {
			return
		}
		h.events += len(n.entries) - len(old.entries)
		el.Value = n
		h.lru.MoveToFront(el)
	} else {
		h.byID[n.id] = h.lru.PushFront(n)
		h.events += len(n.entries)
	}
	for h.lru.Len() > 1 && (h.lru.Len() > h.maxJobs || h.events > h.maxEvents) {
		h.drop(h.lru.Back())
	}
}

func (h *histories) drop(el *list.Element) {
	old := h.lru.Remove(el).(*history)
	delete(h.byID, old.id)
	h.events -= len(old.entries)
}

// forget drops a job's history (the job was deleted).
func (h *histories) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el := h.byID[id]; el != nil {
		h.drop(el)
	}
}
