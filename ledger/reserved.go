package ledger

import (
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// ReservedIdle turns a reservation's idle spans (providers.Reservation's
// Usage) into overhead entries: one per span, category
// OverheadReservedIdle, costing what the span costs (its slots at the
// reservation's price, telescoped from the term's start, so the entries
// of a period add up exactly to its idle cost) and listed at what the same
// slot-hours would cost on demand (onDemand per instance-hour; zero when
// unknown). An entry's ID names the reservation and the span's bounds, so
// the same span always makes the same entry: record spans of closed
// periods (the last span of a term still under way grows).
func ReservedIdle(r providers.Reservation, spans []providers.IdleSpan, onDemand money.Micros, recordedAt time.Time) []Entry {
	out := make([]Entry, 0, len(spans))
	for _, sp := range spans {
		d := sp.To.Sub(sp.From)
		out = append(out, Entry{
			ID:   "reserved-idle/" + r.ID + "/" + sp.From.UTC().Format(time.RFC3339Nano) + "/" + sp.To.UTC().Format(time.RFC3339Nano),
			Kind: Overhead, Category: OverheadReservedIdle,
			Start: sp.From, End: sp.To,
			Quantity: float64(sp.Slots) * d.Hours(), Unit: "Hours",
			Cost: sp.Cost, ListCost: onDemand.ForDuration(d).MulInt(sp.Slots),
			Provider: r.Provider, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType,
			Purchase: string(providers.Reserved), Reservation: r.ID,
			RecordedAt: recordedAt,
		})
	}
	return out
}

// ReservedIdleHour is the overhead entry of the slot-hours a reservation
// left idle in the hour that starts at hour (UTC, whole), as its uses
// known now say: what the idle slots cost in it (the difference of the
// reservation's idle cost to the hour's end and to its start, exact), at
// most one entry per reservation and hour ("reserved-idle/<id>/<hour>").
// ok is false when no slot was idle in it. Only an hour that is over is
// final: a use that starts later cannot change it.
func ReservedIdleHour(r providers.Reservation, uses []providers.ReservationUse, hour time.Time, onDemand money.Micros, recordedAt time.Time) (Entry, bool) {
	hour = hour.UTC().Truncate(time.Hour)
	from, to := r.Usage(uses, hour), r.Usage(uses, hour.Add(time.Hour))
	cost, hours := to.Idle-from.Idle, to.IdleHours-from.IdleHours
	if cost <= 0 && hours <= 0 {
		return Entry{}, false
	}
	start, end := maxTime(hour, r.Start), minTime(hour.Add(time.Hour), r.End)
	// PricePerHour: what the idle slots cost per hour of the clock over
	// the hour, on average, which is how a report spreads the entry.
	return Entry{
		ID:   "reserved-idle/" + r.ID + "/" + hour.Format(time.RFC3339),
		Kind: Overhead, Category: OverheadReservedIdle,
		Start: start, End: end, PricePerHour: cost.Scale(int64(time.Hour), int64(end.Sub(start))),
		Quantity: hours, Unit: "Hours",
		Cost: cost, ListCost: onDemand.ForDuration(time.Duration(hours * float64(time.Hour))),
		Provider: r.Provider, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType,
		Purchase: string(providers.Reserved), Reservation: r.ID,
		RecordedAt: recordedAt,
	}, true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
