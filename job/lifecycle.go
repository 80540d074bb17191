package job

import (
	"fmt"
	"time"
)

// The lifecycle is a job's whole life in one place: a pure function from
// (record, input, now) to (record', effects). Every change to a job record
// goes through Apply; the scheduler reads the inputs off NATS, the clouds
// and its own decisions, writes the record with a revision check and then
// carries out the effects (launch, terminate, ask for a checkpoint,
// history, alerts). Nothing here does I/O, so every rule is tested without
// NATS or a cloud, and its invariants as properties (lifecycle_prop_test.go):
//
//   - at most one live attempt (Current), plus the one being left (Previous)
//     while a checkpointed move or a release completes;
//   - every instance-second is billed to exactly one attempt: each instance
//     belongs to one attempt's spans, from its launch to the end the
//     provider reported;
//   - an input changes a job only if it comes from the attempt it names and
//     from one of that attempt's instances; checkpoint steps only move
//     forward and stay inside the job's checkpoint location; progress goes
//     back only through a recorded loss of work;
//   - a terminal job launches nothing, and a retried decision buys nothing
//     twice.
//
// README.md in this folder has the table of states and inputs.

// Input is one thing that happens to a job.
type Input interface {
	// Name says what happened, for logs and metrics.
	Name() string
}

// Verdict is what Apply made of an input.
type Verdict string

// Verdicts. Only Accepted changes the record.
const (
	// Accepted: the input changed the job.
	Accepted Verdict = "accepted"
	// Duplicate: the job already reflects it (a redelivery).
	Duplicate Verdict = "duplicate"
	// Stale: it names an attempt or state the job has left behind.
	Stale Verdict = "stale"
	// Refused: it does not fit the job (an instance the attempt does not
	// own, a checkpoint outside the job's location or going backwards): a
	// wrong or forged message. The scheduler drops and counts it.
	Refused Verdict = "refused"
)

// Result is what Apply decided.
type Result struct {
	Verdict Verdict
	// Why explains a verdict other than Accepted.
	Why string
	// Effects are for the scheduler to carry out, in order, once the
	// record is stored (some come with a record that did not change, such
	// as a repeated termination).
	Effects []Effect
}

// Changed reports whether the record must be written.
func (r Result) Changed() bool { return r.Verdict == Accepted }

// Effect is a side effect the scheduler carries out.
type Effect interface{ effect() }

// Launch buys the capacity of an attempt with its launch key (idempotent:
// a retry with the same key buys nothing twice).
type Launch struct{ Attempt Attempt }

// Terminate ends every instance of an attempt (its launch key), listed or
// not: a crash may have hidden some from the record.
type Terminate struct {
	Attempt int
	Key     string
	// Instances are the ones the record knows.
	Instances []string
	Provider  string
	Why       string
}

// RequestCheckpoint asks an attempt's agent for a checkpoint before the
// deadline (zero: no hurry, a move of spotwise's own).
type RequestCheckpoint struct {
	Attempt  int
	Deadline time.Time
	Reason   string
}

// StartWorkload tells a replacement attempt's agent that the checkpoint it
// waits for is stored (or will not come): start now.
type StartWorkload struct{ Attempt int }

// History is one entry of the job's history.
type History struct {
	Kind      string
	Attempt   int
	Placement *Placement
	Progress  float64
	// Cost is what the job has cost so far, set on entries that close an
	// attempt.
	Cost    bool
	Message string
	// ID de-duplicates a retried publish.
	ID string
}

// Alert is something an operator should hear about.
type Alert struct {
	Severity string
	Kind     string
	Summary  string
	Details  map[string]string
	ID       string
}

// AttemptClosed reports an attempt that ended (for learning and metrics).
type AttemptClosed struct{ Attempt Attempt }

// WorkDone reports an attempt whose command finished the work: from its
// start to now, a measure of its GPU's real speed.
type WorkDone struct {
	Attempt Attempt
	At      time.Time
}

func (Launch) effect()            {}
func (Terminate) effect()         {}
func (RequestCheckpoint) effect() {}
func (StartWorkload) effect()     {}
func (History) effect()           {}
func (Alert) effect()             {}
func (AttemptClosed) effect()     {}
func (WorkDone) effect()          {}

// Alert severities (the same words as the alert events).
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// History kinds: one step of a job's life.
const (
	KindQueued           = "queued"
	KindPending          = "pending"
	KindPlacing          = "placing"
	KindLaunched         = "launched"
	KindLaunchFailed     = "launch-failed"
	KindRunning          = "running"
	KindProgress         = "progress"
	KindInstanceLost     = "instance-lost"
	KindRequeued         = "requeued"
	KindSucceeded        = "succeeded"
	KindFailed           = "failed"
	KindCancelled        = "cancelled"
	KindExpired          = "expired"
	KindTerminated       = "terminated"
	KindNotice           = "interruption-notice"
	KindCheckpoint       = "checkpoint"
	KindCheckpointFailed = "checkpoint-failed"
	KindPreempted        = "preempted"
	KindMigrating        = "migrating"
	KindRebalance        = "rebalance"
	KindMove             = "move"
)

// Kinds lists every history kind.
var Kinds = []string{KindQueued, KindPending, KindPlacing, KindLaunched, KindLaunchFailed, KindRunning, KindProgress,
	KindInstanceLost, KindRequeued, KindSucceeded, KindFailed, KindCancelled, KindExpired, KindTerminated, KindNotice,
	KindCheckpoint, KindCheckpointFailed, KindPreempted, KindMigrating, KindRebalance, KindMove}

