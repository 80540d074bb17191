package job

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// Notice kinds (the providers' event kinds) and spotwise's own moves.
const (
	NoticeSpot        = "spot-interruption"
	NoticeMaintenance = "maintenance"
	NoticeRebalance   = "rebalance"
	// NoticeReturnToSpot and NoticeCheaper are moves of spotwise's own:
	// back to spot from on-demand, and to clearly cheaper capacity.
	NoticeReturnToSpot = "return-to-spot"
	NoticeCheaper      = "cheaper"
	// NoticeDeadline: the deadline policy moves a job off spot to
	// on-demand while the deadline can still be met there.
	NoticeDeadline = "deadline"
)

// MoveTimeout is how long a move of spotwise's own waits for its
// checkpoint before it is given up (the job stays where it runs).
const MoveTimeout = 10 * time.Minute

// Interruption is a provider's notice about an instance: its capacity goes
// at Deadline (a spot interruption, maintenance), or is at risk (a
// rebalance recommendation, no deadline).
type Interruption struct {
	Key      string
	Instance string
	Kind     string
	Deadline time.Time
	// Verified: the provider's listing confirms the instance is the
	// attempt's (for one the record does not list yet); Listed is what
	// that listing says of it (its launch, its price), recorded with it.
	Verified bool
	Listed   Instance
}

// StartMove moves a running job of spotwise's accord (to cheaper
// capacity, back to spot): it checkpoints where it runs, then is placed
// again.
type StartMove struct {
	Attempt int
	Kind    string
	Message string
}

// AgentStarted: the attempt's agent started the workload, from Progress
// (what it could restore, from Checkpoint).
type AgentStarted struct {
	Attempt    int
	Instance   string
	Progress   float64
	Checkpoint *CheckpointRef
}

// Progressed: the agent reports how far the work is.
type Progressed struct {
	Attempt  int
	Instance string
	Progress float64
}

// Checkpointed: the agent stored a checkpoint.
type Checkpointed struct {
	Attempt    int
	Instance   string
	Checkpoint CheckpointRef
}

// CheckpointFailed: the agent could not store a checkpoint.
type CheckpointFailed struct {
	Attempt  int
	Instance string
	Reason   string
}

// Exited: the workload's command ended.
type Exited struct {
	Attempt  int
	Instance string
	Code     int
	Message  string
}

// Cancel: a user cancelled the job.
type Cancel struct {
	Message string
	// By is who cancelled (the API's principal); "" says "user".
	By string
}

// Expire: the job, waiting for capacity, can no longer meet its deadline.
type Expire struct{ Message string }

func (Interruption) Name() string     { return "interruption" }
func (StartMove) Name() string        { return "start-move" }
func (AgentStarted) Name() string     { return "agent-started" }
func (Progressed) Name() string       { return "progress" }
func (Checkpointed) Name() string     { return "checkpoint" }
func (CheckpointFailed) Name() string { return "checkpoint-failed" }
func (Exited) Name() string           { return "exited" }
func (Cancel) Name() string           { return "cancel" }
func (Expire) Name() string           { return "expire" }

