package api

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/idmap"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// index is the listing view of every job, kept by a watch on the job-state
// bucket so that listing 1,000,000 jobs reads memory, not the store.
//
// Jobs are ordered by submission time, then ID. IDs alone are not enough:
// a job submitted with an idempotency key gets an ID derived from the key,
// which says nothing about when it came.
//
// An entry is kept small (see entry): most of a large store's jobs have
// finished, and a finished job's listing never changes.
type index struct {
	mu sync.RWMutex
	// changes counts the changes to the bucket seen (Service.Changes).
	changes atomic.Uint64
	// byID holds the entries, found by their job's ID (see internal/idmap:
	// about 8 bytes a job besides the entry, where a Go map of the IDs'
	// strings took 50-60 and the strings 32 more).
	byID idmap.Table[entry]
	// order are the listed jobs, oldest first; active the listed jobs not
	// finished, in the same order, so that a listing of running or queued
	// jobs does not walk the finished ones.
	order  jobOrder
	active jobOrder
	// betweenSlices, when set (tests), is called by a listing between two
	// slices of its read, the lock not held.
	betweenSlices func()
	// teams gives each team its bit in both orders' chunk masks.
	teams teamBits
	// growing holds, for each entry whose cost still grows (entry.grows
	// set), what it takes to work it out at any time: what a team's spend
	// so far adds up beside the ledger, without a walk over every job. It
	// is kept here, not in the entry: most entries are of finished jobs.
	growing map[*entry]*growingCost
	ready   chan struct{}
	// deleted, when set, is told of every job removed from the bucket.
	deleted func(id string)
	// recs, when set, is kept current with every change.
	recs *records
	// pages, when set, copies every change the watch brings.
	pages *pages
	// changed, when set, is told of every change applied (nil: the job
	// was deleted), with the index's lock held.
	changed func(id string, r *job.Record)
}

// entry is what the index keeps of one job: what its listing shows, in
// about a hundred bytes. Names, teams and placements repeat across many
// jobs and are kept once each (unique handles); times are Unix
// nanoseconds; a finished job's cost is worked out once.
type entry struct {
	// rev is the bucket revision the entry reflects; older changes are
	// ignored, so the service's own writes (applied at once) and the
	// watch (applied when it catches up) can arrive in any order.
	rev uint64
	// submitted orders the entry; finished is when the job finished
	// (zero while it is not).
	submitted, finished int64
	// named is the job's name and team, kept once for every job with the
	// same two.
	named     unique.Handle[nameTeam]
	placement unique.Handle[job.Placement] // zero: none yet
	// cost is, for a job whose cost no longer grows (see costNow), its
	// whole cost; otherwise what its ended attempts cost.
	cost money.Micros
	// baseline is the job's on-demand baseline (job.Status.BaselineCost).
	baseline money.Micros
	progress float64
	// archived is where the job's record is in the archive (0: not
	// archived; see events.ArchiveJob), read when the bucket holds none.
	archived uint64
	// key is the job's ID (17 bytes beside the 3 below, where a string
	// took 48).
	key   idmap.Key
	state uint8 // index into job.States
	// deleted marks a job removed from the bucket; the entry stays so a
	// late change cannot bring it back, and so a cursor naming it still
	// has a place in the order.
	deleted bool
	// grows is set while the job's cost grows with time (see
	// index.growing).
	grows    bool
	priority int32
}

// nameTeam is a job's name and team.
type nameTeam struct{ name, team string }

// MapKey is the entry's key in the index (idmap.Keyed).
func (e entry) MapKey() idmap.Key { return e.key }

// id is the entry's job ID.
func (e *entry) id() string { return e.key.String() }

// get is the entry of a job, if the index has one.
func (ix *index) get(id string) (*entry, bool) {
	e := ix.byID.Get(idmap.Lookup(id))
	return e, e != nil
}

// growingCost is what a job whose cost still grows costs at any time:
// its current attempt's hourly rate, its checkpoint's storage and its
// charges still running (see openOf).
type growingCost struct {
	launchedAt time.Time
	hourly     money.Micros
	open       []spendSegment
	ckptSince  time.Time
	ckptGB     float64
}

func (e *entry) submittedAt() time.Time { return time.Unix(0, e.submitted).UTC() }

// finishedAt is when the job finished (zero while it has not).
func (e *entry) finishedAt() time.Time {
	if e.finished == 0 {
		return time.Time{}
	}
	return time.Unix(0, e.finished).UTC()
}

