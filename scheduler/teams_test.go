package scheduler_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

// waitPending waits until the scheduler says why a queued job waits with
// a reason of code, and returns that reason's message.
func (r *rig) waitPending(t *testing.T, id, code string) string {
	t.Helper()
	var msg string
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		reasons, _ := r.s.PendingReasons(id)
		i := slices.IndexFunc(reasons, func(p job.PendingReason) bool { return p.Code == code })
		if i < 0 {
			return fmt.Errorf("pending reasons %+v, want %s", reasons, code)
		}
		msg = reasons[i].Message
		return nil
	})
	return msg
}

// reconciled waits for n more reconciliations: whatever they look at
// has been looked at again.
func (r *rig) reconciled(t *testing.T, n int64) {
	t.Helper()
	from := r.s.Stats().Reconciles
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := r.s.Stats().Reconciles; got < from+n {
			return fmt.Errorf("%d reconciliations", got-from)
		}
		return nil
	})
}

// A team at its GPU quota waits with reason quota while another team's
// job is placed; once its running job lets its capacity go, the waiting
// job is placed.
func TestTeamQuota(t *testing.T) {
	r := newRig(t, rigOpt{teams: map[string]scheduler.TeamLimits{"nlp": {Quota: scheduler.Quota{GPUs: 1}}}})
	first := r.submit(t, oneGPU+"team: nlp\n")
	r.waitState(t, first.ID, job.Placing)
	second := r.submit(t, oneGPU+"team: nlp\n")
	other := r.submit(t, oneGPU+"team: cv\n")
	r.waitState(t, other.ID, job.Placing)
	if msg := r.waitPending(t, second.ID, "quota"); !strings.HasSuffix(msg, "offers would take team nlp past its GPU quota: team nlp holds 1 of its 1 GPU (quota.gpus); the job asks 1 GPU") {
		t.Errorf("quota reason %q", msg)
	}
	if got := r.get(t, second.ID); got.Status.State != job.Queued {
		t.Fatalf("the job over its team's quota is %s", got.Status.State)
	}
	h := r.history(t, second.ID)
	if !slices.Contains(h, job.KindPending) {
		t.Errorf("history %v lacks the pending entry", h)
	}
	r.lifecycle(t, first.ID, job.Cancel{})
	r.waitState(t, second.ID, job.Placing)
}

// A team over its hard budget gets no new placement: its job waits with
// reason budget, saying the budget, what was spent and committed and what
// the job would cost, and one alert says so; another team's job is placed.
// The soft alerts its spend reached come with it.
func TestTeamHardBudget(t *testing.T) {
	var spent atomic.Int64
	spent.Store(int64(money.MustParse("0.95")))
	r := newRig(t, rigOpt{
		teams: map[string]scheduler.TeamLimits{"nlp": {Budget: scheduler.Budget{Monthly: money.MustParse("1"), Hard: true}}},
		spend: func(team string, since time.Time) money.Micros {
			if team != "nlp" || !since.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) {
				return 0
			}
			return money.Micros(spent.Load())
		},
	})
	alerts := watchAlerts(t, r)
	held := r.submit(t, oneGPU+"team: nlp\n")
	other := r.submit(t, oneGPU+"team: cv\n")
	r.waitState(t, other.ID, job.Placing)
	msg := r.waitPending(t, held.ID, "budget")
	for _, want := range []string{"team nlp's budget of $1.00 for November 2026 has $0.05 left", "$0.95 spent so far and $0.00 committed", "this job is expected to cost $0."} {
		if !strings.Contains(msg, want) {
			t.Errorf("budget reason %q does not say %q", msg, want)
		}
	}
	a := alerts.wait(t, "budget-exceeded", held.ID)
	if a.Severity != events.SeverityCritical || a.Details["team"] != "nlp" || !strings.Contains(a.Summary, msg) {
		t.Errorf("budget alert %+v", a)
	}
	soft := alerts.waitFor(t, "", func(a events.Alert) bool { return a.Kind == "budget" })
	if soft.Details["threshold_percent"] != "80" || soft.Details["spent_usd"] != "0.950000" {
		t.Errorf("soft alert %+v", soft)
	}
	r.reconciled(t, 3)
	r.advance(t, 10*time.Minute) // policy looks, more cycles
	if got := r.get(t, held.ID); got.Status.State != job.Queued {
		t.Fatalf("the job over its team's hard budget is %s", got.Status.State)
	}
	if n := alerts.count(held.ID, func(a events.Alert) bool { return a.Kind == "budget-exceeded" }); n != 1 {
		t.Errorf("%d budget-exceeded alerts, want 1", n)
	}
	if n := alerts.count("", func(a events.Alert) bool { return a.Kind == "budget" && a.Details["threshold_percent"] == "100" }); n != 0 {
		t.Errorf("a 100%% alert at 95%% of the budget")
	}
}

