package scheduler

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// reconcile compares what the job-state bucket says with what the clouds
// run and repairs the difference, so that a missed event or a crash at any
// point heals:
//   - a placing job whose instances exist gets them recorded; one whose
//     instances do not exist is launched again with the same key (which
//     buys nothing if the first launch did go through);
//   - an active job whose instances are all gone is requeued;
//   - a finished job still holding an attempt is cleaned up;
//   - an instance no active attempt owns is terminated;
//   - every queued job is looked at again.
func (s *Scheduler) reconcile(ctx context.Context) {
	if !s.recMu.TryLock() {
		return
	}
	defer s.recMu.Unlock()
	start := time.Now()
	byKey, ok := s.listInstances(ctx)
	if !ok {
		s.book.bump()
		s.kick()
		return
	}
	s.mu.Lock()
	var ids []string
	for id, e := range s.index {
		if !e.inflight && (e.state.Active() || (e.state.Terminal() && e.hasCurrent)) {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	owned := map[string]bool{}
	var moves []*job.Record
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		keys, rec := s.reconcileJob(ctx, id, byKey)
		for _, key := range keys {
			owned[key] = true
		}
		if rec != nil && s.moveCandidate(rec, s.o.Clock.Now()) {
			moves = append(moves, rec)
		}
	}
	s.mu.Lock()
	s.moves = moves
	s.mu.Unlock()
	s.collectOrphans(ctx, byKey, owned)
	s.exp.save(ctx, s.bus.Meta(), s.log)
	s.book.bump()
	s.kick()
	s.metrics.reconciles.Add(1)
	s.log.Debug("reconciled", zap.Int("active", len(ids)), zap.Duration("took", time.Since(start)))
}

// listInstances lists every cloud's instances once (several provider
// names may share one cloud), grouped by launch key.
func (s *Scheduler) listInstances(ctx context.Context) (map[string][]providers.Instance, bool) {
	seen := map[providers.Provider]bool{}
	byKey := map[string][]providers.Instance{}
	for _, c := range s.o.Clouds {
		if seen[c] {
			continue
		}
		seen[c] = true
		insts, err := c.Instances(ctx)
		if err != nil {
			s.log.Warn("listing instances; skipping reconciliation", zap.String("provider", c.Name()), zap.Error(err))
			return nil, false
		}
		for _, in := range insts {
			byKey[in.IdempotencyKey] = append(byKey[in.IdempotencyKey], in)
		}
	}
	return byKey, true
}

// reconcileJob repairs one job and returns the launch keys it legitimately
// holds, and the record as it was read.
func (s *Scheduler) reconcileJob(ctx context.Context, id string, byKey map[string][]providers.Instance) ([]string, *job.Record) {
	if !s.claim(id) {
		return nil, nil
	}
	defer s.done(id)
	rec, _, err := s.jobs.Get(ctx, id)
	if err != nil {
		if !errors.Is(err, events.ErrNotFound) {
			s.log.Warn("reconcile: reading job", zap.String("job", id), zap.Error(err))
		}
		return nil, nil
	}
	if rec.Status.State.Terminal() {
		s.cleanup(ctx, id)
		return nil, nil
	}
	var owned []string
	if p := rec.Status.Previous; p != nil {
		if s.reconcilePrevious(ctx, rec, p, byKey) {
			owned = append(owned, p.LaunchKey)
		}
	}
	if key := s.reconcileCurrent(ctx, rec, byKey); key != "" {
		owned = append(owned, key)
		s.reconcileMove(ctx, rec)
	}
	return owned, rec
}

// splitByState sorts an attempt's instances into live and ended.
func splitByState(byKey map[string][]providers.Instance, key string) (live, ended []providers.Instance) {
	for _, in := range byKey[key] {
		if in.State.Ended() {
			ended = append(ended, in)
		} else {
			live = append(live, in)
		}
	}
	return live, ended
}

// reconcilePrevious looks after an attempt being replaced: once its
// capacity is gone it is closed; while its notice runs, the checkpoint
// request is repeated (it may have been lost in a restart). It reports
// whether the attempt still holds capacity.
func (s *Scheduler) reconcilePrevious(ctx context.Context, rec *job.Record, p *job.Attempt, byKey map[string][]providers.Instance) bool {
	live, ended := splitByState(byKey, p.LaunchKey)
	if len(live) == 0 {
		reason := "capacity reclaimed"
		if len(ended) > 0 && ended[0].Reason != "" {
			reason = ended[0].Reason
		}
		if err := s.instanceLost(ctx, rec.ID, p.LaunchKey, p.Instances, reason); err != nil {
			s.log.Warn("reconcile: closing a replaced attempt", zap.String("job", rec.ID), zap.Error(err))
		}
		return false
	}
	if rec.Status.State == job.Checkpointing && p.Notice != nil && p.Notice.Deadline.After(s.o.Clock.Now()) {
		s.requestCheckpoint(rec.ID, p.N, p.Notice.Deadline, "repeat: "+p.Notice.Kind)
	}
	return true
}

// reconcileCurrent repairs the current attempt and returns its key if it
// legitimately holds capacity.
func (s *Scheduler) reconcileCurrent(ctx context.Context, rec *job.Record, byKey map[string][]providers.Instance) string {
	id := rec.ID
	a := rec.Status.Current
	if a == nil {
		return ""
	}
	live, ended := splitByState(byKey, a.LaunchKey)
	placing := rec.Status.State == job.Placing || (len(a.Running) < max(1, a.Placement.Nodes) && rec.Status.State != job.Running)
	switch {
	case len(live) == 0 && len(ended) > 0:
		reason := ended[0].Reason
		if reason == "" {
			reason = "instance ended"
		}
		if err := s.instanceLost(ctx, id, a.LaunchKey, idsOf(ended), reason); err != nil {
			s.log.Warn("reconcile: requeueing job", zap.String("job", id), zap.Error(err))
		}
		return ""
	case placing && len(live) == 0:
		s.log.Info("reconcile: launching again with the same key", zap.String("job", id), zap.String("key", a.LaunchKey))
		s.launch(ctx, rec)
		return a.LaunchKey
	case placing && len(live)+len(ended) < max(1, a.Placement.Nodes):
		// Some nodes of the launch are missing (a crash inside the
		// provider's launch): asking again with the key completes it.
		s.log.Info("reconcile: completing a partial launch", zap.String("job", id), zap.String("key", a.LaunchKey), zap.Int("found", len(live)+len(ended)))
		s.launch(ctx, rec)
		return a.LaunchKey
	case placing:
		s.launched(ctx, id, a.N, live)
		return a.LaunchKey
	case len(live) == 0:
		if err := s.instanceLost(ctx, id, a.LaunchKey, a.Instances, "instance not found at the provider"); err != nil {
			s.log.Warn("reconcile: requeueing job", zap.String("job", id), zap.Error(err))
		}
		return ""
	}
	return a.LaunchKey
}

// claim marks a job in flight for a reconciliation step; false if some
// other action holds it.
func (s *Scheduler) claim(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index[id]
	if e == nil || e.inflight {
		return false
	}
	e.inflight = true
	return true
}

// collectOrphans terminates live instances that no current attempt owns,
// after checking the bucket (not the possibly lagging index) for each.
func (s *Scheduler) collectOrphans(ctx context.Context, byKey map[string][]providers.Instance, owned map[string]bool) {
	for key, insts := range byKey {
		if owned[key] {
			continue
		}
		var live []providers.Instance
		for _, in := range insts {
			if !in.State.Ended() {
				live = append(live, in)
			}
		}
		if len(live) == 0 {
			continue
		}
		jobID := live[0].JobID
		if jobID != "" && job.ValidID(jobID) {
			rec, _, err := s.jobs.Get(ctx, jobID)
			if err != nil && !errors.Is(err, events.ErrNotFound) {
				continue // cannot tell: leave it for the next round
			}
			if err == nil && !rec.Status.State.Terminal() && ((rec.Status.Current != nil && rec.Status.Current.LaunchKey == key) ||
				(rec.Status.Previous != nil && rec.Status.Previous.LaunchKey == key)) {
				continue
			}
		}
		s.metrics.orphans.Add(int64(len(live)))
		s.log.Warn("terminating orphaned instances", zap.String("job", jobID), zap.String("key", key), zap.Int("instances", len(live)))
		s.terminateAll(ctx, jobID, live, "no active attempt owns it")
	}
}
