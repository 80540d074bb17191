package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// launch buys the capacity of an attempt with its launch key and tells the
// lifecycle how it went, in one of three kinds: bought (the instances),
// refused (nothing bought: for lack of capacity, the offer or its scope is
// kept out of placements for a while; for a reason retrying will not
// change, the job is kept off it), or unknown (the provider may have
// started the instances; the launch is asked again with the same key,
// which buys nothing twice, a bounded number of times). The attempt is
// recorded before this is called, so a crash at any point is repaired by
// reconciliation asking again with the same key.
func (s *Scheduler) launch(ctx context.Context, rec *job.Record, a job.Attempt) {
	if !s.claimLaunch(a.LaunchKey) {
		return // the same launch is under way
	}
	defer s.releaseLaunch(a.LaunchKey)
	cloud, ok := s.o.Clouds[a.Placement.Provider]
	if !ok {
		s.book.launched(a.LaunchKey, false)
		s.launchOutcome(ctx, rec.ID, a, &providers.LaunchRefusedError{OfferID: a.Placement.OfferID, Code: "NoProvider",
			Reason: fmt.Sprintf("no provider %q is configured", a.Placement.Provider), Scope: providers.ScopeProvider}, nil)
		return
	}
	offer := s.offerFor(a.Placement)
	req := providers.LaunchRequest{
		IdempotencyKey: a.LaunchKey, Offer: offer, Count: max(1, a.Placement.Nodes),
		MaxPrice: a.MaxPrice, JobID: rec.ID, Attempt: a.N, Tags: attemptTags(rec, a), Workload: s.workloadOf(rec, a),
	}
	var insts []providers.Instance
	var err error
	for try := 0; try < s.o.LaunchRetries; try++ {
		insts, err = cloud.Launch(ctx, req)
		if err == nil || definite(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(1<<try) * 100 * time.Millisecond)
	}
	if err == nil {
		s.log.Info("launched", zap.String("job", rec.ID), zap.String("offer", a.Placement.OfferID), zap.Int("instances", len(insts)))
	}
	s.book.launched(a.LaunchKey, err == nil || !definite(err))
	s.launchOutcome(ctx, rec.ID, a, err, insts)
}

// definite reports whether a launch error is a definite "no": nothing
// was bought.
func definite(err error) bool {
	_, refused := providers.AsLaunchRefused(err)
	return refused || providers.IsInsufficientCapacity(err) || errors.Is(err, providers.ErrUnknownOffer)
}

// launchOutcome turns a launch's result into the lifecycle's input.
func (s *Scheduler) launchOutcome(ctx context.Context, id string, a job.Attempt, err error, insts []providers.Instance) {
	var in job.Input
	offer := s.offerFor(a.Placement)
	var ice *providers.InsufficientCapacityError
	refused, isRefused := providers.AsLaunchRefused(err)
	switch {
	case err == nil:
		l := job.Launched{Attempt: a.N, Key: a.LaunchKey}
		for _, x := range insts {
			l.Instances = append(l.Instances, instanceOf(x))
		}
		in = l
	case errors.As(err, &ice):
		s.metrics.launchFailed(a.Placement, launchCapacity)
		until := s.o.Clock.Now().Add(s.o.UnavailableFor)
		if ice.For > 0 {
			until = s.o.Clock.Now().Add(ice.For)
		}
		s.book.markUnavailable(providers.ScopeKey(ice.Scope, offer), until)
		in = job.LaunchRefused{Attempt: a.N, Key: a.LaunchKey, Code: ice.Code, Reason: err.Error()}
	case isRefused:
		s.metrics.launchFailed(a.Placement, launchRefused)
		in = job.LaunchRefused{Attempt: a.N, Key: a.LaunchKey, Permanent: true, Exclude: providers.ScopeKey(refused.Scope, offer),
			Code: refused.Code, Reason: refused.Reason, Account: refused.Account}
	case errors.Is(err, providers.ErrUnknownOffer):
		s.metrics.launchFailed(a.Placement, launchRefused)
		in = job.LaunchRefused{Attempt: a.N, Key: a.LaunchKey, Permanent: true, Exclude: offer.ID(), Code: "UnknownOffer",
			Reason: "the provider does not sell " + offer.ID() + " (any more)"}
	case ctx.Err() != nil:
		return // shutting down: reconciliation asks again with the same key
	default:
		s.metrics.launchFailed(a.Placement, launchUnknown)
		s.log.Warn("launch outcome unknown; will ask again with the same key", zap.String("job", id), zap.String("offer", a.Placement.OfferID), zap.Error(err))
		in = job.LaunchUnknown{Attempt: a.N, Key: a.LaunchKey, Err: err.Error(), MaxTries: s.o.LaunchTries}
	}
	if _, _, aerr := s.apply(ctx, id, in); aerr != nil {
		s.log.Warn("recording a launch", zap.String("job", id), zap.Error(aerr))
	}
}

