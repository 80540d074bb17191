package scheduler

import (
	"context"
	"fmt"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Voluntary moves: the scheduler moves a running job of its own accord, to
// clearly cheaper capacity (arbitrage) or back to spot from on-demand when
// the deadline policy says so. Nothing is being taken away, so nothing is
// rushed: the job keeps running where it is while it checkpoints (state
// checkpointing, its attempt carrying a notice without a deadline), and
// only once the checkpoint is stored is that capacity released and the job
// placed again, resuming from it. A checkpoint that does not come leaves
// the job where it was (job.MoveTimeout).

// Notice kinds of the scheduler's own moves.
const (
	NoticeReturnToSpot = job.NoticeReturnToSpot
	NoticeCheaper      = job.NoticeCheaper
	NoticeDeadline     = job.NoticeDeadline
)

// ZoneCooldown is how long the zone of an interrupted instance is avoided
// for replacements: a notice often comes in a wave across a zone.
const ZoneCooldown = 10 * time.Minute

// move is a decision to move a running job.
type move struct {
	id      string
	attempt int
	kind    string
	msg     string
	from    string
	to      string
	expect  money.Micros
	staying money.Micros
}

// policyRun reports whether a job's capacity is the deadline policy's to
// choose: purchase auto with a deadline.
func policyRun(r *job.Record) bool {
	return r.Spec.Purchase == job.PurchaseAuto && !r.Status.DeadlineAt.IsZero() && !r.Status.DeadlineMissed
}

// moveCandidate reports whether a running job may be moved of the
// scheduler's accord: it runs (not moving, not under notice) on capacity
// that is not reserved (an idle reservation is paid for anyway), and can
// checkpoint. A job the deadline policy sent to on-demand is asked about
// at once (the policy has its own hysteresis); any other job once it has
// run MinStay where it is, and only with arbitrage on (decideMoves also
// wants a job that is not the policy's to have MinStay of work left).
func (s *Scheduler) moveCandidate(r *job.Record, now time.Time) bool {
	a := r.Status.Current
	if r.Status.State != job.Running || a == nil || a.Notice != nil || r.Status.Previous != nil || a.RunningAt.IsZero() ||
		a.Released() || r.Spec.Checkpoint.Disabled || a.Placement.Purchase == string(providers.Reserved) {
		return false
	}
	if policyRun(r) && a.Placement.Purchase == string(providers.OnDemand) {
		return true
	}
	// On spot, a policy job is the policy's to move (it weighs the move's
	// cost itself), once it has run MinStay where it is: a job placed a
	// moment ago by the same policy is not moved again at once.
	return !s.o.Arbitrage.Off && now.Sub(a.RunningAt) >= s.o.Arbitrage.MinStay
}

// decideMoves looks for clearly cheaper capacity for running jobs, with
// the placement pipeline the queue uses. A job the deadline policy put on
// on-demand asks the policy, the same way `spotwise simulate` asks it
// every step, and goes when it says spot; a policy job on spot looks at
// spot only; any other job at what its spec allows. A job moves when
// finishing elsewhere, the move included (the checkpoint's time where it
// runs, the new capacity's start-up, moving the checkpoint, the risk of
// interruptions there), is expected to cost at most (1 - Saving) of
// finishing the same work where it is, priced by the same model. It never
// moves to an offer of the same GPU type that costs as much or more per
// hour.
func (s *Scheduler) decideMoves(snap Snapshot, recs []*job.Record) []move {
	byID := make(map[string]*job.Record, len(recs))
	runningOn := make(map[string]string, len(recs))
	snap.Jobs = make([]*QueuedJob, 0, len(recs))
	for _, r := range recs {
		a := r.Status.Current
		c := r.Clone()
		c.Status.Previous, c.Status.Current = c.Status.Current, nil // its checkpoint is written where it runs now
		req := RequirementsOf(c)
		q := queuedJob(r)
		// Its team's quota counts what it holds: a move gives that back.
		q.Running = &Running{GPU: a.Placement.GPU, GPUs: a.Placement.GPUs * max(1, a.Placement.Nodes)}
		if policyRun(r) {
			switch a.Placement.Purchase {
			case string(providers.OnDemand):
				q.Running.OnDemandSince = a.RunningAt
			case string(providers.Spot):
				q.Running.SpotSince, q.Running.Offer = a.RunningAt, a.Placement.OfferID
			default:
				v := req.Value()
				v.Purchase = string(job.PurchaseSpot)
				req = unique.Make(v)
			}
		}
		byID[r.ID] = r
		runningOn[r.ID] = a.Placement.OfferID
		q.Req = req
		snap.Jobs = append(snap.Jobs, q)
	}
	var out []move
	for _, p := range DecideMoves(snap, runningOn) {
		r := byID[p.JobID]
		a := r.Status.Current
		cur := a.Placement
		returning := policyRun(r) && cur.Purchase == string(providers.OnDemand)
		onSpot := policyRun(r) && cur.Purchase == string(providers.Spot)
		toOnDemand := onSpot && p.Offer.Purchase != providers.Spot
		switch {
		case p.Offer.ID() == cur.OfferID:
			continue // the best place is where it is
		case returning && p.Offer.Purchase != providers.Spot:
			continue // the policy keeps it on on-demand
		case !returning && !onSpot && p.Estimate.Runtime < s.o.Arbitrage.MinStay:
			continue // too little left to be worth a move for price
		case !onSpot && p.Offer.GPU == cur.GPU && p.Offer.Price >= cur.PricePerHour:
			// The same GPU for as much or more than it was placed at:
			// nothing to gain. (The policy weighed the prices of now.)
			continue
		}
		stay := p.Stay
		if stay <= 0 {
			stay = stayCost(a, r.Status.Progress)
		}
		expect := p.Estimate.Cost + cur.HourlyCost().ForDuration(r.Spec.Checkpoint.Time())
		// The policy's moves are its own decision (it weighed the move's
		// cost); the others must save Saving of finishing where they are.
		if !onSpot && (stay <= 0 || float64(expect) > (1-s.o.Arbitrage.Saving)*float64(stay)) {
			continue
		}
		kind, why := NoticeCheaper, "a clearly cheaper place"
		switch {
		case returning:
			kind, why = NoticeReturnToSpot, "spot is back"
		case toOnDemand:
			kind, why = NoticeDeadline, "the deadline needs on-demand"
		case onSpot:
			why = "the deadline policy finds finishing there cheaper"
		}
		msg := fmt.Sprintf("%s: moving from %s %s in %s (%s/h) to %s %s in %s (%s/h), about %s to finish the work left (the move included) instead of %s; checkpointing first",
			why, cur.InstanceType, cur.Purchase, cur.Zone, cur.PricePerHour.Human(),
			p.Offer.InstanceType, p.Offer.Purchase, p.Offer.Zone, p.Offer.Price.Human(), expect.Human(), stay.Human())
		out = append(out, move{id: r.ID, attempt: a.N, kind: kind, msg: msg, from: cur.OfferID, to: p.Offer.ID(), expect: expect, staying: stay})
	}
	return out
}

// stayCost is what finishing on an attempt's capacity is expected to cost
// from progress on, from its placement's estimate (when its offer is no
// longer in the book to price it).
func stayCost(a *job.Attempt, progress float64) money.Micros {
	if a.StartProgress >= 1 || progress >= 1 {
		return 0
	}
	left := time.Duration(float64(a.EstimatedRuntime.D()) * (1 - progress) / (1 - a.StartProgress))
	return a.Placement.HourlyCost().ForDuration(left)
}

// startMove asks the lifecycle to move a running job.
func (s *Scheduler) startMove(ctx context.Context, m move) {
	_, res, err := s.apply(ctx, m.id, job.StartMove{Attempt: m.attempt, Kind: m.kind, Message: m.msg})
	if err != nil {
		s.log.Warn("moving a running job", zap.String("job", m.id), zap.Error(err))
		return
	}
	if !res.Changed() {
		return
	}
	s.metrics.moves.Add(1)
	s.log.Info("moving running job", zap.String("job", m.id), zap.String("why", m.kind), zap.String("from", m.from),
		zap.String("to", m.to), zap.Stringer("expected", m.expect), zap.Stringer("staying", m.staying))
}

// release lets a finished job's capacity go (it was cancelled, or it
// ended while an attempt was still held): its attempts are reconciled
// with what their providers list, which terminates what is live and closes
// what is gone.
func (s *Scheduler) release(ctx context.Context, id string) {
	rec, _, err := s.jobs.Get(ctx, id)
	if err != nil {
		return
	}
	for _, a := range []*job.Attempt{rec.Status.Current, rec.Status.Previous} {
		if a == nil {
			continue
		}
		if obs, ok := s.observe(ctx, a.Placement.Provider, a.LaunchKey); ok {
			if _, _, err := s.apply(ctx, id, obs); err != nil {
				s.log.Warn("releasing a finished job's capacity", zap.String("job", id), zap.Error(err))
			}
		}
	}
}
