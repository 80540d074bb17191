package bidding

import (
	"fmt"
	"time"

	"github.com/spotwise/spotwise/money"
)

// CommitmentQuote is a commitment weighed against on-demand: what it costs,
// where it breaks even, what a busy hour effectively costs at a few
// utilizations, and what ending it early costs. `spotwise quote
// --commitment` prints it.
type CommitmentQuote struct {
	Commitment Commitment   `json:"commitment"`
	OnDemand   money.Micros `json:"on_demand_price"`
	TermHours  int64        `json:"term_hours"`
	// Total is the commitment's cost over the term, every instance;
	// OnDemandTotal what on-demand costs for every hour of the term.
	Total         money.Micros     `json:"total"`
	OnDemandTotal money.Micros     `json:"on_demand_total"`
	BreakEven     BreakEven        `json:"break_even"`
	Effective     []EffectivePrice `json:"effective"`
	EndEarly      []Termination    `json:"end_early"`
}

// EffectivePrice is the commitment at one utilization, per instance.
type EffectivePrice struct {
	Utilization Share `json:"utilization"`
	// PerBusyHour is the commitment's cost over the busy hours.
	PerBusyHour money.Micros `json:"per_busy_hour"`
	// OnDemandCost is what the same busy hours cost on-demand; Saving is
	// that less the commitment (negative: the commitment loses).
	OnDemandCost money.Micros `json:"on_demand_cost"`
	Saving       money.Micros `json:"saving"`
	// VsOnDemand is PerBusyHour relative to on-demand: -0.43 is 43%
	// cheaper.
	VsOnDemand float64 `json:"vs_on_demand"`
}

// DefaultUtilizations are the utilizations a commitment quote shows.
var DefaultUtilizations = []Share{100 * Percent, 80 * Percent, 60 * Percent, 50 * Percent, 40 * Percent, 25 * Percent}

// DefaultEndMonths are the months a commitment quote shows ending early
// at: a third and two thirds into the term.
func DefaultEndMonths(t Term) []int { return []int{t.Months() / 3, 2 * t.Months() / 3} }

// QuoteCommitment weighs a commitment against onDemand per instance-hour
// at the given utilizations (DefaultUtilizations when none) and ending
// months (DefaultEndMonths when none).
func QuoteCommitment(c Commitment, onDemand money.Micros, utilizations []Share, endMonths []int) (CommitmentQuote, error) {
	be, err := c.BreakEven(onDemand)
	if err != nil {
		return CommitmentQuote{}, err
	}
	if len(utilizations) == 0 {
		utilizations = DefaultUtilizations
	}
	if len(endMonths) == 0 {
		endMonths = DefaultEndMonths(c.Term)
	}
	n := max(1, c.Instances)
	q := CommitmentQuote{
		Commitment: c, OnDemand: onDemand, TermHours: c.Term.Hours(),
		Total: c.Total(), OnDemandTotal: onDemand.MulInt(int(c.Term.Hours())).MulInt(n),
		BreakEven: be,
	}
	per := c.PerInstance()
	for _, u := range utilizations {
		eff, ok := c.EffectiveHourly(u)
		if !ok || u > Whole {
			return CommitmentQuote{}, fmt.Errorf("utilization %s: want more than 0%% and at most 100%%", u)
		}
		od := u.Of(onDemand.MulInt(int(c.Term.Hours())))
		q.Effective = append(q.Effective, EffectivePrice{
			Utilization: u, PerBusyHour: eff, OnDemandCost: od, Saving: od - per,
			VsOnDemand: float64(eff-onDemand) / float64(onDemand),
		})
	}
	for _, m := range endMonths {
		if m < 0 || m > c.Term.Months() {
			return CommitmentQuote{}, fmt.Errorf("ending at month %d: the term has %d", m, c.Term.Months())
		}
		t, err := c.EndEarly(time.Duration(m) * HoursPerMonth * time.Hour)
		if err != nil {
			return CommitmentQuote{}, err
		}
		q.EndEarly = append(q.EndEarly, t)
	}
	return q, nil
}
