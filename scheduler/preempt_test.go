package scheduler_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

const spotT4 = "name: p\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 2h on T4\npurchase: spot\n"

// advanceUntil moves the fake clock forward in steps until cond holds,
// letting the system settle after every timer that falls due: simulated
// time never runs ahead of what the system has done with it, however slow
// the machine.
func (r *rig) advanceUntil(t testing.TB, step, limit time.Duration, what string, cond func(*job.Record) bool, id string) *job.Record {
	t.Helper()
	for moved := time.Duration(0); ; moved += step {
		r.settle(t)
		rec := r.get(t, id)
		if cond(rec) {
			return rec
		}
		if moved >= limit {
			t.Fatalf("%s: not reached after %s of clock time: job %s (%s)", what, limit, rec.Status.State, rec.Status.Message)
		}
		r.advance(t, step)
	}
}

func (r *rig) history(t testing.TB, id string) []string {
	t.Helper()
	h, err := r.bus.JobHistory(r.ctx, id, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range h {
		kinds = append(kinds, e.Event.Kind)
	}
	return kinds
}

func (r *rig) runToRunning(t testing.TB, spec string) *job.Record {
	t.Helper()
	rec := r.submit(t, spec)
	r.waitState(t, rec.ID, job.Placing)
	r.boot(t, rec.ID)
	return r.advanceUntil(t, time.Minute, 20*time.Minute, "running", func(x *job.Record) bool { return x.Status.State == job.Running }, rec.ID)
}

// A spot interruption notice: the agent checkpoints inside the window, a
// replacement is chosen in another zone at once, the old capacity goes at
// the deadline, and the job carries on from its checkpoint to the end,
// losing no work.
func TestNoticeCheckpointsAndMovesTheJob(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	rec = r.advanceUntil(t, time.Minute, 2*time.Hour, "progress", func(x *job.Record) bool { return x.Status.Progress >= 0.3 }, rec.ID)
	old := rec.Status.Current
	if err := r.cloud.Preempt(old.Instances[0]); err != nil {
		t.Fatal(err)
	}
	noticeAt := r.clk.Now()
	rec = r.advanceUntil(t, 5*time.Second, 5*time.Minute, "migrating", func(x *job.Record) bool {
		return x.Status.State == job.Migrating && x.Status.Checkpoint != nil && x.Status.Current != nil
	}, rec.ID)
	ck := rec.Status.Checkpoint
	if ck.At.Sub(noticeAt) > 2*time.Minute {
		t.Fatalf("checkpoint stored %s after the notice, outside the 2-minute window", ck.At.Sub(noticeAt))
	}
	next := rec.Status.Current
	if next.N != 2 || next.Placement.Zone == old.Placement.Zone || next.StartAfter.IsZero() {
		t.Fatalf("replacement %+v: want attempt 2 in another zone, held until the old one's deadline", next)
	}
	// With its checkpoint stored, the old capacity is released at once
	// rather than paid for until the deadline.
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		for _, in := range r.instancesFor(t, rec.ID) {
			if in.ID == old.Instances[0] && !in.State.Ended() {
				return fmt.Errorf("old instance %s still %s after the checkpoint", in.ID, in.State)
			}
		}
		x := r.get(t, rec.ID)
		if len(x.Status.Attempts) != 1 {
			return errors.New("old attempt not closed yet")
		}
		if end := x.Status.Attempts[0].EndedAt; !end.Before(noticeAt.Add(2 * time.Minute)) {
			return fmt.Errorf("old attempt billed until %s, the notice's deadline is %s", end, noticeAt.Add(2*time.Minute))
		}
		return nil
	})
	// The replacement starts at the old deadline, as the old capacity goes:
	// the two events may come in either order.
	rec = r.advanceUntil(t, time.Minute, 30*time.Minute, "running again", func(x *job.Record) bool {
		return x.Status.State == job.Running && x.Status.Current != nil && x.Status.Current.N == 2 && x.Status.Previous == nil
	}, rec.ID)
	if len(rec.Status.Attempts) != 1 || rec.Status.Attempts[0].Outcome != "preempted" {
		t.Fatalf("old attempt not closed as preempted: %+v", rec.Status.Attempts)
	}
	if rec.Status.Progress < ck.Progress || rec.Status.WorkLost != 0 || rec.Status.Preemptions != 1 {
		t.Fatalf("resumed at %v (checkpoint %v), work lost %s, preemptions %d", rec.Status.Progress, ck.Progress, rec.Status.WorkLost.D(), rec.Status.Preemptions)
	}
	rec = r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "done", func(x *job.Record) bool { return x.Status.State == job.Succeeded }, rec.ID)
	h := r.history(t, rec.ID)
	for _, k := range []string{events.KindNotice, events.KindCheckpoint, events.KindMigrating, events.KindPreempted, events.KindSucceeded} {
		if !slices.Contains(h, k) {
			t.Errorf("history %v lacks %s", h, k)
		}
	}
}

