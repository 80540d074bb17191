package api

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/internal/idmap"
)

// Retention is how long finished jobs stay in the store: a finished job
// goes, record and history, once it finished longer than MaxAge ago, or
// when more than MaxJobs finished jobs are stored, oldest first (by
// submission). Zero is no limit. Live jobs are never removed.
type Retention struct {
	MaxAge  time.Duration
	MaxJobs int
}

// pruneBatch is the most jobs one Prune removes: a store far over its
// limits is brought down over several rounds, not in one long stall.
const pruneBatch = 10_000

// Prune removes the finished jobs the retention no longer keeps, at most
// pruneBatch of them, and returns how many it removed. It is the active
// scheduler's server's to call; removing a job twice is harmless.
func (s *Service) Prune(ctx context.Context, r Retention) (int, error) {
	ids := s.ix.expired(r, s.clock.Now(), pruneBatch)
	archived := make([]uint64, len(ids))
	for i, id := range ids {
		archived[i] = s.ix.archivedAt(id)
	}
	n, err := s.bus.DeleteJobs(ctx, ids, archived)
	// Out of the index now, not when the watch brings the deletions: the
	// next round must not count them again.
	s.ix.removed(ids[:n])
	if n > 0 {
		s.log.Info("finished jobs removed by retention", zap.Int("jobs", n), zap.Duration("max_age", r.MaxAge), zap.Int("max_jobs", r.MaxJobs))
	}
	if err != nil {
		return n, fmt.Errorf("removing finished jobs: %w", err)
	}
	return n, nil
}

// removed marks jobs deleted from the bucket ahead of the watch, and
// takes them out of the orders in one pass over the chunks that held them
// (jobOrder.removeAll).
func (ix *index) removed(ids []string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var gone []*entry
	for _, id := range ids {
		if e, ok := ix.get(id); ok && !e.deleted {
			e.deleted = true
			ix.track(e, nil)
			gone = append(gone, e)
			if ix.recs != nil {
				ix.recs.put(id, nil, e.rev+1)
			}
			if ix.deleted != nil {
				ix.deleted(id)
			}
		}
	}
	isDeleted := func(e *entry) bool { return e.deleted }
	ix.order.removeAll(gone, isDeleted)
	ix.active.removeAll(gone, isDeleted)
}

// expired lists up to limit finished jobs the retention no longer keeps,
// oldest first.
func (ix *index) expired(r Retention, now time.Time, limit int) []string {
	over := 0
	if r.MaxJobs > 0 {
		// Every listed job not active has finished.
		ix.mu.RLock()
		over = ix.order.Len() - ix.active.Len() - r.MaxJobs
		ix.mu.RUnlock()
	}
	var out []string
	ix.walk(false, 0, idmap.Key{}, func(e *entry) bool {
		if len(out) == limit {
			return false
		}
		if e.deleted || e.finished == 0 {
			return true
		}
		switch {
		case over > 0:
			over--
		case r.MaxAge > 0 && now.Sub(e.finishedAt()) > r.MaxAge:
		default:
			return true
		}
		out = append(out, e.id())
		return true
	})
	return out
}
