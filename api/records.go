package api

import (
	"container/list"
	"sync"
	"time"

	"github.com/spotwise/spotwise/job"
)

// records holds the records of finished jobs read lately. A finished job's
// record seldom changes, and an old one lives in a part of the store that
// is no longer in memory: reading it again from the cache spares a load
// from disk. Live jobs are always read from the store (they change all the
// time and are in its memory). The index's watch keeps every cached record
// current.
type records struct {
	mu   sync.Mutex
	max  int
	byID map[string]*list.Element
	lru  list.List // of *cachedRecord, the most recently read first
}

type cachedRecord struct {
	rec *job.Record
	rev uint64
	at  time.Time // when this revision was cached (wall time)
}

func newRecords(max int) *records {
	return &records{max: max, byID: map[string]*list.Element{}}
}

// get returns a cached record (it must not be changed) and since when it
// has been the job's.
func (c *records) get(id string) (*job.Record, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el == nil {
		return nil, time.Time{}, false
	}
	c.lru.MoveToFront(el)
	cr := el.Value.(*cachedRecord)
	return cr.rec, cr.at, true
}

// put caches a finished job's record read at revision rev, unless a newer
// one is cached; a record of a live job (or none: the job was deleted)
// drops the job from the cache.
func (c *records) put(id string, r *job.Record, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el != nil && el.Value.(*cachedRecord).rev >= rev {
		return
	}
	if r == nil || !r.Status.State.Terminal() {
		if el != nil {
			c.lru.Remove(el)
			delete(c.byID, id)
		}
		return
	}
	if el != nil {
		el.Value = &cachedRecord{rec: r, rev: rev, at: time.Now()}
		c.lru.MoveToFront(el)
		return
	}
	c.byID[id] = c.lru.PushFront(&cachedRecord{rec: r, rev: rev, at: time.Now()})
	for c.lru.Len() > c.max {
		old := c.lru.Remove(c.lru.Back()).(*cachedRecord)
		delete(c.byID, old.rec.ID)
	}
}

// changed brings a cached record up to a change the watch saw.
func (c *records) changed(id string, r *job.Record, rev uint64) {
	c.mu.Lock()
	_, cached := c.byID[id]
	c.mu.Unlock()
	if cached {
		c.put(id, r, rev)
	}
}
