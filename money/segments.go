package money

import "time"

// PriceChange is a change of an hourly price from At on: a spot price that
// moved while an instance ran.
type PriceChange struct {
	At    time.Time `json:"at"`
	Price Micros    `json:"price_per_hour"`
}

// Segment is a stretch of time billed at one hourly price.
type Segment struct {
	From, To time.Time
	Price    Micros
}

// Cost is what the segment bills, rounded once.
func (s Segment) Cost() Micros {
	if !s.To.After(s.From) {
		return 0
	}
	return s.Price.ForDuration(s.To.Sub(s.From))
}

// Segments cuts [from, to) at the price changes that fall inside it: the
// first segment is billed at price, each later one at the change that
// starts it. Changes are in time order; those at or before from set the
// starting price, those at or after to are not reached. Each segment is
// rounded on its own, as a provider bills a price period.
func Segments(from, to time.Time, price Micros, changes []PriceChange) []Segment {
	if !to.After(from) {
		return nil
	}
	out := make([]Segment, 0, 1+len(changes))
	cur := from
	for _, ch := range changes {
		if !ch.At.After(cur) {
			price = ch.Price
			continue
		}
		if !ch.At.Before(to) {
			break
		}
		if ch.Price == price {
			continue
		}
		out = append(out, Segment{From: cur, To: ch.At, Price: price})
		cur, price = ch.At, ch.Price
	}
	return append(out, Segment{From: cur, To: to, Price: price})
}

// Billed is what [from, to) costs at price with its changes: the sum of
// its segments' costs.
func Billed(from, to time.Time, price Micros, changes []PriceChange) Micros {
	var total Micros
	for _, s := range Segments(from, to, price, changes) {
		total += s.Cost()
	}
	return total
}
