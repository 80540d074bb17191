package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Voluntary moves: the scheduler moves a running job of its own accord,
// to clearly cheaper capacity (arbitrage), back to spot from on-demand
// when the deadline policy says so, or off capacity with a rebalance
// recommendation for a job that asked. Unlike a
// preemption nothing is being taken away, so nothing is rushed: the job
// keeps running where it is while it checkpoints (state checkpointing,
// its current attempt carrying a notice with no deadline), and only once
// the checkpoint is stored is that capacity released and the job placed
// again, resuming from it. A checkpoint that does not come leaves the job
// where it was.

const (
	// NoticeReturnToSpot is the notice kind of a move back to spot.
	NoticeReturnToSpot = "return-to-spot"
	// NoticeCheaper is the notice kind of a move to cheaper capacity.
	NoticeCheaper = "cheaper"
	// moveTimeout is how long a voluntary move waits for its checkpoint
	// before it is given up.
	moveTimeout = 10 * time.Minute
)

// voluntary reports whether a notice is one of the scheduler's own moves
// (or a rebalance recommendation): no capacity is going at a deadline.
func voluntary(n *job.Notice) bool { return n != nil && n.Deadline.IsZero() }

// startMove asks the agent of a running job's current attempt for a
// checkpoint to move on. It returns nil when the job is no longer running
// that attempt, is already moving, or cannot checkpoint.
func (s *Scheduler) startMove(ctx context.Context, id string, attempt int, kind, instance, msg string) (*job.Record, error) {
	now := s.o.Clock.Now()
	rec, err := s.modify(ctx, id, func(r *job.Record) error {
		a := r.Status.Current
		if a == nil || a.N != attempt || r.Status.State != job.Running || a.Notice != nil || r.Status.Previous != nil || r.Spec.Checkpoint.Disabled {
			return errSkip
		}
		a.Notice = &job.Notice{Kind: kind, At: now, Instance: instance}
		return r.MoveTo(job.Checkpointing, now, msg)
	})
	if err != nil || rec == nil {
		return rec, err
	}
	s.requestCheckpoint(id, attempt, time.Time{}, kind)
	return rec, nil
}

// moveCheckpointed ends a voluntary move whose checkpoint was stored (fn
// of a record change, with r already holding the checkpoint): the attempt
// is closed as moved and the job migrates. It returns the closed attempt,
// or nil when r is not moving.
func moveCheckpointed(r *job.Record, attempt int, now time.Time) (*job.Attempt, error) {
	a := r.Status.Current
	if a == nil || a.N != attempt || r.Status.State != job.Checkpointing || !voluntary(a.Notice) {
		return nil, nil
	}
	closed := *a
	r.Status.Progress = r.Status.Checkpoint.Progress
	r.Replace()
	r.EndPrevious(now, "moved")
	return &closed, r.MoveTo(job.Migrating, now, fmt.Sprintf("checkpoint at %.0f%% stored; releasing %s and moving",
		r.Status.Progress*100, closed.Placement.InstanceType))
}

// release terminates the instances of an attempt the job has moved off:
// closed by a move, or under notice with its checkpoint stored (its
// capacity is going anyway, and every minute of it until then is billed).
func (s *Scheduler) release(ctx context.Context, id string, a *job.Attempt, why string) {
	s.spawn(func() {
		insts := s.liveInstances(ctx, a)
		s.terminateAll(ctx, id, insts, why)
		if len(insts) > 0 {
			s.emit(ctx, &events.JobEvent{JobID: id, Kind: events.KindTerminated, State: job.Migrating, Attempt: a.N,
				Message: "terminated " + joinIDs(idsOf(insts)) + " (" + why + ")"}, a.LaunchKey+"-terminated")
		}
	})
}

