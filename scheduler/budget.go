package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// What limited teams hold and spend, kept between cycles: the live
// current attempt of each of their jobs (from the job-state bucket's
// watch), and the placements decided but not yet seen there, so that a
// cycle that runs before the bucket's word comes back still counts them.
// Budget alerts are raised once per team, month and threshold: the meta
// bucket remembers which were raised, across terms and restarts.

// DefaultSoftPercent are the budget shares, in percent, that raise an
// alert when a team's budget names none.
var DefaultSoftPercent = []int{80, 100}

// teamHolds is what one job of a limited team holds: its current
// attempt's GPUs and what that attempt is still expected to cost.
type teamHolds struct {
	gpu     string
	gpus    int
	attempt *job.Attempt // nil for a placement not recorded yet
	cost    money.Micros // a placement not recorded yet: its estimate
	n       int          // the attempt's number
}

// holdsOf is what a record's current attempt holds while it is live.
func holdsOf(r *job.Record) (teamHolds, bool) {
	a := r.Status.Current
	if a == nil || a.Released() || r.Status.State.Terminal() {
		return teamHolds{}, false
	}
	c := *a
	c.Spans = slices.Clone(a.Spans)
	return teamHolds{gpu: a.Placement.GPU, gpus: a.Placement.GPUs * max(1, a.Placement.Nodes), attempt: &c, n: a.N}, true
}

// trackTeam keeps a job's holding in step with its record (nil: gone);
// called with mu held. It reports whether the job let go of what it held:
// its team's queued jobs may fit now.
func (s *Scheduler) trackTeam(id string, r *job.Record) (freed bool) {
	if len(s.o.Teams) == 0 {
		return false
	}
	var team string
	if r != nil {
		team = r.Spec.Team
	} else if t, ok := s.teamOf[id]; ok {
		team = t
	}
	if _, limited := s.o.Teams[team]; !limited {
		return false
	}
	jobs := s.holds[team]
	if jobs == nil {
		jobs = map[string]teamHolds{}
		s.holds[team] = jobs
	}
	var h teamHolds
	ok := false
	if r != nil {
		h, ok = holdsOf(r)
	}
	if p, pending := jobs[id]; pending && p.attempt == nil && r != nil && r.Status.Attempt < p.n {
		return false // the placement is on its way: its record comes next
	}
	_, had := jobs[id]
	if ok {
		jobs[id] = h
		s.teamOf[id] = team
	} else {
		delete(jobs, id)
		delete(s.teamOf, id)
	}
	return had && !ok
}

// placing charges a placement to its team until its record comes back;
// called with mu held.
func (s *Scheduler) placing(p Placement, attempt int) {
	team := p.q.Team
	if _, limited := s.o.Teams[team]; !limited {
		return
	}
	if s.holds[team] == nil {
		s.holds[team] = map[string]teamHolds{}
	}
	s.holds[team][p.JobID] = teamHolds{gpu: p.Offer.GPU, gpus: p.Offer.GPUs * max(1, p.Nodes), cost: p.Estimate.Cost, n: attempt}
	s.teamOf[p.JobID] = team
}

