package sim

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
)

func TestManualControls(t *testing.T) {
	e := newEnv(t, quiet)
	rec, _, _ := watch(t, e.cloud)
	spotA := e.boot(awsBigSpot, "spot-a", 2) // us-east-1a
	odA := e.boot(awsBigOD, "od-a", 1)       // us-east-1a, on-demand
	spotB := e.boot(awsSmallSp, "spot-b", 1) // us-east-1b
	now := e.clk.Now()

	got, err := e.cloud.PreemptZone("us-east-1a")
	if err != nil || !slices.Equal(got, ids(spotA)) {
		t.Fatalf("PreemptZone = %v, %v; want the zone's spot instances %v", got, err, ids(spotA))
	}
	for _, in := range spotA {
		ev := rec.wait(t, "notice", instanceEvent(providers.EventSpotInterruption, in.ID))
		if ev.Reason != CauseManualStorm || !ev.Deadline.Equal(now.Add(2*time.Minute)) {
			t.Errorf("storm notice %+v", ev)
		}
	}
	for _, in := range append(odA, spotB...) {
		if e.record(in.ID).Interruption != nil {
			t.Errorf("%s (%s in %s) got a notice in the storm of us-east-1a", in.ID, in.Purchase, in.Zone)
		}
	}

	// A job's instances get notices whatever their purchase option.
	got, err = e.cloud.PreemptJob("job-od-a")
	if err != nil || !slices.Equal(got, ids(odA)) {
		t.Fatalf("PreemptJob = %v, %v; want %v", got, err, ids(odA))
	}
	rec.wait(t, "on-demand notice", instanceEvent(providers.EventSpotInterruption, odA[0].ID))

	if err := e.cloud.Rebalance(spotB[0].ID); err != nil {
		t.Fatal(err)
	}
	ev := rec.wait(t, "rebalance", instanceEvent(providers.EventRebalance, spotB[0].ID))
	if !ev.Time.Equal(now) || !ev.Deadline.IsZero() {
		t.Errorf("rebalance %+v", ev)
	}
	if err := e.cloud.Maintenance(spotB[0].ID, 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	ev = rec.wait(t, "maintenance", instanceEvent(providers.EventMaintenance, spotB[0].ID))
	if !ev.Deadline.Equal(now.Add(3 * time.Hour)) {
		t.Errorf("maintenance %+v", ev)
	}
	e.clk.Advance(3 * time.Hour)
	if got := e.instance(spotB[0].ID); got.State != providers.InstanceTerminated || got.Reason != ReasonMaintenance {
		t.Errorf("after maintenance: %s (%q)", got.State, got.Reason)
	}
	// A job whose instances have all ended has nothing left to preempt.
	if got, err := e.cloud.PreemptJob("job-spot-b"); err != nil || len(got) != 0 {
		t.Errorf("PreemptJob of an ended job = %v, %v", got, err)
	}

	for _, tt := range []struct {
		name string
		call func() error
		is   error
	}{
		{"preempt", func() error { return e.cloud.Preempt("i-nope") }, ErrUnknownInstance},
		{"preempt job", func() error { _, err := e.cloud.PreemptJob("job-nope"); return err }, ErrUnknownInstance},
		{"preempt zone", func() error { _, err := e.cloud.PreemptZone("mars-1a"); return err }, ErrUnknownZone},
		{"rebalance", func() error { return e.cloud.Rebalance("i-nope") }, ErrUnknownInstance},
		{"maintenance", func() error { return e.cloud.Maintenance("i-nope", time.Hour) }, ErrUnknownInstance},
		{"maintenance now", func() error { return e.cloud.Maintenance(odA[0].ID, 0) }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("error %v, want %v", err, tt.is)
			}
		})
	}
}

