package scheduler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// An event about an instance the job's record does not hold yet (the
// event overtook the record of its launch) is checked against the
// provider's listing and taken: the operator hears of no refusal, and no
// refusal is counted. One about an instance the provider does not list
// under the attempt's launch is refused, logged and counted once.
func TestAnEventAheadOfItsLaunchRecordIsNoRefusal(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(zapcore.NewTee(core, eventstest.Logger(t).Core()))
	// No reconciliation round finds the instance first.
	r := newRig(t, rigOpt{log: log, reconcile: time.Hour})
	rec := r.runToRunning(t, spotT4+"checkpoint: {duration: 30s}\n")
	a := rec.Status.Current
	first := r.instancesFor(t, rec.ID)[0]
	// The provider has a second node under the attempt's launch key that
	// the record has not caught up with (a launch whose nodes were
	// persisted one by one, say); its agent reports before anything else.
	offer := providers.Offer{Provider: first.Provider, Region: first.Region, Zone: first.Zone, InstanceType: first.InstanceType, Purchase: first.Purchase}
	insts, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: a.LaunchKey, Offer: offer, Count: 2, JobID: rec.ID, Attempt: a.N})
	if err != nil || len(insts) != 2 {
		t.Fatalf("launching a second node under %s: %v (%d instances)", a.LaunchKey, err, len(insts))
	}
	second := insts[0]
	if second.ID == first.ID {
		second = insts[1]
	}
	report := func(instance string) {
		t.Helper()
		rep := &events.AgentReport{Kind: events.AgentStarted, JobID: rec.ID, Attempt: a.N, InstanceID: instance, Progress: rec.Status.Progress}
		if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, a.N), rep); err != nil {
			t.Fatal(err)
		}
	}
	report(second.ID)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if cur := r.get(t, rec.ID).Status.Current; cur == nil || !strings.Contains(strings.Join(cur.Instances, ","), second.ID) {
			return errors.New("the record does not hold the second node yet")
		}
		return nil
	})
	r.settle(t)
	for _, e := range logs.FilterMessage("event refused").All() {
		t.Errorf("logged %q for an instance its provider lists: %v", e.Message, e.ContextMap())
	}
	verdicts := r.s.Metrics().Verdicts()
	for k, n := range verdicts {
		if strings.HasSuffix(k, "/refused") {
			t.Errorf("counted %d %s", n, k)
		}
	}
	if f := r.s.Stats().Forged; f != 0 {
		t.Errorf("counted %d forged events", f)
	}

	// An instance nobody launched for the attempt: refused, once.
	report("i-0nobody000000000")
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if len(logs.FilterMessage("event refused").All()) == 0 {
			return errors.New("no refusal logged yet")
		}
		return nil
	})
	r.settle(t)
	refused := logs.FilterMessage("event refused").All()
	if len(refused) != 1 || !strings.Contains(refused[0].ContextMap()["why"].(string), "i-0nobody000000000") {
		t.Errorf("refusals logged: %v, want one naming the instance", refused)
	}
	if n := r.s.Metrics().Verdicts()["agent-started/refused"]; n != 1 {
		t.Errorf("counted %d agent-started/refused, want 1", n)
	}
	if f := r.s.Stats().Forged; f != 1 {
		t.Errorf("counted %d forged events, want 1", f)
	}
	if got := r.get(t, rec.ID); got.Status.State != job.Running || got.Status.Attempt != a.N {
		t.Errorf("the job is %s at attempt %d after the refused report, want running at %d", got.Status.State, got.Status.Attempt, a.N)
	}
}
