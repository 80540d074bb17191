package bidding

import (
	"math"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// watch feeds zones on one clock: at each step of pattern, zone i has
// capacity where pattern[step][i] is '1'; every step lasts dt.
func watch(dt time.Duration, pattern ...string) []ZoneStats {
	zs := make([]ZoneStats, len(pattern[0]))
	for _, p := range pattern {
		for i := range zs {
			zs[i].Observe(p[i] == '1', dt)
		}
	}
	return zs
}

func TestUnionRuns(t *testing.T) {
	// Hours 0-9; a and b overlap their outages for 2h (hours 3-4) and
	// 1h (hour 7); c never runs out.
	zs := watch(time.Hour,
		"111", "101", "011", "001", "001", "111", "101", "001", "011", "111")
	zones := make([]SpotZone, len(zs))
	for i := range zs {
		zones[i].Seen = zs[i]
	}
	up, down := unionRuns(zones, []bool{true, true, false})
	// Outages of a and b together: 2h and 1h, both ended; the runs
	// between them: 2h (hours 5-6) ended; the first run (hours 0-2) is
	// cut by the start of the watch, the last one is in progress.
	if got := down.total(); got != 2 {
		t.Errorf("outages of a+b: %v, want 2", got)
	}
	if got := down.mean(); got != 1.5*3600 {
		t.Errorf("mean outage of a+b: %vs, want 1.5h", got)
	}
	if got, mean := up.total(), up.mean(); got != 1 || mean != 2*3600 {
		t.Errorf("runs of a+b: %v of mean %vs, want 1 of 2h", got, mean)
	}
	if _, down := unionRuns(zones, []bool{true, true, true}); down.total() != 0 {
		t.Errorf("with c, which never runs out: %v outages, want 0", down.total())
	}
}

func TestZoneStatsLogIsNotShared(t *testing.T) {
	z := watch(time.Hour, "1", "0", "1", "0")[0]
	a, b := z, z
	a.Observe(true, time.Hour)
	b.Observe(false, time.Hour) // the outage goes on: nothing ends
	b.Observe(true, time.Hour)
	if len(a.recent) != len(z.recent)+1 || len(b.recent) != len(z.recent)+1 {
		t.Fatalf("logs: %d and %d runs, want %d each", len(a.recent), len(b.recent), len(z.recent)+1)
	}
	if a.recent[len(a.recent)-1].length != time.Hour || b.recent[len(b.recent)-1].length != 2*time.Hour {
		t.Errorf("copies of the stats overwrote each other's log: %v, %v", a.recent, b.recent)
	}
}

func TestRecentResidual(t *testing.T) {
	var z ZoneStats
	for range 10 { // long runs, long ago
		z.Observe(true, 40*time.Hour)
		z.Observe(false, time.Hour)
	}
	for range 10 { // then flickering
		z.Observe(true, 30*time.Minute)
		z.Observe(false, 30*time.Minute)
	}
	z.Observe(true, 10*time.Minute)
	all, recent := residual(z), recentResidual(z, (6*time.Hour).Seconds())
	if recent >= all/10 {
		t.Errorf("recent residual %.0fs, want far below the whole history's %.0fs", recent, all)
	}
	if got := recentResidual(z, math.Inf(1)); got != all {
		t.Errorf("over all the log: %.0fs, want residual %.0fs", got, all)
	}
}

// market is a fixture: a 48h job with 12-minute changeovers on zones
// that differ in price and region.
type market struct{ s PolicyState }

func newMarket(elapsed, left, workLeft time.Duration) *market {
	return &market{PolicyState{
		Elapsed: elapsed, TimeLeft: left, Work: h(48), WorkLeft: workLeft,
		Changeover: 12 * time.Minute, Step: 195 * time.Second,
		OnDemandPrice: money.MustParse("3.06"),
	}}
}

func (m *market) zone(region, price string, available bool, seen ZoneStats) *market {
	m.s.Zones = append(m.s.Zones, SpotZone{
		Name: region + string(rune('a'+len(m.s.Zones))), Region: region,
		Price: money.MustParse(price), Available: available, Seen: seen,
	})
	return m
}

func (m *market) onDemand(z int, price string) *market {
	m.s.Zones[z].OnDemandPrice = money.MustParse(price)
	return m
}

func (m *market) on(c Choice) *market { m.s.Current = c; return m }

func (m *market) move(cost string) *market { m.s.MoveCost = money.MustParse(cost); return m }

// cycles is a zone's history: runs of up, outages of down, then the
// last state held for since.
func cycles(up, down time.Duration, n int, available bool, since time.Duration) ZoneStats {
	var z ZoneStats
	for range n {
		z.Observe(true, up)
		z.Observe(false, down)
	}
	if available {
		z.Observe(true, since)
	} else {
		z.Observe(true, up)
		z.Observe(false, since)
	}
	return z
}

func TestSpotwiseAcrossZonesThatDiffer(t *testing.T) {
	always := func() ZoneStats { var z ZoneStats; z.Observe(true, 500*time.Hour); return z }
	tests := []struct {
		name string
		s    PolicyState
		want Choice
	}{
		{
			// The union of every zone never runs out (the dear zone has
			// capacity throughout): judged on its own, the home zones'
			// outages are short and the slack covers them.
			name: "home zones out briefly, a dear zone that never runs out: wait for the home zones",
			s: newMarket(h(10), h(45), h(40)).
				zone("us-east-2", "0.95", false, cycles(20*time.Hour, 30*time.Minute, 20, false, 10*time.Minute)).
				zone("us-east-2", "0.95", false, cycles(20*time.Hour, 30*time.Minute, 20, false, 10*time.Minute)).
				zone("us-west-2", "2.80", true, always()).union(always()),
			want: ChooseIdle,
		},
		{
			// Outages of the home region last about an hour: on-demand
			// there, not the cheaper on-demand of a region the checkpoint
			// would cross to and back.
			name: "a short outage to bridge: on-demand near the checkpoint",
			s: newMarket(h(10), h(42), h(40)).
				zone("us-west-2", "0.92", false, cycles(6*time.Hour, time.Hour, 20, false, 10*time.Minute)).onDemand(0, "3.978").
				zone("us-east-1", "1.60", false, cycles(time.Hour, 6*time.Hour, 20, false, time.Hour)).
				move("2").on(ChooseIdle).withCheckpoint("us-west-2"),
			want: OnDemandIn(0),
		},
		{
			name: "on on-demand near the checkpoint through a short outage: no move for a cheaper price elsewhere",
			s: newMarket(h(10), h(41), h(40)).
				zone("us-west-2", "0.92", false, cycles(6*time.Hour, time.Hour, 20, false, 10*time.Minute)).onDemand(0, "3.978").
				zone("us-east-1", "1.60", false, cycles(time.Hour, 6*time.Hour, 20, false, time.Hour)).
				move("2").on(OnDemandIn(0)).s,
			want: OnDemandIn(0),
		},
		{
			// Bridging in another region: the home zone is back, but its
			// runs of late are short; coming back would pay the egress
			// again when it flickers out.
			name: "bridged on a long-lived zone: no return to a home zone that flickers",
			s: newMarket(h(10), h(50), h(40)).
				zone("us-west-2", "0.95", true, flickering()).
				zone("us-east-2", "1.20", true, cycles(30*time.Hour, time.Hour, 10, true, 3*time.Hour)).
				move("1").on(ChooseSpot(1)).s,
			want: ChooseSpot(1),
		},
		{
			// Its run is expected to end within the hour, and the job
			// then relaunches anyway (at home): a move now saves an hour
			// of the difference and pays the egress and a changeover.
			name: "bridged on a zone whose run is about to end: stay until it does",
			s: newMarket(h(10), h(50), h(40)).
				zone("us-west-2", "0.95", true, cycles(30*time.Hour, time.Hour, 10, true, 3*time.Hour)).
				zone("us-east-2", "1.20", true, cycles(2*time.Hour, time.Hour, 30, true, time.Hour)).
				move("1").on(ChooseSpot(1)).s,
			want: ChooseSpot(1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Spotwise{}).Decide(tt.s); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}

// A zone's place among the home zones is judged on the runs a stint
// there is expected to have now, over the job's window, as a move is:
// a cheaper zone whose long runs are long past and which has flickered
// for the whole window does not keep a steady zone out.
func TestHomeZonesJudgeRecentRuns(t *testing.T) {
	s := newMarket(h(10), h(50), h(40)).
		zone("us-west-2", "0.95", true, flickering()).
		zone("us-west-2", "1.05", true, cycles(30*time.Hour, time.Hour, 10, true, 3*time.Hour)).s
	if home := homeZones(s); !home[1] {
		t.Errorf("home zones %v: the steady zone is not home", home)
	}
	if got := (Spotwise{}).Decide(s); got != ChooseSpot(1) {
		t.Errorf("after a preemption: %v, want the steady zone (spot[1]), not the flickering one", got)
	}
}

func (m *market) union(u ZoneStats) PolicyState {
	m.s.Union = u
	return m.s
}

func (m *market) withCheckpoint(region string) PolicyState {
	m.s.Checkpoint = region
	return m.s
}

// Where an outage is bridged depends on how long it is expected to last:
// on-demand near the checkpoint for a short one, where it costs least,
// the move there and back included, for a long one. And where every
// outage outlasts the slack, bridging one now costs what waiting on does:
// the slack could buy nothing later.
func TestSpotwiseBridgesWhereItCostsLeast(t *testing.T) {
	market := func(outage time.Duration) PolicyState {
		return newMarket(h(10), h(41), h(40)).
			zone("us-west-2", "0.92", false, cycles(6*time.Hour, outage, 20, false, 10*time.Minute)).onDemand(0, "3.978").
			zone("us-east-1", "1.60", false, cycles(time.Hour, 6*time.Hour, 20, false, time.Hour)).
			move("2").on(ChooseIdle).withCheckpoint("us-west-2")
	}
	for _, c := range []struct {
		name   string
		outage time.Duration
		want   Choice
	}{
		{"outages of an hour: on-demand near the checkpoint", time.Hour, OnDemandIn(0)},
		{"outages of 30 hours: on-demand where it costs least, the move included", 30 * time.Hour, OnDemandIn(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := market(c.outage)
			if got := newOutlook(s).bridgeWith(s); got != c.want {
				t.Errorf("bridgeWith = %v, want %v (%s)", got, c.want, Spotwise{}.Explain(s))
			}
		})
	}
	s := market(30 * time.Hour)
	o := newOutlook(s)
	now, wait, ok := o.values(s, o.homePrice(s)).bridgeNow(o.r, o.s, o.age)
	if !ok || math.Abs(now-wait) > 0.001*wait {
		t.Errorf("outages of 30 hours, an hour of slack: bridging now costs $%.2f, waiting on $%.2f (ok %v); want the same: the slack buys nothing later", now/1e6, wait/1e6, ok)
	}
}

// flickering is a zone with long runs long ago and runs of minutes over
// the last job's window and more, up for a few minutes now.
func flickering() ZoneStats {
	z := cycles(30*time.Hour, time.Hour, 10, true, time.Hour)
	for range 48 {
		z.Observe(false, time.Hour)
		z.Observe(true, 20*time.Minute)
	}
	return z
}

// On-demand bridges only the outages the slack cannot wait out of every
// zone the job would rather run on. Here the home zone (us-east-1) is out
// half the time, for 6 hours at once, but a dearer zone of us-east-2,
// still far below on-demand, has capacity through all but the first 20
// minutes of each of those outages. The home zone has been out for an
// hour, the other zone for the last 20 minutes.
func TestSpotwiseBridgesWithOnDemandOnlyWhenNoSpotWillDo(t *testing.T) {
	var pattern []string // 20-minute steps: home zone, other zone, union
	for range 10 {
		for step := range 36 {
			switch {
			case step < 18:
				pattern = append(pattern, "111")
			case step == 18:
				pattern = append(pattern, "000")
			default:
				pattern = append(pattern, "011")
			}
		}
	}
	for range 18 {
		pattern = append(pattern, "111")
	}
	pattern = append(pattern, "011", "011", "000")
	market := cheaperAtHome(watch(20*time.Minute, pattern...))
	tests := []choiceCase{
		{
			// Waiting out the home zone's outages alone would take far
			// more than the 6 hours of slack, but the other zone is
			// expected back any moment and fills the rest of them.
			name: "slack to wait out the outages of all spot cheaper than on-demand: wait",
			s:    market(h(46)),
			want: ChooseIdle,
		},
		{
			name: "slack short even with the other zone's spot: on-demand",
			s:    market(h(42)),
			want: OnDemandIn(0),
		},
	}
	decideAtCheaperHome(t, tests)
}

// A job whose slack can no longer pay the two changeovers of a return to
// spot stays on on-demand to the end: its on-demand is chosen for the
// rest of the job, not for what is left of the outage.
func TestSpotwiseOnDemandToTheEndWhereItCostsLeast(t *testing.T) {
	market := func(left time.Duration) PolicyState {
		return newMarket(h(10), left, h(40)).
			zone("us-west-2", "0.92", false, cycles(6*time.Hour, time.Hour, 20, false, 10*time.Minute)).onDemand(0, "3.978").
			zone("us-east-1", "1.60", false, cycles(time.Hour, 6*time.Hour, 20, false, time.Hour)).
			move("2").on(ChooseIdle).withCheckpoint("us-west-2")
	}
	tests := []struct {
		name string
		s    PolicyState
		want Choice
	}{
		{
			name: "slack for a return to spot: on-demand near the checkpoint for the short outage",
			s:    market(h(42)),
			want: OnDemandIn(0),
		},
		{
			name: "no slack for a return to spot: the cheaper on-demand elsewhere, the move included",
			s:    market(h(40.3)),
			want: OnDemandIn(1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Spotwise{}).Decide(tt.s); got != tt.want {
				t.Errorf("Decide = %v, want %v (%s)", got, tt.want, Spotwise{}.Explain(tt.s))
			}
		})
	}
}

// On-demand waits until the outage of every zone cheaper than it has
// lasted long enough to be worth bridging, by the rule the home zones'
// outages follow. Here those zones together run out for 20 minutes
// between most runs and, twice, for 10 hours: waiting out every outage
// of theirs ahead would take more than the slack, but bridging the ones
// that outlast 20 minutes would not. Both have been out for 20 minutes
// (the home zone for longer): most such outages are over by now.
func TestSpotwiseBridgesWithOnDemandOnceThePlansOutageIsOldEnough(t *testing.T) {
	var pattern []string // 20-minute steps: home zone, other zone, union
	rep := func(n int, p string) {
		for range n {
			pattern = append(pattern, p)
		}
	}
	for i := range 12 {
		rep(18, "111")
		if i%6 == 5 {
			rep(30, "000")
		} else {
			rep(1, "000")
		}
		rep(17, "011")
	}
	rep(18, "111")
	rep(3, "011")
	rep(1, "000")
	market := cheaperAtHome(watch(20*time.Minute, pattern...))
	tests := []choiceCase{
		{
			name: "slack to bridge only the plan's outages older than this one: wait",
			s:    market(h(45)),
			want: ChooseIdle,
		},
		{
			name: "slack short even so: on-demand",
			s:    market(h(42.5)),
			want: OnDemandIn(0),
		},
	}
	decideAtCheaperHome(t, tests)
}

// cheaperAtHome is a market of two zones over seen (the zones' watches and
// the union's), 10 hours in with 40 of work left: us-east-1, where the
// checkpoint is, at $0.95 (the home zone), and us-east-2 at $1.30, a
// region away; its argument is the time left to the deadline.
func cheaperAtHome(seen []ZoneStats) func(left time.Duration) PolicyState {
	return func(left time.Duration) PolicyState {
		m := newMarket(h(10), left, h(40)).
			zone("us-east-1", "0.95", false, seen[0]).
			zone("us-east-2", "1.30", false, seen[1]).
			move("1")
		m.s.Checkpoint = "us-east-1"
		return m.union(seen[2])
	}
}

// choiceCase is a policy state and what Spotwise should choose in it.
type choiceCase struct {
	name string
	s    PolicyState
	want Choice
}

// decideAtCheaperHome checks cases of a cheaperAtHome market: only the
// cheaper zone is home, and Spotwise chooses what each wants.
func decideAtCheaperHome(t *testing.T, tests []choiceCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if home := homeZones(tt.s); !home[0] || home[1] {
				t.Fatalf("home zones %v, want only the cheaper zone", home)
			}
			if got := (Spotwise{}).Decide(tt.s); got != tt.want {
				t.Errorf("Decide = %v, want %v (%s)", got, tt.want, Spotwise{}.Explain(tt.s))
			}
		})
	}
}