// A checkpoint that cannot finish inside the notice window: the job falls
// back to its last good (periodic) checkpoint, and the work since then is
// recorded as lost.
func TestCheckpointTooSlowForTheWindowFallsBack(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 5m, interval: 20m}\n")
	rec = r.advanceUntil(t, time.Minute, 2*time.Hour, "a periodic checkpoint", func(x *job.Record) bool {
		return x.Status.Checkpoint != nil && x.Status.Progress > x.Status.Checkpoint.Progress+0.05
	}, rec.ID)
	good := *rec.Status.Checkpoint
	if err := r.cloud.Preempt(rec.Status.Current.Instances[0]); err != nil {
		t.Fatal(err)
	}
	rec = r.advanceUntil(t, 10*time.Second, 10*time.Minute, "fell back", func(x *job.Record) bool {
		return x.Status.Previous == nil && x.Status.Attempt == 2
	}, rec.ID)
	if rec.Status.Checkpoint.Step != good.Step || rec.Status.Progress != good.Progress {
		t.Fatalf("resumes from %+v at %v, want the last good checkpoint %+v", rec.Status.Checkpoint, rec.Status.Progress, good)
	}
	if rec.Status.WorkLost <= 0 {
		t.Fatal("no work recorded as lost")
	}
	if h := r.history(t, rec.ID); !slices.Contains(h, events.KindCheckpointFailed) {
		t.Fatalf("history %v lacks checkpoint-failed", h)
	}
	rec = r.advanceUntil(t, time.Minute, 30*time.Minute, "running again", func(x *job.Record) bool { return x.Status.State == job.Running }, rec.ID)
	if rec.Status.Progress < good.Progress-1e-9 || rec.Status.Progress > good.Progress+0.02 {
		t.Fatalf("replacement started at %v, want the checkpoint's %v", rec.Status.Progress, good.Progress)
	}
}

// A corrupted checkpoint is detected when the replacement restores it,
// and the one before it is used.
func TestCorruptCheckpointIsSkipped(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s, interval: 15m}\n")
	// Two periodic checkpoints.
	var first *job.CheckpointRef
	rec = r.advanceUntil(t, time.Minute, 2*time.Hour, "two checkpoints", func(x *job.Record) bool {
		if c := x.Status.Checkpoint; c != nil && first == nil {
			cp := *c
			first = &cp
		}
		return first != nil && x.Status.Checkpoint.Step > first.Step
	}, rec.ID)
	latest := *rec.Status.Checkpoint
	// Damage the newest one in the store.
	var damaged bool
	_ = filepath.Walk(r.dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && filepath.Base(path) == "state.json" && filepath.Base(filepath.Dir(path)) == fmt.Sprintf("%020d", latest.Step) {
			damaged = os.WriteFile(path, []byte(`{"progress":0.99}`), 0o644) == nil
		}
		return nil
	})
	if !damaged {
		t.Fatal("could not find the latest checkpoint's file")
	}
	// The capacity goes without notice: the replacement must restore.
	if err := r.cloud.FailInstance(rec.Status.Current.Instances[0], "hardware failure"); err != nil {
		t.Fatal(err)
	}
	// The replacement's agent says what it resumed from.
	rec = r.advanceUntil(t, time.Minute, 40*time.Minute, "resumed", func(x *job.Record) bool {
		return x.Status.State == job.Running && x.Status.Current != nil && x.Status.Current.N == 2 &&
			x.Status.Checkpoint != nil && x.Status.Checkpoint.Step != latest.Step
	}, rec.ID)
	if rec.Status.Checkpoint.Step != first.Step {
		t.Fatalf("resumed from checkpoint step %d, want the older good one, %d", rec.Status.Checkpoint.Step, first.Step)
	}
	if d := rec.Status.Progress - first.Progress; d < -1e-9 || d > 0.02 {
		t.Fatalf("resumed at %v; want the older good checkpoint's %v (the newest, %v, is corrupt)", rec.Status.Progress, first.Progress, latest.Progress)
	}
}