func (e *entry) jobState() job.State { return job.States[e.state] }

func (e *entry) teamName() string { return e.named.Value().team }

func (e *entry) name() string { return e.named.Value().name }

// open are a job's charges still running (the index's lock held).
func (ix *index) open(e *entry) []spendSegment {
	if !e.grows {
		return nil
	}
	return ix.growing[e].open
}

// lastPlacement is where the job runs or last ran (nil: nowhere yet).
func (e *entry) lastPlacement() *job.Placement {
	if e.placement == (unique.Handle[job.Placement]{}) {
		return nil
	}
	p := e.placement.Value()
	return &p
}

// newEntry returns a new entry for a job; entries are never deleted (a
// deleted job keeps its place, see entry.deleted), so the table's chunks
// are always full of live ones.
func (ix *index) newEntry(id string) *entry {
	return ix.byID.Put(entry{key: idmap.KeyOf(id)})
}

func newIndex() *index {
	ix := &index{growing: map[*entry]*growingCost{}, ready: make(chan struct{})}
	ix.order.bits, ix.active.bits = &ix.teams, &ix.teams
	return ix
}

// start loads every job into the index, the archived ones (see
// events.ArchiveJob) and those in the bucket at once, and keeps it current
// with both; ix.ready is closed once both have been read. The two may
// bring a job in any order: its versions are told apart by revision.
func (ix *index) start(ctx context.Context, bus *events.Bus, store *events.JobStore) error {
	apply := ix.apply
	if p := ix.pages; p != nil {
		apply = func(c events.JobChange) {
			p.record(c)
			ix.apply(c)
		}
	}
	var left sync.WaitGroup
	left.Add(2)
	var archiveOnce, bucketOnce sync.Once
	go func() {
		left.Wait()
		// The load inserted records in the order the stores hold them:
		// their chunks are left part-full.
		ix.mu.Lock()
		ix.order.pack()
		ix.active.pack()
		ix.mu.Unlock()
		close(ix.ready)
	}()
	if _, err := bus.FollowArchive(ctx, func(a events.Archived) {
		ix.applyArchived(a, apply)
	}, func() { archiveOnce.Do(left.Done) }); err != nil {
		return err
	}
	_, err := store.Watch(ctx, apply, func() { bucketOnce.Do(left.Done) })
	return err
}

// applyArchived applies one message of the archive: a job's record as
// the bucket held it (a newer version there wins), or its removal.
func (ix *index) applyArchived(a events.Archived, apply func(events.JobChange)) {
	apply(events.JobChange{ID: a.ID, Revision: a.Revision, Record: a.Record, Raw: a.Raw})
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e, ok := ix.get(a.ID); ok {
		e.archived = 0
		if a.Record != nil {
			e.archived = a.Seq
		}
	}
}

// archivedAt is where a job's record is in the archive (0: not there).
func (ix *index) archivedAt(id string) uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if e, ok := ix.get(id); ok && !e.deleted {
		return e.archived
	}
	return 0
}

// unlist takes a listed entry out of the orders.
func (ix *index) unlist(e *entry) {
	ix.order.remove(e)
	if !e.jobState().Terminal() {
		ix.active.remove(e)
	}
}

// enlist puts an entry in the orders.
func (ix *index) enlist(e *entry) {
	ix.order.insert(e)
	if !e.jobState().Terminal() {
		ix.active.insert(e)
	}
}

// apply records one change to the bucket, unless the index has already
// seen a newer one for the job.
func (ix *index) apply(c events.JobChange) {
	ix.changes.Add(1)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e, ok := ix.get(c.ID)
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
			e = ix.newEntry(c.ID)
		} else if !e.deleted {
			ix.unlist(e)
		}
		e.rev, e.deleted = c.Revision, true
		ix.track(e, nil)
		if ix.deleted != nil {
			ix.deleted(c.ID)
		}
		return
	}
	r := c.Record
	if !ok {
		e = ix.newEntry(c.ID)
	}
	if !ok || e.deleted || e.submitted != r.Status.SubmittedAt.UnixNano() {
		if ok && !e.deleted {
			ix.unlist(e) // listed again below, where it now belongs
		}
		e.rev, e.deleted = c.Revision, false
		ix.track(e, e.fill(r))
		ix.enlist(e)
		return
	}
	// Listed where it belongs already (a job's submission time does not
	// change): only its place among the active jobs may.
	wasActive, was, wasNamed := !e.jobState().Terminal(), e.state, e.named
	e.rev = c.Revision
	ix.track(e, e.fill(r))
	// The chunks' masks take its new state or team.
	changed := e.state != was || e.named != wasNamed
	if changed {
		ix.order.mark(e)
	}
	switch active := !e.jobState().Terminal(); {
	case wasActive && !active:
		ix.active.remove(e)
	case !wasActive && active:
		ix.active.insert(e)
	case active && changed:
		ix.active.mark(e)
	}
}

