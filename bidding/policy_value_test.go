package bidding

import (
	"math"
	"testing"
	"time"
)

// valueMarket is a value table over a market whose runs and outages have the
// given lengths in hours, all equally likely.
func valueMarket(t *testing.T, runs, outages []float64, workH, slackH float64) *valueTable {
	t.Helper()
	var up, down runDist
	for _, h := range runs {
		up.add(1, h*3600)
	}
	for _, h := range outages {
		down.add(1, h*3600)
	}
	const d = 0.2 * 3600
	o := outlook{d: d, od: 3_000_000, up: up, down: down}
	s := PolicyState{Work: hrs(workH), TimeLeft: hrs(workH + slackH), WorkLeft: hrs(workH)}
	v := o.values(s, 1_000_000)
	if v == nil {
		t.Fatal("no value table with runs and outages seen")
	}
	return v
}

func hrs(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

// A market whose runs are long and whose outages are short costs what
// waiting every outage through costs: spot for the work and a changeover
// per run; the table finds it, where finishing on on-demand costs three
// times as much.
func TestValueOfAKnownMarketIsWaitingItsOutagesThrough(t *testing.T) {
	v := valueMarket(t, []float64{10}, []float64{1}, 20, 5)
	// Runs of 10 h make 9.8 h of progress each: three launches for
	// 20 h (9.8 + 9.8 + 0.4), the outages after the first two waited
	// through (slack 5 -> 4.8 -> 3.8 -> 3.6 -> 2.6).
	want := 1_000_000 * (20 + 3*0.2)
	if got := v.at(v.u, hrs(20).Seconds(), hrs(5).Seconds()); math.Abs(got-want)/want > 0.02 {
		t.Errorf("cost to go of a spot launch with 20 h of work and 5 h of slack = $%.2f, want $%.2f", got/1e6, want/1e6)
	}
	if now, wait, ok := v.bridgeNow(hrs(20).Seconds(), hrs(5).Seconds(), hrs(0.3).Seconds()); !ok || now < wait {
		t.Errorf("an hour-long outage 0.3 h old with 5 h of slack: bridging now costs $%.2f, waiting $%.2f (ok %v); want to wait it out", now/1e6, wait/1e6, ok)
	}
}

// An outage is bridged at once only when the slack it would take is worth
// more later: here most outages last a quarter of an hour and one in four
// 8 hours. An hour-old outage is one of the long ones; with an hour of
// slack, the short outages ahead need it, so it is bridged now; with
// ample slack it is waited on. Where every outage is long, bridging now
// costs what waiting on does: the slack could buy nothing later. Short
// outages, or ample slack, are waited through.
func TestValueBridgesOnlyWhatTheSlackCannotWaitOut(t *testing.T) {
	mixed := []float64{0.25, 0.25, 0.25, 8}
	cases := []struct {
		name     string
		outages  []float64
		slackH   float64
		ageH     float64
		bridgeIt bool
	}{
		{"mixed outages, a long one, 1 h of slack", mixed, 1, 1, true},
		{"mixed outages, a long one, 6 h of slack", mixed, 6, 1, false},
		{"mixed outages, a long one, 12 h of slack", mixed, 12, 1, false},
		{"outages of 10 min, 3 h of slack", []float64{1.0 / 6}, 3, 0.05, false},
		{"outages of 2 h, 30 h of slack", []float64{2}, 30, 0.5, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := valueMarket(t, []float64{6}, c.outages, 40, c.slackH)
			now, wait, ok := v.bridgeNow(hrs(40).Seconds(), hrs(c.slackH).Seconds(), hrs(c.ageH).Seconds())
			if !ok || (now < wait) != c.bridgeIt {
				t.Errorf("bridging now costs $%.2f, waiting on $%.2f (ok %v); want bridge now %v", now/1e6, wait/1e6, ok, c.bridgeIt)
			}
		})
	}
	v := valueMarket(t, []float64{6}, []float64{20}, 40, 2)
	if now, wait, ok := v.bridgeNow(hrs(40).Seconds(), hrs(2).Seconds(), hrs(1).Seconds()); !ok || math.Abs(now-wait) > 0.001*wait {
		t.Errorf("outages of 20 h, 2 h of slack: bridging now costs $%.2f, waiting on $%.2f (ok %v); want the same", now/1e6, wait/1e6, ok)
	}
	v = valueMarket(t, []float64{6}, mixed, 40, 1)
	if _, _, ok := v.bridgeNow(hrs(40).Seconds(), hrs(1).Seconds(), hrs(9).Seconds()); ok {
		t.Error("an outage longer than any seen: bridgeNow answered, want no answer")
	}
}