// A notice is sent once per instance, whatever asks for it, and never to
// an instance that has ended; one that would end it sooner still is.
func TestNoDuplicateNotice(t *testing.T) {
	e := newEnv(t, quiet)
	rec, _, _ := watch(t, e.cloud)
	in := e.boot(awsSmallSp, "k", 1)[0]
	if err := e.cloud.Preempt(in.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Second)
	if err := e.cloud.Preempt(in.ID); err != nil {
		t.Errorf("second Preempt: %v", err)
	}
	if got, err := e.cloud.PreemptZone(in.Zone); err != nil || !slices.Equal(got, []string{in.ID}) {
		t.Errorf("PreemptZone = %v, %v", got, err)
	}
	if got, err := e.cloud.PreemptJob(in.JobID); err != nil || !slices.Equal(got, []string{in.ID}) {
		t.Errorf("PreemptJob = %v, %v", got, err)
	}
	if err := e.cloud.Rebalance(in.ID); err != nil {
		t.Error(err)
	}
	if err := e.cloud.Maintenance(in.ID, time.Hour); err != nil { // ends sooner anyway
		t.Error(err)
	}
	e.clk.Advance(NoticeWindow("aws"))
	if err := e.cloud.Preempt(in.ID); err != nil {
		t.Errorf("Preempt of an ended instance: %v", err)
	}
	rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
	want := []providers.EventKind{providers.EventInstanceRunning, providers.EventSpotInterruption, providers.EventInstanceTerminated}
	if got := rec.kinds(in.ID); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}

	// Maintenance due before the spot deadline is news: it ends the
	// instance first.
	other := e.boot(awsSmallOD, "other", 1)[0]
	if err := e.cloud.Preempt(other.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.Maintenance(other.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "maintenance", instanceEvent(providers.EventMaintenance, other.ID))
	e.clk.Advance(10 * time.Second)
	if got := e.instance(other.ID); got.State != providers.InstanceTerminated || got.Reason != ReasonMaintenance {
		t.Errorf("%s (%q), want ended by the maintenance", got.State, got.Reason)
	}
}

// An instance under notice stays under notice across a restart and ends at
// the same deadline, whether the cloud is back before it or after.
func TestRestartKeepsNotice(t *testing.T) {
	for _, tt := range []struct {
		name string
		down time.Duration
	}{{"back before the deadline", 30 * time.Second}, {"back after the deadline", 10 * time.Minute}} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, quiet)
			e.setAvailable(awsSmallSp, 2)
			in := e.boot(awsSmallSp, "k", 1)[0]
			deadline := e.clk.Now().Add(NoticeWindow("aws"))
			if err := e.cloud.Preempt(in.ID); err != nil {
				t.Fatal(err)
			}
			e.cloud.Close()
			e.runner.wait(t, in.ID, 1, 1)
			e.clk.Advance(tt.down)
			e.cloud = e.start()
			rec, _, _ := watch(t, e.cloud)
			if tt.down < NoticeWindow("aws") {
				e.runner.wait(t, in.ID, 2, 1) // running again, until the deadline
				if err := e.cloud.Preempt(in.ID); err != nil {
					t.Fatal(err)
				}
				e.clk.Set(deadline.Add(-time.Second))
				if s := e.instance(in.ID).State; s != providers.InstanceRunning {
					t.Fatalf("%s before the deadline", s)
				}
				e.clk.Set(deadline)
				e.runner.wait(t, in.ID, 2, 2)
				rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
				if got := rec.kinds(in.ID); !slices.Equal(got, []providers.EventKind{providers.EventInstanceTerminated}) {
					t.Errorf("events after the restart %v, want only the termination", got)
				}
			}
			got := e.instance(in.ID)
			if got.State != providers.InstanceTerminated || got.Reason != ReasonReclaimed || !got.EndedAt.Equal(deadline) {
				t.Errorf("%s (%q) at %s, want reclaimed at %s", got.State, got.Reason, got.EndedAt, deadline)
			}
			if live, held := e.capacity(awsSmallSp); live != 0 || held != 1 {
				t.Errorf("after the deadline %d live and %d held, want the capacity held", live, held)
			}
		})
	}
}

// capacity is how many instances of an offer are live and how many are
// held back after interruptions.
func (e *env) capacity(offerID string) (live, held int) {
	e.t.Helper()
	mustOffers(e.t, e.cloud)
	e.cloud.mu.Lock()
	defer e.cloud.mu.Unlock()
	o := e.cloud.offers[offerID]
	return o.live, o.reclaimed
}
