package job

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// The lifecycle's invariants, checked over random lives: placements,
// launches refused, unknown or bought (some of them twice), nodes that
// die, notices (some for instances nobody launched), checkpoints good,
// failed, stale and forged, exits, moves, cancellations, reconciliations,
// provider listings that lag behind launches or are applied long after
// they were taken, and every message redelivered or reordered at random.
// After every step the structural invariants hold (life.apply) and every
// instance end the record has is the true one, never undone by older news
// (world.checkEnds); at the end, once every instance has ended, every
// instance-second is billed exactly once.
func TestLifecycleProperties(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newWorld(t, uint64(seed))
			for range 150 {
				w.step()
			}
			w.drain()
			w.checkBilling()
		})
	}
}

// world is a cloud, an agent and a scheduler, as random as they come.
type world struct {
	t       *testing.T
	rng     *rand.Rand
	l       *life
	cloud   map[string][]*minst // by launch key
	keys    []string            // in launch order
	pending []Input             // delivered later, in any order
	past    []Input             // delivered: redelivered at random
	steps   int64               // checkpoint steps taken
	ended   map[string]bool     // instances whose true end the record has
}

type minst struct {
	id       string
	from, to time.Time
	running  bool
	price    money.Micros // what the cloud charges per hour: not the placement's
}

func newWorld(t *testing.T, seed uint64) *world {
	over := map[string]string{"work": "10h on A100", "resources": "{accelerators: [A100], gpus_per_node: 8, nodes: 2}"}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if rng.IntN(4) == 0 {
		over["max_retries"] = "2"
	}
	if rng.IntN(5) == 0 {
		over["checkpoint"] = "{move_on_rebalance: true}"
	}
	if rng.IntN(3) == 0 {
		// About 3.5 hours of two p4d nodes: many lives reach it.
		over["max_cost_usd"] = `"25"`
	}
	return &world{t: t, rng: rng, l: newLife(t, over), cloud: map[string][]*minst{}, ended: map[string]bool{}}
}

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

func (w *world) step() {
	l, s := w.l, &w.l.r.Status
	l.after(time.Duration(w.rng.IntN(600)+1) * time.Second)
	switch {
	case l.r.NeedsPlacement() && w.chance(0.6):
		p := lifePlacement
		p.Nodes, p.Zone = 2, fmt.Sprintf("us-east-1%c", 'a'+rune(w.rng.IntN(4)))
		w.deliver(Place{Attempt: s.Attempt + 1, Placement: p, CheckpointRoot: l.root})
	case len(w.pending) > 0 && w.chance(0.5):
		i := w.rng.IntN(len(w.pending))
		in := w.pending[i]
		w.pending = slices.Delete(w.pending, i, i+1)
		w.deliver(in)
	case len(w.past) > 0 && w.chance(0.1):
		w.deliver(w.past[w.rng.IntN(len(w.past))]) // a redelivery
	default:
		w.environment()
	}
}

