package api

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// index is the listing view of every job, kept by a watch on the job-state
// bucket so that listing 100,000 jobs reads memory, not the store.
//
// Jobs are ordered by submission time, then ID. IDs alone are not enough:
// a job submitted with an idempotency key gets an ID derived from the key,
// which says nothing about when it came.
type index struct {
	mu    sync.RWMutex
	byID  map[string]*entry
	order []*entry // listed jobs, oldest first
	ready chan struct{}
	// deleted, when set, is told of every job removed from the bucket.
	deleted func(id string)
	// recs, when set, is kept current with every change.
	recs *records
	// changed, when set, is told of every change applied (nil: the job
	// was deleted), with the index's lock held.
	changed func(id string, r *job.Record)
}

type entry struct {
	id string
	// rev is the bucket revision the entry reflects; older changes are
	// ignored, so the service's own writes (applied at once) and the
	// watch (applied when it catches up) can arrive in any order.
	rev uint64
	// deleted marks a job removed from the bucket; the entry stays so a
	// late change cannot bring it back, and so a cursor naming it still
	// has a place in the order.
	deleted    bool
	sum        Summary
	launchedAt time.Time
	finishedAt time.Time // set once the job is finished
	hourly     money.Micros
	endedCost  money.Micros
	// open are the job's charges still running (see openOf): what it has
	// cost that the ledger does not hold yet.
	open []spendSegment
	// baseline is the job's on-demand baseline (job.Status.BaselineCost).
	baseline money.Micros
	// ckptSince and ckptGB bill the job's checkpoint storage (see
	// job.Record.StorageAt).
	ckptSince time.Time
	ckptGB    float64
}

// cmpKey orders jobs by submission time, then ID.
func cmpKey(at time.Time, id string, bt time.Time, bid string) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	return strings.Compare(id, bid)
}

func newIndex() *index {
	return &index{byID: map[string]*entry{}, ready: make(chan struct{})}
}

func (ix *index) start(ctx context.Context, store *events.JobStore) error {
	var once sync.Once
	_, err := store.Watch(ctx, ix.apply, func() { once.Do(func() { close(ix.ready) }) })
	return err
}

// search returns where a job submitted at at with ID id is, or would be,
// in the order.
func (ix *index) search(at time.Time, id string) (int, bool) {
	return slices.BinarySearchFunc(ix.order, id, func(e *entry, id string) int {
		return cmpKey(e.sum.SubmittedAt, e.id, at, id)
	})
}

func (ix *index) insert(e *entry) {
	if n := len(ix.order); n == 0 || cmpKey(ix.order[n-1].sum.SubmittedAt, ix.order[n-1].id, e.sum.SubmittedAt, e.id) < 0 {
		ix.order = append(ix.order, e)
		return
	}
	if i, found := ix.search(e.sum.SubmittedAt, e.id); !found {
		ix.order = slices.Insert(ix.order, i, e)
	}
}

func (ix *index) remove(e *entry) {
	if i, found := ix.search(e.sum.SubmittedAt, e.id); found {
		ix.order = slices.Delete(ix.order, i, i+1)
	}
}

// apply records one change to the bucket, unless the index has already
// seen a newer one for the job.
func (ix *index) apply(c events.JobChange) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e, ok := ix.byID[c.ID]
	if ok && c.Revision <= e.rev {
		return
	}
	if ix.recs != nil {
		ix.recs.changed(c.ID, c.Record, c.Revision)
	}
	if ix.changed != nil {
		ix.changed(c.ID, c.Record)
	}
	if c.Record == nil {
		if !ok {
			e = &entry{id: c.ID}
			ix.byID[c.ID] = e
		} else if !e.deleted {
			ix.remove(e)
		}
		e.rev, e.deleted = c.Revision, true
		if ix.deleted != nil {
			ix.deleted(c.ID)
		}
		return
	}
	r := c.Record
	listed := false
	switch {
	case !ok:
		e = &entry{id: c.ID}
		ix.byID[c.ID] = e
	case !e.deleted && !e.sum.SubmittedAt.Equal(r.Status.SubmittedAt):
		ix.remove(e) // re-inserted below at its new place
	case !e.deleted:
		listed = true
	}
	e.rev, e.deleted = c.Revision, false
	// Names and teams repeat across many jobs: keep one copy of each.
	e.sum = Summary{ID: e.id, Name: unique.Make(r.Spec.Name).Value(), Team: unique.Make(r.Spec.Team).Value(), Priority: r.Spec.Prio(),
		State: r.Status.State, Placement: lastPlacement(r), Progress: r.Status.Progress, SubmittedAt: r.Status.SubmittedAt}
	e.endedCost, e.launchedAt, e.hourly, e.finishedAt = r.Status.EndedCost, time.Time{}, 0, time.Time{}
	if r.Status.State.Terminal() {
		e.finishedAt = r.Status.FinishedAt
		if e.finishedAt.IsZero() {
			e.finishedAt = r.Status.UpdatedAt
		}
	}
	if a := r.Status.Current; a != nil && !a.LaunchedAt.IsZero() {
		e.launchedAt, e.hourly = a.LaunchedAt, a.Placement.HourlyCost()
		e.endedCost += a.Transfer + a.DataTransfer
	}
	e.open = openOf(r)
	e.ckptSince, e.ckptGB = r.Status.CheckpointSince, 0
	if ck := r.Status.Checkpoint; ck != nil {
		e.ckptGB = float64(ck.Size) / 1e9
	}
	e.baseline = r.Status.BaselineCost
	if !listed {
		ix.insert(e)
	}
}

