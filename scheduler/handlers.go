package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// onInstance reacts to an instance starting or ending. Events for attempts
// that are no longer current are ignored: reconciliation terminates any
// instance no current attempt owns.
func (s *Scheduler) onInstance(ctx context.Context, m events.Message) error {
	ev := m.Payload.(*events.InstanceChanged)
	in := ev.Instance
	if in.JobID == "" {
		return nil
	}
	switch ev.Kind {
	case providers.EventInstanceRunning:
		return s.instanceRunning(ctx, in)
	case providers.EventInstanceTerminated, providers.EventInstanceFailed:
		reason := ev.Reason
		if reason == "" {
			reason = in.Reason
		}
		return s.instanceLost(ctx, in.JobID, in.IdempotencyKey, []string{in.ID}, reason)
	}
	return nil
}

func (s *Scheduler) instanceRunning(ctx context.Context, in providers.Instance) error {
	now := s.o.Clock.Now()
	rec, err := s.modify(ctx, in.JobID, func(r *job.Record) error {
		a := r.Status.Current
		if a == nil || a.LaunchKey != in.IdempotencyKey || r.Status.State.Terminal() {
			return errSkip
		}
		if slices.Contains(a.Running, in.ID) {
			return errSkip
		}
		if !slices.Contains(a.Instances, in.ID) {
			a.Instances = append(a.Instances, in.ID)
		}
		a.Running = append(a.Running, in.ID)
		if a.LaunchedAt.IsZero() || in.LaunchedAt.Before(a.LaunchedAt) {
			a.LaunchedAt = in.LaunchedAt
		}
		// A replacement (the job is checkpointing or migrating) runs when
		// its agent starts the workload, after the old attempt is done.
		if r.Status.State == job.Placing && len(a.Running) >= max(1, a.Placement.Nodes) {
			a.RunningAt, a.StartProgress = now, r.Status.Progress
			return r.MoveTo(job.Running, now, "running")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rec != nil && rec.Status.State == job.Running && rec.Status.Current != nil && rec.Status.Current.RunningAt.Equal(now) {
		s.emitRunning(ctx, rec)
	}
	return nil
}

// instanceLost handles capacity that went away under an attempt. For the
// attempt being replaced (its notice ran out) that is expected: it ends as
// preempted, and if its checkpoint did not finish the job falls back to the
// last good one. For the current attempt it is a loss: the attempt ends,
// the work since the last checkpoint is lost, the other nodes are released
// and the job goes back to the queue.
func (s *Scheduler) instanceLost(ctx context.Context, jobID, key string, ids []string, reason string) error {
	now := s.o.Clock.Now()
	var ended *job.Attempt
	var previous, ckptFailed bool
	rec, err := s.modify(ctx, jobID, func(r *job.Record) error {
		ended, previous, ckptFailed = nil, false, false
		if p := r.Status.Previous; p != nil && p.LaunchKey == key {
			ended, previous = p, true
			r.EndPrevious(now, "preempted")
			if r.Status.State == job.Checkpointing {
				// The notice ran out before a checkpoint was stored.
				ckptFailed = true
				fallBack(r)
				return r.MoveTo(job.Migrating, now, "checkpoint did not finish in the notice window: resuming from "+resumePoint(r))
			}
			return nil
		}
		a := r.Status.Current
		if a == nil || a.LaunchKey != key || !r.Status.State.Active() {
			return errSkip
		}
		ended = a
		fallBack(r)
		r.EndAttempt(now, "lost")
		return r.MoveTo(job.Queued, now, fmt.Sprintf("instance %s lost: %s; resuming from %s", joinIDs(ids), reason, resumePoint(r)))
	})
	if err != nil || rec == nil {
		return err
	}
	if previous {
		s.emit(ctx, &events.JobEvent{JobID: jobID, Kind: events.KindPreempted, State: rec.Status.State, Attempt: ended.N, Placement: &ended.Placement,
			Message: fmt.Sprintf("capacity reclaimed (%s)", reason), Cost: rec.Status.EndedCost}, ended.LaunchKey+"-preempted")
		if ckptFailed {
			s.checkpointFailed(ctx, rec, ended.N, "the notice window ran out before the checkpoint was stored")
		}
		s.terminateAll(ctx, jobID, instancesOf(ended), "its capacity was reclaimed")
		return nil
	}
	s.metrics.instancesLost.Add(1)
	s.learnFromRun(ended, now, true)
	s.log.Warn("instance lost; job requeued", zap.String("job", jobID), zap.Strings("instances", ids), zap.String("reason", reason))
	if lost := countOutcome(rec, "lost"); lost >= 3 {
		s.alert(ctx, events.SeverityWarning, "repeated-failures", jobID,
			fmt.Sprintf("job %s (%s) lost its capacity without notice %d times (last: %s)", rec.Spec.Name, jobID, lost, reason),
			map[string]string{"team": rec.Spec.Team}, fmt.Sprintf("%s-alert-lost-%d", jobID, lost))
	}
	s.emit(ctx, &events.JobEvent{JobID: jobID, Kind: events.KindInstanceLost, State: job.Queued, Attempt: ended.N, Placement: &ended.Placement,
		Message: rec.Status.Message, Cost: rec.Status.EndedCost}, ended.LaunchKey+"-lost")
	var others []providers.Instance
	for _, in := range instancesOf(ended) {
		if !slices.Contains(ids, in.ID) {
			others = append(others, in)
		}
	}
	s.terminateAll(ctx, jobID, others, "a sibling node was lost")
	return nil
}

// countOutcome counts a record's ended attempts with an outcome.
func countOutcome(r *job.Record, outcome string) int {
	n := 0
	for _, a := range r.Status.Attempts {
		if a.Outcome == outcome {
			n++
		}
	}
	return n
}

// launchedAt is when the cloud launched an attempt's instances (zero if
// it cannot tell).
func (s *Scheduler) launchedAt(ctx context.Context, a *job.Attempt) time.Time {
	cloud, ok := s.o.Clouds[a.Placement.Provider]
	if !ok {
		return time.Time{}
	}
	insts, err := cloud.Instances(ctx)
	if err != nil {
		return time.Time{}
	}
	var first time.Time
	for _, in := range insts {
		if in.IdempotencyKey == a.LaunchKey && (first.IsZero() || in.LaunchedAt.Before(first)) {
			first = in.LaunchedAt
		}
	}
	return first
}

// fallBack sets a job's progress back to its last good checkpoint (or to
// nothing) and records the work in between as lost.
func fallBack(r *job.Record) {
	kept := 0.0
	if c := r.Status.Checkpoint; c != nil {
		kept = c.Progress
	}
	if r.Status.Progress > kept {
		lost := bidding.ScaleDuration(r.Spec.Work.ReferenceDuration(r.Spec.TotalGPUs()), r.Status.Progress-kept)
		r.Status.WorkLost += job.Duration(lost)
	}
	r.Status.Progress = kept
}

// resumePoint says where a job resumes from, for messages.
func resumePoint(r *job.Record) string {
	if c := r.Status.Checkpoint; c != nil {
		return fmt.Sprintf("the checkpoint at %.0f%% (step %d)", c.Progress*100, c.Step)
	}
	return "the start (no checkpoint)"
}

// onAgent records what a job's agent reports: progress, and the exit that
// ends the job (or retries it).
func (s *Scheduler) onAgent(ctx context.Context, m events.Message) error {
	rep := m.Payload.(*events.AgentReport)
	switch rep.Kind {
	case events.AgentExited:
		return s.exited(ctx, rep)
	case events.AgentCheckpoint:
		return s.checkpointed(ctx, rep)
	case events.AgentCheckpointFailed:
		rec, _, err := s.jobs.Get(ctx, rep.JobID)
		if err != nil {
			return nil
		}
		s.checkpointFailed(ctx, rec, rep.Attempt, rep.Message)
		return nil
	}
	now := s.o.Clock.Now()
	var crossed, started bool
	missed := 0 // attempt whose checkpoint missed its window
	rec, err := s.modify(ctx, rep.JobID, func(r *job.Record) error {
		crossed, started, missed = false, false, 0
		a := r.Status.Current
		if a == nil || a.N != rep.Attempt || !r.Status.State.Active() {
			return errSkip
		}
		if rep.Kind == events.AgentStarted {
			// The workload started from where the agent could resume: it is
			// the truth about the job's progress. Behind what we believed
			// (a newer checkpoint did not verify), the difference is lost.
			if rep.Progress < r.Status.Progress {
				lost := bidding.ScaleDuration(r.Spec.Work.ReferenceDuration(r.Spec.TotalGPUs()), r.Status.Progress-rep.Progress)
				r.Status.WorkLost += job.Duration(lost)
			}
			r.Status.Progress = rep.Progress
			a.StartProgress = rep.Progress
			if rep.Checkpoint != nil {
				r.Status.Checkpoint = rep.Checkpoint
			}
			r.Status.UpdatedAt = now
			if r.Status.State == job.Running {
				return nil
			}
			started = true
			if p := r.Status.Previous; p != nil && r.Status.State == job.Checkpointing {
				// The replacement starts when the old attempt's window is
				// over: its checkpoint did not make it.
				missed = p.N
			}
			if a.RunningAt.IsZero() {
				a.RunningAt = now
			}
			if voluntary(a.Notice) {
				a.Notice = nil // the agent restarted: a move it was checkpointing for is off
			}
			return r.MoveTo(job.Running, now, fmt.Sprintf("running from %.0f%%", rep.Progress*100))
		}
		// Progress is written in steps of 1% to keep the bucket quiet.
		if rep.Progress < r.Status.Progress+0.01 {
			return errSkip
		}
		crossed = int(rep.Progress*10) > int(r.Status.Progress*10)
		r.Status.Progress = rep.Progress
		r.Status.UpdatedAt = now
		return nil
	})
	if err != nil || rec == nil {
		return err
	}
	if missed > 0 {
		s.checkpointFailed(ctx, rec, missed, "the notice window ran out before the checkpoint was stored")
	}
	if started {
		s.emitRunning(ctx, rec)
	}
	if crossed {
		pct := int(rec.Status.Progress * 10)
		s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindProgress, State: rec.Status.State, Attempt: rep.Attempt, Progress: rec.Status.Progress,
			Cost: rec.CostAt(now), Message: fmt.Sprintf("%d%% done", pct*10)}, fmt.Sprintf("%s-progress-%d", job.LaunchKey(rec.ID, rep.Attempt), pct))
	}
	return nil
}

// exited ends an attempt whose command finished: success ends the job;
// failure retries it while retries are left.
func (s *Scheduler) exited(ctx context.Context, rep *events.AgentReport) error {
	now := s.o.Clock.Now()
	// An exit can overtake the record of the launch (after a crash, the
	// agent may finish before reconciliation records the instances): bill
	// from the launch time the cloud knows.
	var launchedAt time.Time
	if rec, _, err := s.jobs.Get(ctx, rep.JobID); err == nil {
		if a := rec.Status.Current; a != nil && a.N == rep.Attempt && a.LaunchedAt.IsZero() {
			launchedAt = s.launchedAt(ctx, a)
		}
	}
	var ended, dropped *job.Attempt
	var kind string
	rec, err := s.modify(ctx, rep.JobID, func(r *job.Record) error {
		ended, dropped = nil, nil
		if p := r.Status.Previous; p != nil && p.N == rep.Attempt && r.Status.State.Active() {
			// The attempt under notice finished its work in the window:
			// the job is done and its replacement is not needed. Any
			// other exit of it (killed with its capacity) changes nothing.
			if rep.ExitCode != 0 {
				return errSkip
			}
			ended, dropped, kind = p, r.Status.Current, events.KindSucceeded
			r.Status.Progress = 1
			r.EndPrevious(now, "succeeded")
			r.EndAttempt(now, "cancelled")
			return r.MoveTo(job.Succeeded, now, "command succeeded (before its capacity went)")
		}
		a := r.Status.Current
		if a == nil || a.N != rep.Attempt || !r.Status.State.Active() {
			return errSkip
		}
		if a.LaunchedAt.IsZero() {
			a.LaunchedAt = launchedAt
			if a.LaunchedAt.IsZero() {
				a.LaunchedAt = a.PlacedAt
			}
		}
		if r.Status.State == job.Placing {
			// The exit overtook the running event.
			a.RunningAt = now
			if err := r.MoveTo(job.Running, now, "running"); err != nil {
				return err
			}
		}
		ended = a
		if rep.ExitCode == 0 {
			kind = events.KindSucceeded
			r.Status.Progress = 1
			r.EndAttempt(now, "succeeded")
			return r.MoveTo(job.Succeeded, now, "command succeeded")
		}
		msg := fmt.Sprintf("command exited with code %d", rep.ExitCode)
		if rep.Message != "" {
			msg += ": " + rep.Message
		}
		r.EndAttempt(now, "failed")
		if r.Status.Retries < r.Spec.MaxRetries {
			r.Status.Retries++
			r.Status.Progress = 0
			kind = events.KindRequeued
			return r.MoveTo(job.Queued, now, fmt.Sprintf("%s; retry %d of %d", msg, r.Status.Retries, r.Spec.MaxRetries))
		}
		kind = events.KindFailed
		return r.MoveTo(job.Failed, now, msg)
	})
	if err != nil || rec == nil {
		return err
	}
	s.log.Info("job attempt ended", zap.String("job", rec.ID), zap.String("event", kind), zap.Stringer("cost", rec.Status.EndedCost))
	s.learnFromRun(ended, now, false)
	if kind == events.KindSucceeded && !ended.RunningAt.IsZero() {
		// A whole run from its start to the end of the work: the cleanest
		// measure of the GPU's real speed on this class of work.
		done := rec.Clone()
		done.Status.Current = ended
		done.Status.State = job.Running
		s.learnFromProgress(done, now)
	}
	if kind == events.KindFailed {
		s.alert(ctx, events.SeverityCritical, "job-failed", rec.ID,
			fmt.Sprintf("job %s (%s) failed after %d attempt(s): %s", rec.Spec.Name, rec.ID, rec.Status.Attempt, rec.Status.Message),
			map[string]string{"team": rec.Spec.Team, "retries": fmt.Sprint(rec.Status.Retries)}, rec.ID+"-alert-failed")
	}
	s.metrics.finished.Add(1)
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: kind, State: rec.Status.State, Attempt: ended.N, Placement: &ended.Placement,
		Progress: rec.Status.Progress, Cost: rec.Status.EndedCost, Message: rec.Status.Message}, ended.LaunchKey+"-"+kind)
	s.terminateAll(ctx, rec.ID, instancesOf(ended), rec.Status.Message)
	if dropped != nil {
		s.terminateAll(ctx, rec.ID, instancesOf(dropped), "the job finished before its replacement was needed")
	}
	return nil
}