func TestMinOf(t *testing.T) {
	dist := func(lengths ...float64) runDist {
		var r runDist
		for _, l := range lengths {
			r.add(1, l)
		}
		return r
	}
	tests := []struct {
		name            string
		a               runDist
		shift           float64
		b               runDist
		most            float64
		mean, aFirst    float64
		belowMinOfMeans bool
	}{
		{"one length each", dist(3600), 0, dist(7200), math.Inf(1), 3600, 1, false},
		{"a shifted below nothing", dist(600), 720, dist(7200), math.Inf(1), 0, 1, false},
		{"capped", dist(36000), 0, dist(72000), 7200, 7200, 0, false},
		// Half the runs end at once, half last 30h: their mean (about
		// 15h) is longer than b's 13h, yet half the time the saving
		// lasts minutes.
		{"spread runs", dist(1080, 108000), 720, dist(46800), math.Inf(1), (360 + 46800) / 2, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, first := minOf(tt.a, tt.shift, tt.b, tt.most)
			if math.Abs(mean-tt.mean) > 1 || math.Abs(first-tt.aFirst) > 1e-9 {
				t.Errorf("minOf = %.0fs, %.2f; want %.0fs, %.2f", mean, first, tt.mean, tt.aFirst)
			}
			if old := math.Min(math.Min(tt.a.mean()-tt.shift, tt.b.mean()), tt.most); tt.belowMinOfMeans && mean > 0.6*old {
				t.Errorf("minOf = %.0fs, want far below the shorter of the means (%.0fs)", mean, old)
			}
		})
	}
}

