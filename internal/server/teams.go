package server

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

// TeamConfig is one team's limits: a monthly budget and a quota on what
// its jobs hold at once. Teams not named in the config have neither.
type TeamConfig struct {
	Budget BudgetConfig `json:"budget"`
	Quota  QuotaConfig  `json:"quota"`
}

// BudgetConfig is a team's monthly budget (calendar month, UTC, of the
// scheduler's clock): what the team was charged this month plus what its
// running jobs are still expected to cost counts against it.
type BudgetConfig struct {
	// MonthlyUSD is the budget in dollars, an exact decimal written as
	// text ("1000.00"); empty: none.
	MonthlyUSD string `json:"monthly_usd"`
	// SoftPercent are the shares of the budget, in percent, at which an
	// alert is raised, once each per month (default 80 and 100).
	SoftPercent []int `json:"soft_percent"`
	// Hard makes the team's new jobs wait (pending reason budget) once
	// placing them would go past the budget; running jobs go on.
	Hard bool `json:"hard"`
}

// QuotaConfig bounds what a team's jobs hold at once (0: no limit): GPUs
// of their live attempts (nodes x GPUs per node), in all and per GPU type
// or family ("A100" counts every A100), and jobs holding capacity.
type QuotaConfig struct {
	GPUs       int            `json:"gpus"`
	GPUsByType map[string]int `json:"gpus_by_type"`
	Jobs       int            `json:"jobs"`
}

// teamNameRE is the form of a team name, as job specs write it.
var teamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// validateTeams names every problem of the teams section.
func validateTeams(teams map[string]TeamConfig, bad func(field, format string, args ...any)) {
	names := make([]string, 0, len(teams))
	for name := range teams {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		tc := teams[name]
		at := "teams." + name
		if !teamNameRE.MatchString(name) {
			bad(at, "%q is not a team name: letters, digits, '.', '_' and '-', starting with a letter or digit", name)
			continue
		}
		b := tc.Budget
		switch m, err := money.Parse(b.MonthlyUSD); {
		case b.MonthlyUSD == "" && (b.Hard || len(b.SoftPercent) > 0):
			bad(at+".budget.monthly_usd", "is required with hard or soft_percent (such as \"1000.00\")")
		case b.MonthlyUSD == "":
		case err != nil:
			bad(at+".budget.monthly_usd", "%q is not an amount of dollars (such as \"1000.00\")", b.MonthlyUSD)
		case m <= 0:
			bad(at+".budget.monthly_usd", "must be above 0")
		}
		for i, p := range b.SoftPercent {
			if p < 1 || p > 100 {
				bad(fmt.Sprintf("%s.budget.soft_percent[%d]", at, i), "%d is not between 1 and 100", p)
			}
		}
		q := tc.Quota
		if q.GPUs < 0 {
			bad(at+".quota.gpus", "must be 0 (no limit) or more")
		}
		if q.Jobs < 0 {
			bad(at+".quota.jobs", "must be 0 (no limit) or more")
		}
		types := make([]string, 0, len(q.GPUsByType))
		for gpu := range q.GPUsByType {
			types = append(types, gpu)
		}
		slices.Sort(types)
		for _, gpu := range types {
			n := q.GPUsByType[gpu]
			switch {
			case strings.TrimSpace(gpu) == "":
				bad(at+".quota.gpus_by_type", "has an empty GPU type")
			case !catalog.Default().KnownGPU(gpu):
				bad(at+".quota.gpus_by_type."+gpu, "unknown GPU type %q (a type or family, as a spec's accelerators)", gpu)
			case n < 1:
				bad(at+".quota.gpus_by_type."+gpu, "must be 1 or more (leave the type out for no limit)")
			case q.GPUs > 0 && n > q.GPUs:
				bad(at+".quota.gpus_by_type."+gpu, "%d is more than the team's quota.gpus of %d", n, q.GPUs)
			}
		}
	}
}

// teamLimits is the teams section as the scheduler takes it (validated
// first: an amount that does not parse is no budget).
func teamLimits(teams map[string]TeamConfig) map[string]scheduler.TeamLimits {
	if len(teams) == 0 {
		return nil
	}
	out := make(map[string]scheduler.TeamLimits, len(teams))
	for name, tc := range teams {
		monthly, _ := money.Parse(tc.Budget.MonthlyUSD)
		out[name] = scheduler.TeamLimits{
			Budget: scheduler.Budget{Monthly: max(monthly, 0), SoftPercent: slices.Clone(tc.Budget.SoftPercent), Hard: tc.Budget.Hard},
			Quota:  scheduler.Quota{GPUs: tc.Quota.GPUs, GPUsByType: tc.Quota.GPUsByType, Jobs: tc.Quota.Jobs},
		}
	}
	return out
}

// teamBudgets are the teams' budgets, as the API reports them.
func teamBudgets(teams map[string]TeamConfig) []api.TeamBudget {
	var out []api.TeamBudget
	for name, l := range teamLimits(teams) {
		out = append(out, api.TeamBudget{Team: name, Monthly: l.Budget.Monthly, SoftPercent: l.Budget.SoftPercent, Hard: l.Budget.Hard})
	}
	return out
}
