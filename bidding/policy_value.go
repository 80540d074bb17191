package bidding

import (
	"encoding/binary"
	"math"
	"sync"
)

// The value of the job's state: what finishing is expected to cost from
// (work left, slack left), when the home zones' runs of capacity and
// outages follow the lengths seen so far, each independent of the last,
// and the job acts as well as it can on what it knows: on spot until
// preempted; idle through an outage up to a wait it picks when the outage
// begins, on-demand after; on on-demand, back to spot once a run has
// lasted the return hysteresis (Spotwise's own, returnWait: shorter runs
// and the outages after them are ridden out on on-demand), or on-demand
// to the end; only on-demand once the slack is down to the
// safety net's changeovers. Solved backwards by dynamic programming over
// a grid of 24 cells of the job's work by 48 of its slack: every step
// spends slack or makes progress, so each cell depends only on cells with
// less of either, but for the runs and outages shorter than a cell, which
// lead back to it and are solved for exactly.
//
// Spotwise asks it whether to bridge an outage of the home zones that has
// lasted a now or to wait on: which is expected to cost less, over the
// spread of what is left of the outage. No threshold enters: the slack is
// worth what waiting an outage out saves later, as the market has been.

// valueTable is the solution over the grid: u where a spot launch
// begins, w where an outage begins (the job idle), o where a run begins
// while the job is on on-demand (onDemand). Costs are micro-dollars per node.
type valueTable struct {
	d, p, q  float64 // changeover (s); spot and on-demand price per hour
	migrate  float64 // share of a run's time lost to moves between home zones
	reserve  float64 // slack below which only on-demand is left
	gr, gs   float64 // cell size in work and slack (s)
	nr, ns   int
	u, w, o  []float64
	up, down []bucket
	waits    []float64 // the waits an outage may be given before a bridge
	mu       float64   // the mean run, for the return hysteresis
}

// bucket is a run length and its probability.
type bucket struct{ len, p float64 }

const (
	valueWorkCells  = 24
	valueSlackCells = 48
)

func bucketsOf(r runDist) ([]bucket, float64) {
	n := r.total()
	var out []bucket
	r.each(func(c, m float64) { out = append(out, bucket{m, c / n}) })
	return out, n
}

// at is the table's value t at work r and slack s (seconds), interpolated.
func (v *valueTable) at(t []float64, r, s float64) float64 {
	if r <= 0 {
		return 0
	}
	x, y := r/v.gr, math.Max(0, s)/v.gs
	i, j := int(x), int(y)
	if i >= v.nr {
		i, x = v.nr-1, float64(v.nr)
	}
	if j >= v.ns {
		j, y = v.ns-1, float64(v.ns)
	}
	fx, fy := x-float64(i), y-float64(j)
	c := func(i, j int) float64 {
		if i == 0 {
			return 0
		}
		return t[j*(v.nr+1)+i]
	}
	return (1-fy)*((1-fx)*c(i, j)+fx*c(i+1, j)) + fy*((1-fx)*c(i, j+1)+fx*c(i+1, j+1))
}

// launch is the cost to go of a spot launch at (r, s) whose run lasts
// the given spread of lengths, with next the value where it ends.
func (v *valueTable) launch(runs []bucket, r, s float64, next func(r, s float64) float64) float64 {
	e := 0.0
	for _, b := range runs {
		if b.len <= v.d {
			e += b.p * (v.p*b.len/3600 + next(r, s-b.len))
			continue
		}
		prog := (b.len - v.d) * (1 - v.migrate)
		if prog >= r {
			e += b.p * v.p * (r/(1-v.migrate) + v.d) / 3600
			continue
		}
		e += b.p * (v.p*b.len/3600 + next(r-prog, s-(b.len-prog)))
	}
	return e
}

