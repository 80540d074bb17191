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
