package job

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// life drives one job through the lifecycle in a test: it applies inputs at
// a clock the test moves, keeps the effects, and checks the structural
// invariants after every step.
type life struct {
	t    *testing.T
	r    *Record
	now  time.Time
	res  Result
	root string
}

const lifeRoot = "file:///ckpt"

func newLife(t *testing.T, over map[string]string) *life {
	t.Helper()
	spec := mustParse(t, yamlSpec(over))
	id := NewID(t0)
	r := &Record{ID: id, Spec: spec, Status: Status{State: Queued, SubmittedAt: t0, UpdatedAt: t0, DeadlineAt: spec.Deadline.Resolve(t0), SpecHash: spec.Hash()}}
	return &life{t: t, r: r, now: t0, root: lifeRoot}
}

func (l *life) after(d time.Duration) *life { l.now = l.now.Add(d); return l }

// apply runs an input and checks the invariants; it returns the result.
func (l *life) apply(in Input) Result {
	l.t.Helper()
	before := l.r.Clone()
	l.res = Apply(l.r, in, l.now)
	if err := checkStep(before, l.r, in, l.res); err != nil {
		l.t.Fatalf("%s: %v\nrecord: %s", in.Name(), err, describe(l.r))
	}
	return l.res
}

// want applies an input and fails unless the verdict is v.
func (l *life) want(v Verdict, in Input) Result {
	l.t.Helper()
	res := l.apply(in)
	if res.Verdict != v {
		l.t.Fatalf("%s: verdict %s (%s), want %s\nrecord: %s", in.Name(), res.Verdict, res.Why, v, describe(l.r))
	}
	return res
}

func (l *life) state(want State) {
	l.t.Helper()
	if l.r.Status.State != want {
		l.t.Fatalf("job is %s (%s), want %s", l.r.Status.State, l.r.Status.Message, want)
	}
}

var lifePlacement = Placement{OfferID: "aws/us-east-1/us-east-1a/p4d.24xlarge/spot", Provider: "aws", Region: "us-east-1", Zone: "us-east-1a",
	InstanceType: "p4d.24xlarge", GPU: "A100", GPUs: 8, Nodes: 1, Purchase: "spot", PricePerHour: money.MustParse("3.60")}

// place places the next attempt on nodes nodes in zone.
func (l *life) place(nodes int, zone string) *Attempt {
	l.t.Helper()
	p := lifePlacement
	p.Nodes, p.Zone = nodes, zone
	p.OfferID = "aws/us-east-1/" + zone + "/p4d.24xlarge/spot"
	l.want(Accepted, Place{Attempt: l.r.Status.Attempt + 1, Placement: p, EstimatedRuntime: 6 * time.Hour, CheckpointRoot: l.root})
	return l.r.Status.Current
}

// instances names attempt n's nodes.
func instances(n, nodes int) []string {
	out := make([]string, nodes)
	for i := range out {
		out[i] = fmt.Sprintf("i-a%d-n%d", n, i)
	}
	return out
}

// launch reports attempt a's launch as bought now, running at once if
// running.
func (l *life) launch(a *Attempt, running bool) {
	l.t.Helper()
	var insts []Instance
	for _, id := range instances(a.N, max(1, a.Placement.Nodes)) {
		in := Instance{ID: id, LaunchedAt: l.now}
		if running {
			in.RunningAt = l.now
		}
		insts = append(insts, in)
	}
	l.want(Accepted, Launched{Attempt: a.N, Key: a.LaunchKey, Instances: insts})
}

// running places and launches a first attempt and lets its agent start.
func (l *life) running(nodes int) *Attempt {
	l.t.Helper()
	a := l.place(nodes, "us-east-1a")
	l.launch(a, true)
	l.state(Running)
	return l.r.Status.Current
}

func (l *life) checkpoint(a *Attempt, step int64, progress float64) CheckpointRef {
	return CheckpointRef{Attempt: a.N, Step: step, Progress: progress, SHA256: "abc", Size: 1 << 20,
		Location: fmt.Sprintf("%s/%s/step-%d", l.root, l.r.ID, step), At: l.now}
}

// effects returns the last result's effects of one type.
func effectsOf[E Effect](res Result) []E {
	var out []E
	for _, e := range res.Effects {
		if x, ok := e.(E); ok {
			out = append(out, x)
		}
	}
	return out
}

func historyKinds(res Result) []string {
	var out []string
	for _, h := range effectsOf[History](res) {
		out = append(out, h.Kind)
	}
	return out
}

// checkStep checks what must hold after every input, whatever it was.
func checkStep(before, after *Record, in Input, res Result) error {
	s := &after.Status
	if !res.Changed() && !reflect.DeepEqual(before, after) {
		return fmt.Errorf("verdict %s changed the record", res.Verdict)
	}
	if p := s.Previous; p != nil && !awaiting(p) && !p.Released() {
		return fmt.Errorf("previous attempt %d is neither under notice nor released", p.N)
	}
	if s.Current != nil && s.Previous != nil && s.Current.N <= s.Previous.N {
		return fmt.Errorf("current attempt %d is not newer than the previous %d", s.Current.N, s.Previous.N)
	}
	for _, a := range []*Attempt{s.Current, s.Previous} {
		if a != nil && s.State.Terminal() && !a.Released() {
			return fmt.Errorf("%s job holds attempt %d unreleased", s.State, a.N)
		}
	}
	if s.State == Queued && s.Current != nil {
		return fmt.Errorf("queued job has current attempt %d", s.Current.N)
	}
	for _, l := range effectsOf[Launch](res) {
		switch {
		case before.Status.State.Terminal() || s.State.Terminal():
			return fmt.Errorf("a %s job launched attempt %d", s.State, l.Attempt.N)
		case s.Current == nil || s.Current.N != l.Attempt.N:
			return fmt.Errorf("launch of attempt %d, which is not current", l.Attempt.N)
		case l.Attempt.LaunchKey != LaunchKey(after.ID, l.Attempt.N):
			return fmt.Errorf("launch key %s for attempt %d", l.Attempt.LaunchKey, l.Attempt.N)
		}
	}
	if c, b := s.Checkpoint, before.Status.Checkpoint; c != nil && b != nil && c.Step < b.Step {
		if _, restored := in.(AgentStarted); !restored {
			return fmt.Errorf("checkpoint went back from step %d to %d", b.Step, c.Step)
		}
	}
	if s.Progress < before.Status.Progress {
		ref := after.Spec.Work.ReferenceDuration(after.Spec.TotalGPUs())
		lost := s.WorkLost.D() - before.Status.WorkLost.D()
		want := time.Duration(float64(ref) * (before.Status.Progress - s.Progress))
		if lost < want-time.Second {
			return fmt.Errorf("progress went back from %.3f to %.3f with %s of work recorded lost (want %s)", before.Status.Progress, s.Progress, lost, want)
		}
	}
	if s.EndedCost < before.Status.EndedCost && !slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return a.Cost < 0 }) {
		// A correction downwards is possible (an instance ended before the
		// attempt closed) but never below zero.
		for _, a := range s.Attempts {
			if a.Cost < 0 {
				return fmt.Errorf("attempt %d costs %s", a.N, a.Cost)
			}
		}
	}
	return nil
}

func equalJSON(a, b *Record) bool { return string(mustJSONAny(a)) == string(mustJSONAny(b)) }

func describe(r *Record) string { return string(mustJSONAny(r.Status)) }

func mustJSONAny(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
