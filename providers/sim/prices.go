package sim

import (
	"hash/fnv"
	"strconv"
	"time"

	"github.com/spotwise/spotwise/money"
)

// The spot price walk. A spot price is a seeded, mean-reverting random walk
// around the offer's centre price (catalog.SpotPrice with a per-offer
// jitter): each step adds a shock of at most ±walkShockPPM and keeps
// walkDecayPct percent of the previous deviation. Writing the walk as the
// sum of the last walkWindow shocks, weighted by the decay, makes the price
// at a step a pure function of (seed, offer, step): no state to carry, no
// replay from the beginning of time, and the same answer on every machine
// because it is integer arithmetic throughout. Older shocks weigh less than
// 1% and are left out.
//
// The deviation's typical size is ±7% (at most ±80%), each step moves the
// price by a few percent, and the result is clamped to
// [spotFloorPct, spotCeilPct] of the on-demand price.
const (
	walkWindow   = 96
	walkDecayPct = 95
	walkShockPPM = 40_000 // ±4% per step
	spotFloorPct = 25
	spotCeilPct  = 95
	ppm          = 1_000_000
	weightScale  = 1_000_000_000
)

// walkWeights[j] is walkDecayPct^j in units of 1/weightScale.
var walkWeights = func() [walkWindow]int64 {
	var w [walkWindow]int64
	w[0] = weightScale
	for j := 1; j < walkWindow; j++ {
		w[j] = w[j-1] * walkDecayPct / 100
	}
	return w
}()

// spotPrice is the spot price at a price step of the offer whose walk is
// seeded by h, around centre and bounded by the on-demand price.
func spotPrice(h uint64, centre, onDemand money.Micros, step int64) money.Micros {
	var dev int64 // in ppm * weightScale
	for j := range int64(walkWindow) {
		dev += walkWeights[j] * shock(h, step-j)
	}
	p := centre.Scale(ppm+dev/weightScale, ppm)
	return clampSpot(p, onDemand)
}

// clampSpot keeps a spot price within its bounds relative to on-demand.
func clampSpot(p, onDemand money.Micros) money.Micros {
	lo := onDemand.Scale(spotFloorPct, 100)
	hi := onDemand.Scale(spotCeilPct, 100)
	return min(max(p, lo), hi)
}

// shock is the walk's move at one step, in ppm within ±walkShockPPM.
func shock(h uint64, step int64) int64 {
	return uniform(splitmix(h^splitmix(uint64(step))), -walkShockPPM, walkShockPPM)
}

// stepAt is the number of the price step that contains t; steps are counted
// from the Unix epoch so that every cloud, and every restart of one, agrees.
func stepAt(t time.Time, interval time.Duration) int64 {
	n, d := t.UnixNano(), int64(interval)
	q := n / d
	if n%d < 0 {
		q--
	}
	return q
}

// stepStart is when price step n begins.
func stepStart(n int64, interval time.Duration) time.Time {
	return time.Unix(0, n*int64(interval))
}

// seeded hashes the seed and some labels into 64 well-mixed bits: the source
// of every per-offer random figure, so none depends on iteration order.
func seeded(seed int64, labels ...string) uint64 {
	h := fnv.New64a()
	h.Write(strconv.AppendInt(nil, seed, 10))
	for _, l := range labels {
		h.Write([]byte{0})
		h.Write([]byte(l))
	}
	return splitmix(h.Sum64())
}

// splitmix is the SplitMix64 finaliser: a cheap bijection that spreads
// every input bit over the output.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// uniform maps h onto [lo, hi]. The modulo bias is below 1e-12 for the
// small ranges used here.
func uniform(h uint64, lo, hi int64) int64 {
	return lo + int64(h%uint64(hi-lo+1))
}
