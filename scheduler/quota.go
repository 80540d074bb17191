package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Team quotas and budgets: what a team's jobs may hold at once and spend
// in a month. Decide keeps a copy of every limited team's state for the
// cycle and charges each placement to it, so two jobs of one team placed
// in one cycle are counted together. A job counts what its current
// attempt holds while it is live: capacity it is leaving (under a notice,
// or released after a move) does not count, so its replacement is weighed
// like any other placement. Jobs of teams without limits, and teams under
// theirs, are placed as before.

// TeamLimits are what one team's jobs may hold and spend (the server's
// teams config).
type TeamLimits struct {
	Quota  Quota
	Budget Budget
}

// Quota bounds what a team's jobs hold at once: the GPUs of their live
// attempts (nodes x GPUs per node), in all and per GPU type, and how many
// of its jobs hold capacity. Zero is no limit.
type Quota struct {
	GPUs int
	// GPUsByType is keyed by GPU type or family, as a spec's accelerators
	// are ("A100" counts A100-40GB and A100-80GB).
	GPUsByType map[string]int
	Jobs       int
}

// Budget is what a team may spend in a calendar month (UTC, of the
// scheduler's clock): what it was charged this month (Options.Spend) plus
// what its live attempts are still expected to cost (committed).
type Budget struct {
	// Monthly is the budget; zero: none.
	Monthly money.Micros
	// SoftPercent are the shares of Monthly, in percent, at which an
	// alert is raised, once per team and month each.
	SoftPercent []int
	// Hard makes a placement that would take the team past Monthly wait
	// (pending reason budget) with an alert; running jobs go on.
	Hard bool
}

// TeamState is a limited team as a cycle starts: its limits, what its
// jobs hold (GPUs by the offers' GPU type) and what it has spent and
// committed this month (since Month).
type TeamState struct {
	Limits    TeamLimits
	GPUs      int
	ByType    map[string]int
	Jobs      int
	Spent     money.Micros
	Committed money.Micros
	Month     time.Time
}

// teamUse is a team's state as a cycle charges its placements to it.
type teamUse struct {
	name string
	TeamState
}

// teamBook copies the snapshot's team states for one cycle.
func teamBook(teams map[string]TeamState) map[string]*teamUse {
	if len(teams) == 0 {
		return nil
	}
	out := make(map[string]*teamUse, len(teams))
	for name, st := range teams {
		st.ByType = maps.Clone(st.ByType)
		if st.ByType == nil {
			st.ByType = map[string]int{}
		}
		out[name] = &teamUse{name: name, TeamState: st}
	}
	return out
}

// typeKey finds the quota entry that covers a GPU type ("" when none).
func (u *teamUse) typeKey(gpu string) string {
	keys := slices.Sorted(maps.Keys(u.Limits.Quota.GPUsByType))
	for _, k := range keys {
		if gpuMatches(k, gpu) {
			return k
		}
	}
	return ""
}

// heldOf is how many GPUs the team holds under a quota entry.
func (u *teamUse) heldOf(key string) int {
	n := 0
	for gpu, c := range u.ByType {
		if gpuMatches(key, gpu) {
			n += c
		}
	}
	return n
}

// admit says why the team's quota keeps a job from every offer this
// cycle, nil when it does not: more GPUs than the quota allows at all, or
// the team's jobs quota used up. Which offers the quota leaves the job is
// the filter's (blocks), offer by offer: a job holds the GPUs of the
// instances it gets, which may have more than it asks for.
func (u *teamUse) admit(cj *compiledJob, co *compiledOffers) *job.PendingReason {
	q := u.Limits.Quota
	ask := cj.nodes * cj.perNode
	switch {
	case q.GPUs > 0 && ask > q.GPUs:
		return &job.PendingReason{Code: "quota", Message: fmt.Sprintf("the job asks %s, more than team %s's quota of %d (quota.gpus): it cannot be placed while that quota stands",
			plural(ask, "GPU"), u.name, q.GPUs)}
	case q.Jobs > 0 && cj.q.Running == nil && u.Jobs >= q.Jobs:
		return &job.PendingReason{Code: "quota", Message: fmt.Sprintf("team %s has %d of its %s holding capacity (quota.jobs)",
			u.name, u.Jobs, plural(q.Jobs, "job"))}
	}
	if q.GPUs == 0 && len(q.GPUsByType) == 0 {
		return nil
	}
	cj.team = u
	cj.quotaKeys = make([]string, len(co.groups))
	for gi := range co.groups {
		cj.quotaKeys[gi] = u.typeKey(co.groups[gi].name)
	}
	return nil
}