// track keeps ix.growing current with an entry just changed: g is what
// its cost grows by (nil: it no longer grows).
func (ix *index) track(e *entry, g *growingCost) {
	e.grows = g != nil && !e.deleted
	if e.grows {
		ix.growing[e] = g
	} else {
		delete(ix.growing, e)
	}
}

// fill sets the entry from a record, and returns what its cost grows by
// (nil when it no longer grows; see index.track).
func (e *entry) fill(r *job.Record) *growingCost {
	e.submitted = r.Status.SubmittedAt.UnixNano()
	e.named = unique.Make(nameTeam{r.Spec.Name, r.Spec.Team})
	e.placement = unique.Handle[job.Placement]{}
	if p := lastPlacement(r); p != nil {
		e.placement = unique.Make(*p)
	}
	e.priority, e.state = int32(r.Spec.Prio()), uint8(slices.Index(job.States, r.Status.State))
	e.progress, e.baseline = r.Status.Progress, r.Status.BaselineCost
	e.finished = 0
	if r.Status.State.Terminal() {
		at := r.Status.FinishedAt
		if at.IsZero() {
			at = r.Status.UpdatedAt
		}
		e.finished = at.UnixNano()
	}
	g := &growingCost{open: openOf(r), ckptSince: r.Status.CheckpointSince}
	e.cost = r.Status.EndedCost
	if a := r.Status.Current; a != nil && !a.LaunchedAt.IsZero() {
		g.launchedAt, g.hourly = a.LaunchedAt, a.Placement.HourlyCost()
		e.cost += a.Transfer + a.DataTransfer
	}
	if ck := r.Status.Checkpoint; ck != nil {
		g.ckptGB = float64(ck.Size) / 1e9
	}
	switch {
	case !g.launchedAt.IsZero() || len(g.open) > 0 || !g.ckptSince.IsZero() && e.finished == 0:
		return g
	case !g.ckptSince.IsZero():
		// Finished, nothing left running: the cost is what it is once
		// the checkpoint's storage up to the end is counted.
		e.cost = g.costAt(e.cost, e.finishedAt(), e.finishedAt())
	}
	return nil
}

// costAt is what a job whose ended attempts cost ended costs as of now
// (finished: when it finished, zero while it has not).
func (g *growingCost) costAt(ended money.Micros, now, finished time.Time) money.Micros {
	c := ended
	if !g.launchedAt.IsZero() && now.After(g.launchedAt) {
		c += g.hourly.ForDuration(now.Sub(g.launchedAt))
	}
	if !g.ckptSince.IsZero() {
		end := now
		if !finished.IsZero() && finished.Before(end) {
			end = finished
		}
		c += money.StorageCost(money.ObjectStoragePerGBMonth, g.ckptGB, end.Sub(g.ckptSince))
	}
	return c
}

// costAt is a job's cost as of now (the index's lock held).
func (ix *index) costAt(e *entry, now time.Time) money.Micros {
	if !e.grows {
		return e.cost
	}
	return ix.growing[e].costAt(e.cost, now, e.finishedAt())
}

