package bidding

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// state is a fixture builder for policy states: a 10-hour job in a
// 15-hour window, 1-hour changeovers and steps, zones named by letter.
type state struct{ s PolicyState }

func newState() *state {
	return &state{PolicyState{
		TimeLeft: 15 * time.Hour, Work: 10 * time.Hour, WorkLeft: 10 * time.Hour,
		Changeover: time.Hour, Step: time.Hour, OnDemandPrice: money.MustParse("3"),
	}}
}

func (b *state) at(elapsed, left, workLeft time.Duration) *state {
	b.s.Elapsed, b.s.TimeLeft, b.s.WorkLeft = elapsed, left, workLeft
	return b
}

func (b *state) zones(available ...bool) *state {
	for i, a := range available {
		b.s.Zones = append(b.s.Zones, SpotZone{Name: string(rune('a' + i)), Available: a, Price: money.MustParse("1")})
	}
	return b
}

func (b *state) on(c Choice, changeoverLeft time.Duration) *state {
	b.s.Current, b.s.ChangeoverLeft = c, changeoverLeft
	return b
}

func (b *state) get() PolicyState { return b.s }

func h(n float64) time.Duration { return time.Duration(n * float64(time.Hour)) }

func TestSafe(t *testing.T) {
	tests := []struct {
		name   string
		s      PolicyState
		choice Choice
		want   bool
	}{
		{"on-demand from idle with room for its changeover", newState().at(0, h(11), h(10)).zones(true).get(), ChooseOnDemand, true},
		{"on-demand from idle, one hour short", newState().at(0, h(10.5), h(10)).zones(true).get(), ChooseOnDemand, false},
		{"staying on on-demand needs only its changeover left", newState().at(0, h(10.5), h(10)).zones(true).on(ChooseOnDemand, h(0.5)).get(), ChooseOnDemand, true},
		{"idle a step when on-demand still fits after it", newState().at(0, h(12), h(10)).zones(false).get(), ChooseIdle, true},
		{"idle a step too many", newState().at(0, h(11.5), h(10)).zones(false).get(), ChooseIdle, false},
		{"launch spot with two changeovers of slack", newState().at(0, h(12), h(10)).zones(true).get(), ChooseSpot(0), true},
		{"launch spot with less", newState().at(0, h(11.9), h(10)).zones(true).get(), ChooseSpot(0), false},
		{"stay on spot with one changeover of slack", newState().at(0, h(11), h(10)).zones(true).on(ChooseSpot(0), 0).get(), ChooseSpot(0), true},
		{"stay in a spot changeover that still leaves room", newState().at(0, h(11.5), h(10)).zones(true).on(ChooseSpot(0), h(0.5)).get(), ChooseSpot(0), true},
		{"stay in a spot changeover that does not", newState().at(0, h(11.4), h(10)).zones(true).on(ChooseSpot(0), h(0.5)).get(), ChooseSpot(0), false},
		{"moving to another zone is a launch", newState().at(0, h(11.5), h(10)).zones(true, true).on(ChooseSpot(0), 0).get(), ChooseSpot(1), false},
		{"spot in a zone without capacity", newState().zones(false).get(), ChooseSpot(0), false},
		{"spot in a zone that does not exist", newState().zones(true).get(), ChooseSpot(3), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Safe(tt.choice); got != tt.want {
				t.Errorf("Safe(%v) = %v, want %v", tt.choice, got, tt.want)
			}
		})
	}
	t.Run("Guard falls back to on-demand", func(t *testing.T) {
		s := newState().at(0, h(11.5), h(10)).zones(true).get()
		if got := s.Guard(ChooseSpot(0)); got != ChooseOnDemand {
			t.Errorf("Guard = %v", got)
		}
	})
	t.Run("Guard keeps a running spot when on-demand is already too late", func(t *testing.T) {
		s := newState().at(0, h(10.5), h(10)).zones(true).on(ChooseSpot(0), 0).get()
		if got := s.Guard(ChooseIdle); got != ChooseSpot(0) {
			t.Errorf("Guard = %v, want to stay on spot", got)
		}
	})
}

func TestZoneStats(t *testing.T) {
	var z ZoneStats
	if _, ok := z.Fraction(); ok {
		t.Error("a fraction before any observation")
	}
	// up 3, down 2, up 1, down 4 (in progress)
	for _, up := range []bool{true, true, true, false, false, true, false, false, false, false} {
		z.Observe(up, time.Minute)
	}
	z.Observe(true, 0) // nothing
	f, _ := z.Fraction()
	if z.Observed != 10*time.Minute || z.Up != 4*time.Minute || f != 0.4 {
		t.Errorf("observed %v, up %v, fraction %v", z.Observed, z.Up, f)
	}
	if z.Available || z.Since != 4*time.Minute {
		t.Errorf("now available %v for %v, want an outage of 4m", z.Available, z.Since)
	}
	if z.Ups.N() != 2 || z.Downs.N() != 1 {
		t.Errorf("%v ended runs and %v ended outages, want 2 and 1", z.Ups.N(), z.Downs.N())
	}
	if m, _ := z.Ups.Mean(); m != 2*time.Minute {
		t.Errorf("mean run %v, want 2m", m)
	}
	if m, _ := z.Downs.Mean(); m != 2*time.Minute {
		t.Errorf("mean outage %v, want 2m", m)
	}
	if _, ok := new(RunHist).Mean(); ok {
		t.Error("a mean of no runs")
	}
	t.Run("buckets grow by half-octaves and the last is open", func(t *testing.T) {
		for _, c := range []struct {
			d    time.Duration
			want int
		}{{0, 0}, {29 * time.Second, 0}, {30 * time.Second, 1}, {43 * time.Second, 2}, {time.Minute, 3}, {30 * 24 * time.Hour, histBuckets - 1}} {
			if got := histBucket(c.d); got != c.want {
				t.Errorf("bucket(%v) = %d, want %d", c.d, got, c.want)
			}
		}
	})
}

