package api

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/money"
	"github.com/spotwise/spotwise/job"
)

// index is the listing view of every job, kept by a watch on the job-state
// bucket so that listing 100,000 jobs reads memory, not the store.
type index struct {
	mu    sync.RWMutex
	byID  map[string]*entry
	order []string // job IDs ascending (IDs are time-ordered)
	ready chan struct{}
}

type entry struct {
	sum        Summary
	launchedAt time.Time
	hourly     money.Micros
	endedCost  money.Micros
}

func newIndex() *index {
	return &index{byID: map[string]*entry{}, ready: make(chan struct{})}
}

func (ix *index) start(ctx context.Context, store *events.JobStore) error {
	var once sync.Once
	return store.Watch(ctx, ix.apply, func() { once.Do(func() { close(ix.ready) }) })
}

func (ix *index) apply(c events.JobChange) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if c.Record == nil {
		if _, ok := ix.byID[c.ID]; ok {
			delete(ix.byID, c.ID)
			if i, found := slices.BinarySearch(ix.order, c.ID); found {
				ix.order = slices.Delete(ix.order, i, i+1)
			}
		}
		return
	}
	r := c.Record
	e, ok := ix.byID[c.ID]
	if !ok {
		e = &entry{}
		ix.byID[c.ID] = e
		if n := len(ix.order); n == 0 || ix.order[n-1] < c.ID {
			ix.order = append(ix.order, c.ID)
		} else if i, found := slices.BinarySearch(ix.order, c.ID); !found {
			ix.order = slices.Insert(ix.order, i, c.ID)
		}
	}
	e.sum = Summary{ID: r.ID, Name: r.Spec.Name, Team: r.Spec.Team, Priority: r.Spec.Prio(), State: r.Status.State,
		Placement: lastPlacement(r), Progress: r.Status.Progress, SubmittedAt: r.Status.SubmittedAt}
	e.endedCost, e.launchedAt, e.hourly = r.Status.EndedCost, time.Time{}, 0
	if a := r.Status.Current; a != nil && !a.LaunchedAt.IsZero() {
		e.launchedAt, e.hourly = a.LaunchedAt, a.Placement.HourlyCost()
	}
}

// Query filters a listing.
type Query struct {
	States []job.State
	Team   string
	Name   string
	// Limit is the page size (default 100, at most 1000).
	Limit int
	// After continues a listing: jobs older than this ID.
	After string
}

// list returns jobs newest first.
func (ix *index) list(q Query, now time.Time) JobList {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	end := len(ix.order)
	if q.After != "" {
		end, _ = slices.BinarySearch(ix.order, q.After)
	}
	out := JobList{Jobs: []Summary{}}
	for i := end - 1; i >= 0; i-- {
		e := ix.byID[ix.order[i]]
		if len(q.States) > 0 && !slices.Contains(q.States, e.sum.State) {
			continue
		}
		if q.Team != "" && e.sum.Team != q.Team {
			continue
		}
		if q.Name != "" && !strings.Contains(e.sum.Name, q.Name) {
			continue
		}
		if len(out.Jobs) == limit {
			out.Next = out.Jobs[len(out.Jobs)-1].ID
			break
		}
		s := e.sum
		s.CostUSD = e.endedCost
		if !e.launchedAt.IsZero() && now.After(e.launchedAt) {
			s.CostUSD += e.hourly.ForDuration(now.Sub(e.launchedAt))
		}
		out.Jobs = append(out.Jobs, s)
	}
	return out
}
