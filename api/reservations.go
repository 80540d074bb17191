package api

import (
	"context"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// ReservationView is one reservation or capacity block as GET
// /v1/reservations shows it: what it is, how many of its slots are in use
// now, and what its term has cost so far, used and idle. Reservations are
// platform-wide: whoever may observe the platform reads them.
type ReservationView struct {
	ID string `json:"id"`
	// Kind is reservation or capacity-block.
	Kind         string    `json:"kind"`
	Provider     string    `json:"provider"`
	Region       string    `json:"region"`
	Zone         string    `json:"zone,omitempty"`
	InstanceType string    `json:"instance_type"`
	Count        int       `json:"count"`
	InUse        int       `json:"in_use"`
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	// State is upcoming, active or ended.
	State        string       `json:"state"`
	PricePerHour money.Micros `json:"price_per_hour"`
	// Paid is the term so far, every slot; Used what instances used of
	// it; IdleCost the rest (Paid = Used + IdleCost exactly).
	Paid      money.Micros `json:"paid"`
	Used      money.Micros `json:"used"`
	IdleCost  money.Micros `json:"idle_cost"`
	PaidHours float64      `json:"paid_hours"`
	UsedHours float64      `json:"used_hours"`
	IdleHours float64      `json:"idle_hours"`
	// Utilization is used over paid instance-hours (0 to 1).
	Utilization float64 `json:"utilization"`
	// IdleSpans are the stretches of the term with slots idle, when
	// asked for (?spans=true).
	IdleSpans []providers.IdleSpan `json:"idle_spans,omitempty"`
}

// ReservationList is the answer of GET /v1/reservations, with the totals
// of every reservation.
type ReservationList struct {
	AsOf         time.Time         `json:"as_of"`
	Reservations []ReservationView `json:"reservations"`
	Paid         money.Micros      `json:"paid"`
	Used         money.Micros      `json:"used"`
	IdleCost     money.Micros      `json:"idle_cost"`
	// Utilization is used over paid instance-hours of all of them.
	Utilization float64 `json:"utilization"`
}

// ReservationViewOf shows a reservation with its use as of u.AsOf.
func ReservationViewOf(r providers.Reservation, inUse int, u providers.ReservationUsage, spans bool) ReservationView {
	v := ReservationView{ID: r.ID, Kind: "reservation", Provider: r.Provider, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, Count: r.Count, InUse: inUse, Start: r.Start, End: r.End, State: "active",
		PricePerHour: r.Price, Paid: u.Paid, Used: u.Used, IdleCost: u.Idle,
		PaidHours: u.PaidHours, UsedHours: u.UsedHours, IdleHours: u.IdleHours, Utilization: u.Utilization}
	if r.CapacityBlock {
		v.Kind = "capacity-block"
	}
	switch {
	case u.AsOf.Before(r.Start):
		v.State = "upcoming"
	case !u.AsOf.Before(r.End):
		v.State = "ended"
	}
	if spans {
		v.IdleSpans = u.Spans
	}
	return v
}

// NewReservationList sums the views into a list as of asOf.
func NewReservationList(asOf time.Time, views []ReservationView) *ReservationList {
	l := &ReservationList{AsOf: asOf, Reservations: views}
	if l.Reservations == nil {
		l.Reservations = []ReservationView{}
	}
	var paidH, usedH float64
	for _, v := range views {
		l.Paid += v.Paid
		l.Used += v.Used
		l.IdleCost += v.IdleCost
		paidH += v.PaidHours
		usedH += v.UsedHours
	}
	if paidH > 0 {
		l.Utilization = usedH / paidH
	}
	return l
}

// Reservations reads the reservations and their utilization (spans: with
// their idle spans).
func (c *Client) Reservations(ctx context.Context, spans bool) (*ReservationList, error) {
	path := "/v1/reservations"
	if spans {
		path += "?spans=true"
	}
	var l ReservationList
	if err := c.GetJSON(ctx, path, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
