package api

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

func placement(provider, purchase string, price money.Micros, nodes int) job.Placement {
	return job.Placement{Provider: provider, Region: "us-east-1", Zone: "us-east-1a", GPU: "A100", Purchase: purchase, PricePerHour: price, Nodes: nodes}
}

// costRecords are three jobs: one preempted after 90 minutes of two spot
// instances (one ended by its provider later than the attempt) and moved
// to on-demand, where it still runs; one finished on spot; one of another
// team that never launched.
func costRecords(now time.Time) []*job.Record {
	t0 := now.Add(-5 * time.Hour)
	a := rec(job.NewID(t0), t0, job.Running)
	a.Spec.Team = "vision"
	spot := job.Attempt{N: 1, Placement: placement("aws", "spot", 3_123_457, 2), LaunchedAt: t0.Add(10 * time.Minute),
		Spans: []job.Span{
			{Instance: "i-1", From: t0.Add(10 * time.Minute), To: t0.Add(100 * time.Minute)},
			{Instance: "i-2", From: t0.Add(11 * time.Minute), To: t0.Add(103*time.Minute + 7*time.Second), Price: 2_999_999},
		},
		EndedAt: t0.Add(100 * time.Minute), Outcome: job.OutcomePreempted}
	// What the lifecycle bills the ended attempt.
	spot.Cost = money.Micros(3_123_457).ForDuration(90*time.Minute) + money.Micros(2_999_999).ForDuration(92*time.Minute+7*time.Second)
	a.Status.Attempts = []job.Attempt{spot}
	a.Status.EndedCost = spot.Cost
	a.Status.Current = &job.Attempt{N: 2, Placement: placement("azure", "on-demand", 9_870_001, 1), LaunchedAt: t0.Add(110 * time.Minute)}

	t1 := now.Add(-3 * time.Hour)
	b := rec(job.NewID(t1), t1, job.Succeeded)
	b.Spec.Team = "nlp"
	done := job.Attempt{N: 1, Placement: placement("aws", "spot", 1_000_003, 1), LaunchedAt: t1.Add(time.Minute), EndedAt: t1.Add(61*time.Minute + 13*time.Second), Outcome: job.OutcomeSucceeded}
	done.Cost = money.Micros(1_000_003).ForDuration(60*time.Minute + 13*time.Second)
	b.Status.Attempts = []job.Attempt{done}
	b.Status.EndedCost = done.Cost
	b.Status.Progress, b.Status.FinishedAt, b.Status.BaselineCost = 1, done.EndedAt, 5_000_000

	c := rec(job.NewID(t1), t1.Add(time.Second), job.Queued)
	c.Spec.Team = "nlp"
	return []*job.Record{a, b, c}
}

// costExtras are charges the ledger holds beside the records' usage: a
// checkpoint of the finished job carried between regions, and an orphan
// instance that belongs to no job.
func costExtras(now time.Time, recs []*job.Record) []ledger.Entry {
	t1 := now.Add(-3 * time.Hour)
	return []ledger.Entry{
		{ID: recs[1].ID + "/transfer/1", Kind: ledger.Transfer, Category: "checkpoint", Start: t1.Add(time.Minute), End: t1.Add(time.Minute),
			Cost: 777_777, Provider: "aws", Region: "us-east-1", JobID: recs[1].ID, Team: "nlp", Attempt: 1},
		{ID: "overhead/i-orphan", Kind: ledger.Overhead, Category: ledger.OverheadOrphan, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour),
			PricePerHour: 1_234_567, Cost: 1_234_567, Provider: "aws", Region: "us-east-1", Purchase: "spot", Instance: "i-orphan"},
	}
}

// costService is a service whose index holds costRecords and whose ledger
// holds their closed charges, as the writer appends them, and costExtras.
func costService(t *testing.T, now time.Time) *Service {
	t.Helper()
	s := &Service{ix: newIndex(), clock: clock.NewFake(now)}
	v := ledger.NewView(zaptest.NewLogger(t))
	recs := costRecords(now)
	for i, r := range recs {
		s.ix.apply(events.JobChange{ID: r.ID, Revision: uint64(i + 1), Record: r})
		closed, _ := ledger.Charges(r, now)
		for _, e := range closed {
			v.Add(e)
		}
	}
	for _, e := range costExtras(now, recs) {
		v.Add(e)
	}
	return s.WithLedger(v)
}

