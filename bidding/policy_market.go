package bidding

import (
	"math"

	"github.com/spotwise/spotwise/money"
)

// What a place to run costs, as the policies see it: each zone's spot and
// on-demand prices, its region, and the cost of carrying the checkpoint
// there. Money here is in micro-dollars as float64 for comparisons only:
// nothing is billed from these figures.

// nodes is the job's node count, at least 1.
func (s PolicyState) nodes() float64 { return float64(max(1, s.Nodes)) }

// onDemandAt is zone z's on-demand price per node-hour; AnyZone (or a
// zone without its own) is PolicyState.OnDemandPrice.
func (s PolicyState) onDemandAt(z int) money.Micros {
	if z >= 0 && z < len(s.Zones) && s.Zones[z].OnDemandPrice > 0 {
		return s.Zones[z].OnDemandPrice
	}
	return s.OnDemandPrice
}

// hourly is what choice c costs per node-hour now.
func (s PolicyState) hourly(c Choice) money.Micros {
	switch c.Kind {
	case RunSpot:
		return s.Zones[c.Zone].Price
	case RunOnDemand:
		return s.onDemandAt(c.Zone)
	}
	return 0
}

// checkpointRegion is where the job's checkpoint is: where it runs, or
// where it last ran; ok is false when that is not known.
func (s PolicyState) checkpointRegion() (string, bool) {
	if s.Current.Kind != RunIdle && s.Current.Zone >= 0 && s.Current.Zone < len(s.Zones) {
		return s.Zones[s.Current.Zone].Region, true
	}
	return s.Checkpoint, s.Checkpoint != ""
}

// egress is what moving the checkpoint to zone z costs: MoveCost when the
// job has made progress and z is in another region than its checkpoint.
func (s PolicyState) egress(z int) money.Micros {
	if s.MoveCost <= 0 || s.WorkLeft >= s.Work || z < 0 || z >= len(s.Zones) {
		return 0
	}
	if r, ok := s.checkpointRegion(); ok && r != s.Zones[z].Region {
		return s.MoveCost
	}
	return 0
}

// finishOnDemand is the cost of finishing the job on on-demand in zone z
// from here: the work left at z's price, and unless the job already runs
// there, a changeover at that price and the move of the checkpoint.
func (s PolicyState) finishOnDemand(z int) float64 {
	hours := s.WorkLeft.Hours()
	if s.Current.Kind != RunOnDemand || s.Current.Zone != z {
		hours += s.Changeover.Hours()
	}
	return float64(s.onDemandAt(z))*hours*s.nodes() + float64(s.egress(z))
}

// CheapestOnDemand is the on-demand choice that finishes the job for
// least from here (its price over the work left, plus the changeover and
// the checkpoint's move when it is not where the job runs): the job's own
// on-demand zone while that stays cheapest, the first zone on a tie.
// Without zones, or when the job runs on on-demand at the default price,
// it is ChooseOnDemand.
func (s PolicyState) CheapestOnDemand() Choice {
	best, bestV := ChooseOnDemand, math.Inf(1)
	if s.Current.Kind == RunOnDemand {
		bestV = s.finishOnDemand(s.Current.Zone)
		best = s.Current
	}
	for z := range s.Zones {
		if v := s.finishOnDemand(z); v < bestV {
			best, bestV = OnDemandIn(z), v
		}
	}
	return best
}

// cheapestOnDemandPrice is the lowest on-demand price per node-hour of
// the zones the job may use.
func (s PolicyState) cheapestOnDemandPrice() money.Micros {
	p := s.OnDemandPrice
	for z := range s.Zones {
		p = min(p, s.onDemandAt(z))
	}
	return p
}

// residual is how much longer zone z's current run of capacity is
// expected to last, in seconds: the mean over the ended runs that lasted
// longer than this one has so far, of what they lasted beyond it. A run
// longer than every one seen is expected to last as long again as its age
// (a lasting run is evidence of a lasting run).
func residual(z ZoneStats) float64 {
	age := z.Since.Seconds()
	var n, sum float64
	for i, c := range z.Ups.Count {
		if c > 0 && z.Ups.Total[i]/c > age {
			n += c
			sum += z.Ups.Total[i] - c*age
		}
	}
	if n == 0 {
		return age
	}
	return sum / n
}