// A rebalance recommendation moves a job that asked for it, before any
// notice; a job that did not ask stays where it is.
func TestRebalanceMovesOnlyJobsThatAskForIt(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	mover := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s, move_on_rebalance: true}\n")
	stayer := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	for _, x := range []*job.Record{mover, stayer} {
		if err := r.cloud.Rebalance(x.Status.Current.Instances[0]); err != nil {
			t.Fatal(err)
		}
	}
	r.advanceUntil(t, 10*time.Second, 5*time.Minute, "mover checkpointed and moving", func(x *job.Record) bool {
		return x.Status.Checkpoint != nil && x.Status.Current != nil && x.Status.Current.N == 2
	}, mover.ID)
	got := r.get(t, stayer.ID)
	if got.Status.State != job.Running || got.Status.Attempt != 1 {
		t.Fatalf("the job that did not ask moved: %s attempt %d", got.Status.State, got.Status.Attempt)
	}
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if !slices.Contains(r.history(t, stayer.ID), events.KindRebalance) {
			return errors.New("rebalance not in the history")
		}
		return nil
	})
}

// Notices for an instance of no job, or sent twice, change nothing.
func TestDuplicateAndUnknownNotices(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	in := r.instancesFor(t, rec.ID)[0]
	notice := &events.Interruption{Kind: providers.EventSpotInterruption, Instance: in, Deadline: r.clk.Now().Add(2 * time.Minute)}
	for range 3 {
		if err := r.bus.Publish(r.ctx, events.InterruptionsSubject(in.Provider, in.Region), notice); err != nil {
			t.Fatal(err)
		}
	}
	stray := in
	stray.ID, stray.JobID, stray.IdempotencyKey = "i-nobody", job.NewID(r.clk.Now()), "nobody-a1"
	if err := r.bus.Publish(r.ctx, events.InterruptionsSubject(in.Provider, in.Region), &events.Interruption{Kind: providers.EventSpotInterruption, Instance: stray, Deadline: notice.Deadline}); err != nil {
		t.Fatal(err)
	}
	rec = r.advanceUntil(t, 5*time.Second, 2*time.Minute, "checkpointed", func(x *job.Record) bool { return x.Status.State == job.Migrating }, rec.ID)
	r.settle(t)
	rec = r.get(t, rec.ID)
	if rec.Status.Preemptions != 1 || rec.Status.Attempt != 2 {
		t.Fatalf("three copies of one notice counted %d preemptions and %d attempts", rec.Status.Preemptions, rec.Status.Attempt)
	}
}

// The instance's own metadata can beat the cloud's event: the agent
// checkpoints on it and reports before the scheduler hears of the notice,
// then answers the scheduler's request by reporting that checkpoint again.
// The second report of the same checkpoint ends the checkpointing.
func TestCheckpointReportedAgainEndsCheckpointing(t *testing.T) {
	r := newRig(t, rigOpt{})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	in := r.instancesFor(t, rec.ID)[0]
	report := &events.AgentReport{Kind: events.AgentCheckpoint, JobID: rec.ID, Attempt: 1, InstanceID: in.ID, Progress: 0.4,
		Checkpoint: &job.CheckpointRef{Attempt: 1, Step: 40, Progress: 0.4, SHA256: "ab", Size: 1 << 20, Location: "file://" + r.dir + "/" + rec.ID + "/40", At: r.clk.Now()}}
	if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, 1), report); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if ck := r.get(t, rec.ID).Status.Checkpoint; ck == nil || ck.Step != 40 {
			return errors.New("checkpoint not recorded yet")
		}
		return nil
	})
	notice := &events.Interruption{Kind: providers.EventSpotInterruption, Instance: in, Deadline: r.clk.Now().Add(2 * time.Minute)}
	if err := r.bus.Publish(r.ctx, events.InterruptionsSubject(in.Provider, in.Region), notice); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, rec.ID, job.Checkpointing)
	if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, 1), report); err != nil {
		t.Fatal(err)
	}
	rec = r.waitState(t, rec.ID, job.Migrating)
	if rec.Status.Progress != 0.4 || rec.Status.Checkpoint.Step != 40 {
		t.Fatalf("moving on from %.2f at step %d, want the reported checkpoint (0.4, step 40)", rec.Status.Progress, rec.Status.Checkpoint.Step)
	}
}

