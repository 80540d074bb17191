package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// place carries out one placement: it records the attempt (queued ->
// placing, with the launch key) before buying anything, then launches.
// Because the key is stored first, a crash at any point is repaired by
// reconciliation launching again with the same key, which buys nothing
// twice.
func (s *Scheduler) place(ctx context.Context, p Placement) {
	defer s.done(p.JobID)
	now := s.o.Clock.Now()
	o := p.Offer
	rec, err := s.modify(ctx, p.JobID, func(r *job.Record) error {
		if !r.NeedsPlacement() {
			return errSkip
		}
		r.Status.Attempt++
		n := r.Status.Attempt
		r.Status.Current = &job.Attempt{
			N: n, LaunchKey: job.LaunchKey(r.ID, n), PlacedAt: now, MaxPrice: p.MaxPrice,
			Placement: job.Placement{
				OfferID: o.ID(), Provider: o.Provider, Region: o.Region, Zone: o.Zone,
				InstanceType: o.InstanceType, GPU: o.GPU, GPUs: o.GPUs, Nodes: p.Nodes,
				Purchase: string(o.Purchase), PricePerHour: o.Price,
			},
			EstimatedRuntime: job.Duration(p.Estimate.Runtime),
			EstimatedCost:    p.Estimate.Cost,
		}
		msg := fmt.Sprintf("placing on %d x %s in %s (%s, %s/h)", p.Nodes, o.InstanceType, o.Zone, o.Purchase, o.Price.Human())
		if prev := r.Status.Previous; prev != nil {
			// A replacement: its workload starts once the attempt it
			// replaces has had its chance to checkpoint.
			if prev.Notice != nil && prev.Notice.Deadline.After(now) {
				r.Status.Current.StartAfter = prev.Notice.Deadline
			}
			r.Status.Message = "replacement " + msg
			r.Status.UpdatedAt = now
			return nil
		}
		return r.MoveTo(job.Placing, now, msg)
	})
	if err != nil {
		s.log.Warn("recording placement", zap.String("job", p.JobID), zap.Error(err))
		return
	}
	if rec == nil {
		return
	}
	a := rec.Status.Current
	s.metrics.placements.Add(1)
	s.log.Info("placing job", zap.String("job", rec.ID), zap.String("offer", a.Placement.OfferID), zap.Stringer("price", a.Placement.PricePerHour), zap.Duration("runtime", p.Estimate.Runtime), zap.Stringer("cost", p.Estimate.Cost))
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindPlacing, State: rec.Status.State, Attempt: a.N, Placement: &a.Placement,
		Message: fmt.Sprintf("expected runtime %s, expected cost %s", human(p.Estimate.Runtime), p.Estimate.Cost.Human())}, a.LaunchKey+"-placing")
	s.launch(ctx, rec)
}

// launch buys the capacity of a record's current attempt with its key.
func (s *Scheduler) launch(ctx context.Context, rec *job.Record) {
	a := rec.Status.Current
	cloud, ok := s.o.Clouds[a.Placement.Provider]
	if !ok {
		s.launchRefused(ctx, rec.ID, a, fmt.Errorf("no provider %q is configured", a.Placement.Provider))
		return
	}
	req := providers.LaunchRequest{
		IdempotencyKey: a.LaunchKey, Offer: s.offerFor(a.Placement), Count: max(1, a.Placement.Nodes),
		MaxPrice: a.MaxPrice, JobID: rec.ID, Attempt: a.N,
		Tags:     map[string]string{"spotwise:job": rec.ID, "spotwise:attempt": strconv.Itoa(a.N), "spotwise:name": rec.Spec.Name, "spotwise:team": rec.Spec.Team},
		Workload: s.workloadOf(rec),
	}
	var insts []providers.Instance
	var err error
	for try := 0; try < s.o.LaunchRetries; try++ {
		insts, err = cloud.Launch(ctx, req)
		if err == nil || refused(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(1<<try) * 100 * time.Millisecond)
	}
	switch {
	case err == nil:
		s.launched(ctx, rec.ID, a.N, insts)
	case refused(err):
		s.launchRefused(ctx, rec.ID, a, err)
	default:
		// The outcome is unknown (the cloud may have started the
		// instances): the job stays placing and reconciliation asks again
		// with the same key.
		s.metrics.launchErrors.Add(1)
		s.log.Warn("launch failed; will retry with the same key", zap.String("job", rec.ID), zap.String("offer", a.Placement.OfferID), zap.Error(err))
	}
}

