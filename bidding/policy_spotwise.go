package bidding

import "math"

// Spotwise is spotwise's own policy, the one the scheduler uses. It keeps
// the job on spot whenever that is safe and pays for on-demand only where
// it buys the slack the deadline needs at the best price, judging from
// the capacity observed so far:
//
//   - The home zones (homeZones) are the zones where a stint costs least
//     per hour of progress, the checkpoint's move included; the others
//     only bridge their outages, as on-demand does.
//   - On spot: stay, unless finishing elsewhere is expected to be cheaper
//     by more than the move costs (see moveGain): another zone's spot at
//     a lower price, or on-demand when spot costs more; never between
//     home zones. A move saves only until the first of the two zones'
//     runs ends (the job relaunches then anyway), judged over the spread
//     of their runs, not from their means, and it pays the relaunch it
//     brings on as often as the new zone's run is the first to end. Runs
//     are judged over the job's window as well as all that was seen, the
//     shorter expectation winning. After a preemption, move at once to
//     the home zone with capacity that offers the most: the largest share
//     of time with capacity, times the saving over on-demand, less the
//     checkpoint's move spread over the run expected there.
//   - Idle while no home zone has capacity: bridge the outage now when
//     that is expected to cost less than waiting on, by the value of the
//     job's state (valueTable: what finishing costs from each amount of
//     work and slack left, solved by dynamic programming over the runs
//     and outages seen), over the spread of what is left of the outage.
//     Slack spent waiting now is slack not there to wait an outage out
//     later; the table weighs one against the other, so an outage is
//     bridged at once only where the slack is worth more for the outages
//     ahead, and waited on where it is not (every outage outlasting the
//     slack: waiting now saves on-demand that waiting later could not).
//     Until a run and an outage have been seen, or once the outage has
//     outlasted every one seen, the older rule: wait while the slack
//     left, less the two changeovers the safety net needs, still covers
//     the slack expected to be burnt finishing on spot if every outage
//     ahead were waited through up to the age of this one and bridged
//     after, unless the outage is less likely than not to outlast the
//     changeover. The bridge (bridgeWith) is what costs least per hour of
//     progress over what is left of the outage: on-demand in some zone,
//     or spot outside the home zones, with the checkpoint's move there
//     and, out of the home regions, back. When that is on-demand, the
//     job takes it only if the plan's outage has lasted long enough to
//     be worth bridging by the older rule: the zones whose spot costs
//     less than on-demand taken together, waited through up to the age
//     of their own outage (0 while one of them has capacity) and bridged
//     after, each outage of the home zones they fill costing a move out
//     and back (planned, behind). While the slack covers that, it waits:
//     spot elsewhere will soon fill the home zones' outage, which costs
//     money, not slack. (Judging the plan by waiting out every outage
//     ahead, as if it were never bridged, paid on-demand for outages of
//     the plan a tick old whenever that burn came near the slack.)
//   - On on-demand: stay while no zone has capacity. Return to spot once
//     its run has lasted a hysteresis h (a return that is preempted at
//     once wastes two changeovers, which matters as much as the slack
//     they take: h = d * min(3, 2d * (expected preemptions ahead) / slack))
//     and the return pays for its move (moveGain). Move to another zone's
//     on-demand only when it bridges the rest of the outage for less.
//   - The safety net (PolicyState.Guard) overrules everything: the
//     deadline is never put at risk, whatever spot capacity does.
//
// Statistics are those of the home zones taken together (PolicyState.
// Union when every zone is home, a zone's own with one home zone, else
// rebuilt from the zones' logs: unionRuns): ended runs of capacity and
// outages by length. Until a few outages have been seen, the expected
// burn is blended with Uniform Progress's line (the slack left in
// proportion to the time left), so that a job with no history behaves
// like Uniform Progress.
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
	o := newOutlook(s)
	if s.onSpot() {
		if c, ok := o.bestMove(s); ok {
			return c
		}
		return s.Guard(s.Current)
	}
	z, home := o.bestZone(s, true)
	if s.Current.Kind == RunOnDemand {
		if !home {
			z, home = o.bestZone(s, false)
		}
		// The hysteresis already prices the slack a return risks.
		if home && s.Zones[z].Seen.Since.Seconds() >= o.returnWait() && o.returnGain(s, z) > 0 && s.Safe(ChooseSpot(z)) {
			return ChooseSpot(z)
		}
		// Another zone's on-demand when it bridges what is left of the
		// outage for less, its move included.
		if c := o.bridgeWith(s); c.Kind == RunOnDemand && c != s.Current {
			return s.Guard(c)
		}
		return s.Guard(s.Current)
	}
	if home {
		return s.Guard(ChooseSpot(z))
	}
	if o.bridgeReady(s) {
		// On-demand only when the slack cannot wait out the outages of
		// every zone the job would rather run on: a home zone's outage
		// that cheaper spot elsewhere fills costs money, not slack.
		if c := o.bridgeWith(s); c.Kind != RunOnDemand || o.planned(s).behind(s) {
			return s.Guard(c)
		}
	}
	return s.Guard(ChooseIdle)
}