func (t *tx) interruption(in Interruption) {
	s := &t.r.Status
	a, prev := t.attemptByKey(in.Key)
	switch {
	case a == nil && t.closedByKey(in.Key) != nil:
		t.stale("the attempt has ended")
	case a == nil:
		t.refuse(fmt.Sprintf("no attempt of the job has key %s: spotwise did not launch that instance", in.Key))
	case !owns(a, in.Instance) && !in.Verified:
		t.refuse(fmt.Sprintf("instance %s is not one of attempt %d's", in.Instance, a.N))
	case s.State.Terminal() || a.Released():
		t.stale("the attempt's capacity is being released")
	case prev || (a.Notice != nil && !voluntary(a.Notice)):
		t.duplicate("the attempt is under notice already")
	case in.Kind == NoticeRebalance:
		t.rebalance(a, in)
		return
	}
	if t.res.Verdict != "" {
		return
	}
	if !owns(a, in.Instance) {
		// A notice that overtook the record of its launch: the instance is
		// billed from its launch, as listed, not from the notice.
		listed := in.Listed
		listed.ID, listed.EndedAt = in.Instance, time.Time{}
		t.record(a, listed)
	}
	if in.Kind == NoticeSpot {
		s.Preemptions++
	}
	off := a.Placement
	a.Notice = &Notice{Kind: in.Kind, At: t.now, Deadline: in.Deadline, Instance: in.Instance}
	deadline := in.Deadline.UTC().Format(time.RFC3339)
	t.alert(SeverityWarning, "preemption",
		fmt.Sprintf("job %s (%s): %s on %s %s in %s; capacity goes at %s, moving it", t.r.Spec.Name, t.r.ID, in.Kind, off.InstanceType, off.Purchase, off.Zone, deadline),
		map[string]string{"instance": in.Instance, "zone": off.Zone, "deadline": deadline, "progress": pct(s.Progress)},
		in.Instance+"-"+in.Kind)
	switch {
	case a.RunningAt.IsZero():
		// It never ran the work: nothing to checkpoint. Let it go now.
		msg := fmt.Sprintf("%s before the attempt ran: placing the job again", in.Kind)
		t.history(KindNotice, a.N, &off, msg, in.Instance+"-notice-"+in.Kind)
		t.letGo(OutcomePreempted, in.Kind)
		if s.State == Placing {
			t.moveTo(Queued, msg)
		} else {
			s.Message = msg
		}
	case t.r.Spec.Checkpoint.Disabled:
		t.fallBack()
		msg := fmt.Sprintf("%s: the job cannot checkpoint, moving and starting over", in.Kind)
		t.history(KindNotice, a.N, &off, msg, in.Instance+"-notice-"+in.Kind)
		t.letGo(OutcomePreempted, "the job cannot checkpoint")
		t.moveTo(Migrating, msg)
	default:
		msg := fmt.Sprintf("%s: checkpointing before %s", in.Kind, in.Deadline.UTC().Format(time.TimeOnly))
		if !t.leave() {
			// The attempt under notice is a replacement that has not run
			// while the one before it still checkpoints: drop it.
			t.release(&s.Current, OutcomePreempted, in.Kind)
			if s.Current != nil {
				t.close(&s.Current, OutcomePreempted)
			}
			s.Message = msg
			t.history(KindNotice, a.N, &off, msg, in.Instance+"-notice-"+in.Kind)
			return
		}
		t.do(RequestCheckpoint{Attempt: a.N, Deadline: in.Deadline, Reason: in.Kind})
		if s.State == Checkpointing { // it was moving of its own accord
			s.Message = msg
		} else {
			t.moveTo(Checkpointing, msg)
		}
		t.history(KindNotice, a.N, &off, msg, in.Instance+"-notice-"+in.Kind)
	}
}

// rebalance acts on a rebalance recommendation: a job that asked to move
// on one checkpoints and moves; for the others it is only recorded.
func (t *tx) rebalance(a *Attempt, in Interruption) {
	spec := &t.r.Spec.Checkpoint
	stays := ""
	switch {
	case !spec.MoveOnRebalance:
		stays = "move_on_rebalance is off"
	case spec.Disabled:
		stays = "it cannot checkpoint, and moving would lose all its work"
	case t.r.Status.State != Running || a.Notice != nil:
		stays = "it is not running where it could checkpoint"
	}
	if stays != "" {
		t.history(KindRebalance, a.N, nil, fmt.Sprintf("rebalance recommended for %s (the job stays: %s)", in.Instance, stays), in.Instance+"-rebalance")
		t.set(Duplicate, "recorded only")
		return
	}
	msg := fmt.Sprintf("rebalance recommended for %s: checkpointing, then moving", in.Instance)
	t.beginMove(a, NoticeRebalance, in.Instance, msg)
	t.history(KindRebalance, a.N, &a.Placement, msg, in.Instance+"-rebalance")
}

