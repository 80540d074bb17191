package bidding

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// HoursPerMonth is the month every cloud bills commitments and storage by
// (8760 hours a year / 12); see providers.HoursPerMonth.
const HoursPerMonth = providers.HoursPerMonth

// Term is the length of a commitment, one or three years. It is defined in
// providers, whose configurations and price rows name terms too.
type Term = providers.Term

// Terms.
const (
	Term1Year = providers.Term1Year
	Term3Year = providers.Term3Year
)

// ParseTerm reads "1y" or "3y" ("1yr", "1year", "3-year", "12mo", "36mo"
// too).
func ParseTerm(s string) (Term, error) { return providers.ParseTerm(s) }

// Commitment is reserved or committed capacity: instances of one shape
// bought for a term, paid upfront and/or hourly whether used or not, with
// a penalty for ending it early. Amounts are per instance.
type Commitment struct {
	Provider     string `json:"provider"`
	Region       string `json:"region"`
	InstanceType string `json:"instance_type"`
	// Instances is how many instances the commitment covers (at least 1).
	Instances int  `json:"instances"`
	Term      Term `json:"term"`
	// Upfront is paid once at the start, per instance; it is never
	// refunded.
	Upfront money.Micros `json:"upfront"`
	// Hourly is billed for every hour of the term, per instance, busy or
	// idle.
	Hourly money.Micros `json:"hourly"`
	// Penalty is the share of the hourly payments still owed that ending
	// early costs (Tencent's 20%; AWS sells no exit, which is a penalty of
	// 100%).
	Penalty Share `json:"early_termination_penalty"`
}

// Validate checks a commitment is usable.
func (c Commitment) Validate() error {
	var errs []error
	if c.Term.Months() == 0 {
		errs = append(errs, fmt.Errorf("term %q: want 1y or 3y", c.Term))
	}
	if c.Upfront < 0 || c.Hourly < 0 {
		errs = append(errs, errors.New("upfront and hourly must not be negative"))
	}
	if c.Upfront == 0 && c.Hourly == 0 {
		errs = append(errs, errors.New("a commitment costs something: give an upfront or an hourly price"))
	}
	if c.Penalty < 0 || c.Penalty > Whole {
		errs = append(errs, fmt.Errorf("penalty %s must be between 0%% and 100%%", c.Penalty))
	}
	if c.Instances < 0 {
		errs = append(errs, fmt.Errorf("instances %d must be positive", c.Instances))
	}
	return errors.Join(errs...)
}

func (c Commitment) instances() int { return max(1, c.Instances) }

// PerInstance is what one instance of the commitment costs over the whole
// term: the upfront plus every hour of the term.
func (c Commitment) PerInstance() money.Micros {
	return c.Upfront + c.Hourly.MulInt(int(c.Term.Hours()))
}

// Total is what the commitment costs over its term, every instance.
func (c Commitment) Total() money.Micros { return c.PerInstance().MulInt(c.instances()) }

// HourlyForDiscount is the hourly price of a commitment sold as a discount
// off on-demand: the term's whole cost is on-demand less the discount for
// every hour, of which the upfront is paid at the start and the rest
// hourly. The hourly figure is rounded to the micro-dollar, so the term's
// total can differ from the discount by a few micro-dollars.
func HourlyForDiscount(onDemand money.Micros, discount Share, upfront money.Micros, t Term) (money.Micros, error) {
	switch {
	case onDemand <= 0:
		return 0, errors.New("a discount needs an on-demand price")
	case discount < 0 || discount >= Whole:
		return 0, fmt.Errorf("discount %s must be at least 0%% and below 100%%", discount)
	case t.Months() == 0:
		return 0, fmt.Errorf("term %q: want 1y or 3y", t)
	}
	all := (Whole - discount).Of(onDemand)
	hourly := all - upfront.Scale(1, t.Hours())
	if hourly < 0 {
		return 0, fmt.Errorf("an upfront of %s is more than the whole %s term costs at %s off (%s)",
			upfront.Human(), t, discount, all.MulInt(int(t.Hours())).Human())
	}
	return hourly, nil
}

// EffectiveHourly is what one busy hour costs when the instance is busy for
// the share u of its term: the term's whole cost over the busy hours. It is
// false for no use at all (every hour idle: the cost is all waste).
func (c Commitment) EffectiveHourly(u Share) (money.Micros, bool) {
	if u <= 0 || c.Term.Months() == 0 {
		return 0, false
	}
	// PerInstance / (u/1e6 x hours), exactly.
	return c.PerInstance().Scale(int64(Whole), int64(u)*c.Term.Hours()), true
}

// BreakEven is where a commitment starts to pay off against on-demand.
type BreakEven struct {
	// Utilization is the share of the term an instance must be busy for
	// the commitment to cost no more than on-demand would have for the
	// same hours. Above 1, it never pays off.
	Utilization float64 `json:"utilization"`
	// Busy is that busy time per instance: the on-demand hours that cost
	// as much as the whole commitment, rounded up to the second.
	Busy time.Duration `json:"busy"`
	// PaysOff is false when even a fully busy term costs more than
	// on-demand.
	PaysOff bool `json:"pays_off"`
	// Saving is what a fully busy term saves against on-demand, per
	// instance (negative: what it loses).
	Saving money.Micros `json:"saving_if_always_busy"`
	// Discount is that saving as a share of on-demand.
	Discount float64 `json:"discount"`
}

