package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// launchMix launches spot and on-demand instances over several zones.
func launchMix(e *env) {
	e.t.Helper()
	for _, l := range []struct {
		offer string
		n     int
	}{{awsBigSpot, 2}, {awsSmallSp, 3}, {euBigSpot, 1}, {gcpSpotA, 2}, {gcpSpotC, 1}, {awsSmallOD, 2}, {gcpOD, 2}, {awsBigODEU, 1}} {
		e.setAvailable(l.offer, l.n+2)
		for n := range l.n {
			e.launch(l.offer, fmt.Sprintf("%s-%d", l.offer, n), 1)
		}
	}
}

// interruptionSummary describes every instance's fate, one line each.
func interruptionSummary(e *env) []string {
	e.t.Helper()
	insts, err := e.cloud.Instances(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, in := range insts {
		r := e.record(in.ID)
		rebalance := "-"
		if !r.RebalanceAt.IsZero() {
			rebalance = r.RebalanceAt.Format(time.DateTime)
		}
		line := fmt.Sprintf("%s %s %q ended=%s rebalance=%s", in.ID, in.State, in.Reason, in.EndedAt.Format(time.DateTime), rebalance)
		for _, n := range []*notice{r.Interruption, r.Maintenance} {
			if n != nil {
				line += fmt.Sprintf(" %s..%s(%s)", n.SentAt.Format(time.DateTime), n.Deadline.Format(time.TimeOnly), n.Cause)
			}
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

// The seeded model is a function of the seed and the launches: not of how
// the clock got there, nor of a restart on the way.
func TestInterruptionsDeterministic(t *testing.T) {
	m := Interruptions{RateScale: 2000, StormsPerDay: 2, RebalanceShare: 0.5, MaintenancePerHour: 0.02, FailuresPerHour: 0.01}
	const span = 48 * time.Hour
	run := func(t *testing.T, seed int64, how string) []string {
		e := newEnv(t, model(m), func(o *Options) { o.Seed = seed })
		launchMix(e)
		switch how {
		case "jump":
			e.clk.Advance(span)
		case "steps":
			for range int(span / (7 * time.Minute)) {
				e.clk.Advance(7 * time.Minute)
				e.cloud.Offers(context.Background())
			}
			e.clk.Set(t0.Add(span))
		case "restart":
			e.clk.Advance(17*time.Hour + 3*time.Minute)
			e.cloud.Offers(context.Background())
			e.cloud.Close()
			e.clk.Advance(40 * time.Minute) // down while notices and ends fall due
			e.cloud = e.start()
			e.clk.Set(t0.Add(span))
		}
		return interruptionSummary(e)
	}
	want := run(t, 1, "jump")
	all := strings.Join(want, "\n")
	for _, s := range []string{"(" + CauseInterruption + ")", "(" + CauseStorm + ")", "(" + CauseMaintenance + ")", ReasonFailed} {
		if !strings.Contains(all, s) {
			t.Errorf("no %q in 48 h: the test exercises too little\n%s", s, all)
		}
	}
	if !slices.ContainsFunc(want, func(l string) bool { return !strings.Contains(l, "rebalance=-") }) {
		t.Errorf("no rebalance recommendation in 48 h\n%s", all)
	}
	for _, how := range []string{"steps", "restart"} {
		if got := run(t, 1, how); !slices.Equal(got, want) {
			t.Errorf("same seed, clock moved by %s: different interruptions\n got %s\nwant %s", how, strings.Join(got, "\n    "), strings.Join(want, "\n    "))
		}
	}
	if got := run(t, 2, "jump"); slices.Equal(got, want) {
		t.Error("seeds 1 and 2 give the same interruptions")
	}
}

// With every rate at zero nothing happens to anybody, however long.
func TestNoSeededInterruptions(t *testing.T) {
	e := newEnv(t, model(Interruptions{RebalanceShare: 1}))
	rec, _, _ := watch(t, e.cloud)
	launchMix(e)
	e.clk.Advance(time.Hour)
	for range 30 {
		e.clk.Advance(24 * time.Hour)
		e.cloud.Offers(context.Background())
	}
	insts, _ := e.cloud.Instances(context.Background())
	for _, in := range insts {
		if in.State != providers.InstanceRunning {
			t.Errorf("%s %s (%q) after 30 days", in.ID, in.State, in.Reason)
		}
	}
	// A last event, awaited, so that everything before it was delivered.
	if err := e.cloud.Terminate(context.Background(), insts[0].ID); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, insts[0].ID))
	for _, ev := range rec.all() {
		switch ev.Kind {
		case providers.EventSpotInterruption, providers.EventRebalance, providers.EventMaintenance:
			t.Errorf("%s event for %s", ev.Kind, ev.Instance.ID)
		}
	}
}

// A storm sends a notice to every spot instance of one zone at once, and
// to none elsewhere nor to on-demand instances.
func TestStormHitsOneZone(t *testing.T) {
	e := newEnv(t, model(Interruptions{StormsPerDay: 4}))
	for _, l := range []struct {
		offer string
		n     int
	}{{awsBigSpot, 2}, {awsBigOD, 1}, {awsSmallSp, 3}, {awsSmallOD, 1}, {euBigSpot, 1}} {
		e.setAvailable(l.offer, l.n)
		e.launch(l.offer, l.offer, l.n)
	}
	noticed := func() []record {
		var out []record
		insts, _ := e.cloud.Instances(context.Background())
		for _, in := range insts {
			if r := e.record(in.ID); r.Interruption != nil {
				out = append(out, r)
			}
		}
		return out
	}
	e.advanceUntil(10*time.Minute, 10*24*time.Hour, "storm", func() bool { return len(noticed()) > 0 })
	first := noticed()[0].Interruption.SentAt
	var zone string
	for _, r := range noticed() {
		if r.Interruption.SentAt.Equal(first) {
			zone = r.Instance.Zone
		}
	}
	insts, _ := e.cloud.Instances(context.Background())
	hit := 0
	for _, in := range insts {
		r := e.record(in.ID)
		inStorm := r.Interruption != nil && r.Interruption.SentAt.Equal(first)
		want := in.Zone == zone && in.Purchase == providers.Spot
		if inStorm != want {
			t.Errorf("%s (%s, %s): in the storm %v, want %v", in.ID, in.Zone, in.Purchase, inStorm, want)
		}
		if inStorm {
			hit++
			if r.Interruption.Cause != CauseStorm {
				t.Errorf("%s: cause %q", in.ID, r.Interruption.Cause)
			}
		}
	}
	if hit < 2 {
		t.Fatalf("the storm hit %d instances, want a zone with several", hit)
	}
	t.Logf("storm in %s at %s hit %d instances", zone, first.Sub(t0), hit)
}

// With RebalanceShare 1 every seeded interruption of a running instance is
// preceded, 2 to 20 minutes ahead, by a rebalance recommendation; with 0,
// none is.
func TestRebalancePrecedesInterruption(t *testing.T) {
	for _, share := range []float64{1, 0} {
		t.Run(fmt.Sprint(share), func(t *testing.T) {
			e := newEnv(t, model(Interruptions{RateScale: 3000, RebalanceShare: share}))
			rec, _, _ := watch(t, e.cloud)
			var ins []providers.Instance
			for _, id := range []string{awsBigSpot, awsSmallSp, gcpSpotA, euBigSpot} {
				ins = append(ins, e.boot(id, id, 1)...)
			}
			e.clk.Advance(5 * 24 * time.Hour)
			rebalanced := 0
			for _, in := range ins {
				r := e.record(in.ID)
				if r.Interruption == nil || r.Interruption.Cause != CauseInterruption {
					t.Fatalf("%s: not interrupted by the seeded model in 5 days: %+v", in.ID, r.Interruption)
				}
				lead := r.Interruption.SentAt.Sub(r.RebalanceAt)
				switch {
				case share == 0 && !r.RebalanceAt.IsZero():
					t.Errorf("%s: rebalance with share 0", in.ID)
				case share == 0:
				case r.RebalanceAt.IsZero() && r.Interruption.SentAt.Sub(r.Instance.RunningAt) >= rebalanceLeadMax:
					t.Errorf("%s: no rebalance before its interruption", in.ID)
				case r.RebalanceAt.IsZero():
				case lead < rebalanceLeadMin || lead > rebalanceLeadMax:
					t.Errorf("%s: rebalance %s ahead", in.ID, lead)
				default:
					rebalanced++
					ev := rec.wait(t, "rebalance", instanceEvent(providers.EventRebalance, in.ID))
					if !ev.Deadline.IsZero() || !ev.Time.Equal(r.RebalanceAt) {
						t.Errorf("rebalance event %+v", ev)
					}
					rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
					want := []providers.EventKind{providers.EventInstanceRunning, providers.EventRebalance,
						providers.EventSpotInterruption, providers.EventInstanceTerminated}
					if got := rec.kinds(in.ID); !slices.Equal(got, want) {
						t.Errorf("%s: events %v, want %v", in.ID, got, want)
					}
				}
			}
			if share == 1 && rebalanced == 0 {
				t.Error("no rebalance recommendation at all")
			}
		})
	}
}

// Scheduled maintenance comes to on-demand instances too, hours ahead, and
// ends them at its deadline with their capacity returned.
func TestMaintenanceHitsOnDemand(t *testing.T) {
	e := newEnv(t, model(Interruptions{MaintenancePerHour: 0.2}))
	rec, _, _ := watch(t, e.cloud)
	e.setAvailable(awsSmallOD, 3)
	in := e.boot(awsSmallOD, "k", 1)[0]
	e.advanceUntil(10*time.Minute, 7*24*time.Hour, "maintenance", func() bool { return e.record(in.ID).Maintenance != nil })
	m := e.record(in.ID).Maintenance
	if lead := m.Deadline.Sub(m.SentAt); lead < maintenanceMin || lead > maintenanceMax {
		t.Errorf("maintenance announced %s ahead", lead)
	}
	ev := rec.wait(t, "maintenance", instanceEvent(providers.EventMaintenance, in.ID))
	if !ev.Time.Equal(m.SentAt) || !ev.Deadline.Equal(m.Deadline) || ev.Reason != CauseMaintenance {
		t.Errorf("maintenance event %+v, want at %s for %s", ev, m.SentAt, m.Deadline)
	}
	e.clk.Set(m.Deadline)
	got := e.instance(in.ID)
	if got.State != providers.InstanceTerminated || got.Reason != ReasonMaintenance || !got.EndedAt.Equal(m.Deadline) {
		t.Errorf("after the maintenance: %+v", got)
	}
	e.runner.wait(t, in.ID, 1, 1)
	if got := e.offer(awsSmallOD).Available; got != 3 {
		t.Errorf("available %d, want the capacity back", got)
	}
}

// A hardware failure ends an instance of any purchase option without
// notice.
func TestHardwareFailure(t *testing.T) {
	e := newEnv(t, model(Interruptions{FailuresPerHour: 0.2}))
	rec, _, _ := watch(t, e.cloud)
	in := e.boot(gcpOD, "k", 1)[0]
	e.advanceUntil(10*time.Minute, 7*24*time.Hour, "failure", func() bool { return e.instance(in.ID).State.Ended() })
	got := e.instance(in.ID)
	if got.State != providers.InstanceFailed || got.Reason != ReasonFailed {
		t.Errorf("failed instance %+v", got)
	}
	ev := rec.wait(t, "terminated", instanceEvent(providers.EventInstanceTerminated, in.ID))
	if ev.Reason != ReasonFailed || !ev.Time.Equal(got.EndedAt) {
		t.Errorf("event %+v", ev)
	}
	want := []providers.EventKind{providers.EventInstanceRunning, providers.EventInstanceTerminated}
	if got := rec.kinds(in.ID); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v: a failure comes without notice", got, want)
	}
	e.runner.wait(t, in.ID, 1, 1)
}
