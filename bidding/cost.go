package bidding

import (
	"fmt"
	"math"
	"time"

	"github.com/spotwise/spotwise/money"
)

// ThroughputTable gives a GPU's speed relative to a common reference for a
// throughput class; the catalog implements it.
type ThroughputTable interface {
	RelativeThroughput(gpu, class string) (float64, bool)
}

// Runtime converts work measured on refGPU (refDuration of wall time with
// the job's shape) into the wall time on gpu, for a throughput class.
func Runtime(t ThroughputTable, refDuration time.Duration, refGPU, gpu, class string) (time.Duration, error) {
	ref, ok := t.RelativeThroughput(refGPU, class)
	if !ok || !usable(ref) {
		return 0, fmt.Errorf("no throughput figure for reference GPU %q", refGPU)
	}
	g, ok := t.RelativeThroughput(gpu, class)
	if !ok || !usable(g) {
		return 0, fmt.Errorf("no throughput figure for GPU %q", gpu)
	}
	return ScaleDuration(refDuration, ref/g), nil
}

// usable reports whether a throughput figure can divide: positive and
// finite (NaN fails every comparison).
func usable(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// ScaleDuration multiplies a duration by a positive factor, rounding up to
// the second and saturating instead of overflowing. A NaN result reads as
// forever: an unknown runtime must never look cheap.
func ScaleDuration(d time.Duration, factor float64) time.Duration {
	v := float64(d) * factor
	switch {
	case v >= math.MaxInt64 || math.IsNaN(v):
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	r := time.Duration(v)
	switch rem := r % time.Second; {
	case rem > 0:
		if r > math.MaxInt64-(time.Second-rem) {
			return math.MaxInt64
		}
		r += time.Second - rem
	case rem < 0: // up is toward zero
		r -= rem
	}
	return r
}

// addSat adds two durations, saturating instead of wrapping.
func addSat(a, b time.Duration) time.Duration {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// Estimate is what finishing a job on one offer is expected to take.
type Estimate struct {
	// Startup is the time from launch until the work runs (boot, image,
	// data); it is billed but does no work.
	Startup time.Duration `json:"startup"`
	// Runtime is the remaining work's wall time on this offer.
	Runtime time.Duration `json:"runtime"`
	// Cost is the expected cost to finish: hourly price x nodes x
	// (startup + runtime).
	Cost money.Micros `json:"cost"`
	// Finish is when the job is expected to be done.
	Finish time.Time `json:"finish"`
}

// CostToFinish estimates finishing remaining runtime on nodes instances at
// pricePerHour each, starting now.
func CostToFinish(now time.Time, pricePerHour money.Micros, nodes int, startup, runtime time.Duration) Estimate {
	// A saturated runtime plus startup must stay huge, not wrap negative
	// into a job that looks free and already done.
	billed := addSat(startup, runtime)
	return Estimate{
		Startup: startup,
		Runtime: runtime,
		Cost:    pricePerHour.MulInt(max(1, nodes)).ForDuration(billed),
		Finish:  now.Add(billed),
	}
}

// MeetsDeadline reports whether an estimate finishes by deadline; a zero
// deadline is always met.
func MeetsDeadline(e Estimate, deadline time.Time) bool {
	return deadline.IsZero() || !e.Finish.After(deadline)
}