func (t *tx) startMove(in StartMove) {
	s := &t.r.Status
	a := s.Current
	switch {
	case a == nil || a.N != in.Attempt:
		t.stale(fmt.Sprintf("attempt %d is not current", in.Attempt))
	case s.State != Running || a.Notice != nil || s.Previous != nil || a.Released():
		t.stale("the job is not running settled where it is")
	case t.r.Spec.Checkpoint.Disabled:
		t.refuse("the job cannot checkpoint")
	}
	if t.res.Verdict != "" {
		return
	}
	t.beginMove(a, in.Kind, "", in.Message)
	t.history(KindMove, a.N, &a.Placement, in.Message, a.LaunchKey+"-move")
}

// beginMove starts a move of the job's accord: it keeps running where it
// is while it checkpoints.
func (t *tx) beginMove(a *Attempt, kind, instance, msg string) {
	a.Notice = &Notice{Kind: kind, At: t.now, Instance: instance}
	t.moveTo(Checkpointing, msg)
	t.do(RequestCheckpoint{Attempt: a.N, Reason: kind})
}

// giveUp ends a move whose checkpoint did not come: the job stays.
func (t *tx) giveUp(a *Attempt, msg string) {
	kind := a.Notice.Kind
	if kind == NoticeCostLimit {
		// The job stops at its cost limit all the same, from its last
		// checkpoint.
		t.stopForCost(fmt.Sprintf("cost limit %s reached: stopped without a new checkpoint (%s)", t.r.Spec.MaxCost.Human(), strings.TrimSuffix(msg, ": staying")))
		return
	}
	at := a.Notice.At
	a.Notice = nil
	t.moveTo(Running, msg)
	t.history(KindMove, a.N, nil, msg, fmt.Sprintf("%s-move-given-up-%d", a.LaunchKey, at.UnixNano()))
	t.checkpointAlert(a.N, "no checkpoint for the "+kind+" move in "+humanDuration(MoveTimeout))
}

func (t *tx) agentStarted(in AgentStarted) {
	s := &t.r.Status
	a, prev := t.fenced(in.Attempt, in.Instance)
	switch {
	case a == nil:
		return
	case prev || a.Released():
		t.stale("the attempt is being left")
		return
	case in.Checkpoint != nil && !t.inRoot(*in.Checkpoint):
		t.refuse(fmt.Sprintf("checkpoint %s is outside the job's checkpoint location", in.Checkpoint.Location))
		return
	case s.State == Running && a.StartProgress == in.Progress && !a.RunningAt.IsZero() && a.Notice == nil:
		t.duplicate("the workload is running from there already")
		return
	}
	// The workload started from where the agent could resume: that is the
	// truth about the job's progress. Behind what was believed (a newer
	// checkpoint did not verify), the difference is lost.
	if in.Progress < s.Progress {
		t.lose(s.Progress - in.Progress)
	}
	s.Progress = in.Progress
	a.StartProgress = in.Progress
	if in.Checkpoint != nil {
		ck := *in.Checkpoint
		s.Checkpoint = &ck
		t.storing()
	}
	if a.RunningAt.IsZero() {
		a.RunningAt = t.now
	}
	if voluntary(a.Notice) {
		a.Notice = nil // the agent restarted: a move it was checkpointing for is off
	}
	if p := s.Previous; awaiting(p) {
		// The replacement started when the old attempt's capacity went:
		// that one's checkpoint did not make it.
		t.checkpointAlert(p.N, "the notice window ran out before the checkpoint was stored")
		t.release(&s.Previous, OutcomePreempted, "its replacement runs")
	}
	msg := fmt.Sprintf("running from %s", pct(in.Progress))
	if s.State == Running {
		s.Message = msg
	} else {
		t.moveTo(Running, msg)
	}
	t.history(KindRunning, a.N, &a.Placement, "running on "+joinIDs(a.Instances), a.LaunchKey+"-running")
}