// refused reports whether a launch error is a definite "no": nothing was
// bought, so the job can be placed elsewhere.
func refused(err error) bool {
	return providers.IsInsufficientCapacity(err) || errors.Is(err, providers.ErrUnknownOffer)
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

// defaultCheckpointTime is assumed for a job that does not say how long
// its checkpoints take.
const defaultCheckpointTime = time.Minute

// workloadOf is what the agent on the instances needs: the command, the
// size of the work, where it resumes from, and its checkpoint plan, with
// the periodic interval chosen from the checkpoint time and the offer's
// interruption rate (Young/Daly) unless the job fixes it.
func (s *Scheduler) workloadOf(r *job.Record) providers.Workload {
	spec := &r.Spec
	a := r.Status.Current
	ck := spec.Checkpoint
	plan := providers.CheckpointPlan{Disabled: ck.Disabled, Duration: ck.Duration.D(), SizeGB: ck.SizeGB,
		Signal: ck.Signal, Command: ck.Command, URI: ck.URI, Interval: ck.Interval.D()}
	if plan.Duration == 0 {
		plan.Duration = defaultCheckpointTime
	}
	if plan.Interval == 0 && !plan.Disabled {
		plan.Interval = bidding.CheckpointInterval(plan.Duration, s.interruptionRate(a.Placement))
	}
	w := providers.Workload{
		Image: spec.Image, Command: spec.Command, Env: spec.Env,
		ReferenceGPU: spec.Work.ReferenceGPU, ReferenceSeconds: spec.Work.ReferenceDuration(spec.TotalGPUs()).Seconds(),
		Class: spec.Class(), Checkpoint: plan, StartAfter: a.StartAfter,
	}
	if c := r.Status.Checkpoint; c != nil {
		w.ResumeFrom = c.Progress
	}
	return w
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

// launched records the instances of an attempt. If the job was cancelled
// meanwhile, they are terminated at once.
func (s *Scheduler) launched(ctx context.Context, id string, n int, insts []providers.Instance) {
	now := s.o.Clock.Now()
	var stale, cancelled bool
	rec, err := s.modify(ctx, id, func(r *job.Record) error {
		stale, cancelled = false, false
		a := r.Status.Current
		if a == nil || a.N != n {
			stale = true
			return errSkip
		}
		changed := false
		for _, in := range insts {
			if !slices.Contains(a.Instances, in.ID) {
				a.Instances = append(a.Instances, in.ID)
				changed = true
			}
			if a.LaunchedAt.IsZero() || (!in.LaunchedAt.IsZero() && in.LaunchedAt.Before(a.LaunchedAt)) {
				a.LaunchedAt = in.LaunchedAt
				changed = true
			}
			if in.State == providers.InstanceRunning && !slices.Contains(a.Running, in.ID) {
				a.Running = append(a.Running, in.ID)
				changed = true
			}
		}
		if a.LaunchedAt.IsZero() {
			a.LaunchedAt = now
		}
		if r.Status.State.Terminal() {
			cancelled = true
			r.EndAttempt(now, "cancelled")
			return nil
		}
		if r.Status.State == job.Placing && len(a.Running) >= max(1, a.Placement.Nodes) {
			a.RunningAt = now
			return r.MoveTo(job.Running, now, "running")
		}
		if !changed {
			return errSkip
		}
		return nil
	})
	if err != nil {
		s.log.Warn("recording launch", zap.String("job", id), zap.Error(err))
		return
	}
	if stale || cancelled {
		s.terminateAll(ctx, id, insts, "attempt no longer wanted")
		return
	}
	if rec == nil {
		return
	}
	a := rec.Status.Current
	s.emit(ctx, &events.JobEvent{JobID: id, Kind: events.KindLaunched, State: rec.Status.State, Attempt: n, Placement: &a.Placement,
		Message: fmt.Sprintf("launched %s", joinIDs(a.Instances))}, a.LaunchKey+"-launched")
	if rec.Status.State == job.Running {
		s.emitRunning(ctx, rec)
	}
}

func (s *Scheduler) emitRunning(ctx context.Context, rec *job.Record) {
	a := rec.Status.Current
	s.emit(ctx, &events.JobEvent{JobID: rec.ID, Kind: events.KindRunning, State: job.Running, Attempt: a.N, Placement: &a.Placement, Progress: rec.Status.Progress,
		Message: fmt.Sprintf("running on %s", joinIDs(a.Instances))}, a.LaunchKey+"-running")
}

// launchRefused puts a job back in the queue after a definite launch
// failure and, for lack of capacity, keeps the offer out of the next cycles.
func (s *Scheduler) launchRefused(ctx context.Context, id string, a *job.Attempt, cause error) {
	now := s.o.Clock.Now()
	s.metrics.launchErrors.Add(1)
	if providers.IsInsufficientCapacity(cause) {
		s.book.markUnavailable(a.Placement.OfferID, now.Add(s.o.UnavailableFor))
	}
	msg := "launch failed: " + cause.Error()
	rec, err := s.modify(ctx, id, func(r *job.Record) error {
		if r.Status.Current == nil || r.Status.Current.N != a.N {
			return errSkip
		}
		r.EndAttempt(now, "launch-failed")
		if r.Status.State.Terminal() {
			return nil
		}
		return r.MoveTo(job.Queued, now, msg)
	})
	if err != nil {
		s.log.Warn("recording launch failure", zap.String("job", id), zap.Error(err))
		return
	}
	s.log.Info("launch refused; job requeued", zap.String("job", id), zap.String("offer", a.Placement.OfferID), zap.Error(cause))
	if rec != nil {
		s.emit(ctx, &events.JobEvent{JobID: id, Kind: events.KindLaunchFailed, State: rec.Status.State, Attempt: a.N, Placement: &a.Placement, Message: msg}, a.LaunchKey+"-launch-failed")
	}
}

// cleanup finishes a terminal job that still holds an attempt (it was
// cancelled while placing or running): terminate, bill, close.
func (s *Scheduler) cleanup(ctx context.Context, id string) {
	rec, _, err := s.jobs.Get(ctx, id)
	if err != nil || !rec.Status.State.Terminal() || (rec.Status.Current == nil && rec.Status.Previous == nil) {
		return
	}
	for _, prev := range []bool{true, false} {
		a := rec.Status.Current
		if prev {
			a = rec.Status.Previous
		}
		if a == nil {
			continue
		}
		insts := s.liveInstances(ctx, a)
		s.terminateAll(ctx, id, insts, "job "+string(rec.Status.State))
		now := s.o.Clock.Now()
		closed, err := s.modify(ctx, id, func(r *job.Record) error {
			slot := r.Status.Current
			if prev {
				slot = r.Status.Previous
			}
			if slot == nil || slot.N != a.N {
				return errSkip
			}
			if prev {
				r.EndPrevious(now, "preempted")
			} else {
				r.EndAttempt(now, string(r.Status.State))
			}
			return nil
		})
		if err != nil {
			s.log.Warn("closing attempt", zap.String("job", id), zap.Error(err))
			return
		}
		if closed != nil && len(insts) > 0 {
			s.emit(ctx, &events.JobEvent{JobID: id, Kind: events.KindTerminated, State: closed.Status.State, Attempt: a.N, Cost: closed.Status.EndedCost,
				Message: "terminated " + joinIDs(idsOf(insts))}, a.LaunchKey+"-terminated")
		}
	}
}

// liveInstances finds an attempt's instances that have not ended, asking
// the cloud (the record may not list them all after a crash).
func (s *Scheduler) liveInstances(ctx context.Context, a *job.Attempt) []providers.Instance {
	cloud, ok := s.o.Clouds[a.Placement.Provider]
	if !ok {
		return nil
	}
	all, err := cloud.Instances(ctx)
	if err != nil {
		s.log.Warn("listing instances", zap.String("provider", cloud.Name()), zap.Error(err))
		// Fall back to what the record knows.
		var out []providers.Instance
		for _, id := range a.Instances {
			out = append(out, providers.Instance{ID: id, Provider: a.Placement.Provider})
		}
		return out
	}
	var out []providers.Instance
	for _, in := range all {
		if in.IdempotencyKey == a.LaunchKey && !in.State.Ended() {
			out = append(out, in)
		}
	}
	return out
}

// terminateAll terminates instances, retrying each a few times; what still
// fails is left to reconciliation, which terminates every instance no
// active attempt owns.
func (s *Scheduler) terminateAll(ctx context.Context, id string, insts []providers.Instance, why string) {
	for _, in := range insts {
		cloud, ok := s.o.Clouds[in.Provider]
		if !ok {
			continue
		}
		var err error
		for try := 0; try < 3; try++ {
			if err = cloud.Terminate(ctx, in.ID); err == nil {
				break
			}
			time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
		}
		if err != nil {
			s.log.Warn("terminating instance", zap.String("job", id), zap.String("instance", in.ID), zap.Error(err))
			continue
		}
		s.metrics.terminations.Add(1)
		s.log.Info("terminated instance", zap.String("job", id), zap.String("instance", in.ID), zap.String("reason", why))
	}
}

func idsOf(insts []providers.Instance) []string {
	out := make([]string, len(insts))
	for i, in := range insts {
		out[i] = in.ID
	}
	return out
}

func joinIDs(ids []string) string {
	switch len(ids) {
	case 0:
		return "no instances"
	case 1:
		return ids[0]
	case 2, 3:
		s := ids[0]
		for _, id := range ids[1:] {
			s += ", " + id
		}
		return s
	}
	return fmt.Sprintf("%s and %d more", ids[0], len(ids)-1)
}

// instancesOf turns a record's instance IDs into instances to terminate.
func instancesOf(a *job.Attempt) []providers.Instance {
	out := make([]providers.Instance, len(a.Instances))
	for i, id := range a.Instances {
		out[i] = providers.Instance{ID: id, Provider: a.Placement.Provider}
	}
	return out
}