// outage is the cost to go of an outage at (r, s) whose rest lasts the
// given spread, waited through up to tau and bridged with on-demand
// after; back is the value where the job, waiting, sees spot return, and
// ret where it does on on-demand.
func (v *valueTable) outage(rest []bucket, r, s, tau float64, back, ret func(r, s float64) float64) float64 {
	e := 0.0
	for _, b := range rest {
		if b.len <= tau {
			e += b.p * back(r, s-b.len)
			continue
		}
		y := b.len - tau // on on-demand
		prog := math.Max(0, y-v.d)
		if prog >= r {
			e += b.p * v.q * (r + v.d) / 3600
			continue
		}
		e += b.p * (v.q*y/3600 + ret(r-prog, s-(b.len-prog)))
	}
	return e
}

func (v *valueTable) solve() {
	n := (v.nr + 1) * (v.ns + 1)
	v.u, v.w, v.o = make([]float64, n), make([]float64, n), make([]float64, n)
	for j := 0; j <= v.ns; j++ {
		s := float64(j) * v.gs
		for i := 1; i <= v.nr; i++ {
			r := float64(i) * v.gr
			k := j*(v.nr+1) + i
			if s < v.reserve {
				v.u[k] = v.q * (r + v.d) / 3600
				v.w[k], v.o[k] = v.u[k], v.q*r/3600
				continue
			}
			// Runs and outages shorter than a cell lead back to this
			// very cell: its own values enter the interpolation, with
			// weight wu (in u, of w here) and ww (in w, of u here).
			// Zero them, solve, and the weights are the values'
			// derivatives: u = au + wu*w, w = aw + ww*u.
			v.u[k], v.w[k] = 0, 0
			au := v.launch(v.up, r, s, func(r, s float64) float64 { return v.at(v.w, r, s) })
			v.w[k] = 1
			wu := v.launch(v.up, r, s, func(r, s float64) float64 { return v.at(v.w, r, s) }) - au
			v.w[k] = 0
			aw, ww := math.Inf(1), 0.0
			// On on-demand from this cell the job is a cell's slack
			// lower at least: o here is not solved yet.
			ret := func(r, s2 float64) float64 { return v.at(v.o, r, math.Min(s2, s-v.gs)) }
			for _, tau := range append([]float64{0}, v.waits...) {
				if tau > s-v.reserve {
					tau = s - v.reserve
				}
				a := v.outage(v.down, r, s, tau, func(r, s float64) float64 { return v.at(v.u, r, s) }, ret)
				v.u[k] = 1
				b := v.outage(v.down, r, s, tau, func(r, s float64) float64 { return v.at(v.u, r, s) }, ret) - a
				v.u[k] = 0
				// Compare at the solution: w = (a + b*au)/(1 - b*wu).
				if (a+b*au)/(1-b*wu) < (aw+ww*au)/(1-ww*wu) {
					aw, ww = a, b
				}
				if tau >= s-v.reserve {
					break
				}
			}
			v.w[k] = (aw + ww*au) / (1 - ww*wu)
			v.u[k] = au + wu*v.w[k]
			v.o[k] = math.Min(v.q*r/3600, v.onDemand(k, r, s))
		}
	}
}

// valueCache keeps solved tables: every job of a market (the same prices,
// changeover and runs seen) and of about the same size asks the same
// question at every tick until a run or an outage ends. A table is about
// 30 kB.
var valueCache = struct {
	sync.Mutex
	m map[string]*valueTable
}{m: map[string]*valueTable{}}

const valueCacheSize = 128

// extent is x seconds rounded up to a step of a geometric scale of ratio
// 2^(1/4) hours: jobs of about the same size share a table whose cells
// are at most a fifth larger than their own would be.
func extent(x float64) float64 {
	h := math.Max(x/3600, 1.0/16)
	return math.Exp2(math.Ceil(4*math.Log2(h))/4) * 3600
}