// ProgressEvery is the least time between two writes of a job's progress
// from its agent's reports, unless the report passes a 10% mark. An agent
// reads its progress as often as its work moves; each write is a record
// rewritten and read again by every watcher, so a job of a few minutes
// would otherwise be written a hundred times for its progress alone. A
// long job still has its progress written at each 1%.
const ProgressEvery = time.Minute

// ProgressWanted says whether a progress report would be written to a
// record whose progress is progress, written at at: 1% more than that, and
// either a minute (ProgressEvery) later or past the next 10% mark. It is
// the lifecycle's own rule, which a caller holding a recent copy of the
// record may apply before reading it.
func ProgressWanted(reported, progress float64, at, now time.Time) bool {
	return reported >= progress+0.01 && (now.Sub(at) >= ProgressEvery || tenths(reported) > tenths(progress))
}

// ProgressReportWanted says whether an agent whose last progress report
// said last, at lastAt, reports progress reported now: on the same terms
// as ProgressWanted but twice as often, so that the record, written at a
// minute's distance from its previous write by the scheduler's clock,
// takes a report within the next half minute.
func ProgressReportWanted(reported, last float64, lastAt, now time.Time) bool {
	return reported >= last+0.01 && (now.Sub(lastAt) >= ProgressEvery/2 || tenths(reported) > tenths(last))
}

// tenths is how many 10% marks progress p has passed.
func tenths(p float64) int { return int(p*10 + 1e-9) }

func (t *tx) progressed(in Progressed) {
	s := &t.r.Status
	a, prev := t.fenced(in.Attempt, in.Instance)
	switch {
	case a == nil:
		return
	case prev || a.Released() || a.RunningAt.IsZero() || (s.State != Running && s.State != Checkpointing):
		t.stale("the attempt does not run the job")
		return
	case in.Progress < s.Progress+0.01:
		// Progress is written in steps of 1% to keep the bucket quiet...
		t.duplicate("less than 1% more")
		return
	case !ProgressWanted(in.Progress, s.Progress, s.ProgressAt, t.now):
		// ... and at most once a minute between 10% marks.
		t.duplicate("progress written less than a minute ago")
		return
	}
	crossed := tenths(in.Progress) > tenths(s.Progress)
	s.Progress, s.ProgressAt = in.Progress, t.now
	if crossed {
		tenth := tenths(in.Progress)
		t.history(KindProgress, a.N, nil, fmt.Sprintf("%d%% done", tenth*10), fmt.Sprintf("%s-progress-%d", a.LaunchKey, tenth))
	}
}

