package bidding

import "math"

// The capacity of a set of zones taken together (some zone of the set has
// capacity), rebuilt from each zone's recent runs: what PolicyState.Union
// is for every zone, for the zones a job means to run on. Times here are
// in seconds before now ("ago"), zones being watched on one clock.

// span is an interval [from, to) of seconds before now.
type span struct{ from, to float64 }

// downSpans are zone z's outages within its log, newest first, and how
// far back its log reaches.
func downSpans(z ZoneStats) (downs []span, reach float64) {
	now := z.Observed.Seconds()
	reach = z.Since.Seconds()
	if !z.Available && z.Observed > 0 {
		downs = append(downs, span{0, reach})
	}
	for i := len(z.recent) - 1; i >= 0; i-- {
		r := z.recent[i]
		ago := now - r.end.Seconds()
		sp := span{ago, ago + r.length.Seconds()}
		if !r.up {
			downs = append(downs, sp)
		}
		reach = sp.to
	}
	return downs, reach
}

// intersect is the intersection of two lists of disjoint spans sorted
// newest first.
func intersect(a, b []span) []span {
	var out []span
	for i, j := 0, 0; i < len(a) && j < len(b); {
		from, to := math.Max(a[i].from, b[j].from), math.Min(a[i].to, b[j].to)
		if from < to {
			out = append(out, span{from, to})
		}
		if a[i].to < b[j].to {
			i++
		} else {
			j++
		}
	}
	return out
}

// unionRuns are the ended runs with capacity and the ended outages of the
// zones marked in set taken together, over the time all of them have
// been watched and logged; runs cut by the start of that time are left
// out, as are the runs in progress.
func unionRuns(zones []SpotZone, set []bool) (up, down runDist) {
	var all []span
	reach := math.Inf(1)
	first := true
	for i, z := range zones {
		if !set[i] {
			continue
		}
		d, r := downSpans(z.Seen)
		reach = math.Min(reach, r)
		if first {
			all, first = d, false
		} else {
			all = intersect(all, d)
		}
	}
	if first || reach <= 0 {
		return up, down
	}
	newer := -1.0 // where the newer outage began (ago); -1 before the first
	for _, sp := range all {
		if sp.to >= reach {
			break // cut by the start of the log
		}
		if sp.from > 0 {
			down.add(1, sp.to-sp.from)
		}
		if newer >= 0 {
			up.add(1, sp.from-newer)
		}
		newer = sp.to
	}
	return up, down
}
