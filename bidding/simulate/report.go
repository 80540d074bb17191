package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/money"
)

// EvenStarts spreads k start ticks evenly over a trace of length ticks for
// a deadline of deadline ticks: start i is floor(i*(length-deadline)/(k-1)).
func EvenStarts(length, deadline, k int) []int {
	last := length - deadline
	if k <= 0 || last < 0 {
		return nil
	}
	if k == 1 {
		return []int{0}
	}
	out := make([]int, k)
	for i := range out {
		out[i] = int(int64(i) * int64(last) / int64(k-1))
	}
	return out
}

// RandomStarts draws k start ticks uniformly from [0, length-deadline],
// the same ones for the same seed.
func RandomStarts(length, deadline, k int, seed uint64) []int {
	last := length - deadline
	if k <= 0 || last < 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]int, k)
	for i := range out {
		out[i] = r.IntN(last + 1)
	}
	return out
}

// Options say what to simulate.
type Options struct {
	// Policies are names of bidding policies and PolicyOptimal, reported
	// in this order.
	Policies []string
	// Starts are the start ticks.
	Starts []int
	// History is how many ticks before each start the policies have
	// observed (as a scheduler watching the market would have); negative
	// means all of them, 0 only what they see during the run.
	History int
	// Workers run starts in parallel; 0 means GOMAXPROCS.
	Workers int
	// Progress, if set, is called after each start with the count done.
	Progress func(done, total int)
	// Timeline keeps the timelines of the run from Starts[TimelineStart].
	Timeline      bool
	TimelineStart int
}

// Summary is one policy over every start.
type Summary struct {
	Name   string
	Runs   int
	Misses int
	// MeanCost, P50Cost and P90Cost are over the runs (percentiles by
	// nearest rank).
	MeanCost, P50Cost, P90Cost money.Micros
	// MeanOnDemandHours and MeanSpotHours are billed hours per run,
	// changeovers included.
	MeanOnDemandHours, MeanSpotHours float64
	// MeanMoves is the mean count of moves per run (Outcome.Moves);
	// MeanEgress the mean egress paid per run.
	MeanMoves  float64
	MeanEgress money.Micros
	// Ratio is MeanCost over the optimum's, when the optimum was run.
	Ratio float64
	// Outcomes are the runs, one per start, in start order.
	Outcomes []Outcome
}

// Report is a simulation's result, one summary per policy in order.
type Report struct {
	Job      Ticks
	Starts   []int
	Policies []Summary
	// Elapsed is the wall time the simulation took.
	Elapsed time.Duration
}

// Policy returns the summary of the named policy.
func (r *Report) Policy(name string) (*Summary, bool) {
	for i := range r.Policies {
		if r.Policies[i].Name == name {
			return &r.Policies[i], true
		}
	}
	return nil, false
}

// Simulate runs every policy from every start.
func (m *Market) Simulate(ctx context.Context, job Job, o Options) (*Report, error) {
	began := time.Now()
	t, err := m.Ticks(job)
	if err != nil {
		return nil, err
	}
	if len(o.Starts) == 0 {
		return nil, errors.New("no start ticks")
	}
	for _, s := range o.Starts {
		if s < 0 || s+t.Deadline > m.Len {
			return nil, fmt.Errorf("start tick %d: the deadline ends past the traces (%d ticks)", s, m.Len)
		}
	}
	if len(o.Policies) == 0 {
		return nil, errors.New("no policies")
	}
	online := make([]bidding.Policy, len(o.Policies))
	for i, name := range o.Policies {
		if slices.Contains(o.Policies[:i], name) {
			return nil, fmt.Errorf("policy %q named twice", name)
		}
		if name == PolicyOptimal {
			continue
		}
		if online[i], err = bidding.NewPolicy(name); err != nil {
			return nil, err
		}
	}
	hasOnline := slices.ContainsFunc(online, func(p bidding.Policy) bool { return p != nil })
	var pr *prepared
	if slices.Contains(o.Policies, PolicyOptimal) {
		pr = m.prepare(t)
	}
	outcomes := make([][]Outcome, len(o.Policies))
	for i := range outcomes {
		outcomes[i] = make([]Outcome, len(o.Starts))
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(o.Starts))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		nextStart, done atomic.Int64
		wg              sync.WaitGroup
		errOnce         sync.Once
		firstErr        error
	)
	for range workers {
		wg.Go(func() {
			var sc optimalScratch
			for ctx.Err() == nil {
				k := int(nextStart.Add(1) - 1)
				if k >= len(o.Starts) {
					return
				}
				keep := o.Timeline && k == o.TimelineStart
				start := o.Starts[k]
				var past Past
				if hasOnline {
					from := 0
					if o.History >= 0 {
						from = start - o.History
					}
					past = m.Observe(from, start)
				}
				for i, p := range online {
					if p != nil {
						outcomes[i][k] = m.Run(p, t, start, past, keep)
						continue
					}
					out, err := m.optimal(pr, &sc, t, o.Starts[k], keep)
					if err != nil {
						errOnce.Do(func() { firstErr = err; cancel() })
						return
					}
					outcomes[i][k] = out
				}
				n := int(done.Add(1))
				if o.Progress != nil {
					o.Progress(n, len(o.Starts))
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &Report{Job: t, Starts: o.Starts}
	for i, name := range o.Policies {
		r.Policies = append(r.Policies, m.summarize(name, outcomes[i]))
	}
	if opt, ok := r.Policy(PolicyOptimal); ok && opt.MeanCost > 0 {
		for i := range r.Policies {
			r.Policies[i].Ratio = float64(r.Policies[i].MeanCost) / float64(opt.MeanCost)
		}
	}
	r.Elapsed = time.Since(began)
	return r, nil
}

func (m *Market) summarize(name string, outs []Outcome) Summary {
	s := Summary{Name: name, Runs: len(outs), Outcomes: outs}
	costs := make([]money.Micros, len(outs))
	var total, egress money.Micros
	var odTicks, spotTicks, moves int64
	for i, o := range outs {
		costs[i] = o.Cost
		total += o.Cost
		egress += o.Egress
		moves += int64(o.Moves)
		odTicks += int64(o.OnDemand)
		spotTicks += int64(o.Spot)
		if o.Missed {
			s.Misses++
		}
	}
	n := len(outs)
	if n == 0 {
		return s
	}
	slices.Sort(costs)
	s.MeanCost = total.Scale(1, int64(n))
	s.MeanEgress = egress.Scale(1, int64(n))
	s.MeanMoves = float64(moves) / float64(n)
	s.P50Cost = costs[rank(n, 50)]
	s.P90Cost = costs[rank(n, 90)]
	hours := m.Step.Hours() / float64(n)
	s.MeanOnDemandHours = float64(odTicks) * hours
	s.MeanSpotHours = float64(spotTicks) * hours
	return s
}

// rank is the index of the q-th percentile of n sorted values, by nearest
// rank: the smallest value with at least q% of the values at or below it.
func rank(n, q int) int {
	r := (q*n + 99) / 100
	return max(0, min(n-1, r-1))
}