func (t *tx) checkpointed(in Checkpointed) {
	s := &t.r.Status
	ck := in.Checkpoint
	a, prev := t.fenced(in.Attempt, in.Instance)
	if a == nil {
		return
	}
	c := s.Checkpoint
	same := c != nil && c.Attempt == ck.Attempt && c.Step == ck.Step
	notice := prev && awaiting(a) && s.State == Checkpointing
	moving := !prev && voluntary(a.Notice) && s.State == Checkpointing
	switch {
	case ck.Attempt != in.Attempt && !same:
		// An attempt asked to checkpoint before it made any progress
		// stores the very checkpoint it resumed from, and the store hands
		// back the earlier attempt's (the same step, the same content):
		// that one is the job's already, and may carry a move on.
		t.refuse(fmt.Sprintf("the checkpoint says it is attempt %d's, the report attempt %d's", ck.Attempt, in.Attempt))
	case !t.inRoot(ck):
		t.refuse(fmt.Sprintf("checkpoint %s is outside the job's checkpoint location %s", ck.Location, s.CheckpointRoot))
	case a.Released():
		t.stale("the attempt is being released")
	case c != nil && !same && ck.Step <= c.Step:
		t.refuse(fmt.Sprintf("step %d is not after the job's checkpoint at step %d", ck.Step, c.Step))
	case c != nil && ck.Progress < c.Progress:
		t.refuse(fmt.Sprintf("progress %s is behind the job's checkpoint at %s", pct(ck.Progress), pct(c.Progress)))
	case same && !notice && !moving:
		t.duplicate("the job has this checkpoint")
	}
	if t.res.Verdict != "" {
		return
	}
	s.Checkpoint = &ck
	t.storing()
	t.history(KindCheckpoint, a.N, nil, fmt.Sprintf("checkpoint at %s (step %d, %s) stored", pct(ck.Progress), ck.Step, humanBytes(ck.Size)),
		fmt.Sprintf("%s-ckpt-%d", a.LaunchKey, ck.Step))
	switch {
	case notice:
		// The checkpoint for the notice: the old capacity goes now, not
		// at the deadline, and the replacement starts from here.
		t.resumeAt(ck.Progress)
		why := "checkpoint stored before its " + a.Notice.Kind
		t.release(&s.Previous, OutcomePreempted, why)
		t.moveTo(Migrating, fmt.Sprintf("checkpoint at %s stored; moving", pct(ck.Progress)))
		t.history(KindMigrating, a.N, nil, s.Message, a.LaunchKey+"-migrating")
		t.startReplacement()
	case moving && a.Notice.Kind == NoticeCostLimit:
		t.resumeAt(ck.Progress)
		t.stopForCost(fmt.Sprintf("cost limit %s reached: stopped after a checkpoint at %s", t.r.Spec.MaxCost.Human(), pct(ck.Progress)))
	case moving:
		t.resumeAt(ck.Progress)
		msg := fmt.Sprintf("checkpoint at %s stored; releasing %s and moving", pct(ck.Progress), a.Placement.InstanceType)
		if t.leave() {
			t.release(&s.Previous, OutcomeMoved, "moved")
		}
		t.moveTo(Migrating, msg)
		t.history(KindMigrating, a.N, nil, msg, a.LaunchKey+"-migrating")
	}
}

// startReplacement tells a replacement held for a checkpoint that it may
// start, once its agent can hear it (an instance of it runs; otherwise
// when one comes to run).
func (t *tx) startReplacement() {
	if c := t.r.Status.Current; held(c) && len(c.Running) > 0 {
		t.do(StartWorkload{Attempt: c.N})
	}
}

func (t *tx) checkpointFailed(in CheckpointFailed) {
	s := &t.r.Status
	a, prev := t.fenced(in.Attempt, in.Instance)
	switch {
	case a == nil:
		return
	case a.Released():
		t.stale("the attempt is being released")
	case prev && awaiting(a):
		t.reclaimedWithoutCheckpoint(in.Reason)
	case !prev && voluntary(a.Notice) && s.State == Checkpointing:
		t.giveUp(a, fmt.Sprintf("the checkpoint for the move failed (%s): staying", in.Reason))
	default:
		t.checkpointAlert(a.N, in.Reason)
	}
}

// reclaimedWithoutCheckpoint: the attempt under notice could not
// checkpoint; the job falls back to its last good checkpoint, the old
// capacity goes now, and the replacement starts from there.
func (t *tx) reclaimedWithoutCheckpoint(why string) {
	s := &t.r.Status
	p := s.Previous
	t.fallBack()
	t.checkpointAlert(p.N, why)
	t.release(&s.Previous, OutcomePreempted, "its checkpoint failed")
	t.moveTo(Migrating, "checkpoint failed ("+why+"): resuming from "+t.resumePoint())
	t.startReplacement()
}

// reclaimed handles capacity of the attempt under notice going before its
// checkpoint was stored.
func (t *tx) reclaimed(reason string) {
	s := &t.r.Status
	p := s.Previous
	if awaiting(p) && s.State == Checkpointing {
		t.reclaimedWithoutCheckpoint("the notice window ran out before the checkpoint was stored")
		return
	}
	t.release(&s.Previous, OutcomePreempted, reason)
}