// reconcileMove repeats a voluntary move's checkpoint request (it may have
// been lost), or gives the move up when the checkpoint has not come in
// moveTimeout.
func (s *Scheduler) reconcileMove(ctx context.Context, rec *job.Record) {
	a := rec.Status.Current
	if a == nil || rec.Status.State != job.Checkpointing || !voluntary(a.Notice) {
		return
	}
	now := s.o.Clock.Now()
	if now.Sub(a.Notice.At) < moveTimeout {
		s.requestCheckpoint(rec.ID, a.N, time.Time{}, "repeat: "+a.Notice.Kind)
		return
	}
	kind := a.Notice.Kind
	msg := fmt.Sprintf("no checkpoint for the move (%s) in %s: staying", kind, human(moveTimeout))
	got, err := s.modify(ctx, rec.ID, func(r *job.Record) error {
		c := r.Status.Current
		if c == nil || c.N != a.N || r.Status.State != job.Checkpointing || !voluntary(c.Notice) {
			return errSkip
		}
		c.Notice = nil
		return r.MoveTo(job.Running, now, msg)
	})
	if err != nil || got == nil {
		return
	}
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindMove, State: job.Running, Attempt: a.N, Message: msg},
		fmt.Sprintf("%s-move-given-up-%d", a.LaunchKey, a.Notice.At.UnixNano()))
	s.checkpointFailed(ctx, got, a.N, "no checkpoint for the move in "+human(moveTimeout))
}

// policyRun reports whether a job's capacity is the deadline policy's to
// choose: purchase auto with a deadline.
func policyRun(r *job.Record) bool {
	return r.Spec.Purchase == job.PurchaseAuto && !r.Status.DeadlineAt.IsZero()
}

// moveCandidate reports whether a running job may be moved of the
// scheduler's accord: it runs (not moving, not under notice) on capacity
// that is not reserved (an idle reservation is paid for anyway), and can
// checkpoint. A job the deadline policy sent to on-demand is asked about
// at once (the policy has its own hysteresis); any other job once it has
// run MinStay where it is, and only with arbitrage on (considerMoves also
// wants it to have MinStay of work left).
func (s *Scheduler) moveCandidate(r *job.Record, now time.Time) bool {
	a := r.Status.Current
	if r.Status.State != job.Running || a == nil || a.Notice != nil || r.Status.Previous != nil || a.RunningAt.IsZero() ||
		r.Spec.Checkpoint.Disabled || a.Placement.Purchase == string(providers.Reserved) {
		return false
	}
	if policyRun(r) && a.Placement.Purchase == string(providers.OnDemand) {
		return true
	}
	return !s.o.Arbitrage.Off && now.Sub(a.RunningAt) >= s.o.Arbitrage.MinStay
}

// considerMoves looks for clearly cheaper capacity for running jobs, with
// the placement pipeline the queue uses. A job the deadline policy put on
// on-demand asks the policy, the same way `spotwise simulate` asks it
// every step, and goes when it says spot; a policy job on spot looks at
// spot only; any other job at what its spec allows. A job moves when
// finishing elsewhere, the move included (the checkpoint's time where it
// runs, the new capacity's start-up, moving the checkpoint, the risk of
// interruptions there), is expected to cost at most (1 - Saving) of
// finishing where it is. Called from the cycle, over the candidates the
// last reconciliation found.
func (s *Scheduler) considerMoves(ctx context.Context, snap Snapshot, recs []*job.Record) {
	byID := make(map[string]*job.Record, len(recs))
	snap.Jobs = make([]*QueuedJob, 0, len(recs))
	for _, r := range recs {
		c := r.Clone()
		c.Replace() // its checkpoint is written where it runs now
		req := RequirementsOf(c)
		a := r.Status.Current
		var odSince time.Time
		if policyRun(r) {
			if a.Placement.Purchase == string(providers.OnDemand) {
				odSince = a.RunningAt
			} else {
				v := req.Value()
				v.Purchase = string(job.PurchaseSpot)
				req = unique.Make(v)
			}
		}
		byID[r.ID] = r
		snap.Jobs = append(snap.Jobs, &QueuedJob{ID: r.ID, Priority: r.Spec.Prio(), SubmittedAt: r.Status.SubmittedAt,
			DeadlineAt: r.Status.DeadlineAt, Progress: r.Status.Progress, Req: req, OnDemandSince: odSince})
	}
	plan := Decide(snap)
	for _, p := range plan.Placements {
		r := byID[p.JobID]
		if r == nil {
			continue
		}
		a := r.Status.Current
		returning := policyRun(r) && a.Placement.Purchase == string(providers.OnDemand)
		switch {
		case p.Offer.ID() == a.Placement.OfferID:
			continue // the best place is where it is
		case returning && p.Offer.Purchase != providers.Spot:
			continue // the policy keeps it on on-demand
		case !returning && p.Estimate.Runtime < s.o.Arbitrage.MinStay:
			continue // too little left to be worth a move for price
		}
		stay := stayCost(a, r.Status.Progress)
		move := p.Estimate.Cost + a.Placement.HourlyCost().ForDuration(r.Spec.Checkpoint.Duration.D())
		if stay <= 0 || float64(move) > (1-s.o.Arbitrage.Saving)*float64(stay) {
			continue
		}
		kind, why := NoticeCheaper, "a clearly cheaper place"
		if returning {
			kind, why = NoticeReturnToSpot, "spot is back"
		}
		msg := fmt.Sprintf("%s: moving from %s %s in %s (%s/h) to %s %s in %s (%s/h), about %s to finish (the move included) instead of %s; checkpointing first",
			why, a.Placement.InstanceType, a.Placement.Purchase, a.Placement.Zone, a.Placement.PricePerHour.Human(),
			p.Offer.InstanceType, p.Offer.Purchase, p.Offer.Zone, p.Offer.Price.Human(), move.Human(), stay.Human())
		rec, err := s.startMove(ctx, r.ID, a.N, kind, "", msg)
		if err != nil {
			s.log.Warn("moving a running job", zap.String("job", r.ID), zap.Error(err))
			continue
		}
		if rec == nil {
			continue
		}
		s.metrics.moves.Add(1)
		s.log.Info("moving running job", zap.String("job", r.ID), zap.String("why", kind), zap.String("from", a.Placement.OfferID),
			zap.String("to", p.Offer.ID()), zap.Stringer("expected", move), zap.Stringer("staying", stay))
		s.emit(ctx, &events.JobEvent{JobID: r.ID, Kind: events.KindMove, State: job.Checkpointing, Attempt: a.N, Progress: r.Status.Progress,
			Placement: &a.Placement, Message: msg}, a.LaunchKey+"-move")
	}
}