// environment makes something happen in the world.
func (w *world) environment() {
	l, s := w.l, &w.l.r.Status
	live := w.live()
	cur := s.Current
	switch w.rng.IntN(12) {
	case 0, 1:
		if len(live) > 0 {
			key, in := w.pick(live)
			kind := []string{NoticeSpot, NoticeSpot, NoticeMaintenance, NoticeRebalance}[w.rng.IntN(4)]
			var deadline time.Time
			if kind != NoticeRebalance {
				deadline = l.now.Add(2 * time.Minute)
			}
			w.pending = append(w.pending, Interruption{Key: key, Instance: in.id, Kind: kind, Deadline: deadline})
		}
	case 2:
		if len(live) > 0 {
			key, in := w.pick(live)
			in.to = l.now
			w.pending = append(w.pending, InstanceGone{Key: key, Instance: Instance{ID: in.id, EndedAt: l.now, Reason: "hardware failure"}})
		}
	case 3, 4:
		if cur != nil && len(cur.Instances) > 0 {
			p := min(1, s.Progress+w.rng.Float64()*0.2)
			w.pending = append(w.pending, Progressed{Attempt: cur.N, Instance: cur.Instances[0], Progress: p})
		}
	case 5:
		if cur != nil && len(cur.Instances) > 0 && w.chance(0.4) {
			w.pending = append(w.pending, Exited{Attempt: cur.N, Instance: cur.Instances[0], Code: w.rng.IntN(2)})
		}
	case 6:
		if cur != nil && w.chance(0.5) {
			w.deliver(StartMove{Attempt: cur.N, Kind: NoticeCheaper, Message: "cheaper"})
		}
	case 7:
		if len(w.keys) > 0 {
			o := w.observe(w.keys[w.rng.IntN(len(w.keys))])
			if w.chance(0.3) {
				// The provider's API lags: instances launched in the
				// last half minute are not listed yet.
				o.Instances = slices.DeleteFunc(o.Instances, func(in Instance) bool {
					return l.now.Sub(in.LaunchedAt) < 30*time.Second
				})
			}
			if w.chance(0.5) {
				// A listing applied a while after it was taken, past
				// launches, ends and other listings since.
				w.pending = append(w.pending, o)
				break
			}
			w.deliver(o)
		}
	case 8:
		switch {
		case w.chance(0.03):
			w.deliver(Cancel{Message: "random"})
		case w.chance(0.03):
			w.deliver(Expire{Message: "random"})
		case w.chance(0.3):
			w.deliver(CostLimit{}) // the scheduler's look at the cap, early or late
		}
	case 9:
		w.forge()
	case 10:
		if cur != nil && len(cur.Instances) > 0 {
			w.periodicCheckpoint(cur)
		}
	case 11:
		for _, key := range w.keys {
			for _, in := range w.cloud[key] {
				if !in.running && in.to.IsZero() {
					in.running = true
					w.pending = append(w.pending, InstanceRunning{Key: key, Instance: Instance{ID: in.id, RunningAt: l.now}})
				}
			}
		}
	}
}

// forge sends a message no real component would: every one must be
// refused or found stale, never accepted.
func (w *world) forge() {
	l, s := w.l, &w.l.r.Status
	n := s.Attempt + w.rng.IntN(3) - 1
	key := LaunchKey(l.r.ID, n)
	ck := CheckpointRef{Attempt: n, Step: 1 << 40, Progress: 0.99, Location: "s3://elsewhere/x"}
	forged := []Input{
		Interruption{Key: key, Instance: "i-forged", Kind: NoticeSpot, Deadline: l.now.Add(time.Minute)},
		Exited{Attempt: n, Instance: "i-forged"},
		Checkpointed{Attempt: n, Instance: "i-forged", Checkpoint: ck},
		InstanceGone{Key: key, Instance: Instance{ID: "i-forged", EndedAt: l.now}},
		InstanceRunning{Key: key, Instance: Instance{ID: "i-forged", RunningAt: l.now}},
		AgentStarted{Attempt: n, Instance: "i-forged", Progress: 0.9},
		Progressed{Attempt: n, Instance: "i-forged", Progress: 0.9},
		CheckpointFailed{Attempt: n, Instance: "i-forged", Reason: "forged"},
	}
	if cur := s.Current; cur != nil && len(cur.Instances) > 0 {
		// From the right instance, but outside the job's location.
		ck.Attempt = cur.N
		forged = append(forged, Checkpointed{Attempt: cur.N, Instance: cur.Instances[0], Checkpoint: ck})
	}
	in := forged[w.rng.IntN(len(forged))]
	if res := w.l.apply(in); res.Changed() {
		w.t.Fatalf("forged %s accepted: %s", in.Name(), describe(l.r))
	}
}

// deliver applies an input and carries out its effects.
func (w *world) deliver(in Input) {
	res := w.l.apply(in)
	w.checkEnds(in)
	w.past = append(w.past, in)
	for _, e := range res.Effects {
		w.effect(e)
	}
}