// lost handles capacity that went under the current attempt without
// notice: the work since the last checkpoint is lost, the other nodes are
// released, and the job is placed again.
func (t *tx) lost(reason string) {
	s := &t.r.Status
	a := s.Current
	t.fallBack()
	msg := fmt.Sprintf("%s; resuming from %s", reason, t.resumePoint())
	lostBefore := 0
	for _, x := range s.Attempts {
		if x.Outcome == OutcomeLost {
			lostBefore++
		}
	}
	t.history(KindInstanceLost, a.N, &a.Placement, msg, a.LaunchKey+"-lost")
	if n := lostBefore + 1; n >= 3 {
		t.alert(SeverityWarning, "repeated-failures", fmt.Sprintf("job %s (%s) lost its capacity without notice %d times (last: %s)", t.r.Spec.Name, t.r.ID, n, reason),
			nil, fmt.Sprintf("lost-%d", n))
	}
	t.letGo(OutcomeLost, "a sibling node was lost")
	switch s.State {
	case Running, Placing:
		t.moveTo(Queued, msg)
	case Checkpointing:
		if voluntary(a.Notice) {
			t.moveTo(Queued, msg)
		} else {
			s.Message = msg // a replacement lost while the old one checkpoints
		}
	default:
		s.Message = msg
	}
}

func (t *tx) exited(in Exited) {
	s := &t.r.Status
	a, prev := t.fenced(in.Attempt, in.Instance)
	switch {
	case a == nil:
		return
	case s.State.Terminal():
		t.stale("the job is " + string(s.State))
		return
	case prev && (in.Code != 0 || !awaiting(a)):
		t.stale("the attempt being left was stopped with its capacity")
		return
	case !prev && a.Released():
		t.stale("the attempt is being released")
		return
	}
	if a.RunningAt.IsZero() {
		a.RunningAt = t.now // the exit overtook the running event
	}
	msg := fmt.Sprintf("command exited with code %d", in.Code)
	if in.Message != "" {
		msg += ": " + in.Message
	}
	switch {
	case in.Code == 0 && prev:
		// The attempt under notice finished the work in its window: its
		// replacement is not needed.
		s.Progress = 1
		t.release(&s.Previous, OutcomeSucceeded, "the job succeeded")
		t.release(&s.Current, OutcomeSuperseded, "the job finished before its replacement was needed")
		t.moveTo(Succeeded, "command succeeded (before its capacity went)")
		t.history(KindSucceeded, a.N, &a.Placement, s.Message, a.LaunchKey+"-succeeded")
	case in.Code == 0:
		s.Progress = 1
		t.do(WorkDone{Attempt: a.clone(), At: t.now})
		t.release(&s.Current, OutcomeSucceeded, "the job succeeded")
		t.release(&s.Previous, OutcomePreempted, "the job succeeded")
		t.moveTo(Succeeded, "command succeeded")
		t.history(KindSucceeded, a.N, &a.Placement, s.Message, a.LaunchKey+"-succeeded")
	case s.Retries < t.r.Spec.MaxRetries:
		s.Retries++
		t.lose(s.Progress)
		s.Progress = 0
		t.release(&s.Previous, OutcomePreempted, msg)
		t.letGo(OutcomeFailed, msg)
		msg = fmt.Sprintf("%s; retry %d of %d", msg, s.Retries, t.r.Spec.MaxRetries)
		t.moveTo(Queued, msg)
		t.history(KindRequeued, a.N, &a.Placement, msg, a.LaunchKey+"-requeued")
	default:
		t.release(&s.Current, OutcomeFailed, msg)
		t.release(&s.Previous, OutcomePreempted, msg)
		t.moveTo(Failed, msg)
		t.history(KindFailed, a.N, &a.Placement, msg, a.LaunchKey+"-failed")
		t.alert(SeverityCritical, "job-failed", fmt.Sprintf("job %s (%s) failed after %d attempt(s): %s", t.r.Spec.Name, t.r.ID, s.Attempt, msg),
			map[string]string{"retries": fmt.Sprint(s.Retries)}, "failed")
	}
}