// placed forgets a placement that was not recorded (it changed nothing,
// or failed), unless the record came back meanwhile.
func (s *Scheduler) placed(id string, attempt int, recorded bool) {
	if recorded {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	team := s.teamOf[id]
	if h, ok := s.holds[team][id]; ok && h.attempt == nil && h.n == attempt {
		delete(s.holds[team], id)
		delete(s.teamOf, id)
	}
}

// teamStates is every limited team's state at now: what its jobs hold,
// what it spent this month (Options.Spend, read outside the lock) and
// what its live attempts are still expected to cost.
func (s *Scheduler) teamStates(now time.Time) map[string]TeamState {
	if len(s.o.Teams) == 0 {
		return nil
	}
	month := monthStart(now)
	out := make(map[string]TeamState, len(s.o.Teams))
	s.mu.Lock()
	for team, limits := range s.o.Teams {
		st := TeamState{Limits: limits, ByType: map[string]int{}, Month: month}
		for _, h := range s.holds[team] {
			st.GPUs += h.gpus
			st.ByType[h.gpu] += h.gpus
			st.Jobs++
			if h.attempt == nil {
				st.Committed += h.cost
			} else if left := h.attempt.EstimatedCost - h.attempt.CostAt(now); left > 0 {
				st.Committed += left
			}
		}
		out[team] = st
	}
	s.mu.Unlock()
	if s.o.Spend != nil {
		for team, st := range out {
			if st.Limits.Budget.Monthly > 0 {
				st.Spent = s.o.Spend(team, month)
				out[team] = st
			}
		}
	}
	return out
}

// budgetAlerts raises each team's soft budget alerts its spend and
// committed spend have reached, and the hard budget's when a placement
// of the team waits for it (held), once per team and month each.
func (s *Scheduler) budgetAlerts(ctx context.Context, teams map[string]TeamState, held map[string]Pending) {
	for _, team := range slices.Sorted(maps.Keys(teams)) {
		st := teams[team]
		b := st.Limits.Budget
		if b.Monthly <= 0 {
			continue
		}
		soft := b.SoftPercent
		if soft == nil {
			soft = DefaultSoftPercent
		}
		used := st.Spent + st.Committed
		month := st.Month.Format("2006-01")
		for _, pct := range soft {
			if pct <= 0 || used < b.Monthly.Scale(int64(pct), 100) {
				continue
			}
			severity := events.SeverityWarning
			if pct >= 100 {
				severity = events.SeverityCritical
			}
			s.budgetAlert(ctx, fmt.Sprintf("%s.%s.%d", team, month, pct), severity, "budget", "",
				fmt.Sprintf("team %s has used %d%% of its %s budget for %s: %s spent and %s committed to its running jobs",
					team, pct, b.Monthly.Human(), st.Month.Format("January 2006"), st.Spent.Human(), st.Committed.Human()),
				map[string]string{"team": team, "threshold_percent": fmt.Sprint(pct), "budget_usd": b.Monthly.Decimal(),
					"spent_usd": st.Spent.Decimal(), "committed_usd": st.Committed.Decimal(), "month": month})
		}
		if p, ok := held[team]; ok {
			why := p.Reasons[len(p.Reasons)-1].Message
			s.budgetAlert(ctx, fmt.Sprintf("%s.%s.hard", team, month), events.SeverityCritical, "budget-exceeded", p.JobID,
				fmt.Sprintf("team %s's new jobs wait for its budget (job %s first): %s", team, p.JobID, why),
				map[string]string{"team": team, "budget_usd": b.Monthly.Decimal(), "spent_usd": st.Spent.Decimal(),
					"committed_usd": st.Committed.Decimal(), "month": month})
		}
	}
}

// budgetAlertPrefix starts the meta-bucket key of a budget alert raised.
const budgetAlertPrefix = "budget-alert."

// budgetAlert raises one budget alert unless it was raised before: the
// key is created in the meta bucket first, so a restart or a new term
// does not raise it again.
func (s *Scheduler) budgetAlert(ctx context.Context, key, severity, kind, jobID, summary string, details map[string]string) {
	s.mu.Lock()
	raised := s.budgetRaised[key]
	s.budgetRaised[key] = true
	s.mu.Unlock()
	if raised {
		return
	}
	s.spawn(func() {
		if _, err := s.bus.Meta().Create(ctx, budgetAlertPrefix+key, []byte(s.o.Clock.Now().UTC().Format(time.RFC3339))); err != nil {
			if !errors.Is(err, events.ErrExists) {
				s.log.Warn("recording a budget alert", zap.String("key", key), zap.Error(err))
				s.mu.Lock()
				delete(s.budgetRaised, key) // asked again next time
				s.mu.Unlock()
			}
			return
		}
		s.alert(ctx, severity, kind, jobID, summary, details, budgetAlertPrefix+key)
	})
}