// stayCost is what finishing on an attempt's capacity is expected to cost
// from progress on: its estimated runtime scaled to the work left.
func stayCost(a *job.Attempt, progress float64) money.Micros {
	if a.StartProgress >= 1 || progress >= 1 {
		return 0
	}
	left := time.Duration(float64(a.EstimatedRuntime.D()) * (1 - progress) / (1 - a.StartProgress))
	return a.Placement.HourlyCost().ForDuration(left)
}

// rebalance acts on a rebalance recommendation: a job that asked to move
// on one checkpoints and moves, with the offer and, for a while, its zone
// out of the running; for the others it is only recorded.
func (s *Scheduler) rebalance(ctx context.Context, in providers.Instance) error {
	rec, _, err := s.jobs.Get(ctx, in.JobID)
	if errors.Is(err, events.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	a := rec.Status.Current
	if a == nil || a.LaunchKey != in.IdempotencyKey || rec.Status.State.Terminal() {
		s.log.Info("rebalance for an instance no current attempt owns; dropped", zap.String("job", in.JobID), zap.String("instance", in.ID))
		return nil
	}
	stays := ""
	switch {
	case !rec.Spec.Checkpoint.MoveOnRebalance:
		stays = "move_on_rebalance is off"
	case rec.Spec.Checkpoint.Disabled:
		stays = "it cannot checkpoint, and moving would lose all its work"
	}
	if stays != "" {
		s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindRebalance, State: rec.Status.State, Attempt: a.N,
			Message: fmt.Sprintf("rebalance recommended for %s (the job stays: %s)", in.ID, stays)}, in.ID+"-rebalance")
		return nil
	}
	msg := fmt.Sprintf("rebalance recommended for %s: checkpointing, then moving", in.ID)
	got, err := s.startMove(ctx, rec.ID, a.N, string(providers.EventRebalance), in.ID, msg)
	if err != nil || got == nil {
		return err
	}
	now := s.o.Clock.Now()
	s.book.markUnavailable(a.Placement.OfferID, now.Add(s.o.UnavailableFor))
	s.book.markUnavailable(zoneKey(a.Placement.Provider, a.Placement.Zone), now.Add(ZoneCooldown))
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindRebalance, State: job.Checkpointing, Attempt: a.N, Placement: &a.Placement,
		Progress: got.Status.Progress, Message: msg}, in.ID+"-rebalance")
	return nil
}