func (t *tx) cancel(in Cancel) {
	s := &t.r.Status
	switch {
	case s.State == Cancelled:
		t.duplicate("the job is cancelled already")
		return
	case s.State.Terminal():
		t.stale("the job already " + string(s.State))
		return
	}
	msg := "cancelled by " + cmp.Or(in.By, "user")
	if in.Message != "" {
		msg += ": " + in.Message
	}
	t.release(&s.Current, OutcomeCancelled, "job cancelled")
	t.release(&s.Previous, OutcomeCancelled, "job cancelled")
	t.moveTo(Cancelled, msg)
	t.history(KindCancelled, s.Attempt, nil, msg, t.r.ID+"-cancelled")
}

func (t *tx) expire(in Expire) {
	s := &t.r.Status
	switch {
	case s.State.Terminal():
		t.stale("the job is " + string(s.State))
		return
	case !t.r.NeedsPlacement():
		t.stale("the job has capacity")
		return
	case s.DeadlineMissed:
		t.duplicate("the deadline was missed already; the job runs anyway")
		return
	}
	if t.r.Spec.OnDeadlineMiss() == DeadlineMissRun {
		s.DeadlineMissed = true
		s.Message = "the deadline can no longer be met (" + in.Message + "); running anyway, as the spec says"
		t.alert(SeverityWarning, "deadline-missed", fmt.Sprintf("job %s (%s) can no longer meet its deadline: %s; it runs anyway (on_deadline_miss: run)", t.r.Spec.Name, t.r.ID, in.Message),
			nil, "deadline-missed")
		t.history(KindPending, s.Attempt, nil, s.Message, t.r.ID+"-deadline-missed")
		return
	}
	t.release(&s.Previous, OutcomeExpired, "job expired")
	msg := "expired: the deadline can no longer be met (" + in.Message + ")"
	t.moveTo(Expired, msg)
	t.history(KindExpired, s.Attempt, nil, msg, t.r.ID+"-expired")
	t.alert(SeverityCritical, "job-expired", fmt.Sprintf("job %s (%s) expired: %s", t.r.Spec.Name, t.r.ID, in.Message), nil, "expired")
}

// fallBack sets the job's progress back to its last good checkpoint (or to
// nothing) and records the work in between as lost.
func (t *tx) fallBack() {
	s := &t.r.Status
	kept := 0.0
	if c := s.Checkpoint; c != nil {
		kept = c.Progress
	}
	if s.Progress > kept {
		t.lose(s.Progress - kept)
	}
	s.Progress = kept
}

// resumeAt sets the job's progress to where its next attempt resumes (a
// checkpoint); work reported past it is lost.
func (t *tx) resumeAt(p float64) {
	s := &t.r.Status
	if s.Progress > p {
		t.lose(s.Progress - p)
	}
	s.Progress = p
}

// letGo releases the current attempt when the job goes back to waiting
// for capacity: it becomes the attempt being left until its capacity is
// gone, or closes now when that slot is taken by one still under notice.
func (t *tx) letGo(outcome Outcome, why string) {
	s := &t.r.Status
	t.release(&s.Current, outcome, why)
	if s.Current != nil && !t.leave() {
		t.close(&s.Current, outcome)
	}
}

// lose records a share of the work as lost.
func (t *tx) lose(share float64) {
	if share <= 0 {
		return
	}
	ref := t.r.Spec.Work.ReferenceDuration(t.r.Spec.TotalGPUs())
	t.r.Status.WorkLost += Duration(time.Duration(float64(ref) * share))
}

// storing notes when the job's checkpoints began to be kept: storage is
// billed from the first one stored to the job's end.
func (t *tx) storing() {
	if s := &t.r.Status; s.CheckpointSince.IsZero() {
		s.CheckpointSince = t.now
	}
}