// A move between two spot zones saves until the first of their runs
// ends: a zone whose runs are as long as another's on average, but half
// of them over within minutes, is not worth the move that a steady one
// is.
func TestSpotwiseMovesJudgeTheSpreadOfRuns(t *testing.T) {
	runs := func(lengths []time.Duration, age time.Duration) ZoneStats {
		var z ZoneStats
		for range 10 {
			for _, l := range lengths {
				z.Observe(true, l)
				z.Observe(false, time.Hour)
			}
		}
		z.Observe(true, age)
		return z
	}
	here := runs([]time.Duration{15 * time.Hour}, 2*time.Hour)
	steady := runs([]time.Duration{15*time.Hour + 9*time.Minute}, 3*time.Minute)
	spread := runs([]time.Duration{18 * time.Minute, 30 * time.Hour}, 3*time.Minute)
	tests := []struct {
		name  string
		there ZoneStats
		want  Choice
	}{
		{"runs of 15h there: move", steady, ChooseSpot(1)},
		{"runs of 18 minutes or 30 hours there: stay", spread, ChooseSpot(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMarket(h(1000), h(70), h(40)).
				zone("us-east-1", "1.00", true, here).
				zone("us-east-1", "0.96", true, tt.there).
				on(ChooseSpot(0))
			if got := (Spotwise{}).Decide(m.s); got != tt.want {
				t.Errorf("Decide = %v, want %v (%s)", got, tt.want, (Spotwise{}).Explain(m.s))
			}
		})
	}
}