// checkEnds checks the record's instance ends against the world's: an
// end it records is the instance's true end, and once it has that end no
// later message (a listing taken before the end, a redelivered launch
// answer) takes it away.
func (w *world) checkEnds(in Input) {
	s := &w.l.r.Status
	attempts := slices.Clone(s.Attempts)
	for _, a := range []*Attempt{s.Current, s.Previous} {
		if a != nil {
			attempts = append(attempts, *a)
		}
	}
	for _, a := range attempts {
		for _, sp := range a.Spans {
			var truth *minst
			for _, m := range w.cloud[a.LaunchKey] {
				if m.id == sp.Instance {
					truth = m
				}
			}
			switch {
			case truth == nil:
				w.t.Fatalf("%s: attempt %d bills %s, which it did not launch", in.Name(), a.N, sp.Instance)
			case !sp.To.IsZero() && !truth.to.IsZero() && !sp.To.Equal(truth.to):
				w.t.Fatalf("%s: %s ended at %s, the record says %s", in.Name(), sp.Instance, truth.to, sp.To)
			case !sp.To.IsZero() && truth.to.Equal(sp.To):
				w.ended[sp.Instance] = true
			case sp.To.IsZero() && w.ended[sp.Instance]:
				w.t.Fatalf("%s undid the known end of %s (%s): %+v\n%s", in.Name(), sp.Instance, truth.to, in, describe(w.l.r))
			}
		}
	}
}

func (w *world) effect(e Effect) {
	l := w.l
	switch e := e.(type) {
	case Launch:
		a := e.Attempt
		switch {
		case w.chance(0.15) && len(w.cloud[a.LaunchKey]) == 0:
			w.pending = append(w.pending, LaunchRefused{Attempt: a.N, Key: a.LaunchKey, Reason: "no capacity", Permanent: w.chance(0.2), Exclude: a.Placement.OfferID})
		case w.chance(0.1):
			if w.chance(0.5) {
				w.buy(a) // the provider did start them
			}
			w.pending = append(w.pending, LaunchUnknown{Attempt: a.N, Key: a.LaunchKey, Err: "timeout", MaxTries: 3})
		default:
			insts := w.buy(a)
			var out []Instance
			for _, in := range insts {
				out = append(out, Instance{ID: in.id, LaunchedAt: in.from, EndedAt: in.to, Price: in.price})
			}
			w.pending = append(w.pending, Launched{Attempt: a.N, Key: a.LaunchKey, Instances: out})
		}
	case Terminate:
		for _, in := range w.cloud[e.Key] {
			if in.to.IsZero() {
				in.to = l.now
				w.pending = append(w.pending, InstanceGone{Key: e.Key, Instance: Instance{ID: in.id, EndedAt: l.now, Reason: "terminated"}})
			}
		}
	case RequestCheckpoint:
		a, _ := (&tx{r: l.r}).attemptByN(e.Attempt)
		if a == nil || len(a.Instances) == 0 {
			return
		}
		if w.chance(0.2) {
			w.pending = append(w.pending, CheckpointFailed{Attempt: a.N, Instance: a.Instances[0], Reason: "upload failed"})
			return
		}
		w.pending = append(w.pending, w.checkpointOf(a))
	case StartWorkload:
		a, _ := (&tx{r: l.r}).attemptByN(e.Attempt)
		if a == nil || len(a.Instances) == 0 {
			return
		}
		progress := 0.0
		var ck *CheckpointRef
		if c := l.r.Status.Checkpoint; c != nil {
			progress, ck = c.Progress, c
		}
		w.pending = append(w.pending, AgentStarted{Attempt: a.N, Instance: a.Instances[0], Progress: progress, Checkpoint: ck})
	}
}

