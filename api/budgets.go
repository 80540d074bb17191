package api

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/money"
)

// TeamBudget is a team's monthly budget as the server's config sets it.
type TeamBudget struct {
	Team        string
	Monthly     money.Micros
	SoftPercent []int
	Hard        bool
}

// BudgetStatus is where a team stands against its budget this month (UTC,
// the server's clock): what its jobs were charged (the cost ledger, and
// what its running jobs have run up since), the share of the budget that
// is, and the alert thresholds.
type BudgetStatus struct {
	Team        string       `json:"team"`
	Month       string       `json:"month"`
	Budget      money.Micros `json:"budget_usd"`
	Spent       money.Micros `json:"spent_usd"`
	Used        float64      `json:"used"`
	SoftPercent []int        `json:"soft_percent"`
	Hard        bool         `json:"hard"`
	// Over: the team has spent its budget (with Hard, its new jobs wait).
	Over bool `json:"over"`
}

// WithBudgets gives the service the teams' budgets it reports.
func (s *Service) WithBudgets(b []TeamBudget) *Service {
	s.budgets = slices.Clone(b)
	slices.SortFunc(s.budgets, func(a, b TeamBudget) int { return cmp.Compare(a.Team, b.Team) })
	return s
}

// Budgets is where each team the caller may see stands against its
// monthly budget.
func (s *Service) Budgets(ctx context.Context) ([]BudgetStatus, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	out := []BudgetStatus{}
	for _, b := range s.budgets {
		if b.Monthly <= 0 || !p.Can(auth.ReadJobs, b.Team) {
			continue
		}
		st := BudgetStatus{Team: b.Team, Month: month.Format("2006-01"), Budget: b.Monthly, Spent: s.TeamSpend(b.Team, month),
			SoftPercent: b.SoftPercent, Hard: b.Hard}
		if st.SoftPercent == nil {
			st.SoftPercent = []int{80, 100}
		}
		st.Used = float64(st.Spent) / float64(st.Budget)
		st.Over = st.Spent >= st.Budget
		out = append(out, st)
	}
	return out, nil
}

// httpBudgets serves GET /v1/budgets.
func (s *Service) httpBudgets(w http.ResponseWriter, r *http.Request) {
	res, err := s.Budgets(r.Context())
	respond(w, http.StatusOK, map[string]any{"budgets": res}, err)
}