func TestNewPolicy(t *testing.T) {
	for _, name := range PolicyNames {
		p, err := NewPolicy(name)
		if err != nil || p.Name() != name {
			t.Errorf("NewPolicy(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := NewPolicy("optimal"); err == nil || !strings.Contains(err.Error(), "known: on-demand, greedy, uniform-progress, spotwise") {
		t.Errorf("NewPolicy(optimal) = %v: the optimum is not an online policy", err)
	}
	ps, err := Policies("spotwise", "greedy")
	if err != nil || len(ps) != 2 || ps[0].Name() != "spotwise" {
		t.Errorf("Policies = %v, %v", ps, err)
	}
	if _, err := Policies("greedy", "nope"); err == nil {
		t.Error("Policies accepted an unknown name")
	}
}

func TestUniformProgress(t *testing.T) {
	up := UniformProgress{}
	tests := []struct {
		name string
		s    PolicyState
		want Choice
	}{
		// The line at t: Work*t/window; 10h in 15h, so at 6h the line
		// is at 4h of work done.
		{"spot whenever available, even behind", newState().at(h(6), h(9), h(6.5)).zones(true).get(), ChooseSpot(0)},
		{"behind and idle without spot: on-demand", newState().at(h(6), h(9), h(7)).zones(false).get(), ChooseOnDemand},
		{"on the line and idle: wait", newState().at(h(6), h(9), h(6)).zones(false).get(), ChooseIdle},
		{"on on-demand, ahead but not by 2d: stay", newState().at(h(6), h(9), h(5.5)).zones(true).on(ChooseOnDemand, 0).get(), ChooseOnDemand},
		// 2d ahead: line at 8h is 5.33h done.
		{"on on-demand, 2d ahead, spot there: go", newState().at(h(6), h(9), h(4.5)).zones(true).on(ChooseOnDemand, 0).get(), ChooseSpot(0)},
		{"on on-demand, 2d ahead, no spot: stay", newState().at(h(6), h(9), h(4.5)).zones(false).on(ChooseOnDemand, 0).get(), ChooseOnDemand},
		{"keep a running spot", newState().at(h(6), h(9), h(8)).zones(true).on(ChooseSpot(0), 0).get(), ChooseSpot(0)},
		{"safety net: too late to risk spot", newState().at(h(6), h(9), h(7.5)).zones(true).get(), ChooseOnDemand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := up.Decide(tt.s); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}

// observed is a zone's stats after watching a repeating pattern of runs.
func observed(up, down time.Duration, cycles int) ZoneStats {
	var z ZoneStats
	for range cycles {
		for range int(up / time.Hour) {
			z.Observe(true, time.Hour)
		}
		for range int(down / time.Hour) {
			z.Observe(false, time.Hour)
		}
	}
	return z
}

// sameChoice compares choices, an on-demand one in any zone matching
// ChooseOnDemand.
func sameChoice(got, want Choice) bool {
	if want == ChooseOnDemand {
		return got.Kind == RunOnDemand
	}
	return got == want
}

func TestSpotwise(t *testing.T) {
	sw := Spotwise{}
	// A zone with 20-hour runs and 2-hour outages: a 10-hour job with
	// 5 hours of slack expects less than one outage.
	good := observed(20*time.Hour, 2*time.Hour, 20)
	// A zone with 2-hour runs and 6-hour outages: spot cannot carry it.
	bad := observed(2*time.Hour, 6*time.Hour, 20)
	with := func(b *state, seen ...ZoneStats) PolicyState {
		s := b.get()
		for i := range seen {
			s.Zones[i].Seen = seen[i]
		}
		if len(seen) == 1 {
			s.Union = seen[0]
		}
		return s
	}
	tests := []struct {
		name string
		s    PolicyState
		want Choice
	}{
		{"spot when available", with(newState().zones(true), good), ChooseSpot(0)},
		{"keep a running spot", with(newState().zones(true).on(ChooseSpot(0), 0), good), ChooseSpot(0)},
		{"plenty of slack in a good zone: wait out an outage", with(newState().at(h(1), h(14), h(10)).zones(false), good), ChooseIdle},
		{"a bad zone and little slack: bridge with on-demand", with(newState().at(h(1), h(13), h(10)).zones(false), bad), ChooseOnDemand},
		{"on on-demand without spot: stay", with(newState().at(h(1), h(14), h(10)).zones(false).on(ChooseOnDemand, 0), good), ChooseOnDemand},
		{"the safety net wins", with(newState().at(h(6), h(9), h(7.5)).zones(true), good), ChooseOnDemand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sw.Decide(tt.s); !sameChoice(got, tt.want) {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("moves to the zone with the most capacity", func(t *testing.T) {
		s := newState().zones(true, true, false).get()
		s.Zones[0].Seen = observed(2*time.Hour, 6*time.Hour, 5)
		s.Zones[1].Seen = observed(6*time.Hour, 2*time.Hour, 5)
		s.Zones[2].Seen = observed(20*time.Hour, 1*time.Hour, 5)
		if got := sw.Decide(s); got != ChooseSpot(1) {
			t.Errorf("Decide = %v, want the better of the available zones, spot[1]", got)
		}
	})
	t.Run("with no history it keeps to the uniform line, less the reserve", func(t *testing.T) {
		// The line wants 3h of slack at 9h left; the reserve is 2h.
		behind := newState().at(h(6), h(9), h(4.5)).zones(false).get()
		ahead := newState().at(h(6), h(9), h(4)).zones(false).get()
		if got := sw.Decide(behind); got.Kind != RunOnDemand {
			t.Errorf("behind the line: %v", got)
		}
		if got := sw.Decide(ahead); got != ChooseIdle {
			t.Errorf("ahead of the line: %v", got)
		}
	})
	t.Run("after a flicker it waits before leaving on-demand when slack is short", func(t *testing.T) {
		s := with(newState().at(h(1), h(12.5), h(10)).zones(true).on(ChooseOnDemand, 0), bad)
		s.Zones[0].Seen.Observe(true, time.Hour) // a run of one hour so far
		if got := sw.Decide(s); got != ChooseOnDemand {
			t.Errorf("Decide = %v, want to stay on on-demand", got)
		}
	})
}

func TestLessProduct(t *testing.T) {
	big := time.Duration(math.MaxInt64 / 2)
	for _, c := range []struct {
		a, b, c, d time.Duration
		want       bool
	}{
		{2, 3, 1, 7, true}, {2, 3, 1, 6, false}, {big, 4, big, 3, false}, {big, 3, big, 4, true}, {-1, 1, 0, 0, true},
	} {
		if got := lessProduct(c.a, c.b, c.c, c.d); got != c.want {
			t.Errorf("lessProduct(%v) = %v", c, got)
		}
	}
}

func TestPoliciesNeverPickAZoneWithoutCapacity(t *testing.T) {
	for _, name := range PolicyNames {
		p, _ := NewPolicy(name)
		for _, avail := range [][]bool{{false}, {false, false}, {true, false}, {false, true, false}} {
			s := newState().zones(avail...).get()
			c := p.Decide(s)
			if c.Kind == RunSpot && !avail[c.Zone] {
				t.Errorf("%s chose %v with capacity %v", name, c, avail)
			}
		}
	}
	if !slices.Contains(PolicyNames, PolicySpotwise) {
		t.Error("spotwise is not a named policy")
	}
}

// TestSpotwiseMovesOnPrice: a job on an always-available but dear spot
// zone leaves it for a cheaper zone once the move clearly pays, and stays
// when it would not (the cheaper zone is about to vanish, or the move's
// egress eats the saving).
func TestSpotwiseMovesOnPrice(t *testing.T) {
	long := observed(40*time.Hour, time.Hour, 10) // runs of 40h
	flicker := observed(6*time.Minute, 30*time.Minute, 20)
	dear := func() ZoneStats { var z ZoneStats; z.Observe(true, 400*time.Hour); return z }
	state := func(cheap ZoneStats, run time.Duration, cheapRegion string, moveCost money.Micros) PolicyState {
		s := newState().at(h(2), h(58), h(46)).zones(true, true).on(ChooseSpot(0), 0).get()
		s.Work, s.Changeover = h(48), 12*time.Minute
		s.OnDemandPrice = money.MustParse("100")
		s.Zones[0].Price, s.Zones[0].Region, s.Zones[0].Seen = money.MustParse("69.91"), "us-east-1", dear()
		s.Zones[1].Price, s.Zones[1].Region, s.Zones[1].Seen = money.MustParse("18.98"), cheapRegion, cheap
		s.Zones[1].Seen.Observe(true, run)
		s.MoveCost = moveCost
		return s
	}
	tests := []struct {
		name string
		s    PolicyState
		want Choice
	}{
		{"a cheaper zone with long runs: move", state(long, 3*time.Hour, "us-east-1", 0), ChooseSpot(1)},
		{"in another region, a small egress: move", state(long, 3*time.Hour, "us-west-2", money.MustParse("20")), ChooseSpot(1)},
		{"an egress larger than the saving: stay", state(long, 3*time.Hour, "us-west-2", money.MustParse("5000")), ChooseSpot(0)},
		{"a cheaper zone whose runs do not outlast a changeover: stay", state(flicker, 3*time.Minute, "us-east-1", 0), ChooseSpot(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Spotwise{}).Decide(tt.s); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}
