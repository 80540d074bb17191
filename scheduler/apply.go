package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// jobStore is the job-state bucket as the scheduler uses it.
type jobStore interface {
	Get(ctx context.Context, id string) (*job.Record, uint64, error)
	ModifyFrom(ctx context.Context, id string, from *job.Record, rev uint64, fn func(r *job.Record) error) (*job.Record, uint64, error)
	Watch(ctx context.Context, fn func(events.JobChange), ready func()) (stop func(), err error)
}

// publisher puts job history and alerts on the bus.
type publisher interface {
	Publish(ctx context.Context, subject string, p events.Payload, opts ...events.PublishOption) error
}

// ErrDeposed refuses a write by a scheduler whose lease term is over: a
// newer scheduler holds the cluster, and this one's late writes must not
// land.
var ErrDeposed = errors.New("scheduler deposed: its lease term is over")

// apply runs one input through a job's lifecycle: it reads the record,
// applies the input, writes the record back with a revision check (and the
// lease term), and then carries out the effects. It returns the record as
// written (or as read when nothing changed) and what the lifecycle made of
// the input; a job that does not exist is (nil, zero, nil). A refusal is
// logged and counted.
func (s *Scheduler) apply(ctx context.Context, id string, in job.Input) (*job.Record, job.Result, error) {
	rec, res, err := s.tryApply(ctx, id, in)
	if err == nil && res.Verdict == job.Refused {
		s.refused(id, in, res)
	}
	return rec, res, err
}

// refused logs and counts a refused input.
func (s *Scheduler) refused(id string, in job.Input, res job.Result) {
	s.metrics.verdict(in.Name(), string(job.Refused))
	s.log.Warn("event refused", zap.String("job", id), zap.String("event", in.Name()), zap.String("why", res.Why))
}

// tryApply is apply but for a refusal, which the caller logs (refused) if
// it stands: an event about an instance whose launch the record does not
// hold yet is refused, then checked against the provider's listing and
// taken, which is no refusal an operator should hear of.
func (s *Scheduler) tryApply(ctx context.Context, id string, in job.Input) (*job.Record, job.Result, error) {
	now := s.o.Clock.Now()
	var res job.Result
	var ended []int
	var was before
	// From the version the watch brought last, for a job holding an
	// attempt: most inputs are about such jobs, and the versions this
	// process keeps cover only its last few seconds of writes.
	held, heldRev := s.held(id)
	rec, _, err := s.jobs.ModifyFrom(ctx, id, held, heldRev, func(r *job.Record) error {
		if err := s.fence(r); err != nil {
			return err
		}
		before := job.LiveAttempts(r)
		was = beforeOf(r)
		res = job.Apply(r, in, now)
		ended = ended[:0]
		after := job.LiveAttempts(r)
		for _, n := range before {
			if !slices.Contains(after, n) {
				ended = append(ended, n)
			}
		}
		if !res.Changed() {
			return events.ErrNoChange
		}
		if s.o.Term > 0 {
			r.Status.Term = s.o.Term
		}
		return nil
	})
	switch {
	case errors.Is(err, events.ErrNotFound):
		s.metrics.verdict(in.Name(), "no-job")
		return nil, job.Result{Verdict: job.Stale, Why: "no such job"}, nil
	case errors.Is(err, ErrDeposed):
		if s.depose != nil {
			s.depose(ErrDeposed)
		}
		return nil, res, fmt.Errorf("%s for job %s: %w", in.Name(), id, err)
	case err != nil:
		return nil, res, fmt.Errorf("%s for job %s: %w", in.Name(), id, err)
	}
	if res.Verdict != job.Refused {
		s.metrics.verdict(in.Name(), string(res.Verdict))
	}
	if res.Changed() {
		s.noteChange(ctx, rec, in, was)
	}
	s.carryOut(ctx, rec, res.Effects)
	for _, n := range ended {
		s.attemptEnded(rec, n)
	}
	return rec, res, nil
}

// fence refuses the write of a deposed scheduler: its lease is no longer
// valid, or a scheduler of a newer term has written the record.
func (s *Scheduler) fence(r *job.Record) error {
	if s.o.Term == 0 {
		return nil
	}
	if r.Status.Term > s.o.Term || (s.o.LeaseValid != nil && !s.o.LeaseValid()) {
		s.metrics.deposedWrites.Add(1)
		return ErrDeposed
	}
	return nil
}

// tellTimeout bounds the publish of a written change's history entries
// and alerts.
const tellTimeout = 5 * time.Second

