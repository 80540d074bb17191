package simulate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/bidding/trace"
	"github.com/spotwise/spotwise/money"
)

// Hand-made markets use one-hour ticks and round prices, so that costs
// read as whole dollars: on-demand $3 a tick, spot $1.
var (
	onDemand3 = money.MustParse("3")
	spot1     = money.MustParse("1")
)

// zone builds a one-hour-step trace from a picture: '#' has capacity,
// '_' has none; a digit is a count of instances.
func zone(name, picture string) trace.Trace {
	t := trace.Trace{Name: name, Source: name + ".csv", Step: time.Hour}
	for _, c := range picture {
		switch {
		case c == '#':
			t.Avail = append(t.Avail, 1)
		case c == '_':
			t.Avail = append(t.Avail, 0)
		case c >= '0' && c <= '9':
			t.Avail = append(t.Avail, int(c-'0'))
		}
	}
	return t
}

func market(t *testing.T, nodes int, zones ...trace.Trace) *Market {
	t.Helper()
	m, err := NewMarket(zones, nodes, Prices{OnDemand: onDemand3, Spot: spot1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func hours(h int) time.Duration { return time.Duration(h) * time.Hour }

// runAll runs every policy from one start, without history.
func runAll(t *testing.T, m *Market, job Job, start int) map[string]Outcome {
	t.Helper()
	tk, err := m.Ticks(job)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Outcome{}
	for _, name := range bidding.PolicyNames {
		p, _ := bidding.NewPolicy(name)
		out[name] = m.Run(p, tk, start, Past{}, false)
	}
	opt, err := m.Optimal(tk, start, false)
	if err != nil {
		t.Fatal(err)
	}
	out[PolicyOptimal] = opt
	return out
}

func TestKnownAnswers(t *testing.T) {
	always := strings.Repeat("#", 40)
	never := strings.Repeat("_", 40)
	tests := []struct {
		name   string
		zones  []trace.Trace
		job    Job
		costs  map[string]string // policy -> dollars; every policy when "*"
		spotH  map[string]int
		finish map[string]int
	}{
		{
			name:  "always available: all spot, (C+d) x S",
			zones: []trace.Trace{zone("a", always)},
			job:   Job{Work: hours(6), Deadline: hours(10), Changeover: hours(1)},
			costs: map[string]string{"on-demand": "21", "greedy": "7", "uniform-progress": "7", "spotwise": "7", "optimal": "7"},
			spotH: map[string]int{"greedy": 7, "uniform-progress": 7, "spotwise": 7, "optimal": 7},
		},
		{
			name:  "never available: all on-demand, (C+d) x P",
			zones: []trace.Trace{zone("a", never)},
			job:   Job{Work: hours(6), Deadline: hours(10), Changeover: hours(1)},
			costs: map[string]string{"*": "21"},
		},
		{
			name:  "never available in any of three zones",
			zones: []trace.Trace{zone("a", never), zone("b", never), zone("c", never)},
			job:   Job{Work: hours(6), Deadline: hours(7), Changeover: hours(1)},
			costs: map[string]string{"*": "21"},
		},
		{
			// The optimum: spot t0 (changeover), t1 (work 1); outage
			// t2-t4; relaunch t5, work t6-t8: done at t9 = R, 6 spot ticks.
			// Greedy cannot relaunch spot at t5: were it preempted after
			// the changeover, on-demand could no longer finish in time; it
			// finishes on on-demand: 2 spot ticks and 4 on-demand, $14.
			name:   "one 3-tick outage, slack 5: wait it out",
			zones:  []trace.Trace{zone("a", "##___"+strings.Repeat("#", 20))},
			job:    Job{Work: hours(4), Deadline: hours(9), Changeover: hours(1)},
			costs:  map[string]string{"optimal": "6", "greedy": "14"},
			finish: map[string]int{"optimal": 9},
		},
		{
			// Slack 4 cannot pay for the outage and a relaunch. Best, by
			// hand: spot t0-t1 (work 1), idle t2, on-demand t3-t4 (work
			// 2), spot t5-t7 (work 3, 4): 5 spot ticks and 2 on-demand,
			// $11, done at t8 = R. Bridging at once costs $13, staying on
			// on-demand $14, on-demand alone $15.
			name:   "one 3-tick outage, slack 4: bridge part of it",
			zones:  []trace.Trace{zone("a", "##___"+strings.Repeat("#", 20))},
			job:    Job{Work: hours(4), Deadline: hours(8), Changeover: hours(1)},
			costs:  map[string]string{"optimal": "11", "on-demand": "15"},
			finish: map[string]int{"optimal": 8},
		},
		{
			// Zone a goes at t2 when b comes: moving costs one changeover,
			// on the same tick: t0 co, t1 work, t2 co on b, t3-t4 work,
			// 5 spot ticks. The optimum waits for b: 4 spot ticks.
			name:   "preempted in one zone, relaunch in another on the same tick",
			zones:  []trace.Trace{zone("a", "##"+strings.Repeat("_", 20)), zone("b", "__"+strings.Repeat("#", 20))},
			job:    Job{Work: hours(3), Deadline: hours(8), Changeover: hours(1)},
			costs:  map[string]string{"greedy": "5", "spotwise": "5", "optimal": "4"},
			finish: map[string]int{"greedy": 5, "spotwise": 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runAll(t, market(t, 1, tt.zones...), tt.job, 0)
			for name, o := range got {
				if o.Missed {
					t.Errorf("%s missed the deadline (finish %d)", name, o.Finish)
				}
				want, ok := tt.costs[name]
				if all, any := tt.costs["*"]; any {
					want, ok = all, true
				}
				if ok && o.Cost != money.MustParse(want) {
					t.Errorf("%s costs %s, want $%s", name, o.Cost, want)
				}
				if h, ok := tt.spotH[name]; ok && (o.Spot != h || o.OnDemand != 0) {
					t.Errorf("%s: %d spot and %d on-demand ticks, want %d spot", name, o.Spot, o.OnDemand, h)
				}
				if f, ok := tt.finish[name]; ok && o.Finish != f {
					t.Errorf("%s finishes at tick %d, want %d", name, o.Finish, f)
				}
				if got[PolicyOptimal].Cost > o.Cost {
					t.Errorf("%s costs %s, below the optimum %s", name, o.Cost, got[PolicyOptimal].Cost)
				}
			}
		})
	}
}

func TestTickModel(t *testing.T) {
	t.Run("work and changeover round up, the deadline down", func(t *testing.T) {
		tr := zone("a", "#")
		tr.Step = 195 * time.Second
		tr.Avail = make([]int, 20158)
		m := market(t, 1, tr)
		got, err := m.Ticks(Job{Work: 48 * time.Hour, Deadline: 60 * time.Hour, Changeover: 12 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if want := (Ticks{Work: 887, Deadline: 1107, Changeover: 4}); got != want {
			t.Errorf("ticks %+v, want %+v", got, want)
		}
	})
	t.Run("an unavailable tick is not billed; the relaunch is on the same tick", func(t *testing.T) {
		m := market(t, 1, zone("a", "##_"+strings.Repeat("#", 10)))
		tk, _ := m.Ticks(Job{Work: hours(3), Deadline: hours(10), Changeover: hours(1)})
		o := m.Run(bidding.Greedy{}, tk, 0, Past{}, true)
		// t0 co, t1 work, t2 preempted (idle, free), t3 co, t4-t5 work.
		want := "~s.~ss"
		if got := picture(o.Timeline); got != want || o.Spot != 5 || o.Cost != money.MustParse("5") || o.Finish != 6 {
			t.Errorf("timeline %q, %d spot ticks, %s, finish %d; want %q, 5, $5, 6", got, o.Spot, o.Cost, o.Finish, want)
		}
	})
	t.Run("with N nodes a tick has capacity when N instances are there; cost is per node", func(t *testing.T) {
		m := market(t, 4, zone("a", "443444444444"))
		tk, _ := m.Ticks(Job{Work: hours(3), Deadline: hours(10), Changeover: hours(1)})
		o := m.Run(bidding.Greedy{}, tk, 0, Past{}, true)
		if got := picture(o.Timeline); got != "~s.~ss" || o.Cost != money.MustParse("20") {
			t.Errorf("timeline %q, cost %s; want \"~s.~ss\", 5 ticks x 4 nodes x $1 = $20", got, o.Cost)
		}
	})
	t.Run("trace prices are billed tick by tick, rounded once", func(t *testing.T) {
		tr := zone("a", "####")
		tr.Step = 30 * time.Second
		tr.Prices = []money.Micros{money.MustParse("0.918"), money.MustParse("1.2754"), money.MustParse("0.9731"), money.MustParse("2")}
		m, err := NewMarket([]trace.Trace{tr}, 1, Prices{OnDemand: onDemand3, UseTrace: true})
		if err != nil {
			t.Fatal(err)
		}
		tk, _ := m.Ticks(Job{Work: time.Minute, Deadline: 2 * time.Minute, Changeover: 30 * time.Second})
		o := m.Run(bidding.Greedy{}, tk, 0, Past{}, false)
		// (0.918 + 1.2754 + 0.9731) $/h for 30 s each = 3.1665 / 120.
		if want := money.MustParse("3.1665").Scale(1, 120); o.Cost != want {
			t.Errorf("cost %s, want %s", o.Cost, want)
		}
	})
	t.Run("a job that cannot finish in time misses under every policy, at on-demand's cost", func(t *testing.T) {
		got := runAll(t, market(t, 1, zone("a", strings.Repeat("#", 20))), Job{Work: hours(6), Deadline: hours(6), Changeover: hours(1)}, 0)
		for name, o := range got {
			if !o.Missed {
				t.Errorf("%s met an infeasible deadline", name)
			}
		}
		if got[PolicyOptimal].Cost != money.MustParse("21") {
			t.Errorf("optimal %s, want on-demand's $21", got[PolicyOptimal].Cost)
		}
	})
}

// picture draws a timeline: s spot, O on-demand, ~ changeover, . idle.
func picture(tl []Slot) string {
	var b strings.Builder
	for _, s := range tl {
		switch {
		case s.Changeover:
			b.WriteByte('~')
		case s.Choice.Kind == bidding.RunSpot:
			b.WriteByte('s')
		case s.Choice.Kind == bidding.RunOnDemand:
			b.WriteByte('O')
		default:
			b.WriteByte('.')
		}
	}
	return b.String()
}

// scripted follows a fixed list of choices, one per tick.
type scripted struct {
	choices []bidding.Choice
}

func (scripted) Name() string { return "scripted" }

func (p scripted) Decide(s bidding.PolicyState) bidding.Choice {
	i := int(s.Elapsed / s.Step)
	if i < len(p.choices) {
		return p.choices[i]
	}
	return bidding.ChooseOnDemand
}

// bruteForce is the cheapest run over every sequence of choices that
// meets the deadline, through the simulator itself.
func bruteForce(m *Market, tk Ticks, start int) (money.Micros, bool) {
	options := []bidding.Choice{bidding.ChooseIdle}
	for z := range m.Zones {
		options = append(options, bidding.ChooseSpot(z))
		if z == 0 || m.OnDemandPriceIn(z) != m.OnDemandPriceIn(0) || m.Region(z) != m.Region(0) {
			options = append(options, bidding.OnDemandIn(z))
		}
	}
	seq := make([]bidding.Choice, tk.Deadline)
	best, found := money.Micros(0), false
	var walk func(i int)
	walk = func(i int) {
		if i == len(seq) {
			o := m.Run(scripted{seq}, tk, start, Past{}, false)
			if !o.Missed && (!found || o.Cost < best) {
				best, found = o.Cost, true
			}
			return
		}
		for _, c := range options {
			seq[i] = c
			walk(i + 1)
		}
	}
	walk(0)
	return best, found
}

// randomZone is a two-state Markov trace with random persistence.
func randomZone(r *rand.Rand, name string, n int) trace.Trace {
	t := trace.Trace{Name: name, Step: time.Hour, Avail: make([]int, n)}
	stay := 0.3 + 0.65*r.Float64()
	up := r.IntN(2) == 0
	for i := range t.Avail {
		if r.Float64() > stay {
			up = !up
		}
		if up {
			t.Avail[i] = 1
		}
	}
	return t
}

func TestOptimalIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 120 {
		zones := []trace.Trace{randomZone(r, "a", 12)}
		if i%2 == 1 {
			zones = append(zones, randomZone(r, "b", 12))
		}
		m := market(t, 1, zones...)
		if i%4 >= 2 {
			// Spot prices that move tick by tick, sometimes above on-demand.
			for z := range zones {
				zones[z].Prices = make([]money.Micros, len(zones[z].Avail))
				for k := range zones[z].Prices {
					zones[z].Prices[k] = money.Micros(r.IntN(4_000_000))
				}
			}
			var err error
			if m, err = NewMarket(zones, 1, Prices{OnDemand: onDemand3, UseTrace: true}); err != nil {
				t.Fatal(err)
			}
		}
		work := 1 + r.IntN(4)
		d := r.IntN(3)
		deadline := min(7, work+d+r.IntN(4))
		job := Job{Work: hours(work), Deadline: hours(deadline), Changeover: hours(d)}
		tk, _ := m.Ticks(job)
		if !tk.Feasible() {
			continue
		}
		opt, err := m.Optimal(tk, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := bruteForce(m, tk, 0)
		if !ok || opt.Cost != want || opt.Missed {
			t.Fatalf("case %d (%d zones, %+v): optimal %s (missed %v), brute force %s (found %v)", i, len(zones), tk, opt.Cost, opt.Missed, want, ok)
		}
	}
}

// TestOptimalIsExactAcrossRegions checks the optimum against every plan
// where zones differ: on-demand prices per zone, regions, and an egress
// on moves between them once the job has made progress.
func TestOptimalIsExactAcrossRegions(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 5))
	names := [][]string{{"r1-a", "r2-a"}, {"r1-a", "r1-b"}, {"r1-a", "r2-b", "r3-c"}}
	paid := 0
	defer func() {
		if paid == 0 {
			t.Error("no optimum paid an egress: the cases do not test it")
		}
	}()
	for i := range 150 {
		set := names[i%len(names)]
		var zones []trace.Trace
		for _, n := range set {
			z := randomZone(r, n, 12)
			z.Prices = make([]money.Micros, len(z.Avail))
			for k := range z.Prices {
				z.Prices[k] = money.Micros(r.IntN(4_000_000))
			}
			z.OnDemand = money.Micros(2_000_000 + r.IntN(3)*1_000_000)
			zones = append(zones, z)
		}
		nodes := 1 + r.IntN(2)
		egress := money.Micros(r.IntN(4) * 400_000)
		m, err := NewMarket(zones, nodes, Prices{OnDemand: onDemand3, UseTrace: true, Egress: egress})
		if err != nil {
			t.Fatal(err)
		}
		work := 1 + r.IntN(3)
		d := r.IntN(2)
		deadline := min(6, work+d+r.IntN(3))
		if len(set) == 3 {
			deadline = min(5, deadline)
		}
		tk, _ := m.Ticks(Job{Work: hours(work), Deadline: hours(deadline), Changeover: hours(d)})
		if !tk.Feasible() {
			continue
		}
		opt, err := m.Optimal(tk, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := bruteForce(m, tk, 0)
		if !ok || opt.Cost != want || opt.Missed {
			t.Fatalf("case %d (%v, egress %s, %+v): optimal %s (missed %v), brute force %s (found %v)", i, set, egress, tk, opt.Cost, opt.Missed, want, ok)
		}
		if opt.Egress > 0 {
			paid++
		}
		// The optimum's own run, replayed through the simulator, bills the same.
		var plan []bidding.Choice
		for _, sl := range opt.Timeline {
			plan = append(plan, sl.Choice)
		}
		if again := m.Run(scripted{plan}, tk, 0, Past{}, false); again.Cost != opt.Cost || again.Egress != opt.Egress {
			t.Fatalf("case %d: the optimum's plan replayed costs %s (egress %s), the optimum says %s (egress %s)", i, again.Cost, again.Egress, opt.Cost, opt.Egress)
		}
	}
}

func TestNoPolicyBeatsOptimalNorMissesAFeasibleDeadline(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	for i := range 400 {
		n := 80
		var zones []trace.Trace
		for z := range 1 + r.IntN(3) {
			zones = append(zones, randomZone(r, fmt.Sprintf("z%d", z), n))
		}
		m := market(t, 1, zones...)
		work := 3 + r.IntN(15)
		d := r.IntN(3)
		job := Job{Work: hours(work), Deadline: hours(work + d + r.IntN(work+4)), Changeover: hours(d)}
		tk, err := m.Ticks(job)
		if err != nil {
			t.Fatal(err)
		}
		start := r.IntN(n - tk.Deadline + 1)
		past := m.Observe(0, start)
		opt, err := m.Optimal(tk, start, true)
		if err != nil {
			t.Fatal(err)
		}
		if opt.Missed || opt.Finish > tk.Deadline || opt.Spot+opt.OnDemand != len(opt.Timeline)-countIdle(opt.Timeline) {
			t.Fatalf("case %d: optimal run %+v inconsistent", i, opt)
		}
		for _, name := range bidding.PolicyNames {
			p, _ := bidding.NewPolicy(name)
			o := m.Run(p, tk, start, past, false)
			if o.Missed {
				t.Errorf("case %d (%d zones, %+v, start %d): %s missed a feasible deadline", i, len(zones), tk, start, name)
			}
			if o.Cost < opt.Cost {
				t.Errorf("case %d: %s costs %s, below the optimum %s", i, name, o.Cost, opt.Cost)
			}
		}
	}
}

func countIdle(tl []Slot) int {
	n := 0
	for _, s := range tl {
		if s.Choice.Kind == bidding.RunIdle {
			n++
		}
	}
	return n
}

func TestStarts(t *testing.T) {
	if got := EvenStarts(100, 10, 4); !slices.Equal(got, []int{0, 30, 60, 90}) {
		t.Errorf("EvenStarts(100, 10, 4) = %v", got)
	}
	if got := EvenStarts(20158, 1107, 300); got[0] != 0 || got[299] != 20158-1107 || got[1] != (20158-1107)/299 {
		t.Errorf("EvenStarts over the 45-day trace: %v ... %v", got[:2], got[299])
	}
	if got := EvenStarts(100, 10, 1); !slices.Equal(got, []int{0}) {
		t.Errorf("one start: %v", got)
	}
	if got := EvenStarts(10, 20, 3); got != nil {
		t.Errorf("deadline past the trace: %v", got)
	}
	a, b := RandomStarts(1000, 100, 50, 42), RandomStarts(1000, 100, 50, 42)
	if !slices.Equal(a, b) || slices.Equal(a, RandomStarts(1000, 100, 50, 43)) {
		t.Error("random starts are not a function of the seed")
	}
	for _, s := range a {
		if s < 0 || s > 900 {
			t.Errorf("start %d outside [0, 900]", s)
		}
	}
}

func TestSimulateReport(t *testing.T) {
	// Zone a has capacity for the first 20 ticks only: starts there run
	// on spot, later ones on on-demand.
	m := market(t, 1, zone("a", strings.Repeat("#", 20)+strings.Repeat("_", 20)))
	job := Job{Work: hours(4), Deadline: hours(6), Changeover: hours(1)}
	starts := []int{0, 5, 10, 25, 30}
	var calls []int
	r, err := m.Simulate(context.Background(), job, Options{
		Policies: []string{"greedy", "on-demand", PolicyOptimal},
		Starts:   starts, Workers: 1,
		Progress: func(done, total int) { calls = append(calls, done) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []int{1, 2, 3, 4, 5}) {
		t.Errorf("progress calls %v", calls)
	}
	g, _ := r.Policy("greedy")
	// 3 runs at $5 (all spot), 2 at $15 (all on-demand).
	if g.Runs != 5 || g.Misses != 0 || g.MeanCost != money.MustParse("9") || g.P50Cost != money.MustParse("5") || g.P90Cost != money.MustParse("15") {
		t.Errorf("greedy: %+v", g)
	}
	if g.MeanSpotHours != 3 || g.MeanOnDemandHours != 2 {
		t.Errorf("greedy hours: spot %v, on-demand %v", g.MeanSpotHours, g.MeanOnDemandHours)
	}
	od, _ := r.Policy("on-demand")
	if od.Ratio != float64(money.MustParse("15"))/float64(money.MustParse("9")) {
		t.Errorf("on-demand ratio %v", od.Ratio)
	}
	if names := []string{r.Policies[0].Name, r.Policies[1].Name, r.Policies[2].Name}; !slices.Equal(names, []string{"greedy", "on-demand", PolicyOptimal}) {
		t.Errorf("order %v", names)
	}

	errs := []struct {
		name string
		job  Job
		o    Options
		want string
	}{
		{"unknown policy", job, Options{Policies: []string{"cheapest"}, Starts: []int{0}}, `unknown policy "cheapest"`},
		{"policy twice", job, Options{Policies: []string{"greedy", "greedy"}, Starts: []int{0}}, "named twice"},
		{"no starts", job, Options{Policies: []string{"greedy"}}, "no start ticks"},
		{"start past the end", job, Options{Policies: []string{"greedy"}, Starts: []int{36}}, "past the traces"},
		{"deadline longer than the trace", Job{Work: hours(4), Deadline: hours(41)}, Options{Policies: []string{"greedy"}, Starts: []int{0}}, "longer than the traces"},
		{"no work", Job{Deadline: hours(4)}, Options{Policies: []string{"greedy"}, Starts: []int{0}}, "work must be positive"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := m.Simulate(context.Background(), tt.job, tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Simulate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewMarket(t *testing.T) {
	a := zone("a", "####")
	b := zone("b", "##")
	c := zone("c", "###")
	c.Step = time.Minute
	tests := []struct {
		name   string
		traces []trace.Trace
		nodes  int
		p      Prices
		want   string
	}{
		{"steps differ", []trace.Trace{a, c}, 1, Prices{OnDemand: onDemand3}, "step 1m0s differs"},
		{"no traces", nil, 1, Prices{OnDemand: onDemand3}, "no traces"},
		{"no nodes", []trace.Trace{a}, 0, Prices{OnDemand: onDemand3}, "at least 1"},
		{"free on-demand", []trace.Trace{a}, 1, Prices{}, "on-demand price must be positive"},
		{"trace prices missing", []trace.Trace{a}, 1, Prices{OnDemand: onDemand3, UseTrace: true}, "carries no prices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewMarket(tt.traces, tt.nodes, tt.p); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewMarket: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	m := market(t, 1, a, b)
	if m.Len != 2 {
		t.Errorf("zones of different lengths: market of %d ticks, want the shortest, 2", m.Len)
	}
}

func TestPlot(t *testing.T) {
	m := market(t, 1, zone("us-east-1a", "##__####__######"), zone("us-west-2b", "#_#_#_##########"))
	job := Job{Work: hours(4), Deadline: hours(8), Changeover: hours(1)}
	r, err := m.Simulate(context.Background(), job, Options{Policies: []string{"greedy", "spotwise", PolicyOptimal}, Starts: []int{0, 4, 8}})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := m.Timelines(job, r, 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := m.WritePlot(&b, r, tl); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{"<svg", "</svg>", "spotwise", "optimal", "us-west-2b", "deadline", "start tick 4"} {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

// sharedTraces is where the measured traces live, relative to this
// package.
const sharedTraces = "../../../shared/traces"

// TestSharedTraceSmoke runs every policy over one measured zone: a quick
// check that nothing misses and nothing beats the optimum there; the
// full comparison is `make bench-policy`.
func TestSharedTraceSmoke(t *testing.T) {
	path := filepath.Join(sharedTraces, "availability/1-node/aws-02-15-2023/us-east-1c_v100_1.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared traces not here: %v", err)
	}
	ts, err := trace.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMarket(ts, 1, Prices{OnDemand: money.MustParse("3.06"), Spot: money.MustParse("0.9731")})
	if err != nil {
		t.Fatal(err)
	}
	job := Job{Work: 48 * time.Hour, Deadline: 60 * time.Hour, Changeover: 12 * time.Minute}
	tk, _ := m.Ticks(job)
	policies := append(slices.Clone(bidding.PolicyNames), PolicyOptimal)
	r, err := m.Simulate(context.Background(), job, Options{Policies: policies, Starts: EvenStarts(m.Len, tk.Deadline, 24), History: -1})
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := r.Policy(PolicyOptimal)
	for _, s := range r.Policies {
		if s.Misses != 0 {
			t.Errorf("%s missed %d deadlines", s.Name, s.Misses)
		}
		for k, o := range s.Outcomes {
			if o.Cost < opt.Outcomes[k].Cost {
				t.Errorf("%s beats the optimum from start %d", s.Name, r.Starts[k])
			}
		}
	}
}
