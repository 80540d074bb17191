package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Plan is everything a run injects, drawn from its seed before the run
// starts: the same seed gives the same jobs, submitted at the same moments,
// the same kills and storms at the same moments, and (through sim.seed)
// the same simulated cloud. What the system does in between depends on
// timing, and so do the few choices made from what it does: the zone a
// storm hits (the one with the most live spot instances then) and which
// launches get a fault (each launch key's n-th call draws its fault from
// the seed, so the same calls get the same faults, but which calls are
// made depends on what happened before).
type Plan struct {
	Seed   int64
	Jobs   []JobPlan
	Kills  []Kill
	Storms []time.Duration // wall time from the start of the run
}

// JobPlan is one job to submit.
type JobPlan struct {
	// Key is the submission's idempotency key: a submission retried
	// across a kill makes one job.
	Key string
	At  time.Duration // wall time from the start of the run
	// Spec is the job spec (YAML) as submitted.
	Spec     []byte
	Nodes    int
	Purchase string
	Deadline bool
}

// Kill is one kill -9 of the server: At, then Down of wall time before it
// starts again on the same data directory.
type Kill struct {
	At   time.Duration
	Down time.Duration
}

// gpuChoices are the acceptable GPU lists jobs pick from, each with the
// reference GPU their work is measured on.
var gpuChoices = []struct {
	accelerators string
	reference    string
}{
	{"[A100, H100]", "A100"},
	{"[V100, A100]", "V100"},
	{"[A10G, L4, A10]", "A10G"},
	{"[T4, L4]", "T4"},
	{"[H100]", "H100"},
	{"[A100]", "A100"},
	{"[L40S, A100, H100]", "A100"},
}

// NewPlan draws a run's plan from o.Seed.
func NewPlan(o Options) Plan {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed_c4a05))
	p := Plan{Seed: o.Seed}
	for i := range o.Jobs {
		p.Jobs = append(p.Jobs, newJob(rng, o, i))
	}
	slices.SortStableFunc(p.Jobs, func(a, b JobPlan) int { return int(a.At - b.At) })
	// Kills fall in the chaos window, at least a restart apart; storms
	// anywhere in it.
	for range o.Kills {
		p.Kills = append(p.Kills, Kill{At: o.ChaosFrom + randDur(rng, o.ChaosOver), Down: randDur(rng, o.MaxDown)})
	}
	slices.SortFunc(p.Kills, func(a, b Kill) int { return int(a.At - b.At) })
	for i := 1; i < len(p.Kills); i++ {
		if min := p.Kills[i-1].At + p.Kills[i-1].Down + o.MinKillGap; p.Kills[i].At < min {
			p.Kills[i].At = min
		}
	}
	for range o.Storms {
		p.Storms = append(p.Storms, o.ChaosFrom+randDur(rng, o.ChaosOver))
	}
	slices.Sort(p.Storms)
	return p
}

func randDur(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

// newJob draws one job: one node or several, spot, on-demand or either,
// always checkpointing, some with a deadline.
func newJob(rng *rand.Rand, o Options, i int) JobPlan {
	g := gpuChoices[rng.IntN(len(gpuChoices))]
	nodes, gpus := 1, []int{1, 1, 2, 4, 8}[rng.IntN(5)]
	if rng.Float64() < o.MultiNodeShare {
		nodes, gpus = 2+rng.IntN(3), 8
	}
	purchase := "spot"
	switch u := rng.Float64(); {
	case u < 0.25:
		purchase = "on-demand"
	case u < 0.6:
		purchase = "auto"
	}
	work := o.MinWork + time.Duration(rng.Int64N(int64(o.MaxWork-o.MinWork)+1))
	work = work.Round(time.Minute)
	ckDur := 10 + rng.IntN(50) // seconds: inside every notice window (30 s) or not
	ckEvery := time.Duration(10+rng.IntN(30)) * time.Minute
	var b strings.Builder
	fmt.Fprintf(&b, "api_version: spotwise/v1\nname: chaos-%d\nteam: chaos\npriority: %d\n", i, rng.IntN(1000))
	fmt.Fprintf(&b, "command: [train, --job, \"%d\"]\nworkload: training\nprecision: fp16\n", i)
	fmt.Fprintf(&b, "resources:\n  accelerators: %s\n  gpus_per_node: %d\n  nodes: %d\n", g.accelerators, gpus, nodes)
	fmt.Fprintf(&b, "work: %s on %s\npurchase: %s\n", specDuration(work), g.reference, purchase)
	deadline := rng.Float64() < o.DeadlineShare
	if deadline {
		// Between comfortable and tight: some of these expire, which is
		// an end too.
		within := time.Duration(float64(work) * (2 + 4*rng.Float64())).Round(time.Minute)
		fmt.Fprintf(&b, "deadline: %s\non_deadline_miss: %s\n", specDuration(within), []string{"expire", "run"}[rng.IntN(2)])
	}
	fmt.Fprintf(&b, "checkpoint:\n  duration: %ds\n  interval: %s\n  size_gb: %d\n", ckDur, specDuration(ckEvery), 1+rng.IntN(20))
	if rng.Float64() < 0.2 {
		b.WriteString("  move_on_rebalance: true\n")
	}
	return JobPlan{
		Key: fmt.Sprintf("chaos-%d-%d", o.Seed, i), At: randDur(rng, o.SubmitOver),
		Spec: []byte(b.String()), Nodes: nodes, Purchase: purchase, Deadline: deadline,
	}
}

// specDuration writes a duration the way specs do ("1h30m", "45m", "2h").
func specDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// Describe says in a few lines what the plan injects.
func (p Plan) Describe(o Options) string {
	nodes, purchase, deadlines := 0, map[string]int{}, 0
	for _, j := range p.Jobs {
		if j.Nodes > 1 {
			nodes++
		}
		purchase[j.Purchase]++
		if j.Deadline {
			deadlines++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d jobs (%d multi-node; %d spot, %d auto, %d on-demand; %d with a deadline), submitted over %s\n",
		p.Seed, len(p.Jobs), nodes, purchase["spot"], purchase["auto"], purchase["on-demand"], deadlines, o.SubmitOver)
	var kills []string
	for _, k := range p.Kills {
		kills = append(kills, fmt.Sprintf("%s (down %s)", k.At.Round(100*time.Millisecond), k.Down.Round(100*time.Millisecond)))
	}
	var storms []string
	for _, s := range p.Storms {
		storms = append(storms, s.Round(100*time.Millisecond).String())
	}
	fmt.Fprintf(&b, "  kill -9 at %s\n  zone storms at %s\n", orNone(strings.Join(kills, ", ")), orNone(strings.Join(storms, ", ")))
	f := o.Faults
	fmt.Fprintf(&b, "  launch faults: capacity %g, permanent %g, unknown outcome %g (of which %g launched); spot interruption scale %g; sim speed %gx\n",
		f.Capacity, f.Permanent, f.Unknown, f.UnknownLaunched, o.InterruptionScale, o.Speed)
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