// carryOut does what the lifecycle asked for, in order, but for what
// tells of the change (history entries and alerts): those go out first,
// right after the record is written, so that no cloud call (a terminate
// can take seconds, and more while a cloud is slow) holds them back. A
// reader that sees the record's new state finds its history entry with
// it, and a crash while the calls are under way no longer loses them
// (one between the write and the publish still can).
func (s *Scheduler) carryOut(ctx context.Context, rec *job.Record, effects []job.Effect) {
	// With a context of their own: the one that stops Run (a deploy's
	// SIGTERM) does not drop what the record already says.
	tell, cancel := context.WithTimeout(context.WithoutCancel(ctx), tellTimeout)
	for _, e := range effects {
		switch e := e.(type) {
		case job.History:
			s.emitHistory(tell, rec, e)
		case job.Alert:
			s.alert(tell, e.Severity, e.Kind, rec.ID, e.Summary, e.Details, e.ID)
		}
	}
	cancel()
	for _, e := range effects {
		switch e := e.(type) {
		case job.Launch:
			// On a launch worker: the record is written, and writing the
			// next placement must not wait for this one's cloud call, nor
			// for the launches queued before it.
			s.goLaunch(func(ctx context.Context) { s.launch(ctx, rec, e.Attempt) })
		case job.Terminate:
			// On a worker of its own: the input that asked for it (an
			// agent's exit, a notice, an instance's event) goes on
			// while the cloud takes its time, and so do the inputs of
			// the other jobs of its lane. Once Run is on its way out,
			// at once, as before.
			if !s.ends.submit(func(ctx context.Context) { s.terminate(ctx, rec.ID, e) }) {
				s.terminate(ctx, rec.ID, e)
			}
		case job.RequestCheckpoint:
			s.requestCheckpoint(rec.ID, e.Attempt, e.Deadline, e.Reason)
		case job.StartWorkload:
			s.control(rec.ID, e.Attempt, events.ControlStart, time.Time{}, "the checkpoint it resumes from is stored")
		case job.AttemptClosed:
			s.attemptClosed(e.Attempt)
			if reason := moveReason(&e.Attempt); reason != "" {
				s.metrics.vecs().moves.WithLabelValues(reason).Inc()
			}
		case job.WorkDone:
			if !e.Attempt.RunningAt.IsZero() {
				// A whole run from its start to the end of the work: the
				// cleanest measure of the GPU's real speed on this class
				// of work.
				done := rec.Clone()
				a := e.Attempt
				done.Status.Current, done.Status.State, done.Status.Progress = &a, job.Running, 1
				s.learnFromProgress(done, e.At)
			}
		}
	}
}

// emitHistory publishes a history entry, logging (not failing) when it
// cannot: the job's state is in the bucket either way.
func (s *Scheduler) emitHistory(ctx context.Context, rec *job.Record, h job.History) {
	ev := &events.JobEvent{JobID: rec.ID, Kind: h.Kind, State: rec.Status.State, Attempt: h.Attempt, Placement: h.Placement,
		Progress: h.Progress, Message: h.Message}
	if h.Cost {
		ev.Cost = rec.Status.EndedCost
	} else if h.Kind == job.KindProgress {
		ev.Cost = rec.CostAt(s.o.Clock.Now())
	}
	s.emit(ctx, ev, h.ID)
}

// emit publishes a job event.
func (s *Scheduler) emit(ctx context.Context, ev *events.JobEvent, id string) {
	var opts []events.PublishOption
	if id != "" {
		opts = append(opts, events.WithID(id))
	}
	if err := s.pub.Publish(ctx, events.JobEventsSubject(ev.JobID), ev, opts...); err != nil {
		s.log.Warn("publishing job event", zap.String("job", ev.JobID), zap.String("event", ev.Kind), zap.Error(err))
	}
}

// alert publishes an operator alert; delivery to webhooks happens
// elsewhere and never holds the scheduler up.
func (s *Scheduler) alert(ctx context.Context, severity, kind, jobID, summary string, details map[string]string, id string) {
	a := &events.Alert{Severity: severity, Kind: kind, JobID: jobID, Summary: summary, Details: details, Ongoing: ongoing(kind)}
	var opts []events.PublishOption
	if id != "" {
		opts = append(opts, events.WithID(id))
	}
	if err := s.pub.Publish(ctx, events.AlertsSubject(severity), a, opts...); err != nil {
		s.log.Warn("publishing alert", zap.String("job", jobID), zap.String("event", kind), zap.Error(err))
	}
}

