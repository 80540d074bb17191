package ledger

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/money"
)

// View is every server's copy of the ledger, kept current by following its
// stream: the charges, compactly, for the cost reports, each team's spend
// per calendar month for its budget, and running totals for the metrics.
type View struct {
	log *zap.Logger

	mu      sync.RWMutex
	rows    []Row
	months  map[teamMonth]money.Micros
	totals  map[SpendKey]money.Micros
	owed    map[SpendKey]money.Micros
	byJob   map[string]money.Micros
	garbled int
	ready   chan struct{}
}

// Row is one entry as the view keeps it.
type Row struct {
	ID       string
	Reverses string
	Instance string
	Start    time.Time
	End      time.Time
	Price    money.Micros
	Cost     money.Micros
	ListCost money.Micros
	Quantity float64
	Attempt  int
	Recorded time.Time
	*Dims
}

// Dims are the dimensions an entry is reported by, shared between the
// entries that have the same.
type Dims struct {
	Kind         Kind
	Category     string
	Unit         string
	Provider     string
	Region       string
	Zone         string
	InstanceType string
	Purchase     string
	GPU          string
	GPUs         int
	Reservation  string
	JobID        string
	Team         string
}

// SpendKey is what the spend metric is labelled by.
type SpendKey struct{ Team, Provider, Purchase string }

type teamMonth struct {
	team  string
	month int64 // Unix seconds of the month's first instant, UTC
}

// NewView returns an empty view; Follow fills it.
func NewView(log *zap.Logger) *View {
	return &View{log: log, months: map[teamMonth]money.Micros{}, totals: map[SpendKey]money.Micros{}, owed: map[SpendKey]money.Micros{},
		byJob: map[string]money.Micros{}, ready: make(chan struct{})}
}

// Follow reads the ledger into the view and keeps it current until stop;
// Ready is closed once what was stored when it started is in.
func (v *View) Follow(ctx context.Context, bus *events.Bus) (stop func(), err error) {
	var once sync.Once
	return bus.FollowLedger(ctx, v.take, func() { once.Do(func() { close(v.ready) }) })
}

// Ready is closed once the view holds the whole ledger as it was when
// Follow started.
func (v *View) Ready() <-chan struct{} { return v.ready }

// Garbled counts stored entries the view could not read.
func (v *View) Garbled() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.garbled
}

func (v *View) take(m events.LedgerMsg) {
	var e Entry
	err := json.Unmarshal(m.Data, &e)
	if err == nil {
		err = e.Check()
	}
	if err != nil {
		v.mu.Lock()
		v.garbled++
		v.mu.Unlock()
		v.log.Warn("skipping a garbled ledger entry", zap.String("subject", m.Subject), zap.Uint64("seq", m.Seq), zap.Error(err))
		return
	}
	v.Add(e)
}

var dimsCache sync.Map // unique.Handle[Dims] -> *Dims

// DimsOf are an entry's dimensions: one copy of each set, shared by every
// row and report that has it.
func DimsOf(e *Entry) *Dims {
	d := Dims{Kind: e.Kind, Category: e.Category, Unit: e.Unit, Provider: e.Provider, Region: e.Region, Zone: e.Zone,
		InstanceType: e.InstanceType, Purchase: e.Purchase, GPU: e.GPU, GPUs: e.GPUs, Reservation: e.Reservation,
		JobID: e.JobID, Team: e.Team}
	h := unique.Make(d)
	dp, ok := dimsCache.Load(h)
	if !ok {
		dp, _ = dimsCache.LoadOrStore(h, &d)
	}
	return dp.(*Dims)
}

// Add takes one entry into the view (Follow calls it for each stored one).
func (v *View) Add(e Entry) {
	r := Row{ID: e.ID, Reverses: e.Reverses, Instance: e.Instance, Start: e.Start.UTC(), End: e.End.UTC(), Price: e.PricePerHour,
		Cost: e.Cost, ListCost: e.ListCost, Quantity: e.Quantity, Attempt: e.Attempt, Recorded: e.RecordedAt.UTC(), Dims: DimsOf(&e)}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rows = append(v.rows, r)
	// The totals only grow: a reversal is owed, and taken from the next
	// charge of the same key (which a reversal's new version is).
	k := SpendKey{r.Team, r.Provider, r.Purchase}
	if r.Cost < 0 {
		v.owed[k] -= r.Cost
	} else {
		pay := min(r.Cost, v.owed[k])
		v.owed[k] -= pay
		v.totals[k] += r.Cost - pay
	}
	if r.JobID != "" {
		v.byJob[r.JobID] += r.Cost
	}
	// The row's cost by calendar month, cut exactly at month edges.
	for lo := r.Start; ; {
		start := monthStart(lo)
		hi := start.AddDate(0, 1, 0)
		v.months[teamMonth{r.Team, start.Unix()}] += r.CostUpTo(hi) - r.CostUpTo(lo)
		if !hi.Before(r.End) {
			break
		}
		lo = hi
	}
}

// CostUpTo is what the row bills from its start up to t: its price for
// the time up to t, capped by its cost, and all of its cost from its end.
// Cutting a row at edges by differences of CostUpTo telescopes to its cost
// exactly; a reversal cuts as what it reverses, negated.
func (r *Row) CostUpTo(t time.Time) money.Micros {
	switch {
	case !t.After(r.Start):
		return 0 // a one-off charge too: it counts from just after it
	case !t.Before(r.End):
		return r.Cost
	}
	c := r.Price.ForDuration(t.Sub(r.Start))
	if r.Cost < 0 {
		return -min(c, -r.Cost)
	}
	return min(c, r.Cost)
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// MonthSpend is what team's charges cost in the calendar month (UTC) that
// holds t.
func (v *View) MonthSpend(team string, t time.Time) money.Micros {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.months[teamMonth{team, monthStart(t).Unix()}]
}

// Totals are the spend so far per team, provider and purchase option, as
// a counter: they never go down (a reversal is taken from the next charge
// of its key, its new version), so a reader never sees a dip between a
// reversal and the charge that replaces it.
func (v *View) Totals() map[SpendKey]money.Micros {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[SpendKey]money.Micros, len(v.totals))
	for k, c := range v.totals {
		out[k] = c
	}
	return out
}

// JobTotal is what the ledger bills a job so far: the sum of its entries.
func (v *View) JobTotal(jobID string) money.Micros {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.byJob[jobID]
}

// Each calls fn, under the view's read lock, with every row that bills
// something in [from, to) (a one-off charge: made then), until fn returns
// false.
func (v *View) Each(from, to time.Time, fn func(*Row) bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for i := range v.rows {
		r := &v.rows[i]
		if r.End.Equal(r.Start) {
			if r.Start.Before(from) || !r.Start.Before(to) {
				continue
			}
		} else if !r.End.After(from) || !r.Start.Before(to) {
			continue
		}
		if !fn(r) {
			return
		}
	}
}

// Entry is the row as an entry (its job's name and labels are not kept).
func (r *Row) Entry() Entry {
	return Entry{ID: r.ID, Kind: r.Kind, Category: r.Category, Reverses: r.Reverses, Start: r.Start, End: r.End,
		PricePerHour: r.Price, Quantity: r.Quantity, Unit: r.Unit, Cost: r.Cost, ListCost: r.ListCost,
		Provider: r.Provider, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, Purchase: r.Purchase,
		GPU: r.GPU, GPUs: r.GPUs, Instance: r.Instance, Reservation: r.Reservation, JobID: r.JobID, Attempt: r.Attempt, Team: r.Team,
		RecordedAt: r.Recorded}
}
