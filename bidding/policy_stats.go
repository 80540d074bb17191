package bidding

import (
	"math"
	"time"
)

// ZoneStats is what has been observed of one zone's spot capacity: fed
// sample by sample with Observe, it only ever knows the past. The
// simulator feeds it from the trace up to the current step; the scheduler
// from the capacity it has seen (offers, launches, interruptions).
type ZoneStats struct {
	// Observed is how long the zone has been watched; Up how much of that
	// it had capacity.
	Observed, Up time.Duration
	// Available is the last observation; Since how long it has held.
	Available bool
	Since     time.Duration
	// Ups and Downs are the runs of availability and the outages that
	// have ended, by length. The run in progress is not among them.
	Ups, Downs RunHist
	// recent are the last runs that ended (at most recentRuns), oldest
	// first, with when they ended: what the union of any set of zones
	// watched together can be rebuilt from (unionOf).
	recent []pastRun
}

// pastRun is one ended run of capacity or outage of a zone.
type pastRun struct {
	end, length time.Duration // end is the zone's Observed when it ended
	up          bool
}

// recentRuns bounds ZoneStats' log of runs: at one outage an hour, about
// ten days of a zone's history.
const recentRuns = 512

// Observe records that the zone had capacity (or not) for the last dt.
func (z *ZoneStats) Observe(available bool, dt time.Duration) {
	if dt <= 0 {
		return
	}
	if z.Observed > 0 && available != z.Available {
		if z.Available {
			z.Ups.Add(z.Since)
		} else {
			z.Downs.Add(z.Since)
		}
		// A copy of the stats may share the log: append to a fresh
		// array, never into one another copy reads.
		n := len(z.recent)
		log := append(z.recent[max(0, n+1-recentRuns):n:n], pastRun{end: z.Observed, length: z.Since, up: z.Available})
		z.recent = log
		z.Since = 0
	}
	z.Available = available
	z.Since += dt
	z.Observed += dt
	if available {
		z.Up += dt
	}
}

// Fraction is the share of the observed time the zone had capacity; ok is
// false before anything was observed.
func (z ZoneStats) Fraction() (f float64, ok bool) {
	if z.Observed <= 0 {
		return 0, false
	}
	return float64(z.Up) / float64(z.Observed), true
}

// RunHist is a histogram of run lengths (of availability, or of outages)
// on a geometric scale: bucket 0 holds runs shorter than histBase, bucket
// i >= 1 those from histBase*2^((i-1)/2) up to the next bound. Each bucket
// keeps its count and the exact sum of its lengths, so sums and means are
// exact and only the split at a threshold inside a bucket is estimated.
type RunHist struct {
	// Count is the number of runs per bucket; Total their summed lengths
	// in seconds.
	Count [histBuckets]float64
	Total [histBuckets]float64
}

const (
	histBase    = 30 * time.Second
	histBuckets = 32 // the last one is open: from about 7.8 days
)

// histBound[i] is the lower bound of bucket i.
var histBound = func() (b [histBuckets + 1]time.Duration) {
	for i := 1; i <= histBuckets; i++ {
		b[i] = time.Duration(float64(histBase) * math.Pow(2, float64(i-1)/2))
	}
	b[histBuckets] = math.MaxInt64
	return b
}()

func histBucket(d time.Duration) int {
	i := 0
	for i+1 < histBuckets && d >= histBound[i+1] {
		i++
	}
	return i
}

// Add records one run of length d.
func (h *RunHist) Add(d time.Duration) {
	i := histBucket(d)
	h.Count[i]++
	h.Total[i] += d.Seconds()
}

// N is the number of runs recorded.
func (h *RunHist) N() float64 {
	n := 0.0
	for _, c := range h.Count {
		n += c
	}
	return n
}

// Mean is the mean run length; ok is false with no runs.
func (h *RunHist) Mean() (time.Duration, bool) {
	n, s := 0.0, 0.0
	for i, c := range h.Count {
		n += c
		s += h.Total[i]
	}
	if n == 0 {
		return 0, false
	}
	return time.Duration(s / n * float64(time.Second)), true
}
