package scheduler

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// cycle runs one scheduling cycle over the queued jobs that need a look:
// new ones, and ones last found unplaceable against an older offer book.
// Placements are handed to the executor; pending jobs get their reasons.
func (s *Scheduler) cycle(ctx context.Context) {
	start := time.Now()
	now := s.o.Clock.Now()
	offers, unavailable, version := s.book.snapshot(now)
	s.mu.Lock()
	batch := make([]*QueuedJob, 0, min(s.q.len(), 1024))
	for _, qj := range s.q.jobs {
		e := s.index[qj.ID]
		if e == nil || e.inflight || e.seen == version {
			continue
		}
		batch = append(batch, qj)
	}
	moves := s.moves
	s.moves = nil
	s.mu.Unlock()
	if len(batch) == 0 && len(moves) == 0 {
		return
	}
	s.zones.observe(offers, unavailable, now)
	snap := Snapshot{Now: now, Jobs: batch, Offers: offers, Unavailable: unavailable, Throughput: s.tp,
		Geography: s.o.Geography, Rates: s.book.ratesNow(), Policy: s.o.Policy, Zones: s.zones.stats, PolicyStep: s.o.PolicyInterval}
	if len(moves) > 0 {
		s.considerMoves(ctx, snap, moves)
	}
	if len(batch) == 0 {
		return
	}
	plan := Decide(snap)

	var changed []Pending
	s.mu.Lock()
	for _, p := range plan.Placements {
		e := s.index[p.JobID]
		if e == nil || e.queued == nil || e.inflight {
			continue
		}
		e.inflight = true
		s.book.take(p.Offer, p.Nodes)
		s.goAction(ctx, func(ctx context.Context) { s.place(ctx, p) })
	}
	for _, p := range plan.Pending {
		e := s.index[p.JobID]
		if e == nil || e.queued == nil {
			continue
		}
		e.seen = version
		e.pending = p.Reasons
		if codes := codesHash(p.Reasons); codes != e.codes {
			e.codes = codes
			changed = append(changed, p)
		}
	}
	s.mu.Unlock()
	s.metrics.cycles.Add(1)
	s.metrics.lastCycle.Store(int64(time.Since(start)))
	if len(changed) > 0 {
		s.spawn(func() {
			for _, p := range changed {
				last := p.Reasons[len(p.Reasons)-1]
				s.emit(ctx, &events.JobEvent{JobID: p.JobID, Kind: events.KindPending, State: job.Queued, Reasons: p.Reasons,
					Message: "not placed yet: " + last.Message}, "")
				if last.Code == "deadline" {
					// Every offer that passes the other filters finishes
					// too late: someone has to decide.
					s.alert(ctx, events.SeverityCritical, "deadline-at-risk", p.JobID,
						fmt.Sprintf("job %s can no longer meet its deadline: %s", p.JobID, last.Message), nil, p.JobID+"-alert-deadline")
				}
			}
		})
	}
	s.log.Debug("cycle", zap.Int("jobs", len(batch)), zap.Int("placed", len(plan.Placements)), zap.Int("pending", len(plan.Pending)), zap.Duration("took", time.Since(start)))
}

// codesHash hashes the kinds of pending reasons: a change of kind is
// worth a history entry; a change of count is not.
func codesHash(rs []job.PendingReason) uint64 {
	h := fnv.New64a()
	for _, r := range rs {
		h.Write([]byte(r.Code))
		h.Write([]byte{0})
	}
	return h.Sum64() | 1
}

// emit publishes a job event, logging (not failing) when it cannot: the
// job's state is in the bucket either way.
func (s *Scheduler) emit(ctx context.Context, ev *events.JobEvent, id string) {
	var opts []events.PublishOption
	if id != "" {
		opts = append(opts, events.WithID(id))
	}
	if err := s.bus.Publish(ctx, events.JobEventsSubject(ev.JobID), ev, opts...); err != nil {
		s.log.Warn("publishing job event", zap.String("job", ev.JobID), zap.String("event", ev.Kind), zap.Error(err))
	}
}