// More slack never costs more, and no state costs more than on-demand
// to the end or less than spot for the work alone.
func TestValueIsBoundedAndFallsWithSlack(t *testing.T) {
	v := valueMarket(t, []float64{0.1, 1, 3, 12}, []float64{0.05, 0.5, 2, 8}, 48, 20)
	for i := 1; i <= v.nr; i++ {
		r := float64(i) * v.gr
		prev := math.Inf(1)
		for j := 0; j <= v.ns; j++ {
			s := float64(j) * v.gs
			for name, tab := range map[string][]float64{"launch": v.u, "outage": v.w} {
				x := v.at(tab, r, s)
				if x < v.p*r/3600-1 || x > v.q*(r+v.d)/3600+1 {
					t.Fatalf("%s at work %.1fh slack %.1fh: $%.2f, outside spot-only $%.2f and on-demand-only $%.2f", name, r/3600, s/3600, x/1e6, v.p*r/3600/1e6, v.q*(r+v.d)/3600/1e6)
				}
			}
			x := v.at(v.w, r, s)
			if x > prev+1 {
				t.Fatalf("outage at work %.1fh: slack %.1fh costs $%.2f, more than with less slack ($%.2f)", r/3600, s/3600, x/1e6, prev/1e6)
			}
			prev = x
		}
	}
}

// BenchmarkValueTable solves a table over 17 run lengths and 13 outage
// lengths, as a job in the April four zones sees them: the cost of the
// first bridge question a market asks after a run or an outage ends.
func BenchmarkValueTable(b *testing.B) {
	var up, down runDist
	for i, h := range []float64{0.02, 0.05, 0.1, 0.13, 0.2, 0.3, 0.4, 0.6, 0.9, 1.1, 1.8, 2.9, 3.2, 5.1, 6.3, 9.8, 28} {
		up.add(float64(1+i%3), h*3600)
	}
	for i, h := range []float64{0.03, 0.04, 0.05, 0.07, 0.13, 0.2, 0.3, 0.4, 0.7, 1, 1.2, 2, 4.9} {
		down.add(float64(1+i%4), h*3600)
	}
	s := PolicyState{Work: hrs(48), TimeLeft: hrs(60), WorkLeft: hrs(48)}
	for i := 0; b.Loop(); i++ {
		// A new market each time: never from the cache.
		o := outlook{d: 720, od: 3_060_000 + float64(i), up: up, down: down}
		if o.values(s, 918_000) == nil {
			b.Fatal("no table")
		}
	}
}

// On on-demand, a job returns to spot only once a run has lasted the
// return hysteresis. Runs of half an hour, outages of a minute, little
// slack: the hysteresis is longer than a run for most of the job, so the
// job stays on on-demand where a return at once would pay (a third of
// the price for most of each run), and the table prices the staying.
// Where runs are long, it returns and pays far less.
func TestValueOnOnDemandRidesOutRunsShorterThanTheHysteresis(t *testing.T) {
	const r, s = 40 * 3600, 2 * 3600
	short := valueMarket(t, []float64{0.5}, []float64{1.0 / 60}, 40, 2)
	if h := hysteresis(short.d, r, s, short.mu); h <= 0.5*3600 {
		t.Fatalf("hysteresis %.2fh: the runs of half an hour are not shorter", h/3600)
	}
	o, u, od := short.at(short.o, r, s), short.at(short.u, r, s), short.q*r/3600
	t.Logf("runs of half an hour: on on-demand $%.2f, a spot launch $%.2f, on-demand to the end $%.2f", o/1e6, u/1e6, od/1e6)
	if o <= u {
		t.Errorf("runs of half an hour: on on-demand at a run's start costs $%.2f, no more than a return at once ($%.2f)", o/1e6, u/1e6)
	}
	long := valueMarket(t, []float64{10}, []float64{0.5}, 40, 4)
	if got, od := long.at(long.o, r, 4*3600), long.q*r/3600; got > 0.6*od {
		t.Errorf("runs of 10 hours: on on-demand at a run's start costs $%.2f, want well below on-demand to the end $%.2f", got/1e6, od/1e6)
	}
}