// cache caches a record read from the store at revision rev, unless the
// index has seen a newer change: with the index's lock held, a change the
// watch brings meanwhile either came first (and the read is not cached)
// or comes after (and updates the cached one).
func (ix *index) cache(r *job.Record, rev uint64) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if e, ok := ix.get(r.ID); ok && e.rev > rev {
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
	// What the filters compare, worked out once: states as the entries
	// hold them, the team as its handle.
	var states []uint8
	onlyActive := len(q.States) > 0
	for _, s := range q.States {
		if i := slices.Index(job.States, s); i >= 0 {
			states = append(states, uint8(i))
		}
		onlyActive = onlyActive && !s.Terminal()
	}
	if len(q.States) > 0 && len(states) == 0 {
		return JobList{Jobs: []Summary{}}, true
	}
	order := &ix.order
	if onlyActive {
		order = &ix.active
	}
	var at int64
	after := idmap.Lookup(q.After)
	out := JobList{Jobs: []Summary{}}
	want := anyJob
	ix.mu.RLock()
	if q.After != "" {
		if e, known := ix.get(q.After); known {
			at = e.submitted
		} else if t, ok := idTime(q.After); ok && !after.IsZero() {
			at = t.UnixNano()
		} else {
			ix.mu.RUnlock()
			return JobList{}, false
		}
	}
	if q.Team != "" && order.bits != nil {
		bit, seen := order.bits.lookup(q.Team)
		if !seen {
			ix.mu.RUnlock()
			return out, true // no job of the team was ever listed
		}
		want.teams = bit
	}
	ix.mu.RUnlock()
	if len(states) > 0 {
		want.states = 0
		for _, st := range states {
			want.states |= 1 << st
		}
	}
	var idBuf [64]byte
	search := []byte(q.Search)
	// A page of a rare team's, state's or name's jobs may read every
	// listed job: the read lock is held for walkSlice of them at a time,
	// as walk does (the loop is list's own: a call per job through walk's
	// function made a small team's page four times slower).
	from, key := q.After != "", after
	for {
		n, full := 0, false
		ix.mu.RLock()
		for e := range order.before(from, at, key, want) {
			if n == walkSlice {
				break
			}
			n++
			from, at, key = true, e.submitted, e.key
			if len(states) > 0 && !slices.Contains(states, e.state) {
				continue
			}
			if q.Team != "" && e.teamName() != q.Team {
				continue
			}
			if q.Name != "" && !strings.Contains(e.name(), q.Name) {
				continue
			}
			if q.Provider != "" && (e.placement == (unique.Handle[job.Placement]{}) || e.placement.Value().Provider != q.Provider) {
				continue
			}
			if q.Search != "" && !strings.Contains(e.name(), q.Search) && !bytes.HasPrefix(e.key.AppendTo(idBuf[:0]), search) {
				continue
			}
			if len(out.Jobs) == limit {
				out.Next = out.Jobs[len(out.Jobs)-1].ID
				full = true
				break
			}
			out.Jobs = append(out.Jobs, ix.summaryAt(e, now))
		}
		ix.mu.RUnlock()
		if full || n < walkSlice {
			return out, true
		}
		if ix.betweenSlices != nil {
			ix.betweenSlices()
		}
	}
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

// walkSlice is how many entries a walk over the listing order (walk) reads
// under one hold of the index's read lock: about a millisecond's worth. A
// million finished jobs walked in one hold kept every change to the index
// waiting (a submission, a placement) for tens of milliseconds, and, a
// writer waiting, every reader too.
const walkSlice = 4096

// walk calls fn on the listed jobs' entries oldest first, from just after
// the job submitted at at with key (from the oldest when from is false),
// until fn returns false. It holds the index's read lock while fn runs,
// but for walkSlice entries at a time: the entries may change between
// slices (a job submitted behind the walk is not seen, one removed ahead
// of it is not), which suits the background rounds and reports that walk
// every job. fn must not take the index's lock.
func (ix *index) walk(from bool, at int64, key idmap.Key, fn func(*entry) bool) {
	for {
		n, stop := 0, false
		ix.mu.RLock()
		for e := range ix.order.after(from, at, key) {
			if n == walkSlice {
				break
			}
			if !fn(e) {
				stop = true
				break
			}
			from, at, key = true, e.submitted, e.key
			n++
		}
		ix.mu.RUnlock()
		if stop || n < walkSlice {
			return
		}
	}
}

// teamOf is a job's team, if the index knows the job.
// revOf is the bucket revision of a job's record the index holds, if it
// knows the job.
func (ix *index) revOf(id string) (uint64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.get(id)
	if !ok || e.deleted {
		return 0, false
	}
	return e.rev, true
}

func (ix *index) teamOf(id string) (string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.get(id)
	if !ok || e.deleted {
		return "", false
	}
	return e.teamName(), true
}

// summary is a job as a listing shows it now, if the index knows it.
func (ix *index) summary(id string, now time.Time) (Summary, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.get(id)
	if !ok || e.deleted {
		return Summary{}, false
	}
	return ix.summaryAt(e, now), true
}

// summaryAt is an entry's summary with its cost as of now (the index's
// lock held).
func (ix *index) summaryAt(e *entry, now time.Time) Summary {
	nt := e.named.Value()
	return Summary{ID: e.id(), Name: nt.name, Team: nt.team, Priority: int(e.priority), State: e.jobState(),
		Placement: e.lastPlacement(), CostUSD: ix.costAt(e, now), Progress: e.progress, SubmittedAt: e.submittedAt()}
}
