package main

import (
	"testing"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/bidding/simulate"
)

// A timeline of ticks of one hour: what each launch was and whether it
// made progress, and how long the on-demand stints lasted.
func TestStintsCountLaunchesByKindAndTheWastedOnes(t *testing.T) {
	idle := simulate.Slot{Choice: bidding.ChooseIdle}
	spot := func(z int, change bool) simulate.Slot {
		return simulate.Slot{Choice: bidding.ChooseSpot(z), Changeover: change}
	}
	od := func(change bool) simulate.Slot {
		return simulate.Slot{Choice: bidding.OnDemandIn(0), Changeover: change}
	}
	tl := []simulate.Slot{
		spot(0, true), spot(0, false), // start -> spot, progress
		spot(0, true),             // preempted and launched again there: idle -> spot, none
		spot(1, true),             // spot -> spot, none
		idle, od(true), od(false), // idle -> on-demand, 2 h
		spot(0, true),                                        // on-demand -> spot, none
		od(true), od(false), od(false), od(false), od(false), // spot -> on-demand, 5 h
	}
	var b breakdown
	b.stints(tl, 1)
	for _, c := range []struct {
		e              entry
		entries, waste float64
	}{
		{entry{"start", "spot"}, 1, 0},
		{entry{"idle", "spot"}, 1, 1},
		{entry{"spot", "spot"}, 1, 1},
		{entry{"idle", "od"}, 1, 0},
		{entry{"od", "spot"}, 1, 1},
		{entry{"spot", "od"}, 1, 0},
	} {
		if b.entries[c.e] != c.entries || b.wasted[c.e] != c.waste {
			t.Errorf("%s -> %s: %v launches, %v without progress; want %v, %v", c.e.from, c.e.to, b.entries[c.e], b.wasted[c.e], c.entries, c.waste)
		}
	}
	if want := [3]float64{0, 1, 1}; b.odStints != want {
		t.Errorf("on-demand stints by length %v, want %v", b.odStints, want)
	}
}
