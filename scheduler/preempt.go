package scheduler

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// ZoneCooldown is how long the zone of an interrupted instance is avoided
// for replacements: a notice often comes in a wave across a zone.
const ZoneCooldown = 10 * time.Minute

// onInterruption handles a provider's notice about an instance.
func (s *Scheduler) onInterruption(ctx context.Context, m events.Message) error {
	n := m.Payload.(*events.Interruption)
	if n.Instance.JobID == "" {
		s.log.Info("notice for an instance of no job; dropped", zap.String("instance", n.Instance.ID), zap.String("event", string(n.Kind)))
		return nil
	}
	switch n.Kind {
	case providers.EventSpotInterruption, providers.EventMaintenance:
		return s.notice(ctx, n)
	case providers.EventRebalance:
		return s.rebalance(ctx, n.Instance)
	}
	return nil
}

// notice moves a job off capacity that is going: the agent is asked to
// checkpoint at once (every millisecond of the window counts), the
// attempt becomes the one being replaced, and the job waits for a
// replacement, which the next cycle chooses with the interrupted offer
// and, for a while, its zone out of the running. A notice overrides a
// move the job was making of its own accord (see move.go).
func (s *Scheduler) notice(ctx context.Context, n *events.Interruption) error {
	in := n.Instance
	now := s.o.Clock.Now()
	deadline := n.Deadline
	s.requestCheckpoint(in.JobID, in.Attempt, deadline, string(n.Kind))
	var dup bool
	var off job.Placement
	rec, err := s.modify(ctx, in.JobID, func(r *job.Record) error {
		dup = false
		a := r.Status.Current
		if a == nil || a.LaunchKey != in.IdempotencyKey || !r.Status.State.Active() {
			if p := r.Status.Previous; p != nil && p.LaunchKey == in.IdempotencyKey {
				dup = true
			}
			return errSkip
		}
		if a.Notice != nil && !voluntary(a.Notice) {
			dup = true
			return errSkip
		}
		off = a.Placement
		a.Notice = &job.Notice{Kind: string(n.Kind), At: now, Deadline: deadline, Instance: in.ID}
		if n.Kind == providers.EventSpotInterruption {
			r.Status.Preemptions++
		}
		r.Replace()
		if r.Spec.Checkpoint.Disabled {
			fallBack(r)
			return r.MoveTo(job.Migrating, now, fmt.Sprintf("%s: the job cannot checkpoint, moving and starting over", n.Kind))
		}
		msg := fmt.Sprintf("%s: checkpointing before %s", n.Kind, deadline.UTC().Format(time.TimeOnly))
		if r.Status.State == job.Checkpointing { // it was moving of its own accord
			r.Status.Message, r.Status.UpdatedAt = msg, now
			return nil
		}
		return r.MoveTo(job.Checkpointing, now, msg)
	})
	if err != nil {
		return err
	}
	switch {
	case dup:
		return nil // the same notice again
	case rec == nil:
		s.log.Info("notice for an instance no current attempt owns; dropped", zap.String("job", in.JobID), zap.String("instance", in.ID))
		return nil
	}
	s.metrics.notices.Add(1)
	if n.Kind == providers.EventSpotInterruption {
		s.learnFromRun(rec.Status.Previous, now, true)
	}
	until := now.Add(s.o.UnavailableFor)
	s.book.markUnavailable(off.OfferID, until)
	s.book.markUnavailable(zoneKey(off.Provider, off.Zone), now.Add(ZoneCooldown))
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindNotice, State: rec.Status.State, Attempt: in.Attempt, Placement: &off,
		Message: rec.Status.Message, Progress: rec.Status.Progress}, in.ID+"-notice-"+string(n.Kind))
	if n.Kind == providers.EventSpotInterruption || n.Kind == providers.EventMaintenance {
		s.alert(ctx, events.SeverityWarning, "preemption", rec.ID,
			fmt.Sprintf("job %s (%s): %s on %s %s in %s; capacity goes at %s, moving it", rec.Spec.Name, rec.ID, n.Kind, off.InstanceType, off.Purchase, off.Zone, deadline.UTC().Format(time.RFC3339)),
			map[string]string{"instance": in.ID, "zone": off.Zone, "deadline": deadline.UTC().Format(time.RFC3339), "progress": fmt.Sprintf("%.0f%%", rec.Status.Progress*100), "team": rec.Spec.Team},
			in.ID+"-alert-"+string(n.Kind))
	}
	s.kick()
	return nil
}

// zoneKey marks a whole zone in the unavailable map.
func zoneKey(provider, zone string) string { return "zone:" + provider + "/" + zone }