// buy starts a launch's instances, once per key.
func (w *world) buy(a Attempt) []*minst {
	if got, ok := w.cloud[a.LaunchKey]; ok {
		return got
	}
	var insts []*minst
	// The spot price moved since the decision, by an odd amount, so that
	// every instance's bill rounds.
	price := a.Placement.PricePerHour + money.Micros(1+w.rng.IntN(99_999))
	for node := range max(1, a.Placement.Nodes) {
		insts = append(insts, &minst{id: fmt.Sprintf("i-%s-%d", a.LaunchKey, node), from: w.l.now, price: price})
	}
	w.cloud[a.LaunchKey] = insts
	w.keys = append(w.keys, a.LaunchKey)
	return insts
}

func (w *world) checkpointOf(a *Attempt) Checkpointed {
	w.steps++
	p := w.l.r.Status.Progress
	if c := w.l.r.Status.Checkpoint; c != nil && c.Progress > p {
		p = c.Progress
	}
	ref := w.l.checkpoint(a, w.steps*10, p)
	return Checkpointed{Attempt: a.N, Instance: a.Instances[0], Checkpoint: ref}
}

func (w *world) periodicCheckpoint(a *Attempt) { w.pending = append(w.pending, w.checkpointOf(a)) }

// live lists instances still running somewhere.
func (w *world) live() map[string][]*minst {
	out := map[string][]*minst{}
	for key, insts := range w.cloud {
		for _, in := range insts {
			if in.to.IsZero() {
				out[key] = append(out[key], in)
			}
		}
	}
	return out
}

func (w *world) pick(live map[string][]*minst) (string, *minst) {
	keys := make([]string, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	key := keys[w.rng.IntN(len(keys))]
	return key, live[key][w.rng.IntN(len(live[key]))]
}

// observe is what a provider lists for a key.
func (w *world) observe(key string) Observed {
	var insts []Instance
	for _, in := range w.cloud[key] {
		x := Instance{ID: in.id, LaunchedAt: in.from, EndedAt: in.to, Price: in.price}
		if in.running {
			x.RunningAt = in.from
		}
		insts = append(insts, x)
	}
	// Taken now: a redelivery or a late delivery says when it was true.
	return Observed{Key: key, Instances: insts, At: w.l.now}
}

// drain ends the job and lets the world settle: every message delivered,
// every instance ended and reconciled.
func (w *world) drain() {
	l := w.l
	if !l.r.Status.State.Terminal() {
		w.deliver(Cancel{Message: "end of test"})
	}
	for round := 0; round < 50; round++ {
		l.after(time.Minute)
		for len(w.pending) > 0 {
			in := w.pending[0]
			w.pending = w.pending[1:]
			w.deliver(in)
		}
		// The orphan sweep: what no live attempt owns is terminated.
		for _, insts := range w.live() {
			for _, in := range insts {
				in.to = l.now
			}
		}
		for _, key := range w.keys {
			w.deliver(w.observe(key))
		}
		if l.r.Status.Current == nil && l.r.Status.Previous == nil && len(w.pending) == 0 {
			return
		}
	}
	w.t.Fatalf("the job did not settle: %s", describe(l.r))
}

// checkBilling checks that every instance-second was billed once, to the
// attempt that launched it, at the price the cloud charged for it, rounded
// once per instance as the cloud bills it.
func (w *world) checkBilling() {
	s := &w.l.r.Status
	var total money.Micros
	for _, a := range s.Attempts {
		var run time.Duration
		var want money.Micros
		for _, in := range w.cloud[a.LaunchKey] {
			run += in.to.Sub(in.from)
			want += in.price.ForDuration(in.to.Sub(in.from))
		}
		if a.Cost != want {
			w.t.Fatalf("attempt %d (%s) billed %s, its instances ran %s = %s\n%s", a.N, a.Outcome, a.Cost, run, want, describe(w.l.r))
		}
		total += a.Cost
	}
	if s.Attempt > maxHistory {
		return // the oldest attempts left the record; their cost stays in the total
	}
	if s.EndedCost != total {
		w.t.Fatalf("ended cost %s, attempts add up to %s", s.EndedCost, total)
	}
	{
		for _, key := range w.keys {
			if !slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return a.LaunchKey == key }) {
				w.t.Fatalf("instances of %s billed to no attempt", key)
			}
		}
	}
}