// However the period is cut and grouped, the spend adds up to exactly
// what the jobs are billed (their cost_usd), to the micro-dollar, and
// each bucket holds what was billed within it.
func TestCostsAddUpToWhatJobsAreBilled(t *testing.T) {
	now := time.Date(2031, 3, 14, 18, 0, 0, 0, time.UTC)
	s := costService(t, now)
	var billed, overhead money.Micros
	for _, r := range costRecords(now) {
		billed += r.CostAt(now)
	}
	for _, e := range costExtras(now, costRecords(now)) {
		billed += e.Cost
		if e.Kind == ledger.Overhead {
			overhead += e.Cost
		}
	}
	op := auth.WithPrincipal(context.Background(), auth.System("test"))
	for _, group := range CostGroups {
		for _, bucket := range []time.Duration{time.Minute, 7 * time.Minute, time.Hour, 24 * time.Hour} {
			c, err := s.Costs(op, CostQuery{GroupBy: group, From: now.Add(-6 * time.Hour), To: now, Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			var sum money.Micros
			for _, g := range c.Groups {
				var gs money.Micros
				for _, v := range g.Series {
					if v < 0 {
						t.Errorf("%s by %s: a negative bucket %s", group, bucket, v)
					}
					gs += v
				}
				if gs != g.Total {
					t.Errorf("%s by %s: group %s series add to %s, total says %s", group, bucket, g.Key, gs, g.Total)
				}
				sum += gs
			}
			if sum != billed || c.Total != billed {
				t.Errorf("%s by %s: spend %s (total %s), the jobs and overhead are billed %s", group, bucket, sum, c.Total, billed)
			}
			if c.Overhead != overhead {
				t.Errorf("%s by %s: overhead %s, want %s", group, bucket, c.Overhead, overhead)
			}
			if c.Jobs != 2 {
				t.Errorf("%s by %s: %d jobs billed, want 2", group, bucket, c.Jobs)
			}
		}
	}
	byPurchase, _ := s.Costs(op, CostQuery{GroupBy: "purchase", From: now.Add(-6 * time.Hour), To: now, Bucket: time.Hour})
	want := map[string]bool{"spot": true, "on-demand": true, "(none)": true}
	if byPurchase.Groups[len(byPurchase.Groups)-1].Key != "(none)" {
		t.Errorf("the transfer, which has no purchase option, is not the smallest group: %+v", byPurchase.Groups)
	}
	for _, g := range byPurchase.Groups {
		if !want[g.Key] {
			t.Errorf("unexpected purchase group %q", g.Key)
		}
	}
	// The on-demand attempt runs from 3h10m ago at $9.870001/h: the
	// last whole hour holds exactly an hour of it.
	for _, g := range byPurchase.Groups {
		if g.Key == "on-demand" && g.Series[5] != money.Micros(9_870_001) {
			t.Errorf("the last hour holds %s of on-demand, want $9.870001", g.Series[5])
		}
	}

	// A period that cuts the jobs holds only what fell inside it.
	from, to := now.Add(-4*time.Hour), now.Add(-2*time.Hour)
	part, err := s.Costs(op, CostQuery{GroupBy: "team", From: from, To: to, Bucket: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// 14:00-16:00: the spot instances from 14:00 to their ends (i-1 ran
	// 50 minutes before, i-2 49), on-demand from 14:50, the finished job
	// from 15:01 and the transfer of its checkpoint then, the orphan from
	// 16:00 (nothing).
	m := func(p money.Micros, d time.Duration) money.Micros { return p.ForDuration(d) }
	inside := m(3_123_457, 90*time.Minute) - m(3_123_457, 50*time.Minute) +
		m(2_999_999, 92*time.Minute+7*time.Second) - m(2_999_999, 49*time.Minute) +
		m(9_870_001, 70*time.Minute) + m(1_000_003, 59*time.Minute) + 777_777
	if part.Total != inside {
		t.Errorf("spend from %s to %s is %s, want %s", from, to, part.Total, inside)
	}
}

// A job that finished in the period counts its savings: its on-demand
// baseline for the work it did less what it cost; a running one does not
// yet, and its view shows what it saved so far.
func TestCostsCountSavingsOfFinishedJobs(t *testing.T) {
	now := time.Date(2031, 3, 14, 18, 0, 0, 0, time.UTC)
	s := costService(t, now)
	op := auth.WithPrincipal(context.Background(), auth.System("test"))
	recs := costRecords(now)
	finished := recs[1]
	want := money.Micros(5_000_000) - finished.CostAt(now)
	c, err := s.Costs(op, CostQuery{GroupBy: "team", From: now.Add(-6 * time.Hour), To: now, Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range c.Groups {
		switch g.Key {
		case "nlp":
			if g.Finished != 1 || g.Savings != want || g.Baseline != 5_000_000 {
				t.Errorf("nlp: %d finished, baseline %s, savings %s; want 1, $5, %s", g.Finished, g.Baseline, g.Savings, want)
			}
		default:
			if g.Finished != 0 || g.Savings != 0 {
				t.Errorf("%s: %d finished, savings %s; want none", g.Key, g.Finished, g.Savings)
			}
		}
	}
	if c.Savings != want {
		t.Errorf("savings %s, want %s", c.Savings, want)
	}
	// Finished before the period: not counted.
	if c, _ := s.Costs(op, CostQuery{From: now.Add(-time.Hour), To: now, Bucket: time.Hour}); c.Savings != 0 {
		t.Errorf("savings of jobs finished before the period: %s", c.Savings)
	}
	// A running job at 40% with a $10 baseline has
	// saved $4 less that.
	r := recs[0]
	r.Status.Progress, r.Status.BaselineCost = 0.4, 10_000_000
	v := viewOf(r, now, nil, nil)
	if v.BaselineUSD != 10_000_000 || v.SavingsUSD == nil || *v.SavingsUSD != 4_000_000-v.CostUSD {
		t.Errorf("view: baseline %s, savings %v (cost %s)", v.BaselineUSD, v.SavingsUSD, v.CostUSD)
	}
	if v := viewOf(recs[2], now, nil, nil); v.SavingsUSD != nil {
		t.Errorf("a job never placed shows savings %s", *v.SavingsUSD)
	}
}

// A team's member sees its team's spend only; another team's is refused;
// bad queries say what is wrong.
func TestCostsKeepToTheCallersTeams(t *testing.T) {
	now := time.Date(2031, 3, 14, 18, 0, 0, 0, time.UTC)
	s := costService(t, now)
	nlp := auth.WithPrincipal(context.Background(), auth.Principal{Subject: "u", Team: "nlp", Role: auth.Viewer})
	c, err := s.Costs(nlp, CostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Groups) != 1 || c.Groups[0].Key != "nlp" || c.Overhead != 0 {
		t.Errorf("nlp's viewer sees %+v, overhead %s", c.Groups, c.Overhead)
	}
	if _, err := s.Costs(nlp, CostQuery{Team: "vision"}); err == nil {
		t.Error("nlp's viewer read vision's costs")
	}
	op := auth.WithPrincipal(context.Background(), auth.System("test"))
	for name, q := range map[string]CostQuery{
		"unknown group":   {GroupBy: "colour"},
		"unknown second":  {GroupBy: "team,colour"},
		"backwards":       {From: now, To: now.Add(-time.Hour)},
		"too many points": {From: now.Add(-2000 * time.Hour), To: now, Bucket: time.Minute},
	} {
		if _, err := s.Costs(op, q); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A team's spend for its budget is the month's ledger charges and what its
// running jobs have run up since, the month cut exactly at its start.
func TestTeamSpendIsTheMonthsLedgerAndWhatRunsSince(t *testing.T) {
	now := time.Date(2031, 3, 14, 18, 0, 0, 0, time.UTC)
	s := costService(t, now)
	recs := costRecords(now)
	march := time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC)
	if got, want := s.TeamSpend("vision", march), recs[0].CostAt(now); got != want {
		t.Errorf("vision spent %s in March, its job is billed %s", got, want)
	}
	if got, want := s.TeamSpend("nlp", march), recs[1].CostAt(now)+777_777; got != want {
		t.Errorf("nlp spent %s in March, its job and transfer are billed %s", got, want)
	}
	if got := s.TeamSpend("vision", time.Date(2031, 4, 1, 0, 0, 0, 0, time.UTC)); got != 0 {
		t.Errorf("vision spent %s in April, which has not begun", got)
	}
	if got := s.TeamSpend("search", march); got != 0 {
		t.Errorf("a team with no jobs spent %s", got)
	}
}

// A report grouped by job over a ledger view whose charges are in its file
// (read back chunk by chunk into a reused buffer) keeps every job's key
// and total as they were billed.
func TestCostsByJobFromASpilledLedger(t *testing.T) {
	now := time.Date(2031, 3, 14, 18, 0, 0, 0, time.UTC)
	v := ledger.NewView(zaptest.NewLogger(t))
	if err := v.SpillTo(t.TempDir(), 1<<30); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	const jobs, each = 12_000, 6 // about 4 MB of charges: several chunks
	want := map[string]money.Micros{}
	for i := range jobs * each {
		id := fmt.Sprintf("job-%06d", i/each)
		start := now.Add(-5*time.Hour + time.Duration(i%each)*time.Minute)
		e := ledger.Entry{ID: fmt.Sprintf("%s/a1/i-%08x/%d", id, i, i%each), Kind: ledger.Usage, Start: start, End: start.Add(time.Minute),
			PricePerHour: 60_000_000, Quantity: 1.0 / 60, Unit: "Hours", Cost: 1_000_000 + money.Micros(i%each), Provider: "aws", Region: "us-east-1",
			Purchase: "spot", Instance: fmt.Sprintf("i-%08x", i), JobID: id, Attempt: 1, Team: "vision", RecordedAt: start.Add(time.Minute)}
		v.Add(e)
		want[id] += e.Cost
	}
	if spilled, inMemory := v.Spilled(); spilled < 3<<20 || inMemory != 1 {
		t.Fatalf("the view spilled %d bytes and keeps %d chunks in memory", spilled, inMemory)
	}
	s := (&Service{ix: newIndex(), clock: clock.NewFake(now)}).WithLedger(v)
	op := auth.WithPrincipal(context.Background(), auth.System("test"))
	c, err := s.Costs(op, CostQuery{GroupBy: "job", From: now.Add(-6 * time.Hour), To: now, Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]money.Micros{}
	for _, g := range c.Groups {
		got[g.Key] += g.Total
	}
	if c.Jobs != jobs || !maps.Equal(got, want) {
		t.Fatalf("%d jobs billed in %d groups; want %d, each as billed (job-000000: %s, want %s)", c.Jobs, len(got), jobs, got["job-000000"], want["job-000000"])
	}
}