// requestCheckpoint asks a job's agent to checkpoint now, without waiting
// for the answer: a core NATS request, so it arrives in milliseconds.
func (s *Scheduler) requestCheckpoint(jobID string, attempt int, deadline time.Time, reason string) {
	if attempt < 1 {
		return
	}
	s.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.bus.RequestEvent(ctx, events.AgentControlSubject(jobID), &events.AgentControl{
			JobID: jobID, Attempt: attempt, Kind: events.ControlCheckpoint, Deadline: deadline, Reason: reason,
		}); err != nil {
			s.log.Warn("asking the agent to checkpoint", zap.String("job", jobID), zap.Int("attempt", attempt), zap.Error(err))
			return
		}
		s.metrics.checkpointRequests.Add(1)
	})
}

// checkpointed records a checkpoint the agent stored. One from the attempt
// being replaced ends its checkpointing: the job moves on.
func (s *Scheduler) checkpointed(ctx context.Context, rep *events.AgentReport) error {
	now := s.o.Clock.Now()
	ck := *rep.Checkpoint
	var moved bool
	var released *job.Attempt
	rec, err := s.modify(ctx, rep.JobID, func(r *job.Record) error {
		moved, released = false, nil
		if r.Status.State.Terminal() {
			return errSkip
		}
		c := r.Status.Checkpoint
		same := c != nil && c.Attempt == ck.Attempt && c.Step == ck.Step
		if c != nil && !same && (c.Attempt > ck.Attempt || (c.Attempt == ck.Attempt && c.Step > ck.Step)) {
			return errSkip // older than what we have
		}
		p := r.Status.Previous
		ending := p != nil && p.N == rep.Attempt && r.Status.State == job.Checkpointing
		a := r.Status.Current
		moving := a != nil && a.N == rep.Attempt && r.Status.State == job.Checkpointing && voluntary(a.Notice)
		if same && !ending && !moving {
			return errSkip // the same one again
		}
		r.Status.Checkpoint = &ck
		r.Status.UpdatedAt = now
		if moving {
			var err error
			released, err = moveCheckpointed(r, rep.Attempt, now)
			moved = true
			return err
		}
		if ending {
			// The agent may report the checkpoint it took for the
			// instance's own notice again when the scheduler asks for
			// one: it ends the checkpointing all the same.
			moved = true
			gone := *p
			released = &gone
			r.Status.Progress = ck.Progress
			return r.MoveTo(job.Migrating, now, fmt.Sprintf("checkpoint at %.0f%% stored; moving", ck.Progress*100))
		}
		return nil
	})
	if err != nil || rec == nil {
		return err
	}
	msg := fmt.Sprintf("checkpoint at %.0f%% (step %d, %s) stored", ck.Progress*100, ck.Step, humanBytes(ck.Size))
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindCheckpoint, State: rec.Status.State, Attempt: rep.Attempt, Progress: ck.Progress, Message: msg},
		fmt.Sprintf("%s-ckpt-%d", job.LaunchKey(rec.ID, rep.Attempt), ck.Step))
	if moved {
		s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindMigrating, State: job.Migrating, Attempt: rep.Attempt, Progress: ck.Progress,
			Message: rec.Status.Message}, job.LaunchKey(rec.ID, rep.Attempt)+"-migrating")
	}
	if released != nil {
		why := "moved"
		if released.Notice != nil && !voluntary(released.Notice) {
			why = "checkpoint stored before its " + released.Notice.Kind
		}
		s.release(ctx, rec.ID, released, why)
		s.kick()
	}
	return nil
}

// checkpointFailed records a checkpoint that did not make it, and alerts.
func (s *Scheduler) checkpointFailed(ctx context.Context, rec *job.Record, attempt int, why string) {
	s.metrics.checkpointFailures.Add(1)
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindCheckpointFailed, State: rec.Status.State, Attempt: attempt, Progress: rec.Status.Progress,
		Message: "checkpoint failed: " + why + "; resuming from " + resumePoint(rec)}, job.LaunchKey(rec.ID, attempt)+"-ckpt-failed")
	s.alert(ctx, events.SeverityWarning, "checkpoint-failed", rec.ID,
		fmt.Sprintf("job %s (%s): checkpoint of attempt %d failed (%s); resuming from %s", rec.Spec.Name, rec.ID, attempt, why, resumePoint(rec)),
		map[string]string{"attempt": fmt.Sprint(attempt), "work_lost": rec.Status.WorkLost.D().String(), "team": rec.Spec.Team},
		job.LaunchKey(rec.ID, attempt)+"-alert-ckpt")
}

// alert publishes an operator alert; delivery to webhooks happens
// elsewhere and never holds the scheduler up.
func (s *Scheduler) alert(ctx context.Context, severity, kind, jobID, summary string, details map[string]string, id string) {
	a := &events.Alert{Severity: severity, Kind: kind, JobID: jobID, Summary: summary, Details: details}
	var opts []events.PublishOption
	if id != "" {
		opts = append(opts, events.WithID(id))
	}
	if err := s.bus.Publish(ctx, events.AlertsSubject(severity), a, opts...); err != nil {
		s.log.Warn("publishing alert", zap.String("job", jobID), zap.String("event", kind), zap.Error(err))
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