// Forged events of every kind change no job: each names the running job
// but not its current attempt's own instance, or puts a checkpoint outside
// the job's location. The real agent's reports still count afterwards.
func TestForgedEventsChangeNoJob(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	rec = r.advanceUntil(t, time.Minute, time.Hour, "progress", func(x *job.Record) bool { return x.Status.Progress >= 0.2 }, rec.ID)
	a := rec.Status.Current
	real := r.instancesFor(t, rec.ID)[0]
	fake := real
	fake.ID = "i-0forged0000000000"
	other := real
	other.IdempotencyKey = job.LaunchKey(rec.ID, 7)
	ck := job.CheckpointRef{Attempt: a.N, Step: 999999999, Progress: 0.99, SHA256: "x", Location: "s3://elsewhere/" + rec.ID + "/x"}
	good := ck
	good.Location = rec.Status.CheckpointRoot + "/" + rec.ID + "/forged"
	subj := events.InterruptionsSubject(real.Provider, real.Region)
	isubj := events.InstancesSubject(real.Provider, real.Region)
	asubj := events.AgentSubject(rec.ID, a.N)
	forged := []struct {
		subject string
		p       events.Payload
	}{
		{subj, &events.Interruption{Kind: providers.EventSpotInterruption, Instance: fake, Deadline: r.clk.Now().Add(2 * time.Minute)}},
		{subj, &events.Interruption{Kind: providers.EventSpotInterruption, Instance: other, Deadline: r.clk.Now().Add(2 * time.Minute)}},
		{isubj, &events.InstanceChanged{Kind: providers.EventInstanceTerminated, Instance: fake, Reason: "forged"}},
		{isubj, &events.InstanceChanged{Kind: providers.EventInstanceRunning, Instance: fake}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: fake.ID, Kind: events.AgentExited}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N + 3, InstanceID: real.ID, Kind: events.AgentExited}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: real.ID, Kind: events.AgentCheckpoint, Progress: 0.99, Checkpoint: &ck}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: fake.ID, Kind: events.AgentCheckpoint, Progress: 0.99, Checkpoint: &good}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: fake.ID, Kind: events.AgentStarted, Progress: 0.9}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: fake.ID, Kind: events.AgentProgress, Progress: 0.95}},
		{asubj, &events.AgentReport{JobID: rec.ID, Attempt: a.N, InstanceID: fake.ID, Kind: events.AgentCheckpointFailed, Message: "forged"}},
	}
	before := r.get(t, rec.ID)
	for _, f := range forged {
		if err := r.bus.Publish(r.ctx, f.subject, f.p); err != nil {
			t.Fatal(err)
		}
	}
	r.settle(t)
	after := r.get(t, rec.ID)
	if after.Status.State != before.Status.State || after.Status.Attempt != before.Status.Attempt || after.Status.Progress != before.Status.Progress ||
		!reflect.DeepEqual(after.Status.Checkpoint, before.Status.Checkpoint) || after.Status.Preemptions != 0 || after.Status.Previous != nil {
		t.Fatalf("forged events changed the job:\nbefore %+v\nafter  %+v", before.Status, after.Status)
	}
	if in := r.instancesFor(t, rec.ID)[0]; in.State.Ended() {
		t.Fatalf("a forged notice terminated the real instance %s", in.ID)
	}
	if n := r.s.Stats().Forged; n < 4 {
		t.Errorf("%d forged events counted", n)
	}
	// The real agent goes on: its next checkpoint is taken.
	r.advanceUntil(t, time.Minute, 2*time.Hour, "done", func(x *job.Record) bool { return x.Status.State == job.Succeeded }, rec.ID)
}