// Apply runs one input through a job's lifecycle at now. It changes r in
// place when the verdict is Accepted (and only then: a refused, stale or
// duplicate input leaves r as it was, though its effects may still need
// carrying out).
func Apply(r *Record, in Input, now time.Time) Result {
	before := r.Clone()
	t := &tx{r: r, now: now}
	t.apply(in)
	if t.res.Verdict == "" {
		t.res.Verdict = Accepted
	}
	if t.res.Verdict != Accepted {
		*r = *before
		return t.res
	}
	r.Status.UpdatedAt = now
	return t.res
}

// tx is one application of an input: the record being changed and what it
// decided.
type tx struct {
	r   *Record
	now time.Time
	res Result
}

func (t *tx) apply(in Input) {
	switch in := in.(type) {
	case Place:
		t.place(in)
	case Launched:
		t.launched(in)
	case LaunchRefused:
		t.launchRefused(in)
	case LaunchUnknown:
		t.launchUnknown(in)
	case InstanceRunning:
		t.instanceRunning(in)
	case InstanceGone:
		t.instanceGone(in)
	case Observed:
		t.observed(in)
	case Interruption:
		t.interruption(in)
	case StartMove:
		t.startMove(in)
	case AgentStarted:
		t.agentStarted(in)
	case Progressed:
		t.progressed(in)
	case Checkpointed:
		t.checkpointed(in)
	case CheckpointFailed:
		t.checkpointFailed(in)
	case Exited:
		t.exited(in)
	case Cancel:
		t.cancel(in)
	case Expire:
		t.expire(in)
	case CostLimit:
		t.costLimit(in)
	default:
		t.refuse(fmt.Sprintf("unknown input %T", in))
	}
}

// verdicts other than Accepted stop the transaction's changes.
func (t *tx) refuse(why string)    { t.set(Refused, why) }
func (t *tx) stale(why string)     { t.set(Stale, why) }
func (t *tx) duplicate(why string) { t.set(Duplicate, why) }

func (t *tx) set(v Verdict, why string) {
	if t.res.Verdict == "" {
		t.res.Verdict, t.res.Why = v, why
	}
}

func (t *tx) do(e ...Effect) { t.res.Effects = append(t.res.Effects, e...) }

// history records a step; id de-duplicates a retried publish.
func (t *tx) history(kind string, attempt int, p *Placement, msg, id string) {
	var pl *Placement
	if p != nil {
		c := *p
		pl = &c
	}
	t.do(History{Kind: kind, Attempt: attempt, Placement: pl, Progress: t.r.Status.Progress, Message: msg, ID: id})
}

// historyCost records a step that closes an attempt, with the job's cost.
func (t *tx) historyCost(kind string, a *Attempt, msg, id string) {
	t.history(kind, a.N, &a.Placement, msg, id)
	h := t.res.Effects[len(t.res.Effects)-1].(History)
	h.Cost = true
	t.res.Effects[len(t.res.Effects)-1] = h
}

func (t *tx) alert(severity, kind, summary string, details map[string]string, id string) {
	if details == nil {
		details = map[string]string{}
	}
	details["team"] = t.r.Spec.Team
	t.do(Alert{Severity: severity, Kind: kind, Summary: summary, Details: details, ID: t.r.ID + "-alert-" + id})
}

// moveTo changes the job's state; the lifecycle only asks for moves its
// table allows, so a refusal is a bug that is reported, not hidden.
func (t *tx) moveTo(next State, msg string) {
	if err := t.r.moveTo(next, t.now, msg); err != nil {
		panic(err)
	}
}

// attemptByKey finds a live attempt by launch key: the current one, the
// one being left, or nil.
func (t *tx) attemptByKey(key string) (a *Attempt, previous bool) {
	s := &t.r.Status
	switch {
	case s.Current != nil && s.Current.LaunchKey == key:
		return s.Current, false
	case s.Previous != nil && s.Previous.LaunchKey == key:
		return s.Previous, true
	}
	return nil, false
}

// attemptByN finds a live attempt by number.
func (t *tx) attemptByN(n int) (a *Attempt, previous bool) {
	s := &t.r.Status
	switch {
	case s.Current != nil && s.Current.N == n:
		return s.Current, false
	case s.Previous != nil && s.Previous.N == n:
		return s.Previous, true
	}
	return nil, false
}

// closedByKey finds an ended attempt in the history by launch key.
func (t *tx) closedByKey(key string) *Attempt {
	for i := range t.r.Status.Attempts {
		if t.r.Status.Attempts[i].LaunchKey == key {
			return &t.r.Status.Attempts[i]
		}
	}
	return nil
}

// owns reports whether an instance belongs to an attempt.
func owns(a *Attempt, instance string) bool {
	for _, id := range a.Instances {
		if id == instance {
			return true
		}
	}
	return false
}

// fenced checks that an agent's input comes from the attempt it names, on
// one of that attempt's instances; it returns the attempt.
func (t *tx) fenced(attempt int, instance string) (*Attempt, bool) {
	a, prev := t.attemptByN(attempt)
	if a == nil {
		if attempt > t.r.Status.Attempt || attempt < 1 {
			t.refuse(fmt.Sprintf("attempt %d was never placed", attempt))
		} else {
			t.stale(fmt.Sprintf("attempt %d has ended", attempt))
		}
		return nil, false
	}
	if !owns(a, instance) {
		t.refuse(fmt.Sprintf("instance %q is not one of attempt %d's", instance, attempt))
		return nil, false
	}
	return a, prev
}