// homeZones are the zones the job means to run on: the one where a stint
// costs least per hour of progress (price, and a changeover and the
// checkpoint's move spread over the zone's run), and every zone where a
// stint of its run costs more than there by less than a changeover. A
// zone's run is the one a stint there is expected to have now, judged
// as a move is (holdOn): for a zone with capacity, the rest of its
// current run over the runs that ended within the job's window; for one
// without, the mean of those runs. (The mean of all runs ever seen calls
// a zone home that has flickered for the whole of the job's window.)
// Moving between home zones never pays, so they are one market; a zone
// outside it is worth a move only while the home zones have no
// capacity. When every zone costs the same, every zone is home.
func homeZones(s PolicyState) []bool {
	home := make([]bool, len(s.Zones))
	if len(s.Zones) == 0 {
		return home
	}
	d := s.Changeover.Hours()
	n := s.nodes()
	window := (s.Elapsed + s.TimeLeft).Seconds()
	meanRun := func(z ZoneStats) float64 {
		h := recentMean(z, window)
		if z.Available {
			h = recentResidual(z, window)
		}
		return math.Min(s.WorkLeft.Hours(), math.Max(h/3600, d))
	}
	rate := make([]float64, len(s.Zones))
	best := 0
	for i, z := range s.Zones {
		p := float64(z.Price)
		rate[i] = p + (p*d*n+float64(s.egress(i)))/(meanRun(z.Seen)*n)
		if rate[i] < rate[best] {
			best = i
		}
	}
	change := float64(s.Zones[best].Price) * d
	for i, z := range s.Zones {
		home[i] = (rate[i]-rate[best])*meanRun(z.Seen) <= change
	}
	return home
}

// bridgeWith is what bridges an outage of the home zones: of on-demand in
// each zone and spot in the available zones outside them, the one whose
// stint costs least per hour of progress. A stint lasts what is expected
// to be left of the outage (outageLeft), or less on spot whose run ends
// first; it costs its price over the stint and a changeover, and the
// checkpoint's move there and, when no home zone is in its region, back.
// So a short outage is bridged near the checkpoint even where on-demand
// elsewhere would finish the whole job for less; but once the slack left
// cannot pay the two changeovers of a return to spot, the stint is the
// rest of the job.
func (o outlook) bridgeWith(s PolicyState) Choice {
	homeRegion := map[string]bool{}
	for z, h := range o.home {
		if h {
			homeRegion[s.Zones[z].Region] = true
		}
	}
	n := s.nodes()
	rate := func(c Choice, stint float64) float64 {
		if stint <= 0 {
			return math.Inf(1)
		}
		e := float64(s.egress(c.Zone))
		if c.Zone >= 0 && !homeRegion[s.Zones[c.Zone].Region] {
			e += float64(s.MoveCost)
		}
		launch := o.d
		if c == s.Current {
			launch = 0
		}
		return (float64(s.hourly(c))*(stint+launch)/3600*n + e) / (stint / 3600)
	}
	out := math.Min(o.r, o.outageLeft())
	if o.s < reserveChangeovers*o.d {
		// Too little slack left to ever leave on-demand for spot again
		// (PolicyState.Safe): on-demand now is on-demand to the end.
		out = o.r
	}
	best, bestV := s.CheapestOnDemand(), math.Inf(1)
	if best.Zone != AnyZone {
		bestV = rate(best, out)
	}
	if s.Current.Kind == RunOnDemand {
		best, bestV = s.Current, rate(s.Current, out)
	}
	for z, zone := range s.Zones {
		if v := rate(OnDemandIn(z), out); v < bestV {
			best, bestV = OnDemandIn(z), v
		}
		if zone.Available && !o.home[z] {
			if v := rate(ChooseSpot(z), math.Min(out, o.holdOn(s, z))); v < bestV {
				best, bestV = ChooseSpot(z), v
			}
		}
	}
	return best
}