// values is the table for the job's market as the outlook sees it: nil
// until an outage and a run have been seen.
func (o outlook) values(s PolicyState, p float64) *valueTable {
	up, upN := bucketsOf(o.up)
	down, downN := bucketsOf(o.down)
	if upN == 0 || downN == 0 {
		return nil
	}
	work, slack := extent(s.Work.Seconds()), extent((s.Elapsed + s.TimeLeft - s.Work).Seconds())
	migrate := math.Min(o.migrate, 0.5)
	key := make([]byte, 0, 8*(7+2*(len(up)+len(down))))
	for _, f := range []float64{o.d, p, o.od, work, slack, migrate, float64(len(up)), o.muZone} {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(f))
	}
	for _, b := range append(up, down...) {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(b.len))
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(b.p))
	}
	valueCache.Lock()
	v, ok := valueCache.m[string(key)]
	valueCache.Unlock()
	if ok {
		return v
	}
	mu := o.up.mean()
	if o.muZone > 0 {
		mu = math.Min(mu, o.muZone)
	}
	v = &valueTable{mu: mu, d: o.d, p: p, migrate: migrate, q: o.od, reserve: reserveChangeovers * o.d, up: up, down: down}
	v.nr, v.ns = valueWorkCells, valueSlackCells
	v.gr = work / float64(v.nr)
	v.gs = slack / float64(v.ns)
	for w := v.gs; w < slack; w *= 1.5 {
		v.waits = append(v.waits, w)
	}
	v.waits = append(v.waits, slack)
	v.solve()
	valueCache.Lock()
	if len(valueCache.m) >= valueCacheSize {
		clear(valueCache.m)
	}
	valueCache.m[string(key)] = v
	valueCache.Unlock()
	return v
}

// residual is the spread of what is left of a run or outage of the
// spread runs that has lasted age: nil when none seen lasted that long.
func residualOf(runs []bucket, age float64) []bucket {
	var out []bucket
	t := 0.0
	for _, b := range runs {
		if b.len > age {
			t += b.p
		}
	}
	if t == 0 {
		return nil
	}
	for _, b := range runs {
		if b.len > age {
			out = append(out, bucket{b.len - age, b.p / t})
		}
	}
	return out
}

// bridgeNow is what finishing is expected to cost when the outage, aged
// age, is bridged with on-demand now, and when it is waited on for the
// best of the waits (a changeover, or the table's); ok is false when the
// outage has outlasted every one seen.
func (v *valueTable) bridgeNow(r, s, age float64) (now, wait float64, ok bool) {
	rest := residualOf(v.down, age)
	if rest == nil {
		return 0, 0, false
	}
	back := func(r, s float64) float64 { return v.at(v.u, r, s) }
	ret := func(r, s float64) float64 { return v.at(v.o, r, s) }
	now = v.outage(rest, r, s, 0, back, ret)
	wait = math.Inf(1)
	for _, tau := range append([]float64{v.d}, v.waits...) {
		if tau > s-v.reserve {
			break
		}
		wait = math.Min(wait, v.outage(rest, r, s, tau, back, ret))
	}
	return now, wait, true
}

// onDemand is the cost to go on on-demand at (r, s) when a run begins,
// returning to spot once the run has lasted the hysteresis: a run shorter
// than that and the outage after it are ridden out on on-demand, up to
// the next run. Runs and outages shorter than a cell lead back to this
// cell (k), solved for as in solve.
func (v *valueTable) onDemand(k int, r, s float64) float64 {
	h := hysteresis(v.d, r, s, v.mu)
	next := func(r, s float64) float64 { return v.at(v.w, r, s) }
	val := func() float64 {
		e := 0.0
		for _, b := range v.up {
			if b.len > h {
				if h >= r {
					e += b.p * v.q * r / 3600
					continue
				}
				e += b.p * (v.q*h/3600 + v.launch([]bucket{{b.len - h, 1}}, r-h, s, next))
				continue
			}
			for _, x := range v.down {
				y := b.len + x.len
				if y >= r {
					e += b.p * x.p * v.q * r / 3600
					continue
				}
				e += b.p * x.p * (v.q*y/3600 + v.at(v.o, r-y, s))
			}
		}
		return e
	}
	v.o[k] = 0
	a := val()
	v.o[k] = 1
	w := val() - a
	v.o[k] = 0
	return a / (1 - w)
}
