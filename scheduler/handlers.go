package scheduler

import (
	"context"
	"fmt"
	"slices"

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
		if r.Status.State == job.Placing && len(a.Running) >= max(1, a.Placement.Nodes) {
			a.RunningAt = now
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

// instanceLost handles capacity that went away under an active attempt:
// the attempt ends, the work since the last kept progress is lost, the
// other nodes are released and the job goes back to the queue.
func (s *Scheduler) instanceLost(ctx context.Context, jobID, key string, ids []string, reason string) error {
	now := s.o.Clock.Now()
	var ended *job.Attempt
	rec, err := s.modify(ctx, jobID, func(r *job.Record) error {
		ended = nil
		a := r.Status.Current
		if a == nil || a.LaunchKey != key || !r.Status.State.Active() {
			return errSkip
		}
		ended = a
		// Without a checkpoint, everything this attempt did is lost.
		lost := bidding.ScaleDuration(r.Spec.Work.ReferenceDuration(r.Spec.TotalGPUs()), r.Status.Progress)
		r.Status.WorkLost += job.Duration(lost)
		r.Status.Progress = 0
		r.EndAttempt(now, "lost")
		return r.MoveTo(job.Queued, now, fmt.Sprintf("instance %s lost: %s", joinIDs(ids), reason))
	})
	if err != nil || rec == nil {
		return err
	}
	s.metrics.instancesLost.Add(1)
	s.log.Warn("instance lost; job requeued", zap.String("job", jobID), zap.Strings("instances", ids), zap.String("reason", reason))
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

// onAgent records what a job's agent reports: progress, and the exit that
// ends the job (or retries it).
func (s *Scheduler) onAgent(ctx context.Context, m events.Message) error {
	rep := m.Payload.(*events.AgentReport)
	if rep.Kind == events.AgentExited {
		return s.exited(ctx, rep)
	}
	now := s.o.Clock.Now()
	var crossed bool
	rec, err := s.modify(ctx, rep.JobID, func(r *job.Record) error {
		a := r.Status.Current
		if a == nil || a.N != rep.Attempt || !r.Status.State.Active() {
			return errSkip
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
	var ended *job.Attempt
	var kind string
	rec, err := s.modify(ctx, rep.JobID, func(r *job.Record) error {
		ended = nil
		a := r.Status.Current
		if a == nil || a.N != rep.Attempt || !r.Status.State.Active() {
			return errSkip
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
	s.metrics.finished.Add(1)
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: kind, State: rec.Status.State, Attempt: ended.N, Placement: &ended.Placement,
		Progress: rec.Status.Progress, Cost: rec.Status.EndedCost, Message: rec.Status.Message}, ended.LaunchKey+"-"+kind)
	s.terminateAll(ctx, rec.ID, instancesOf(ended), rec.Status.Message)
	return nil
}
