package bidding

import (
	"math/bits"
	"time"
)

// The baselines of "Can't Be Late" (NSDI '24), in the same model as
// Spotwise, so that comparisons measure the policies and nothing else.
// With several zones they take the cheapest available one (the first in
// order on a tie).

// OnDemandOnly runs on on-demand capacity from start to end.
type OnDemandOnly struct{}

// Name implements Policy.
func (OnDemandOnly) Name() string { return PolicyOnDemandOnly }

// Decide implements Policy.
func (OnDemandOnly) Decide(PolicyState) Choice { return ChooseOnDemand }

// Greedy takes spot whenever it is available and waits for it otherwise,
// until the deadline forces on-demand; from then on it stays there.
type Greedy struct{}

// Name implements Policy.
func (Greedy) Name() string { return PolicyGreedy }

// Decide implements Policy.
func (Greedy) Decide(s PolicyState) Choice {
	if s.onSpot() {
		return s.Guard(s.Current)
	}
	if z, ok := s.cheapestAvailable(); ok {
		return s.Guard(ChooseSpot(z))
	}
	return s.Guard(ChooseIdle)
}

// UniformProgress is the paper's policy: keep the work done at or above
// the uniform line Work*t/window, by these rules:
//   - take spot whenever it is available, even when behind the line, and
//     stay on it until it is preempted;
//   - when idle and behind the line, run on-demand;
//   - once on on-demand, stay there until spot is available and the work
//     done is at or above the line 2 changeovers ahead (hysteresis): the
//     paper's state machine leaves on-demand only for spot, as its
//     reference simulator does;
//   - the safety net (Guard): on-demand when anything else could miss the
//     deadline.
type UniformProgress struct{}

// Name implements Policy.
func (UniformProgress) Name() string { return PolicyUniformProgress }

// Decide implements Policy.
func (UniformProgress) Decide(s PolicyState) Choice {
	if s.onSpot() {
		return s.Guard(s.Current)
	}
	if s.Current.Kind == RunOnDemand && (!s.anyAvailable() || s.behind(s.Elapsed+2*s.Changeover)) {
		return s.Guard(ChooseOnDemand)
	}
	if z, ok := s.cheapestAvailable(); ok {
		return s.Guard(ChooseSpot(z))
	}
	if s.behind(s.Elapsed) {
		return s.Guard(ChooseOnDemand)
	}
	return s.Guard(ChooseIdle)
}

// behind reports whether the work done is below the uniform line at time
// t since the start: done/Work < t/window, compared exactly.
func (s PolicyState) behind(t time.Duration) bool {
	done := s.Work - s.WorkLeft
	window := s.Elapsed + s.TimeLeft
	return lessProduct(done, window, s.Work, t)
}

// lessProduct reports whether a*b < c*d for non-negative durations,
// without overflow.
func lessProduct(a, b, c, d time.Duration) bool {
	if a < 0 || b < 0 || c < 0 || d < 0 {
		return float64(a)*float64(b) < float64(c)*float64(d)
	}
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 < h2 || h1 == h2 && l1 < l2
}

// cheapestAvailable is the available zone with the lowest spot price, the
// first in order on a tie.
func (s PolicyState) cheapestAvailable() (int, bool) {
	best := -1
	for i, z := range s.Zones {
		if z.Available && (best < 0 || z.Price < s.Zones[best].Price) {
			best = i
		}
	}
	return best, best >= 0
}
