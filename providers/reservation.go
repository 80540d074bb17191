package providers

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Reservation is reserved capacity held for a term: Count instances of one
// instance type in a region (and zone), paid Price per instance-hour from
// Start to End whether used or not. It stands for an AWS On-Demand Capacity
// Reservation or Capacity Block for ML, an Azure reservation, or a
// simulated one. Instances launched on it are on-demand instances targeted
// at it, sold as reserved offers: the hours are paid already, so a job put
// on a free slot costs nothing more, and it is used first.
type Reservation struct {
	// ID names it: the cloud's reservation ID ("cr-...") or a name.
	ID           string `json:"id"`
	Provider     string `json:"provider"`
	Region       string `json:"region"`
	Zone         string `json:"zone,omitempty"`
	InstanceType string `json:"instance_type"`
	Count        int    `json:"count"`
	// CapacityBlock marks a short term bought ahead (a Capacity Block for
	// ML): its instances end with it.
	CapacityBlock bool      `json:"capacity_block,omitempty"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	// Price is what one instance-hour of the term costs, used or not.
	Price money.Micros `json:"price_per_hour"`
}

// Validate checks a reservation is usable, naming the field at fault.
func (r Reservation) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, f := range []struct{ name, v string }{{"id", r.ID}, {"provider", r.Provider}, {"region", r.Region}, {"instance_type", r.InstanceType}} {
		if f.v == "" {
			bad(f.name, "is required")
		}
	}
	if r.Count < 1 {
		bad("count", "%d: must be at least 1", r.Count)
	}
	if r.Start.IsZero() {
		bad("start", "is required (RFC 3339, such as 2026-12-01T00:00:00Z)")
	}
	if !r.End.After(r.Start) {
		bad("end", "%s is not after the start %s", r.End.Format(time.RFC3339), r.Start.Format(time.RFC3339))
	}
	if r.Price <= 0 {
		bad("price_per_hour", "%s: a reservation costs something per instance-hour", r.Price)
	}
	return errors.Join(errs...)
}

// Active reports whether the term covers t: Start <= t < End.
func (r Reservation) Active(t time.Time) bool { return !t.Before(r.Start) && t.Before(r.End) }

// paidTo is what one slot has cost from the start up to t (clipped to the
// term), rounded once: idle spans telescope on it, so their costs add up
// to the whole exactly.
func (r Reservation) paidTo(t time.Time) money.Micros {
	t = clipTime(t, r.Start, r.End)
	return r.Price.ForDuration(t.Sub(r.Start))
}

func clipTime(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

// ReservationUse is one instance's time on a reservation: from its launch
// to its end (To zero: it still runs).
type ReservationUse struct {
	Instance string    `json:"instance,omitempty"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to,omitzero"`
}

// IdleSpan is a stretch of a reservation's term in which Slots of its
// instances were paid for and not used: [From, To) x Slots, costing Cost.
type IdleSpan struct {
	From  time.Time    `json:"from"`
	To    time.Time    `json:"to"`
	Slots int          `json:"slots"`
	Cost  money.Micros `json:"cost"`
}

// ReservationUsage is how a reservation has been used up to AsOf.
type ReservationUsage struct {
	AsOf time.Time `json:"as_of"`
	// Paid is the term so far, every slot: Count x Price x elapsed.
	Paid      money.Micros `json:"paid"`
	PaidHours float64      `json:"paid_hours"`
	// Used is what of it instances used (Paid less Idle, exactly).
	Used      money.Micros `json:"used"`
	UsedHours float64      `json:"used_hours"`
	// Idle is what was paid and not used: the sum of the spans' costs.
	Idle      money.Micros `json:"idle"`
	IdleHours float64      `json:"idle_hours"`
	// Utilization is UsedHours / PaidHours (0 before the term starts).
	Utilization float64    `json:"utilization"`
	Spans       []IdleSpan `json:"idle_spans"`
}

// Usage works out, from the instance lifetimes that used the reservation,
// its idle spans up to asOf (clipped to the term) and what they cost. A
// span's cost is Slots x (what a slot had cost at To less at From), each
// rounded once from the start, so the spans' costs telescope: they add up
// exactly to what the idle time costs, and Used + Idle = Paid to the
// micro-dollar. Uses outside the term count for nothing; more instances
// than slots at once leave no slot idle (and no more than Count used).
func (r Reservation) Usage(uses []ReservationUse, asOf time.Time) ReservationUsage {
	end := clipTime(asOf, r.Start, r.End)
	u := ReservationUsage{AsOf: asOf, Spans: []IdleSpan{}}
	if !end.After(r.Start) || r.Count < 1 {
		return u
	}
	type edge struct {
		at    time.Time
		delta int
	}
	edges := []edge{{r.Start, 0}, {end, 0}}
	for _, use := range uses {
		to := use.To
		if to.IsZero() || to.After(end) {
			to = end
		}
		from := clipTime(use.From, r.Start, end)
		if !to.After(from) {
			continue
		}
		edges = append(edges, edge{from, 1}, edge{to, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	busy := 0
	for i := 0; i < len(edges); {
		at := edges[i].at
		for ; i < len(edges) && edges[i].at.Equal(at); i++ {
			busy += edges[i].delta
		}
		if i == len(edges) || !at.Before(end) {
			break
		}
		next := edges[i].at
		idle := r.Count - min(busy, r.Count)
		if idle == 0 || !next.After(at) {
			continue
		}
		if n := len(u.Spans); n > 0 && u.Spans[n-1].To.Equal(at) && u.Spans[n-1].Slots == idle {
			u.Spans[n-1].To = next
			continue
		}
		u.Spans = append(u.Spans, IdleSpan{From: at, To: next, Slots: idle})
	}
	for i := range u.Spans {
		sp := &u.Spans[i]
		sp.Cost = (r.paidTo(sp.To) - r.paidTo(sp.From)).MulInt(sp.Slots)
		u.Idle += sp.Cost
		u.IdleHours += float64(sp.Slots) * sp.To.Sub(sp.From).Hours()
	}
	u.Paid = r.paidTo(end).MulInt(r.Count)
	u.PaidHours = float64(r.Count) * end.Sub(r.Start).Hours()
	u.Used = u.Paid - u.Idle
	u.UsedHours = max(u.PaidHours-u.IdleHours, 0)
	if u.PaidHours > 0 {
		u.Utilization = u.UsedHours / u.PaidHours
	}
	return u
}

// CompareReservations orders reservations by provider, region, zone,
// instance type and ID.
func CompareReservations(a, b Reservation) int {
	return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Region, b.Region), cmp.Compare(a.Zone, b.Zone),
		cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.ID, b.ID))
}
