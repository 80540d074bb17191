package sim

import (
	"cmp"
	"context"
	"testing"
	"time"
)

// The action queue holds, at every step, the action that asking every
// instance would give first (same time, kind and instance), through two
// days of interruptions, storms, maintenance, failures and ends.
func TestActionQueueAgreesWithAskingEveryInstance(t *testing.T) {
	m := Interruptions{RateScale: 2000, StormsPerDay: 2, RebalanceShare: 0.5, MaintenancePerHour: 0.02, FailuresPerHour: 0.01}
	e := newEnv(t, model(m))
	launchMix(e)
	compared := 0
	for step := range int(48 * time.Hour / (7 * time.Minute)) {
		e.clk.Advance(7 * time.Minute)
		if _, err := e.cloud.Offers(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := e.cloud
		c.mu.Lock()
		now := e.clk.Now()
		until := c.horizon(now)
		var best *instance
		var ba action
		live := 0
		for _, in := range c.insts {
			a, ok := c.planLocked(in, until)
			if !in.rec.Instance.State.Ended() {
				live++
			}
			if !ok || a.at.After(until) {
				continue
			}
			if best == nil || cmp.Or(a.at.Compare(ba.at), cmp.Compare(a.kind, ba.kind), compareInstances(in.rec.Instance, best.rec.Instance)) < 0 {
				best, ba = in, a
			}
		}
		c.planAllLocked(now, until)
		var top *instance
		var ta action
		if c.acts.Len() > 0 && !c.acts.items[0].at.After(until) { // it plans further ahead: compare within the horizon
			top, ta = c.acts.items[0].in, c.acts.items[0].a
		}
		if best != nil {
			compared++
		}
		c.mu.Unlock()
		if best != top || (best != nil && (!ba.at.Equal(ta.at) || ba.kind != ta.kind)) {
			t.Fatalf("step %d: the queue's next action is %v on %v, asking every instance gives %v on %v", step, ta, idOf(top), ba, idOf(best))
		}
		if live == 0 && step > 10 {
			break
		}
	}
	if compared < 20 {
		t.Fatalf("an action was due ahead at %d steps only: the test exercises too little", compared)
	}
	t.Logf("%d steps compared", compared)
}

func idOf(in *instance) string {
	if in == nil {
		return "nothing"
	}
	return in.rec.Instance.ID
}