// outageLeft is how much longer the home zones' outage is expected to
// last, in seconds: as residual, over the outages seen; the work left
// when none was.
func (o outlook) outageLeft() float64 {
	var n, sum float64
	o.down.each(func(c, m float64) {
		if m > o.age {
			n += c
			sum += c * (m - o.age)
		}
	})
	switch {
	case o.down.total() == 0:
		return o.r
	case n == 0:
		return math.Max(o.age, o.d)
	}
	return sum / n
}

// outlook is the job's view of the market ahead, from what was observed.
// Durations are in seconds, prices in micro-dollars per hour.
type outlook struct {
	d, r, s float64 // changeover, work left, slack
	window  float64 // the job's whole window
	od      float64 // on-demand price
	age     float64 // of the current outage of every zone
	// migrate is the share of spot time lost to moving between zones:
	// d per run of one zone, when several zones cover for each other.
	migrate float64
	// muZone is the mean run of one zone, when there are several.
	muZone   float64
	up, down runDist // runs with capacity in some home zone, outages of all
	// home marks the zones the job means to run on (homeZones); the others
	// only bridge outages of these, as on-demand does.
	home []bool
	// plan marks the zones whose spot the job would run on rather than
	// pay for on-demand: the home zones and every zone whose spot costs
	// less than on-demand.
	plan []bool
	// moves is the slack spent per run of capacity moving between zones
	// beyond migrate: out of the home zones and back (planned).
	moves float64
	// here is the spread of what is left of the current zone's run, on
	// spot (residuals).
	here runDist
}