// BreakEven compares the commitment with paying onDemand for each busy
// hour.
func (c Commitment) BreakEven(onDemand money.Micros) (BreakEven, error) {
	if onDemand <= 0 {
		return BreakEven{}, errors.New("break-even needs an on-demand price")
	}
	if err := c.Validate(); err != nil {
		return BreakEven{}, err
	}
	per := c.PerInstance()
	hours := c.Term.Hours()
	full := onDemand.MulInt(int(hours))
	// Busy seconds = per x 3600 / onDemand, rounded up: big enough for
	// 3-year terms of the dearest machines.
	secs := (int64(per)/int64(onDemand))*3600 + ceilDivInt64((int64(per)%int64(onDemand))*3600, int64(onDemand))
	b := BreakEven{
		Utilization: float64(per) / float64(full),
		Busy:        time.Duration(min(secs, math.MaxInt64/int64(time.Second))) * time.Second,
		Saving:      full - per,
		Discount:    float64(full-per) / float64(full),
	}
	b.PaysOff = per <= full
	return b, nil
}

func ceilDivInt64(a, b int64) int64 { return (a + b - 1) / b }

// Termination is what ending a commitment early costs.
type Termination struct {
	// At is how far into the term it ends.
	At time.Duration `json:"at"`
	// Month is At in billing months (730 h), for display.
	Month float64 `json:"month"`
	// Paid is what was paid up to then: the upfront and the hours of the
	// term so far.
	Paid money.Micros `json:"paid"`
	// Owed is what the rest of the term would still have billed.
	Owed money.Micros `json:"owed"`
	// Penalty is the penalty share of Owed, due on ending.
	Penalty money.Micros `json:"penalty"`
	// Total is Paid + Penalty: the commitment's whole cost when ended at
	// At.
	Total money.Micros `json:"total"`
	// Saved is what ending saves against running the term out (Owed less
	// the penalty); ending is only worth it when the capacity will stay
	// idle.
	Saved money.Micros `json:"saved"`
}

// EndEarly is the cost of ending the commitment at a point of its term,
// every instance. At the end of the term (or after) nothing is owed.
func (c Commitment) EndEarly(at time.Duration) (Termination, error) {
	if err := c.Validate(); err != nil {
		return Termination{}, err
	}
	if at < 0 {
		return Termination{}, fmt.Errorf("ending at %s: before the term starts", at)
	}
	at = min(at, c.Term.Duration())
	n := c.instances()
	paid := (c.Upfront + c.Hourly.ForDuration(at)).MulInt(n)
	owed := c.Total() - paid
	pen := c.Penalty.Of(owed)
	return Termination{
		At: at, Month: at.Hours() / HoursPerMonth,
		Paid: paid, Owed: owed, Penalty: pen, Total: paid + pen, Saved: owed - pen,
	}, nil
}

// Reservation is a commitment as one scheduling decision sees it: how many
// of its instances are idle now and how much of its term is left. Its
// idle hours are paid for whatever happens (a sunk cost), so a job put on
// them costs nothing more: reserved capacity is used first.
type Reservation struct {
	Commitment
	// Free is how many of the commitment's instances are idle now.
	Free int `json:"free"`
	// Left is how much of the term remains.
	Left time.Duration `json:"left"`
	// Overflow is the price per instance-hour of what the reservation
	// does not cover: nodes beyond Free, and time after the term ends
	// (the on-demand price of the shape).
	Overflow money.Micros `json:"overflow_price"`
}

// MarginalCost is what running nodes instances for billed time on the
// reservation adds to the bill: nothing for the idle committed
// instance-time it uses (min(Free, nodes) instances for up to Left), the
// overflow price for the rest. covered is the committed instance-time
// used.
func (r Reservation) MarginalCost(nodes int, billed time.Duration) (cost money.Micros, covered time.Duration) {
	nodes = max(1, nodes)
	if billed <= 0 {
		return 0, 0
	}
	in := min(max(r.Free, 0), nodes)
	span := min(billed, max(r.Left, 0))
	// Instance-time: nodes x billed, of which in x span is covered.
	whole := r.Overflow.MulInt(nodes).ForDuration(billed)
	free := r.Overflow.MulInt(in).ForDuration(span)
	return whole - free, durTimes(span, in)
}

// MarginalPrice is the hourly price per instance to put on a reserved offer
// for a job of nodes instances running billed time: the marginal cost
// spread over the run, zero when the reservation covers all of it. The
// scheduler's cost-to-finish arithmetic then prices the offer right.
func (r Reservation) MarginalPrice(nodes int, billed time.Duration) money.Micros {
	cost, _ := r.MarginalCost(nodes, billed)
	if cost == 0 || billed <= 0 {
		return 0
	}
	// cost / (nodes x hours), exactly, rounded to the micro-dollar.
	return cost.Scale(int64(time.Hour), int64(max(1, nodes))*int64(billed))
}

// CostToFinish is CostToFinish for a reserved offer: the marginal cost of
// the run, with the same startup, runtime and finish.
func (r Reservation) CostToFinish(now time.Time, nodes int, startup, runtime time.Duration) Estimate {
	billed := addSat(startup, runtime)
	cost, _ := r.MarginalCost(nodes, billed)
	return Estimate{Startup: startup, Runtime: runtime, Cost: cost, Finish: now.Add(billed)}
}

// durTimes multiplies a duration by a count, saturating.
func durTimes(d time.Duration, n int) time.Duration {
	if n == 0 || d == 0 {
		return 0
	}
	if d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}
