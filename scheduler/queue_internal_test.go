package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The queue keeps the queued jobs in order through any mix of additions
// and removals (versions of one job sharing its key among them), its
// length counts only the queued ones, and what it drops as gone is never
// walked as queued.
func TestQueueOrderThroughAddsAndRemovals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		jobs int
		ops  int
		seed uint64
	}{
		{"few", 5, 50, 1},
		{"a backlog", 2000, 20000, 2},
		{"one job over and over", 1, 100, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(c.seed, 9))
			var q queue
			queued := map[string]*QueuedJob{} // what should be in, by ID
			for range c.ops {
				id := fmt.Sprintf("j-%04d", rng.IntN(c.jobs))
				old := queued[id]
				switch {
				case old == nil:
					j := &QueuedJob{ID: id, Priority: rng.IntN(3), SubmittedAt: t0.Add(time.Duration(rng.IntN(100)) * time.Second)}
					q.add(j)
					queued[id] = j
				case rng.IntN(2) == 0:
					// Changed: a new version with the same key replaces it.
					q.remove(id, old)
					j := &QueuedJob{ID: id, Priority: old.Priority, SubmittedAt: old.SubmittedAt}
					q.add(j)
					queued[id] = j
				default:
					q.remove(id, old)
					delete(queued, id)
				}
				if q.len() != len(queued) {
					t.Fatalf("len %d, %d queued", q.len(), len(queued))
				}
			}
			var walked []*QueuedJob
			for _, j := range q.jobs {
				if queued[j.ID] == j {
					walked = append(walked, j)
				} else if !q.isGone(j) {
					t.Fatalf("job %s is in the queue but neither queued nor gone", j.ID)
				}
			}
			if len(walked) != len(queued) {
				t.Fatalf("walked %d queued jobs, want %d", len(walked), len(queued))
			}
			if !slices.IsSortedFunc(q.jobs, queueLess) {
				t.Fatal("the queue is out of order")
			}
			if len(q.gone) > 0 && 2*len(q.gone) >= len(q.jobs) {
				t.Fatalf("%d gone of %d kept: gone ones are dropped at half", len(q.gone), len(q.jobs))
			}
		})
	}
}
