package scheduler

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// cycle runs one scheduling cycle, in three phases:
//
//  1. snapshot: the offer book and the queued jobs that need a look (new
//     ones, and ones last found unplaceable against an older book), from
//     memory, without a read of the bucket;
//  2. decide: Decide over the snapshot (pure), and the moves of running
//     jobs the last reconciliation put forward (decided the same way);
//  3. apply: each placement, expiry and move goes through the job's
//     lifecycle on the worker pool (the record written, then the launch);
//     pending jobs keep their reasons in memory.
func (s *Scheduler) cycle(ctx context.Context) {
	start := time.Now()

	// 1. Snapshot.
	now := s.o.Clock.Now()
	bv := s.book.snapshot(now)
	version := bv.version
	s.mu.Lock()
	needsLook := func(qj *QueuedJob) bool {
		e := qj.e
		return e != nil && e.queued == qj && !e.inflight && e.seen != version
	}
	batch := s.cycleJobs[:0]
	whole := version != s.lookedAt
	if bv.shape != s.nowhereShape {
		clear(s.nowhere)
		s.nowhereShape = bv.shape
	}
	if !whole {
		// Every other queued job was found to fit nowhere in this very
		// book: only the fresh ones, in queue order.
		for _, qj := range s.fresh {
			if needsLook(qj) {
				batch = append(batch, qj)
			}
		}
		slices.SortFunc(batch, queueLess)
		batch = slices.Compact(batch)
	} else {
		if cap(batch) < s.q.len() {
			batch = make([]*QueuedJob, 0, s.q.len()) // one allocation, not a trail of copies
		}
		for _, qj := range s.q.jobs {
			if needsLook(qj) && !s.stillNowhere(qj, now) {
				batch = append(batch, qj)
			}
		}
		s.lookedAt = version
	}
	s.fresh = s.fresh[:0]
	moves := s.moves
	s.moves = nil
	s.mu.Unlock()
	if len(batch) == 0 && len(moves) == 0 {
		return
	}
	s.zones.observe(bv, now)
	teams := s.teamStates(now)
	snap := Snapshot{Now: now, Jobs: batch, Offers: bv.offers, Unavailable: bv.unavailable, Throughput: s.tp,
		Geography: s.o.Geography, Rates: bv.rates, Policy: s.o.Policy, Zones: s.zones.stats, PolicyStep: s.o.PolicyInterval, base: bv.base, taken: bv.taken,
		Teams: teams, pending: s.cyclePending, placed: s.cyclePlaced}

	// 2. Decide.
	var moving []move
	if len(moves) > 0 {
		moving = s.decideMoves(snap, moves)
	}
	plan := Decide(snap)

	// 3. Apply.
	for _, m := range moving {
		s.goAction(ctx, func(ctx context.Context) { s.startMove(ctx, m) })
	}
	var changed []Pending
	var held map[string]Pending // by team: the first job its hard budget holds back
	s.mu.Lock()
	// A job's entry may have moved on since the snapshot: one no longer
	// queued as it was decided on (placed, cancelled, gone, changed) is
	// left alone (a changed one is fresh again).
	for _, p := range plan.Placements {
		e := p.q.e
		if e.queued != p.q || e.inflight {
			continue
		}
		e.inflight = true
		n := p.q.attempt + 1
		s.book.take(p.Offer, p.Nodes, job.LaunchKey(p.JobID, n))
		s.placing(p, n)
		s.goAction(ctx, func(ctx context.Context) {
			defer s.done(p.JobID)
			s.place(ctx, p, n)
		})
	}
	for _, p := range plan.Pending {
		e := p.q.e
		if e.queued != p.q {
			continue
		}
		if p.nowhere {
			if s.nowhere == nil {
				s.nowhere = map[unique.Handle[Requirements]]bool{}
			}
			s.nowhere[p.q.Req] = true
		}
		e.seen = version
		e.pending = p.Reasons
		if len(p.Reasons) > 0 && p.Reasons[0].Code == "budget" && held[p.q.Team].JobID == "" {
			if held == nil {
				held = map[string]Pending{}
			}
			held[p.q.Team] = p
		}
		switch {
		case !p.Hopeless:
			e.hopeless = 0
		case e.hopeless == 0:
			// Found hopeless: if a policy interval later it still is (the
			// offer book may have been incomplete), it expires.
			e.hopeless = now.UnixNano()
		case now.Sub(time.Unix(0, e.hopeless)) >= s.o.PolicyInterval && !e.inflight:
			e.inflight = true
			s.goAction(ctx, func(ctx context.Context) {
				defer s.done(p.JobID)
				s.expire(ctx, p)
			})
			continue
		}
		if codes := codesHash(p.Reasons); codes != e.codes {
			e.codes = codes
			changed = append(changed, p)
		}
	}
	s.mu.Unlock()
	if teams != nil {
		s.budgetAlerts(ctx, teams, held)
	}
	took := time.Since(start)
	s.metrics.cycles.Add(1)
	s.metrics.lastCycle.Store(int64(took))
	s.metrics.cycleTime.Add(int64(took))
	if whole {
		s.metrics.wholeCycles.Add(1)
		s.metrics.wholeCycleTime.Add(int64(took))
	}
	if len(changed) > 0 {
		s.spawn(func() { s.recordPending(ctx, changed) })
	}
	s.log.Debug("cycle", zap.Int("jobs", len(batch)), zap.Int("placed", len(plan.Placements)), zap.Int("pending", len(plan.Pending)), zap.Duration("took", took))
	// The next cycle lists its jobs and their verdicts in the same arrays
	// (with 10,000 queued a cycle over all of them needs most of a MB).
	clear(batch)
	clear(plan.Pending)
	clear(plan.Placements)
	s.cycleJobs, s.cyclePending, s.cyclePlaced = batch[:0], plan.Pending[:0], plan.Placements[:0]
}