// attemptClosed learns from an attempt that ended and counts it.
func (s *Scheduler) attemptClosed(a job.Attempt) {
	switch a.Outcome {
	case job.OutcomeSucceeded:
		s.metrics.finished.Add(1)
		s.learnFromRun(&a, a.EndedAt, false)
	case job.OutcomeFailed, job.OutcomeCostLimit:
		s.metrics.finished.Add(1)
	case job.OutcomeLost:
		s.metrics.instancesLost.Add(1)
		s.learnFromRun(&a, a.EndedAt, true)
	case job.OutcomePreempted:
		s.learnFromRun(&a, a.EndedAt, a.Notice != nil && a.Notice.Kind == job.NoticeSpot)
	case job.OutcomeMoved:
		s.learnFromRun(&a, a.EndedAt, false)
	}
}

// requestCheckpoint asks a job's agent to checkpoint now, without waiting
// for the answer: a core NATS request, so it arrives in milliseconds.
func (s *Scheduler) requestCheckpoint(jobID string, attempt int, deadline time.Time, reason string) {
	s.control(jobID, attempt, events.ControlCheckpoint, deadline, reason)
}

// control sends a request to a job's agent of one attempt, in the
// background.
func (s *Scheduler) control(jobID string, attempt int, kind string, deadline time.Time, reason string) {
	if attempt < 1 {
		return
	}
	s.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := &events.AgentControl{JobID: jobID, Attempt: attempt, Kind: kind, Deadline: deadline, Reason: reason}
		for try := 0; ; try++ {
			_, err := s.bus.RequestEvent(ctx, events.AgentControlSubject(jobID, attempt), req)
			if err == nil {
				break
			}
			// A replacement's agent may still be coming up when its start
			// is sent: ask again for a few seconds (reconciliation asks
			// again after that).
			if kind != events.ControlStart || !errors.Is(err, events.ErrNoResponders) || ctx.Err() != nil {
				s.log.Info("agent did not answer", zap.String("job", jobID), zap.Int("attempt", attempt), zap.String("event", kind), zap.Error(err))
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(min(try+1, 5)) * 100 * time.Millisecond):
			}
		}
		if kind == events.ControlCheckpoint {
			s.metrics.checkpointRequests.Add(1)
		}
	})
}

// terminate ends an attempt's instances; with none named, every instance
// of its launch key the provider lists. What fails is left to
// reconciliation, which asks again.
func (s *Scheduler) terminate(ctx context.Context, jobID string, t job.Terminate) {
	cloud, ok := s.o.Clouds[t.Provider]
	if !ok {
		return
	}
	ids := t.Instances
	if kl, ok := cloud.(providers.KeyLister); ok && len(ids) == 0 {
		insts, err := kl.InstancesByKey(ctx, t.Key)
		if err != nil {
			s.log.Warn("listing instances to terminate", zap.String("job", jobID), zap.String("provider", t.Provider), zap.Error(err))
			return
		}
		for _, in := range insts {
			if !in.State.Ended() {
				ids = append(ids, in.ID)
			}
		}
	} else if len(ids) == 0 {
		insts, err := cloud.Instances(ctx)
		if err != nil {
			s.log.Warn("listing instances to terminate", zap.String("job", jobID), zap.String("provider", t.Provider), zap.Error(err))
			return
		}
		for _, in := range insts {
			if in.IdempotencyKey == t.Key && !in.State.Ended() {
				ids = append(ids, in.ID)
			}
		}
	}
	for _, id := range ids {
		var err error
		for try := 0; try < 3; try++ {
			if err = cloud.Terminate(ctx, id); err == nil {
				break
			}
			time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
		}
		if err != nil {
			s.log.Warn("terminating instance", zap.String("job", jobID), zap.String("instance", id), zap.Error(err))
			continue
		}
		s.metrics.terminations.Add(1)
		s.log.Info("terminated instance", zap.String("job", jobID), zap.String("instance", id), zap.String("reason", t.Why))
	}
}

// instanceOf turns what a provider says of an instance into what the
// lifecycle reads.
func instanceOf(in providers.Instance) job.Instance {
	x := job.Instance{ID: in.ID, LaunchedAt: in.LaunchedAt, RunningAt: in.RunningAt, Reason: in.Reason, Price: in.Price,
		Prices: in.PriceChanges}
	if in.State == providers.InstanceRunning && x.RunningAt.IsZero() {
		x.RunningAt = in.LaunchedAt
	}
	if in.State.Ended() {
		x.EndedAt = in.EndedAt
		if x.EndedAt.IsZero() {
			x.EndedAt = in.LaunchedAt
		}
	}
	return x
}

func attemptTags(rec *job.Record, a job.Attempt) map[string]string {
	return map[string]string{"spotwise:job": rec.ID, "spotwise:attempt": strconv.Itoa(a.N), "spotwise:name": rec.Spec.Name, "spotwise:team": rec.Spec.Team}
}