// cache caches a record read from the store at revision rev, unless the
// index has seen a newer change: with the index's lock held, a change the
// watch brings meanwhile either came first (and the read is not cached)
// or comes after (and updates the cached one).
func (ix *index) cache(r *job.Record, rev uint64) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if e, ok := ix.byID[r.ID]; ok && e.rev > rev {
		return
	}
	ix.recs.put(r.ID, r, rev)
}

// Query filters a listing.
type Query struct {
	States []job.State
	Team   string
	Name   string
	// Provider keeps the jobs whose current (or last) placement is on
	// this provider.
	Provider string
	// Search keeps the jobs whose name contains it or whose ID starts
	// with it.
	Search string
	// Limit is the page size (default 100, at most 1000).
	Limit int
	// After continues a listing: the jobs listed after this one (the Next
	// of the previous page), which are the ones submitted before it.
	After string
}

// list returns jobs newest first; ok is false when q.After names a job the
// index cannot place.
func (ix *index) list(q Query, now time.Time) (list JobList, ok bool) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	end := len(ix.order)
	if q.After != "" {
		var at time.Time
		if e, known := ix.byID[q.After]; known {
			at = e.sum.SubmittedAt
		} else if at, ok = idTime(q.After); !ok {
			return JobList{}, false
		}
		end, _ = ix.search(at, q.After)
	}
	out := JobList{Jobs: []Summary{}}
	for i := end - 1; i >= 0; i-- {
		e := ix.order[i]
		if len(q.States) > 0 && !slices.Contains(q.States, e.sum.State) {
			continue
		}
		if q.Team != "" && e.sum.Team != q.Team {
			continue
		}
		if q.Name != "" && !strings.Contains(e.sum.Name, q.Name) {
			continue
		}
		if q.Provider != "" && (e.sum.Placement == nil || e.sum.Placement.Provider != q.Provider) {
			continue
		}
		if q.Search != "" && !strings.Contains(e.sum.Name, q.Search) && !strings.HasPrefix(e.id, q.Search) {
			continue
		}
		if len(out.Jobs) == limit {
			out.Next = out.Jobs[len(out.Jobs)-1].ID
			break
		}
		out.Jobs = append(out.Jobs, e.summaryAt(now))
	}
	return out, true
}

// idTime reads the submission time (to the millisecond) out of a
// time-ordered job ID (job.NewID): its first 48 bits are Unix
// milliseconds. IDs derived from idempotency keys carry no time.
func idTime(id string) (time.Time, bool) {
	const digits = "0123456789abcdefghjkmnpqrstvwxyz"
	s := strings.TrimPrefix(id, "j-")
	if len(s) != 26 || s[0] > '7' {
		return time.Time{}, false
	}
	// 26 base-32 digits are 130 bits, the top two always zero, so the
	// first 10 digits (50 bits) are the ID's top 48 bits.
	var v uint64
	for _, c := range s[:10] {
		d := strings.IndexRune(digits, c)
		if d < 0 {
			return time.Time{}, false
		}
		v = v<<5 | uint64(d)
	}
	return time.UnixMilli(int64(v)), true
}

// teamOf is a job's team, if the index knows the job.
func (ix *index) teamOf(id string) (string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.byID[id]
	if !ok || e.deleted {
		return "", false
	}
	return e.sum.Team, true
}

// summary is a job as a listing shows it now, if the index knows it.
func (ix *index) summary(id string, now time.Time) (Summary, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.byID[id]
	if !ok || e.deleted {
		return Summary{}, false
	}
	return e.summaryAt(now), true
}

// summaryAt is the entry's summary with its cost as of now.
func (e *entry) summaryAt(now time.Time) Summary {
	s := e.sum
	s.CostUSD = e.endedCost
	if !e.launchedAt.IsZero() && now.After(e.launchedAt) {
		s.CostUSD += e.hourly.ForDuration(now.Sub(e.launchedAt))
	}
	if !e.ckptSince.IsZero() {
		end := now
		if !e.finishedAt.IsZero() && e.finishedAt.Before(end) {
			end = e.finishedAt
		}
		s.CostUSD += money.StorageCost(money.ObjectStoragePerGBMonth, e.ckptGB, end.Sub(e.ckptSince))
	}
	return s
}
