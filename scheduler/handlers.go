package scheduler

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// The handlers turn what comes off NATS into lifecycle inputs. Each
// message names a job, an attempt (or a launch key) and an instance; the
// lifecycle takes it only from that attempt's own instances. An instance
// the record does not list yet (the event overtook the record of its
// launch) is checked against the provider's own listing before the input
// is taken as the provider's word.

// onInstance reacts to an instance starting or ending.
func (s *Scheduler) onInstance(ctx context.Context, _ events.Message, ev *events.InstanceChanged) error {
	in := ev.Instance
	if in.JobID == "" {
		s.metrics.verdict("instance", "no-job")
		return nil
	}
	x := instanceOf(in)
	var input job.Input
	switch ev.Kind {
	case providers.EventInstanceRunning:
		if x.RunningAt.IsZero() {
			x.RunningAt = s.o.Clock.Now()
		}
		input = job.InstanceRunning{Key: in.IdempotencyKey, Instance: x}
	case providers.EventInstanceTerminated, providers.EventInstanceFailed:
		if x.EndedAt.IsZero() {
			x.EndedAt = s.o.Clock.Now()
		}
		if ev.Reason != "" {
			x.Reason = ev.Reason
		}
		input = job.InstanceGone{Key: in.IdempotencyKey, Instance: x}
	default:
		return nil
	}
	return s.applyVerified(ctx, in.JobID, in.Provider, in.IdempotencyKey, input)
}

// applyVerified applies an input; when the lifecycle refuses it for an
// instance the record does not know, the provider's listing of the launch
// key is applied first (the instance may be real and its launch not yet
// recorded), and the input again. Provider "" means the attempt's.
func (s *Scheduler) applyVerified(ctx context.Context, jobID, provider, key string, in job.Input) error {
	rec, res, err := s.tryApply(ctx, jobID, in)
	if err != nil || res.Verdict != job.Refused {
		return err
	}
	if provider == "" && rec != nil {
		for _, a := range []*job.Attempt{rec.Status.Current, rec.Status.Previous} {
			if a != nil && a.LaunchKey == key {
				provider = a.Placement.Provider
			}
		}
	}
	obs, ok := s.observe(ctx, provider, key)
	if !ok || len(obs.Instances) == 0 {
		s.refused(jobID, in, res)
		s.metrics.forged.Add(1)
		return nil
	}
	if _, _, err := s.apply(ctx, jobID, obs); err != nil {
		return err
	}
	_, res, err = s.apply(ctx, jobID, in)
	if err == nil && res.Verdict == job.Refused {
		s.metrics.forged.Add(1)
	}
	return err
}

// observe lists what a provider has for one launch key.
func (s *Scheduler) observe(ctx context.Context, provider, key string) (job.Observed, bool) {
	cloud, ok := s.o.Clouds[provider]
	if !ok {
		return job.Observed{}, false
	}
	listedAt := s.o.Clock.Now()
	if _, ok := cloud.(providers.KeyLister); ok {
		insts, ok := s.byLaunchKey(ctx, provider, key)
		if !ok {
			return job.Observed{}, false
		}
		return observed(key, insts, listedAt), true
	}
	insts, err := cloud.Instances(ctx)
	if err != nil {
		s.log.Warn("listing instances", zap.String("provider", provider), zap.Error(err))
		return job.Observed{}, false
	}
	obs := job.Observed{Key: key, At: listedAt}
	for _, in := range insts {
		if in.IdempotencyKey == key {
			obs.Instances = append(obs.Instances, instanceOf(in))
		}
	}
	return obs, true
}

// onInterruption handles a provider's notice about an instance.
func (s *Scheduler) onInterruption(ctx context.Context, m events.Message, n *events.Interruption) error {
	in := n.Instance
	if jobID, attempt, ok := events.ParseAttemptSubject(m.Subject); ok {
		// An agent's forward: its NATS user can publish only its own
		// attempt's subject, and the notice must be about that attempt.
		if in.JobID != jobID || in.IdempotencyKey != job.LaunchKey(jobID, attempt) {
			s.metrics.forged.Add(1)
			s.log.Warn("an agent's notice about another attempt; dropped", zap.String("subject", m.Subject), zap.String("job", in.JobID), zap.String("key", in.IdempotencyKey))
			return nil
		}
	}
	if in.JobID == "" {
		s.metrics.verdict("interruption", "no-job")
		s.log.Info("notice for an instance of no job; dropped", zap.String("instance", in.ID), zap.String("event", string(n.Kind)))
		return nil
	}
	input := job.Interruption{Key: in.IdempotencyKey, Instance: in.ID, Kind: string(n.Kind), Deadline: n.Deadline}
	rec, res, err := s.tryApply(ctx, in.JobID, input)
	if err == nil && res.Verdict == job.Refused {
		// Spotwise may have launched the instance without the record
		// knowing yet; the provider's listing says.
		if obs, ok := s.observe(ctx, in.Provider, in.IdempotencyKey); ok && hasInstance(obs, in.ID) {
			input.Verified = true
			for _, x := range obs.Instances {
				if x.ID == in.ID {
					input.Listed = x
				}
			}
			rec, res, err = s.apply(ctx, in.JobID, input)
		} else {
			s.metrics.verdict(input.Name(), string(job.Refused))
			s.metrics.forged.Add(1)
			s.log.Warn("notice for an instance spotwise did not launch; dropped", zap.String("job", in.JobID), zap.String("instance", in.ID), zap.String("why", res.Why))
			return nil
		}
	}
	if err != nil || res.Verdict != job.Accepted || n.Kind == providers.EventRebalance && rec.Status.State != job.Checkpointing {
		return err
	}
	// The capacity is going: keep its offer and, for a while, its zone
	// out of the replacement's placement.
	s.metrics.notices.Add(1)
	now := s.o.Clock.Now()
	off := in
	s.book.markUnavailable(providers.ScopeKey(providers.ScopeOffer, offerOfInstance(off)), now.Add(s.o.UnavailableFor))
	s.book.markUnavailable(providers.ScopeKey(providers.ScopeZone, offerOfInstance(off)), now.Add(ZoneCooldown))
	s.kick()
	return nil
}