// claimLaunch marks a launch key as being launched, so reconciliation
// does not ask again while the first call is under way.
func (s *Scheduler) claimLaunch(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.launching[key] {
		return false
	}
	s.launching[key] = true
	return true
}

func (s *Scheduler) releaseLaunch(key string) {
	s.mu.Lock()
	delete(s.launching, key)
	s.mu.Unlock()
}

// offerFor rebuilds the offer of a placement, from the book if it is
// still there.
func (s *Scheduler) offerFor(p job.Placement) providers.Offer {
	if o, ok := s.book.lookup(p.Provider, p.Region, p.OfferID); ok {
		return o
	}
	return providers.Offer{Provider: p.Provider, Region: p.Region, Zone: p.Zone, InstanceType: p.InstanceType,
		GPU: p.GPU, GPUs: p.GPUs, Purchase: providers.PurchaseOption(p.Purchase), Price: p.PricePerHour, Available: -1}
}

// workloadOf is what the agent on the instances needs: the command, the
// size of the work, where it resumes from, and its checkpoint plan, with
// the periodic interval chosen from the checkpoint time and the offer's
// interruption rate (Young/Daly) unless the job fixes it.
func (s *Scheduler) workloadOf(r *job.Record, a job.Attempt) providers.Workload {
	spec := &r.Spec
	ck := spec.Checkpoint
	plan := providers.CheckpointPlan{Disabled: ck.Disabled, Duration: ck.Time(), SizeGB: ck.SizeGB,
		Signal: ck.Signal, Command: ck.Command, URI: ck.URI, Interval: ck.Interval.D()}
	if plan.Interval == 0 && !plan.Disabled {
		plan.Interval = bidding.CheckpointInterval(plan.Duration, s.interruptionRate(a.Placement))
	}
	w := providers.Workload{
		Image: spec.Image, Command: spec.Command, Env: workloadEnv(*spec),
		ReferenceGPU: spec.Work.ReferenceGPU, ReferenceSeconds: spec.Work.ReferenceDuration(spec.TotalGPUs()).Seconds(),
		Class: spec.Class(), Checkpoint: plan, StartAfter: a.StartAfter,
	}
	if c := r.Status.Checkpoint; c != nil {
		w.ResumeFrom = c.Progress
	}
	if s.o.AgentCredentials != nil && s.ownsCredential(a.Placement.Provider, spec.Command) {
		creds, err := s.o.AgentCredentials(r.ID, a.N)
		if err != nil {
			s.log.Error("cannot issue the agent's NATS credential", zap.String("job", r.ID), zap.Int("attempt", a.N), zap.Error(err))
		}
		w.AgentCredentials = creds
	}
	return w
}

// ownsCredential reports whether an attempt's agent gets a NATS
// credential of its own: not when its cloud runs the agent inside the
// server's process (providers.AgentHost), where it reports over the
// server's connection.
func (s *Scheduler) ownsCredential(provider string, command []string) bool {
	h, ok := s.o.Clouds[provider].(providers.AgentHost)
	return !ok || !h.AgentInProcess(command)
}

// attemptEnded tells Options.AttemptEnded of an ended attempt of r,
// unless its agent was given no credential.
func (s *Scheduler) attemptEnded(r *job.Record, n int) {
	if s.o.AttemptEnded == nil {
		return
	}
	for _, a := range r.Status.Attempts {
		if a.N == n && !s.ownsCredential(a.Placement.Provider, r.Spec.Command) {
			return
		}
	}
	s.o.AttemptEnded(r.ID, n)
}

// interruptionRate is how often the placement's capacity is expected to
// be taken back per hour: what its provider says, else the prior for its
// provider and purchase option.
func (s *Scheduler) interruptionRate(p job.Placement) float64 {
	if rr, ok := s.o.Clouds[p.Provider].(providers.RiskReporter); ok {
		if rate, ok := rr.InterruptionRate(p.OfferID); ok {
			return rate
		}
	}
	return bidding.PriorRate(p.Provider, providers.PurchaseOption(p.Purchase))
}

// workloadEnv is what the workload's environment gets: env and
// secret_env together.
func workloadEnv(spec job.Spec) map[string]string {
	if len(spec.SecretEnv) == 0 {
		return spec.Env
	}
	env := make(map[string]string, len(spec.Env)+len(spec.SecretEnv))
	maps.Copy(env, spec.Env)
	maps.Copy(env, spec.SecretEnv)
	return env
}