// survives is the chance that zone z's current run outlasts another d
// seconds, from the ended runs; 1 with no runs to judge by.
func survives(z ZoneStats, d float64) float64 {
	var runs runDist
	runs.addHist(&z.Ups)
	age := z.Since.Seconds()
	t := runs.tail(age)
	if t <= 0 {
		return 1
	}
	return runs.tail(age+d) / t
}

// recentResidual is residual over only the runs of zone z that ended in
// the last window seconds (the job's own time scale: capacity that came
// and went in short runs lately is expected to keep doing so for a
// while); with no run ended in the window, residual over all of them.
func recentResidual(z ZoneStats, window float64) float64 {
	all := residual(z)
	age := z.Since.Seconds()
	now := z.Observed.Seconds()
	var n, sum float64
	seen := false
	for i := len(z.recent) - 1; i >= 0; i-- {
		r := z.recent[i]
		if now-r.end.Seconds() > window {
			break
		}
		if !r.up {
			continue
		}
		seen = true
		if l := r.length.Seconds(); l > age {
			n++
			sum += l - age
		}
	}
	switch {
	case !seen:
		return all
	case n == 0:
		return math.Min(all, age)
	}
	return math.Min(all, sum/n)
}

// recentMean is the mean length of zone z's runs of capacity that ended
// in the last window seconds, in seconds; with none, the mean of all
// that ended, and with none at all, the current run's (or outage's) age.
func recentMean(z ZoneStats, window float64) float64 {
	now := z.Observed.Seconds()
	var n, sum float64
	for i := len(z.recent) - 1; i >= 0; i-- {
		r := z.recent[i]
		if now-r.end.Seconds() > window {
			break
		}
		if r.up {
			n++
			sum += r.length.Seconds()
		}
	}
	if n > 0 {
		return sum / n
	}
	if m, ok := z.Ups.Mean(); ok {
		return m.Seconds()
	}
	return z.Since.Seconds()
}

// residuals is the distribution of how much longer zone z's current run
// of capacity lasts, in seconds, judged as recentResidual judges its
// mean: over the runs that ended in the last window seconds when their
// mean is the shorter, else over every ended run; each run longer than
// the current one's age counts what it lasted beyond it. Where no run
// says anything, a single value: recentResidual.
func residuals(z ZoneStats, window float64) runDist {
	age := z.Since.Seconds()
	var all, recent runDist
	for i, c := range z.Ups.Count {
		if c > 0 && z.Ups.Total[i]/c > age {
			all.add(c, z.Ups.Total[i]/c-age)
		}
	}
	now := z.Observed.Seconds()
	for i := len(z.recent) - 1; i >= 0; i-- {
		r := z.recent[i]
		if now-r.end.Seconds() > window {
			break
		}
		if l := r.length.Seconds(); r.up && l > age {
			recent.add(1, l-age)
		}
	}
	mean := recentResidual(z, window)
	switch {
	case recent.total() > 0 && recent.mean() <= mean:
		return recent
	case all.total() > 0 && all.mean() <= mean:
		return all
	}
	var one runDist
	one.add(1, mean)
	return one
}

// minOf is the expected shorter of two independent run lengths drawn
// from a (less shift, at least 0) and b, both capped at most, and the
// chance that a's is the shorter.
func minOf(a runDist, shift float64, b runDist, most float64) (mean, aFirst float64) {
	var n float64
	a.each(func(ca, la float64) {
		la = math.Min(most, math.Max(0, la-shift))
		b.each(func(cb, lb float64) {
			lb = math.Min(most, lb)
			w := ca * cb
			n += w
			mean += w * math.Min(la, lb)
			if la < lb {
				aFirst += w
			}
		})
	})
	if n == 0 {
		return 0, 0
	}
	return mean / n, aFirst / n
}