func hasInstance(obs job.Observed, id string) bool {
	for _, x := range obs.Instances {
		if x.ID == id && x.EndedAt.IsZero() {
			return true
		}
	}
	return false
}

// offerOfInstance is the offer an instance was launched from.
func offerOfInstance(in providers.Instance) providers.Offer {
	return providers.Offer{Provider: in.Provider, Region: in.Region, Zone: in.Zone, InstanceType: in.InstanceType, Purchase: in.Purchase}
}

// onAgent records what a job's agent reports.
func (s *Scheduler) onAgent(ctx context.Context, m events.Message, rep *events.AgentReport) error {
	// The subject is the agent's identity (its NATS user may publish on
	// its own attempt's only): a report about anything else is forged.
	if jobID, attempt, ok := events.ParseAttemptSubject(m.Subject); !ok || jobID != rep.JobID || attempt != rep.Attempt {
		s.metrics.forged.Add(1)
		s.log.Warn("an agent report about another attempt than its subject's; dropped", zap.String("subject", m.Subject), zap.String("job", rep.JobID), zap.Int("attempt", rep.Attempt))
		return nil
	}
	var in job.Input
	switch rep.Kind {
	case events.AgentStarted:
		in = job.AgentStarted{Attempt: rep.Attempt, Instance: rep.InstanceID, Progress: rep.Progress, Checkpoint: rep.Checkpoint}
	case events.AgentProgress:
		if !s.progressWanted(rep) {
			s.metrics.verdict("progress", string(job.Duplicate))
			return nil
		}
		in = job.Progressed{Attempt: rep.Attempt, Instance: rep.InstanceID, Progress: rep.Progress}
	case events.AgentCheckpoint:
		in = job.Checkpointed{Attempt: rep.Attempt, Instance: rep.InstanceID, Checkpoint: *rep.Checkpoint}
	case events.AgentCheckpointFailed:
		in = job.CheckpointFailed{Attempt: rep.Attempt, Instance: rep.InstanceID, Reason: rep.Message}
	case events.AgentExited:
		in = job.Exited{Attempt: rep.Attempt, Instance: rep.InstanceID, Code: rep.ExitCode, Message: rep.Message}
	default:
		return nil // heartbeats change nothing
	}
	return s.applyVerified(ctx, rep.JobID, "", job.LaunchKey(rep.JobID, rep.Attempt), in)
}

// progressWanted says whether a progress report could be written: false
// when the record as last watched (whose progress the store's can only
// have passed) is of the report's attempt and got its progress written
// too lately or too close to the report's (job.ProgressWanted). An agent
// reports as often as its work moves: most reports end here, without a
// read of the record.
func (s *Scheduler) progressWanted(rep *events.AgentReport) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index[rep.JobID]
	if e == nil || e.rev == 0 || e.attempt != rep.Attempt || e.progressAt == 0 {
		return true
	}
	return job.ProgressWanted(rep.Progress, e.progress, time.Unix(0, e.progressAt), s.o.Clock.Now())
}

// Typed handlers: a payload of the wrong type on a subject is a poison
// message, refused once (never redelivered), not a crash.
func instanceHandler(s *Scheduler) events.Handler   { return events.Typed(s.onInstance) }
func agentHandler(s *Scheduler) events.Handler      { return events.Typed(s.onAgent) }
func noticeHandler(s *Scheduler) events.Handler     { return events.Typed(s.onInterruption) }
func offersHandler(s *Scheduler) events.Handler     { return events.Typed(s.onOffers) }
func submissionHandler(s *Scheduler) events.Handler { return events.Typed(s.onSubmitted) }

// onOffers replaces one region of the offer book.
func (s *Scheduler) onOffers(_ context.Context, _ events.Message, u *events.OffersUpdated) error {
	if s.book.replace(u.Provider, u.Region, u.Offers) {
		s.kick()
	}
	return nil
}

// onSubmitted asks for a cycle when a job comes in.
func (s *Scheduler) onSubmitted(context.Context, events.Message, *events.JobSubmitted) error {
	s.kick()
	return nil
}