func newOutlook(s PolicyState) outlook {
	o := outlook{
		d:      s.Changeover.Seconds(),
		r:      s.WorkLeft.Seconds(),
		s:      s.slack().Seconds(),
		window: (s.Elapsed + s.TimeLeft).Seconds(),
		od:     float64(s.cheapestOnDemandPrice()),
	}
	o.home = homeZones(s)
	if s.onSpot() {
		o.here = residuals(s.Zones[s.Current.Zone].Seen, o.window)
	}
	o.up, o.down, o.age = runsOf(s, o.home)
	o.plan = make([]bool, len(s.Zones))
	for i, z := range s.Zones {
		o.plan[i] = o.home[i] || float64(z.Price) < o.od
	}
	if len(s.Zones) > 1 {
		for i, z := range s.Zones {
			if !o.home[i] {
				continue
			}
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

// runsOf are the ended runs with capacity and the outages of the zones
// marked in set taken together, and the age of their outage now (0 while
// one of them has capacity): PolicyState.Union when every zone is
// marked, a zone's own statistics when one is, else rebuilt from the
// zones' logs (unionRuns).
func runsOf(s PolicyState, set []bool) (up, down runDist, age float64) {
	u := s.Union
	z, n := -1, 0
	for i, in := range set {
		if in {
			z, n = i, n+1
		}
	}
	switch {
	case n == 1:
		u = s.Zones[z].Seen
		up.addHist(&u.Ups)
		down.addHist(&u.Downs)
	case n < len(set):
		// The union of every zone says little of these zones' when
		// others (a dearer zone that never runs out, say) fill their
		// outages.
		up, down = unionRuns(s.Zones, set)
	default:
		up.addHist(&u.Ups)
		down.addHist(&u.Downs)
	}
	// Their outage began when the last of them lost capacity.
	age = math.Inf(1)
	for i, z := range s.Zones {
		switch {
		case !set[i]:
		case z.Seen.Available:
			age = 0
		default:
			age = math.Min(age, z.Seen.Since.Seconds())
		}
	}
	if math.IsInf(age, 1) || len(s.Zones) == 0 {
		age = 0
		if !u.Available {
			age = u.Since.Seconds()
		}
	}
	return up, down, age
}

// planned is the outlook over the zones of the plan taken together: the
// slack the job spends when it fills the home zones' outages with spot
// elsewhere whenever there is some, and waits only while no zone of the
// plan has capacity. Every outage of the home zones the others fill costs
// a move there and one back, spread over the plan's runs.
func (o outlook) planned(s PolicyState) outlook {
	p := o
	p.up, p.down, p.age = runsOf(s, o.plan)
	if n, h := p.down.total(), o.down.total(); n > 0 && h > n {
		p.moves = 2 * o.d * (h - n) / n
	}
	return p
}

// behind reports whether the slack left, less the safety net's
// changeovers, falls short of what the rest of the job is expected to
// burn when every outage ahead is waited through up to the age of this
// one and bridged after (need at o.age).
func (o outlook) behind(s PolicyState) bool {
	need := o.need(s, o.age)
	return math.IsNaN(need) || need+reserveChangeovers*o.d > o.s
}

// burn is the slack expected to be burnt finishing the work on spot when
// outages are waited through up to tau and bridged with on-demand after:
// per run of capacity, a launch (cut short when the run is shorter) and
// the moves between zones (migrate, moves); per outage, the wait, or tau and a changeover
// to on-demand, whose progress then shortens the work left.
func (o outlook) burn(tau float64) float64 {
	d, migr := o.d, o.migrate
	progress := o.up.meanOf(func(l float64) float64 { return math.Max(0, l-d) * (1 - migr) })
	launches := o.up.meanOf(func(l float64) float64 { return math.Min(l, d) + math.Max(0, l-d)*migr }) + o.moves
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
	return o.behind(s)
}

// returnWait is how long a zone's run must have lasted before the job
// leaves on-demand for it.
func (o outlook) returnWait() float64 {
	mu := o.up.mean()
	if o.muZone > 0 {
		mu = math.Min(mu, o.muZone)
	}
	return hysteresis(o.d, o.r, o.s, mu)
}

// hysteresis is the return hysteresis of a job with changeover d, work r
// and slack s left in a market whose runs last mu on average (seconds).
func hysteresis(d, r, s, mu float64) float64 {
	preemptions := r / math.Max(mu, d)
	return d * math.Min(maxReturnWait, 2*d*preemptions/math.Max(s, 1))
}

// bestZone is the available zone that offers the most: its share of time
// with capacity times its saving over on-demand, less the move of the
// checkpoint there spread over the run expected there. Spot at or above
// the cheapest on-demand price is no saving and is not taken.
func (o outlook) bestZone(s PolicyState, homeOnly bool) (int, bool) {
	best, bestV := -1, math.Inf(-1)
	for i, z := range s.Zones {
		if !z.Available || float64(z.Price) >= o.od || homeOnly && !o.home[i] {
			continue
		}
		f, ok := z.Seen.Fraction()
		if !ok {
			f = 0.5
		}
		v := f * (o.od - float64(z.Price))
		if e := s.egress(i); e > 0 {
			hold := math.Max(math.Min(o.r, residual(z.Seen)-o.d), o.d) / 3600
			v -= float64(e) / (hold * s.nodes())
		}
		if v > bestV {
			best, bestV = i, v
		}
	}
	return best, best >= 0
}

// stintSaving is what a stint on spot in zone z is expected to save over
// running at price from per node-hour, net of the move there: moveGain
// from a place that costs from.
func (o outlook) stintSaving(s PolicyState, z int, from float64) float64 {
	return o.gainFrom(s, from, ChooseSpot(z), true)
}

// bestMove is where a job running on spot should move to, if anywhere:
// the safe choice with the largest positive moveGain.
func (o outlook) bestMove(s PolicyState) (Choice, bool) {
	best, bestV := Choice{}, 0.0
	consider := func(c Choice) {
		if s.hourly(c) >= s.hourly(s.Current) || !s.Safe(c) {
			return
		}
		if v := o.moveGain(s, c); v > bestV {
			best, bestV = c, v
		}
	}
	for z, zone := range s.Zones {
		// Between home zones a move never pays (homeZones).
		if zone.Available && z != s.Current.Zone && !(o.home[z] && o.home[s.Current.Zone]) {
			consider(ChooseSpot(z))
		}
	}
	if c := s.CheapestOnDemand(); c.Zone != AnyZone {
		consider(c)
	}
	return best, bestV > 0
}

// moveGain is the expected saving, in micro-dollars, of leaving what the
// job runs on now for c, net of what the move costs. The saving is the
// difference in price over the progress c is expected to make before the
// job would leave it anyway: the work left on on-demand; on spot, the rest
// of the zone's current run after the changeover (residual), until the
// run the job leaves would have ended. Between two spot zones that is the
// expected shorter of the two runs' rests (minOf over their spread:
// the shorter of their means overrates it where runs are either short or
// very long), and a move to a zone whose run ends first brings on a
// relaunch, paid with the chance that it does. The move
// costs a changeover billed at c's price and the checkpoint's egress,
// both lost again if c's capacity vanishes during the changeover (so
// divided by the chance it does not), and the changeover's time: its
// share that the slack left cannot absorb is expected to be run on
// on-demand instead of spot.
func (o outlook) moveGain(s PolicyState, c Choice) float64 {
	stay := o.r
	if s.onSpot() {
		// Past the end of the current run the job moves anyway: the
		// move now saves only until then.
		stay = math.Min(o.r, recentResidual(s.Zones[s.Current.Zone].Seen, o.window))
	}
	return o.gainWithin(s, float64(s.hourly(s.Current)), c, true, stay)
}

// gainFrom is moveGain from a place that costs from per node-hour; the
// changeover's time is priced only with slack set.
func (o outlook) gainFrom(s PolicyState, from float64, c Choice, slack bool) float64 {
	return o.gainWithin(s, from, c, slack, o.r)
}

// gainWithin is gainFrom counting the saving over at most stay seconds.
func (o outlook) gainWithin(s PolicyState, from float64, c Choice, slack bool, stay float64) float64 {
	n := s.nodes()
	dh := o.d / 3600
	to := float64(s.hourly(c))
	hold, surv := o.r, 1.0
	if c.Kind == RunSpot {
		seen := s.Zones[c.Zone].Seen
		hold = o.holdOn(s, c.Zone)
		surv = survives(seen, o.d)
	}
	if surv <= 0 {
		return math.Inf(-1)
	}
	held, first := math.Min(hold, stay), 0.0
	if s.onSpot() && c.Kind == RunSpot {
		// Both runs end when they will: the saving lasts until the
		// first ends, and when c's does, the move brings on a
		// relaunch, back here at the latest. (From on-demand the
		// return hysteresis prices that.)
		held, first = minOf(residuals(s.Zones[c.Zone].Seen, o.window), o.d,
			o.here, math.Min(o.r, stay))
	}
	gain := (from - to) * held / 3600 * n
	arrive := (to*dh*n + float64(s.egress(c.Zone))) / surv
	arrive += first * (from*dh*n + float64(s.egress(c.Zone)))
	short := 0.0
	if slack {
		short = math.Min(o.d, math.Max(0, o.need(s, o.age)+(reserveChangeovers+1)*o.d-o.s))
	}
	slackCost := math.Max(0, o.od-to) * short / 3600 * n
	return gain - arrive - slackCost
}

// returnGain is what leaving on-demand for spot in zone z is expected to
// save: moveGain without the slack (the return hysteresis prices it).
func (o outlook) returnGain(s PolicyState, z int) float64 {
	return o.gainFrom(s, float64(s.hourly(s.Current)), ChooseSpot(z), false)
}

// holdOn is how long a launch on spot in zone z is expected to make
// progress before its capacity goes: the rest of its current run after
// the changeover, at most the work left.
func (o outlook) holdOn(s PolicyState, z int) float64 {
	res := residual(s.Zones[z].Seen)
	if len(s.Zones) > 1 {
		res = recentResidual(s.Zones[z].Seen, o.window)
	}
	return math.Min(o.r, math.Max(0, res-o.d))
}

// homePrice is the lowest spot price of the home zones.
func (o outlook) homePrice(s PolicyState) float64 {
	p := math.Inf(1)
	for i, z := range s.Zones {
		if o.home[i] {
			p = math.Min(p, float64(z.Price))
		}
	}
	return p
}

// bridgeReady reports whether the home zones' outage should be bridged
// now: when bridging it now is expected to cost less than waiting on
// (valueTable.bridgeNow), once an outage and a run have been seen and
// some outage seen lasted longer than this one; by the rule of bridge
// before that.
func (o outlook) bridgeReady(s PolicyState) bool {
	if v := o.values(s, o.homePrice(s)); v != nil {
		if now, wait, ok := v.bridgeNow(o.r, o.s, o.age); ok {
			return now < wait
		}
	}
	return o.bridge(s)
}
