package job

import (
	"fmt"
	"time"

	"github.com/spotwise/spotwise/money"
)

// A job's max_cost_usd: once what it has cost, with what the checkpoint it
// stops with is expected to take at the rate it pays, reaches the cap, a
// job that runs and can checkpoint is asked for a checkpoint (a move of
// spotwise's own, kind NoticeCostLimit) and ends as failed once it is
// stored; any other job ends at once. The cost so far only grows while
// capacity is held, so the scheduler asks when CostLimitAt says, and the
// lifecycle checks the same figure again.

// NoticeCostLimit is the move of a job that checkpoints to stop at its
// max_cost_usd.
const NoticeCostLimit = "cost-limit"

// OutcomeCostLimit: spotwise stopped the attempt because the job reached
// its max_cost_usd.
const OutcomeCostLimit Outcome = "cost-limit"

// CostLimit: the job's cost has reached its max_cost_usd (see
// Record.CostLimitAt).
type CostLimit struct{}

// Name says what happened.
func (CostLimit) Name() string { return "cost-limit" }

// CostLimitAt says whether a job with a max_cost_usd has reached it at
// now: its cost so far plus what a checkpoint takes at the rate its live
// capacity is billed. If not, next is when it will at that rate (zero when
// nothing accrues: the job holds no capacity that is billed).
func (r *Record) CostLimitAt(now time.Time) (reached bool, next time.Time) {
	limit := r.Spec.MaxCost
	if limit <= 0 {
		return false, time.Time{}
	}
	var rate money.Micros
	for _, a := range []*Attempt{r.Status.Current, r.Status.Previous} {
		if a != nil {
			rate += a.rate(now)
		}
	}
	cost := r.CostAt(now) + rate.ForDuration(r.Spec.Checkpoint.Time())
	if cost >= limit {
		return true, time.Time{}
	}
	if rate <= 0 {
		return false, time.Time{}
	}
	// When to look again is not money: a float is enough, rounded up to
	// the second so the look does not come a moment early.
	d := time.Duration(float64(limit-cost) / float64(rate) * float64(time.Hour)).Round(time.Second)
	return false, now.Add(max(d, time.Second))
}

// rate is what an attempt is billed per hour at now: its instances that
// run, each at its price, or, before they are known, its nodes from its
// launch. A released attempt is billed to its release until its instances'
// ends are known: nothing more accrues.
func (a *Attempt) rate(now time.Time) money.Micros {
	if a.Released() || a.LaunchedAt.IsZero() || a.LaunchedAt.After(now) {
		return 0
	}
	if len(a.Spans) == 0 {
		return a.Placement.HourlyCost()
	}
	var r money.Micros
	for _, sp := range a.Spans {
		if sp.To.IsZero() && !sp.From.After(now) {
			r += cmpOr(sp.Price, a.Placement.PricePerHour)
		}
	}
	return r
}

func cmpOr(a, b money.Micros) money.Micros {
	if a != 0 {
		return a
	}
	return b
}

func (t *tx) costLimit(CostLimit) {
	s := &t.r.Status
	limit := t.r.Spec.MaxCost
	reached, _ := t.r.CostLimitAt(t.now)
	a := s.Current
	switch {
	case s.State.Terminal():
		t.stale("the job is " + string(s.State))
	case limit <= 0:
		t.refuse("the job has no max_cost_usd")
	case !reached:
		t.stale(fmt.Sprintf("the job has cost %s of its %s", t.r.CostAt(t.now).Human(), limit.Human()))
	case a != nil && a.Notice != nil && a.Notice.Kind == NoticeCostLimit:
		t.duplicate("the job checkpoints to stop already")
	case awaiting(s.Previous):
		// The checkpoint for the notice is on its way: the job stops from
		// it, once it is stored (asked again then).
		t.stale("the job checkpoints for a notice")
	}
	if t.res.Verdict != "" {
		return
	}
	msg := fmt.Sprintf("cost limit %s reached (%s so far)", limit.Human(), t.r.CostAt(t.now).Human())
	switch {
	case a != nil && s.State == Checkpointing && voluntary(a.Notice):
		// A move checkpoints already: its checkpoint stops the job instead.
		a.Notice.Kind = NoticeCostLimit
		s.Message = msg + ": checkpointing, then stopping"
		t.history(KindMove, a.N, nil, s.Message, a.LaunchKey+"-cost-limit")
	case a != nil && s.State == Running && a.Notice == nil && !a.Released() && !a.RunningAt.IsZero() && !t.r.Spec.Checkpoint.Disabled:
		t.beginMove(a, NoticeCostLimit, "", msg+": checkpointing, then stopping")
		t.history(KindMove, a.N, &a.Placement, s.Message, a.LaunchKey+"-cost-limit")
	default:
		// Nothing runs that could checkpoint (or the job cannot): what it
		// has is its last checkpoint.
		t.stopForCost(msg)
	}
}

// stopForCost ends a job at its max_cost_usd: its capacity is released and
// it fails with msg, with an alert.
func (t *tx) stopForCost(msg string) {
	s := &t.r.Status
	n := s.Attempt
	var pl *Placement
	if a := s.Current; a != nil {
		n, pl = a.N, &a.Placement
	}
	t.release(&s.Current, OutcomeCostLimit, "the job reached its cost limit")
	t.release(&s.Previous, OutcomeCostLimit, "the job reached its cost limit")
	t.moveTo(Failed, msg)
	t.history(KindFailed, n, pl, msg, t.r.ID+"-cost-limit")
	cost := t.r.CostAt(t.now)
	t.alert(SeverityWarning, "cost-limit", fmt.Sprintf("job %s (%s) stopped: %s", t.r.Spec.Name, t.r.ID, msg),
		map[string]string{"max_cost_usd": t.r.Spec.MaxCost.Decimal(), "cost_usd": cost.Decimal(), "progress": pct(s.Progress)}, "cost-limit")
}
