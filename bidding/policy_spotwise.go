package bidding

import "math"

// Spotwise is spotwise's own policy, the one the scheduler uses. It keeps
// the job on spot whenever that is safe and pays for on-demand only where
// it buys the slack the deadline needs at the best price, judging from
// the capacity observed so far:
//
//   - On spot: stay until preempted. After a preemption, move at once to
//     the zone with capacity that offers the most: the largest share of
//     time with capacity, times the saving over on-demand.
//   - Idle while no zone has capacity: wait while the slack left, less
//     the two changeovers the safety net needs, still covers the slack
//     expected to be burnt finishing on spot if every outage ahead were
//     waited through up to the age of this one and bridged with
//     on-demand after (launch changeovers included). Once it does not,
//     this outage has lasted long enough to be worth bridging: run
//     on-demand, unless the outage is less likely than not to outlast
//     the changeover (one that ends during it buys nothing). So short
//     outages are waited through and long ones bridged, as the optimum
//     does, with the cut-off set by the slack left.
//   - On on-demand: stay while no zone has capacity. Return to spot once
//     its run has lasted a hysteresis h: a return that is preempted at
//     once wastes two changeovers, which matters as much as the slack
//     they take: h = d * min(3, 2d * (expected preemptions ahead) / slack).
//   - The safety net (PolicyState.Guard) overrules everything: the
//     deadline is never put at risk, whatever spot capacity does.
//
// Statistics are those of the zones the job may use (PolicyState.Union
// for the union's runs): ended runs of capacity and outages by length.
// Until a few outages have been seen, the expected burn is blended with
// Uniform Progress's line (the slack left in proportion to the time left),
// so that a job with no history behaves like Uniform Progress.
//
// Nothing is tuned to a trace: every threshold is in units of the job's
// changeover d, its slack, and the observed runs; prices enter as ratios.
type Spotwise struct{}

// Name implements Policy.
func (Spotwise) Name() string { return PolicySpotwise }

// The few constants of Spotwise, each a statement rather than a fit.
const (
	// priorOutages is the weight, in observed outages, of the prior
	// (Uniform Progress's line) in the expected burn.
	priorOutages = 2
	// reserveChangeovers is the slack kept aside for the safety net: a
	// spot launch must be able to fail and still leave time for one
	// on-demand launch.
	reserveChangeovers = 2
	// maxReturnWait caps the return hysteresis, in changeovers.
	maxReturnWait = 3
	// bridgeOdds is the least chance an outage must have of outlasting a
	// changeover to be worth bridging.
	bridgeOdds = 0.5
)

// Decide implements Policy.
func (Spotwise) Decide(s PolicyState) Choice {
	if s.onSpot() {
		return s.Guard(s.Current)
	}
	o := newOutlook(s)
	if z, ok := o.bestZone(s); ok {
		if s.Current.Kind == RunOnDemand && s.Zones[z].Seen.Since.Seconds() < o.returnWait() {
			return s.Guard(ChooseOnDemand)
		}
		return s.Guard(ChooseSpot(z))
	}
	if s.Current.Kind == RunOnDemand || o.bridge(s) {
		return s.Guard(ChooseOnDemand)
	}
	return s.Guard(ChooseIdle)
}

// outlook is the job's view of the market ahead, from what was observed.
// Durations are in seconds, prices in micro-dollars per hour.
type outlook struct {
	d, r, s float64 // changeover, work left, slack
	od      float64 // on-demand price
	age     float64 // of the current outage of every zone
	// migrate is the share of spot time lost to moving between zones:
	// d per run of one zone, when several zones cover for each other.
	migrate float64
	// muZone is the mean run of one zone, when there are several.
	muZone   float64
	up, down runDist // runs with capacity in some zone, outages of all
}

func newOutlook(s PolicyState) outlook {
	o := outlook{
		d:  s.Changeover.Seconds(),
		r:  s.WorkLeft.Seconds(),
		s:  s.slack().Seconds(),
		od: float64(s.OnDemandPrice),
	}
	u := s.Union
	if len(s.Zones) == 1 {
		u = s.Zones[0].Seen
	}
	o.up.addHist(&u.Ups)
	o.down.addHist(&u.Downs)
	if !u.Available {
		o.age = u.Since.Seconds()
	}
	if len(s.Zones) > 1 {
		for _, z := range s.Zones {
			var runs runDist
			runs.addHist(&z.Seen.Ups)
			if z.Seen.Available {
				runs.add(1, z.Seen.Since.Seconds())
			}
			o.muZone = math.Max(o.muZone, runs.mean())
		}
		if o.muZone > 0 {
			o.migrate = o.d / math.Max(o.muZone, o.d)
		}
	}
	return o
}

// burn is the slack expected to be burnt finishing the work on spot when
// outages are waited through up to tau and bridged with on-demand after:
// per run of capacity, a launch (cut short when the run is shorter) and
// the moves between zones; per outage, the wait, or tau and a changeover
// to on-demand, whose progress then shortens the work left.
func (o outlook) burn(tau float64) float64 {
	d, migr := o.d, o.migrate
	progress := o.up.meanOf(func(l float64) float64 { return math.Max(0, l-d) * (1 - migr) })
	launches := o.up.meanOf(func(l float64) float64 { return math.Min(l, d) + math.Max(0, l-d)*migr })
	waits := o.down.meanOf(func(x float64) float64 {
		if x > tau {
			return tau + d
		}
		return x
	})
	bridged := o.down.meanOf(func(x float64) float64 { return math.Max(0, x-tau-d) })
	per := progress + bridged
	if per <= 0 {
		return math.Inf(1)
	}
	return o.r / per * (launches + waits)
}

// need is the slack the rest of the job is expected to burn when outages
// are bridged from age tau on, blended with Uniform Progress's line until
// enough outages have been seen.
func (o outlook) need(s PolicyState, tau float64) float64 {
	window := (s.Elapsed + s.TimeLeft).Seconds()
	line := (window - s.Work.Seconds()) * s.TimeLeft.Seconds() / window
	n := o.down.total()
	if n == 0 {
		return line
	}
	w := n / (n + priorOutages)
	return w*o.burn(tau) + (1-w)*line
}

// bridge reports whether the job, idle while no zone has capacity,
// should bridge the outage with on-demand.
func (o outlook) bridge(s PolicyState) bool {
	if t := o.down.tail(o.age); t > 0 && o.down.tail(o.age+o.d)/t < bridgeOdds {
		return false
	}
	need := o.need(s, o.age)
	return math.IsNaN(need) || need+reserveChangeovers*o.d > o.s
}

// returnWait is how long a zone's run must have lasted before the job
// leaves on-demand for it.
func (o outlook) returnWait() float64 {
	mu := o.up.mean()
	if o.muZone > 0 {
		mu = math.Min(mu, o.muZone)
	}
	preemptions := o.r / math.Max(mu, o.d)
	return o.d * math.Min(maxReturnWait, 2*o.d*preemptions/math.Max(o.s, 1))
}

// bestZone is the available zone that offers the most: its share of time
// with capacity times its saving over on-demand. Spot at or above the
// on-demand price is no saving and is not taken.
func (o outlook) bestZone(s PolicyState) (int, bool) {
	best, bestV := -1, math.Inf(-1)
	for i, z := range s.Zones {
		if !z.Available || z.Price >= s.OnDemandPrice {
			continue
		}
		f, ok := z.Seen.Fraction()
		if !ok {
			f = 0.5
		}
		if v := f * (o.od - float64(z.Price)); v > bestV {
			best, bestV = i, v
		}
	}
	return best, best >= 0
}