// stillNowhere reports whether a queued job need not be looked at again:
// no offer passed its needs' static filters in a book of the same shape
// (book.shape: capacity coming back, which triggers most looks, changes
// nothing for it), it waits for those reasons already, and its deadline,
// if any, has not passed (a cycle finds it hopeless then). Called with
// mu held.
func (s *Scheduler) stillNowhere(qj *QueuedJob, now time.Time) bool {
	return s.nowhere[qj.Req] && qj.e.pending != nil && (qj.DeadlineAt.IsZero() || now.Before(qj.DeadlineAt))
}

// place records one placement (the attempt and its launch key, before
// anything is bought) and launches it.
func (s *Scheduler) place(ctx context.Context, p Placement, attempt int) {
	o := p.Offer
	in := job.Place{
		Attempt: attempt, MaxPrice: p.MaxPrice, Baseline: p.Baseline, Transfer: p.Transfer, DataTransfer: p.DataTransfer, EstimatedRuntime: p.Estimate.Runtime, EstimatedCost: p.Estimate.Cost, CheckpointRoot: s.o.CheckpointRoot,
		Placement: job.Placement{OfferID: o.ID(), Provider: o.Provider, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
			GPU: o.GPU, GPUs: o.GPUs, Nodes: p.Nodes, Purchase: string(o.Purchase), PricePerHour: o.Price,
			OnDemandPrice: o.OnDemandPrice},
	}
	_, res, err := s.apply(ctx, p.JobID, in)
	if err != nil || !res.Changed() {
		s.book.launched(job.LaunchKey(p.JobID, attempt), false) // no launch follows
	}
	s.placed(p.JobID, attempt, err == nil && res.Changed())
	if err != nil {
		s.log.Warn("recording a placement", zap.String("job", p.JobID), zap.Error(err))
	} else if res.Changed() {
		s.log.Info("placing job", zap.String("job", p.JobID), zap.String("offer", o.ID()), zap.Stringer("price", o.Price),
			zap.Duration("runtime", p.Estimate.Runtime), zap.Stringer("cost", p.Estimate.Cost))
	}
}

// expire ends a waiting job that can no longer meet its deadline (or,
// if its spec says so, lets it run anyway).
func (s *Scheduler) expire(ctx context.Context, p Pending) {
	last := p.Reasons[len(p.Reasons)-1]
	if _, _, err := s.apply(ctx, p.JobID, job.Expire{Message: last.Message}); err != nil {
		s.log.Warn("expiring a job", zap.String("job", p.JobID), zap.Error(err))
	}
}

// recordPending puts a "pending" entry in the history of each job whose
// kinds of reasons changed.
func (s *Scheduler) recordPending(ctx context.Context, changed []Pending) {
	for _, p := range changed {
		last := p.Reasons[len(p.Reasons)-1]
		s.emit(ctx, &events.JobEvent{JobID: p.JobID, Kind: events.KindPending, State: job.Queued, Reasons: p.Reasons,
			Message: "not placed yet: " + last.Message}, "")
		if last.Code == "deadline" {
			// Every offer that passes the other filters finishes too
			// late while some would not with capacity: someone may want
			// to decide.
			var details map[string]string
			if p.q != nil {
				details = map[string]string{"team": p.q.Team}
			}
			s.alert(ctx, events.SeverityCritical, "deadline-at-risk", p.JobID,
				fmt.Sprintf("job %s can no longer meet its deadline where there is capacity now: %s", p.JobID, last.Message), details, p.JobID+"-alert-deadline")
		}
	}
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
