package scheduler

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/job"
)

// Jobs with a max_cost_usd are watched on the scheduler's clock: after
// each change of one, and at the earliest time one of them will reach its
// cap at the rate it is billed (job.Record.CostLimitAt), those that have
// reached it get the lifecycle's CostLimit: a running job checkpoints and
// ends, any other ends at once.

// trackCap keeps a job with a max_cost_usd in the watch while it is not
// done (nil: gone); called with mu held.
func (s *Scheduler) trackCap(id string, r *job.Record) {
	if r == nil || r.Spec.MaxCost <= 0 || r.Status.State.Terminal() {
		if _, ok := s.capped[id]; ok {
			delete(s.capped, id)
		}
		return
	}
	s.capped[id] = r
	select {
	case s.capC <- struct{}{}:
	default:
	}
}

// checkCaps stops the watched jobs that have reached their cap and sets
// the timer for the next one due.
func (s *Scheduler) checkCaps(ctx context.Context, timer interface{ Reset(time.Duration) bool }) {
	now := s.o.Clock.Now()
	var due []string
	var next time.Time
	s.mu.Lock()
	for id, r := range s.capped {
		reached, at := r.CostLimitAt(now)
		switch {
		case reached:
			if a := r.Status.Current; a == nil || a.Notice == nil || a.Notice.Kind != job.NoticeCostLimit {
				due = append(due, id)
			}
		case !at.IsZero() && (next.IsZero() || at.Before(next)):
			next = at
		}
	}
	s.mu.Unlock()
	if !next.IsZero() {
		timer.Reset(next.Sub(now))
	}
	for _, id := range due {
		if !s.claim(id) {
			// Busy with an action: its end changes the record, which
			// brings the job back here.
			continue
		}
		s.goAction(ctx, func(ctx context.Context) {
			defer s.done(id)
			if _, res, err := s.apply(ctx, id, job.CostLimit{}); err != nil {
				s.log.Warn("stopping a job at its cost limit", zap.String("job", id), zap.Error(err))
			} else if res.Changed() {
				s.log.Info("job reached its cost limit", zap.String("job", id))
			}
		})
	}
}
