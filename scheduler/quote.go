package scheduler

import "time"

// Book is what the scheduler would place a job over at now: its offer
// book (with the capacity it has taken since the last feed update), the
// offers marked unavailable, the interruption rates blended with what it
// has seen, the throughput corrected by what jobs measured, and the
// geography. It has no jobs. A quote made over it is what this scheduler
// would then do.
func (s *Scheduler) Book(now time.Time) Snapshot {
	bv := s.book.snapshot(now)
	return Snapshot{Now: now, Offers: bv.offers, Unavailable: bv.unavailable, Throughput: s.tp, Geography: s.o.Geography,
		Rates: bv.rates, Policy: s.o.Policy, PolicyStep: s.o.PolicyInterval, base: bv.base, taken: bv.taken}
}