// Soft budget alerts come at 80% and at 100% of the month's budget, once
// each per team and month however often the spend is looked at, by this
// scheduler or the next; a new month starts over.
func TestTeamSoftBudgetAlerts(t *testing.T) {
	var spent atomic.Int64
	spent.Store(int64(money.MustParse("7")))
	r := newRig(t, rigOpt{
		teams: map[string]scheduler.TeamLimits{"nlp": {Budget: scheduler.Budget{Monthly: money.MustParse("10")}}},
		spend: func(team string, since time.Time) money.Micros { return money.Micros(spent.Load()) },
	})
	alerts := watchAlerts(t, r)
	of := func(month, pct string) func(events.Alert) bool {
		return func(a events.Alert) bool {
			return a.Kind == "budget" && a.Details["month"] == month && a.Details["threshold_percent"] == pct
		}
	}
	r.reconciled(t, 2)
	if n := alerts.count("", func(a events.Alert) bool { return a.Kind == "budget" }); n != 0 {
		t.Fatalf("%d budget alerts at 70%%", n)
	}
	steps := []struct {
		spent     string
		month, at string // the alert that must come
		severity  string
	}{
		{"8.50", "2026-11", "80", events.SeverityWarning},
		{"10", "2026-11", "100", events.SeverityCritical},
	}
	for _, st := range steps {
		spent.Store(int64(money.MustParse(st.spent)))
		a := alerts.waitFor(t, "", of(st.month, st.at))
		if a.Severity != st.severity || a.Details["team"] != "nlp" || !strings.Contains(a.Summary, "team nlp has used "+st.at+"% of its $10.00 budget for November 2026") {
			t.Errorf("alert %+v", a)
		}
	}
	r.reconciled(t, 3)
	// Another scheduler on the same bus (a new term, a restart) finds
	// them raised already.
	r.start(t)
	r.reconciled(t, 3)
	// December: the spend counted from its start is $9 (the function is
	// asked from the month's start), so 80% again, for December.
	spent.Store(int64(money.MustParse("9")))
	r.clk.Set(time.Date(2026, 12, 1, 0, 1, 0, 0, time.UTC))
	r.settle(t)
	alerts.waitFor(t, "", of("2026-12", "80"))
	r.reconciled(t, 3)
	for _, c := range []struct{ month, pct string }{{"2026-11", "80"}, {"2026-11", "100"}, {"2026-12", "80"}} {
		if n := alerts.count("", of(c.month, c.pct)); n != 1 {
			t.Errorf("%d alerts at %s%% for %s, want 1", n, c.pct, c.month)
		}
	}
	if n := alerts.count("", of("2026-12", "100")); n != 0 {
		t.Errorf("a 100%% alert in December at 90%%")
	}
}

// slowT4 runs T4s at half the speed the scheduler's table says: the
// estimate a job sized on a V100 was placed with is too low.
type slowT4 struct{ *catalog.Catalog }

func (s slowT4) RelativeThroughput(gpu, class string) (float64, bool) {
	v, ok := s.Catalog.RelativeThroughput(gpu, class)
	if gpu == "T4" {
		v /= 2
	}
	return v, ok
}

// A running job whose cost reaches its max_cost_usd checkpoints and ends
// as failed, near its cap, with an alert.
func TestMaxCostStopsAfterACheckpoint(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	cat := catalog.Default()
	r.work.Throughput = slowT4{cat}
	alerts := watchAlerts(t, r)
	price := cheapestT4(t, r.cloud).Price
	// Work for about an hour on a T4 by the table; it takes twice that,
	// and its cap is 1.5 hours' worth.
	rel, _ := cat.RelativeThroughput("T4", "train-mixed")
	work := time.Duration(rel * float64(time.Hour)).Round(time.Second)
	limit := price.Scale(3, 2)
	rec := r.runToRunning(t, fmt.Sprintf("name: capped\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: %s on V100\npurchase: on-demand\n"+
		"checkpoint: {duration: 30s}\nmax_cost_usd: \"%s\"\n", work, limit.Decimal()))
	if est := rec.Status.Current.EstimatedCost; est <= 0 || est >= limit {
		t.Fatalf("estimated %s, cap %s: the test needs a job expected to fit its cap", est, limit)
	}
	got := r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "failed", func(x *job.Record) bool { return x.Status.State == job.Failed }, rec.ID)
	want := "cost limit " + limit.Human() + " reached: stopped after a checkpoint at "
	if !strings.HasPrefix(got.Status.Message, want) || got.Status.Checkpoint == nil || got.Status.Progress <= 0 {
		t.Fatalf("stopped: %q, checkpoint %+v, progress %v; want %q", got.Status.Message, got.Status.Checkpoint, got.Status.Progress, want)
	}
	a := alerts.wait(t, "cost-limit", rec.ID)
	if a.Details["max_cost_usd"] != limit.Decimal() || a.Details["team"] != "default" {
		t.Errorf("alert %+v", a)
	}
	var done *job.Record
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if done = r.get(t, rec.ID); done.Status.Current != nil {
			return fmt.Errorf("the attempt is still being released")
		}
		return nil
	})
	if out := done.Status.Attempts[0].Outcome; out != job.OutcomeCostLimit {
		t.Errorf("attempt outcome %s", out)
	}
	// Stopped at its cap, give or take the checkpoint and the teardown.
	slack := price.ForDuration(3 * time.Minute)
	if c := done.Status.EndedCost; c < limit-slack || c > limit+slack {
		t.Errorf("the job cost %s with a cap of %s", c, limit)
	}
	for _, in := range r.instancesFor(t, rec.ID) {
		if !in.State.Ended() {
			t.Errorf("instance %s still %s", in.ID, in.State)
		}
	}
}