// blocks reports whether placing the job on an offer would take its team
// past a GPU quota, in all or for the offer's GPU type. A running job
// weighed for a move gives back what it holds.
func (u *teamUse) blocks(cj *compiledJob, o *compiledOffer) bool {
	q := u.Limits.Quota
	ask := cj.nodes * o.offer.GPUs
	heldGPU, held := cj.q.held()
	if q.GPUs > 0 && u.GPUs-held+ask > q.GPUs {
		return true
	}
	key := cj.quotaKeys[o.gpu]
	if key == "" {
		return false
	}
	have := u.heldOf(key)
	if heldGPU != "" && gpuMatches(key, heldGPU) {
		have -= held
	}
	return have+ask > q.GPUsByType[key]
}

// quotaMessage says what the team holds against its GPU quotas and what
// the job asks.
func (u *teamUse) quotaMessage(cj *compiledJob) string {
	q := u.Limits.Quota
	var parts []string
	if q.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d of its %s (quota.gpus)", u.GPUs, plural(q.GPUs, "GPU")))
	}
	var keys []string
	for _, k := range cj.quotaKeys {
		if k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	ask := cj.nodes * cj.perNode
	var never []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d of its %d %s GPUs (quota.gpus_by_type.%s)", u.heldOf(k), q.GPUsByType[k], k, k))
		if ask > q.GPUsByType[k] {
			never = append(never, k)
		}
	}
	msg := fmt.Sprintf("team %s holds %s; the job asks %s", u.name, strings.Join(parts, ", "), plural(ask, "GPU"))
	if len(never) > 0 {
		msg += fmt.Sprintf(", more than its %s quota allows at all", strings.Join(never, " and "))
	}
	return msg
}

// take charges a placement to the team for the rest of the cycle.
func (u *teamUse) take(cj *compiledJob, o providers.Offer, nodes int, cost money.Micros) {
	heldGPU, held := cj.q.held()
	u.GPUs += nodes*o.GPUs - held
	u.ByType[o.GPU] += nodes * o.GPUs
	if held > 0 {
		u.ByType[heldGPU] -= held
		return // a move: the same job
	}
	u.Jobs++
	u.Committed += cost
}

// overBudget says why a team's hard budget keeps a job from the placement
// it would get (expected to cost cost), nil when it does not. A job that
// ran and is being moved (a notice, a move) continues: the budget holds
// back new work, not running jobs.
func (u *teamUse) overBudget(cj *compiledJob, cost money.Micros) *job.PendingReason {
	b := u.Limits.Budget
	if !b.Hard || b.Monthly <= 0 || cj.q.Moving || cj.q.Running != nil {
		return nil
	}
	if u.Spent+u.Committed+cost <= b.Monthly {
		return nil
	}
	left := b.Monthly - u.Spent - u.Committed
	state := "is used up"
	if left > 0 {
		state = "has " + left.Human() + " left"
	}
	return &job.PendingReason{Code: "budget", Message: fmt.Sprintf("team %s's budget of %s for %s %s: %s spent so far and %s committed to its running jobs; this job is expected to cost %s",
		u.name, b.Monthly.Human(), u.Month.Format("January 2006"), state, u.Spent.Human(), u.Committed.Human(), cost.Human())}
}

// monthStart is the start of the calendar month (UTC) of t.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
