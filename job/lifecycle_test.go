package job

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// A job's life on the happy path: placed, launched, running, done; its
// capacity is billed from launch to the end its provider reports, teardown
// included.
func TestLifecycleHappyPath(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(1, "us-east-1a")
	l.state(Placing)
	if got := effectsOf[Launch](l.res); len(got) != 1 || got[0].Attempt.LaunchKey != LaunchKey(l.r.ID, 1) {
		t.Fatalf("placing launched %+v", got)
	}
	l.after(time.Minute)
	l.launch(a, false)
	l.state(Placing)
	l.after(2 * time.Minute)
	id := instances(1, 1)[0]
	l.want(Accepted, InstanceRunning{Key: a.LaunchKey, Instance: Instance{ID: id, RunningAt: l.now}})
	l.state(Running)
	l.after(30 * time.Minute)
	l.want(Accepted, Progressed{Attempt: 1, Instance: id, Progress: 0.5})
	l.want(Duplicate, Progressed{Attempt: 1, Instance: id, Progress: 0.505})
	l.after(30 * time.Minute)
	res := l.want(Accepted, Exited{Attempt: 1, Instance: id})
	l.state(Succeeded)
	if term := effectsOf[Terminate](res); len(term) != 1 || term[0].Key != a.LaunchKey {
		t.Fatalf("success terminated %+v", term)
	}
	if l.r.Status.Current == nil || !l.r.Status.Current.Released() {
		t.Fatal("the attempt closed before its capacity was gone")
	}
	// Teardown takes 20 s at the provider: billed too.
	l.after(20 * time.Second)
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: id, EndedAt: l.now}})
	if l.r.Status.Current != nil {
		t.Fatal("the attempt did not close once its capacity was gone")
	}
	got := l.r.Status.Attempts[0]
	want := money.MustParse("3.60").ForDuration(62*time.Minute + 20*time.Second) // launched at +1m, gone at +63m20s
	if got.Outcome != OutcomeSucceeded || got.Cost != want || l.r.Status.EndedCost != want || l.r.CostAt(l.now.Add(time.Hour)) != want {
		t.Fatalf("closed %q costing %s (job %s), want succeeded costing %s", got.Outcome, got.Cost, l.r.Status.EndedCost, want)
	}
	// A terminal job launches nothing, whatever comes.
	l.want(Stale, Place{Attempt: 2, Placement: lifePlacement})
	l.want(Stale, Exited{Attempt: 1, Instance: id})
}

// An agent reports its progress every second: the record is written for
// it only for 1% more, and then at most once a minute unless the report
// passes a 10% mark (which the history shows), so a short job is not
// rewritten a hundred times and a long one still moves at each 1%.
func TestLifecycleWritesProgressAtMostOnceAMinute(t *testing.T) {
	for _, tc := range []struct {
		name        string
		perSecond   float64 // progress a second
		seconds     int
		wantWritten int
		wantMarks   int
	}{
		{"a five-minute job", 1.0 / 300, 299, 10, 9}, // at 3 s (1%), then at each 10% mark (every 30 s)
		{"a day-long job", 1.0 / 86400, 1800, 2, 0},  // at each 1%: 864 s and 1,728 s
		{"a slow start", 0.0001, 600, 6, 0},          // at each 1%: every 100 s
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, nil)
			l.running(1)
			id := instances(1, 1)[0]
			written, marks := 0, 0
			last, lastP := time.Time{}, 0.0
			for i := 1; i <= tc.seconds; i++ {
				l.after(time.Second)
				p := float64(i) * tc.perSecond
				res := l.apply(Progressed{Attempt: 1, Instance: id, Progress: p})
				if res.Verdict != Accepted {
					continue
				}
				written++
				mark := int(p*10+1e-9) > int(lastP*10+1e-9)
				if !last.IsZero() && l.now.Sub(last) < ProgressEvery && !mark {
					t.Fatalf("progress written at %s and again %s later, no 10%% mark passed", last, l.now.Sub(last))
				}
				if l.r.Status.Progress != p || !l.r.Status.ProgressAt.Equal(l.now) {
					t.Fatalf("progress %v at %s written, want %v at %s", l.r.Status.Progress, l.r.Status.ProgressAt, p, l.now)
				}
				if mark {
					marks++
					if h := effectsOf[History](l.res); len(h) != 1 || h[0].Kind != KindProgress {
						t.Fatalf("passing %.0f%% recorded %+v in the history", p*100, h)
					}
				}
				last, lastP = l.now, p
			}
			if written != tc.wantWritten || marks != tc.wantMarks {
				t.Errorf("progress written %d times, %d at a 10%% mark; want %d and %d", written, marks, tc.wantWritten, tc.wantMarks)
			}
		})
	}
}

// The on-demand baseline is kept from the first placement that carries
// one: a later placement does not change what savings are counted
// against.
func TestLifecycleKeepsTheFirstBaseline(t *testing.T) {
	l := newLife(t, nil)
	p := lifePlacement
	p.Zone, p.OfferID = "us-east-1a", "aws/us-east-1/us-east-1a/p4d.24xlarge/spot"
	l.want(Accepted, Place{Attempt: 1, Placement: p, EstimatedRuntime: 6 * time.Hour, CheckpointRoot: l.root, Baseline: money.MustParse("120.50")})
	a := l.r.Status.Current
	l.want(Accepted, LaunchRefused{Attempt: 1, Key: a.LaunchKey, Code: "InsufficientInstanceCapacity"})
	if !l.r.NeedsPlacement() {
		t.Fatalf("not placed again after a refused launch: %s", describe(l.r))
	}
	p.Zone, p.OfferID = "us-east-1b", "aws/us-east-1/us-east-1b/p4d.24xlarge/spot"
	l.want(Accepted, Place{Attempt: 2, Placement: p, EstimatedRuntime: 6 * time.Hour, CheckpointRoot: l.root, Baseline: money.MustParse("99")})
	if got := l.r.Status.BaselineCost; got != money.MustParse("120.50") {
		t.Fatalf("baseline %s, want the first placement's $120.50", got)
	}
}

// The provider charges each instance its own price, from its launch to its
// end, rounded once per instance: a spot price that moved between the
// decision and the launch, and nodes ending at different moments, are
// billed as the provider bills them, not at the placement's price for the
// nodes' total time.
func TestLifecycleBillsWhatTheProviderCharges(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(2, "us-east-1a") // decided at $3.60/h per node
	l.after(time.Minute)
	charged := money.MustParse("3.500001") // the price had moved by the launch
	ids := instances(1, 2)
	l.want(Accepted, Launched{Attempt: 1, Key: a.LaunchKey, Instances: []Instance{
		{ID: ids[0], LaunchedAt: l.now, RunningAt: l.now, Price: charged}, {ID: ids[1], LaunchedAt: l.now, RunningAt: l.now, Price: charged}}})
	l.state(Running)
	l.after(30 * time.Minute)
	l.want(Accepted, Exited{Attempt: 1, Instance: ids[0]})
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: ids[0], EndedAt: l.now}})
	l.after(time.Hour)
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: ids[1], EndedAt: l.now}})
	// 3.500001/h for 30 min is 1.7500005, billed 1.750001; for 90 min
	// 5.2500015, billed 5.250002. The nodes' two hours at one rounding
	// would be 7.000002; at the placement's price 7.20.
	want := money.MustParse("7.000003")
	if got := l.r.Status.Attempts[0].Cost; got != want || l.r.Status.EndedCost != want {
		t.Fatalf("billed %s (job %s), want %s, what the provider charged", got, l.r.Status.EndedCost, want)
	}
}

// A spot price that moves while an instance runs bills each segment at its
// price, as the provider reports it; a checkpoint carried to the
// attempt's region is charged once the capacity is bought, not before.
func TestLifecycleBillsPriceSegmentsAndTheTransfer(t *testing.T) {
	l := newLife(t, nil)
	p := lifePlacement
	p.Zone, p.OfferID = "us-east-1a", "aws/us-east-1/us-east-1a/p4d.24xlarge/spot"
	transfer := money.MustParse("0.36")
	l.want(Accepted, Place{Attempt: 1, Placement: p, EstimatedRuntime: 6 * time.Hour, CheckpointRoot: l.root, Transfer: transfer})
	a := l.r.Status.Current
	if got := l.r.CostAt(l.now.Add(time.Hour)); got != 0 {
		t.Fatalf("placed, nothing bought: billed %s", got)
	}
	start := l.now
	ids := instances(1, 1)
	six, five := money.MustParse("6.01"), money.MustParse("5.68")
	l.want(Accepted, Launched{Attempt: 1, Key: a.LaunchKey, Instances: []Instance{{ID: ids[0], LaunchedAt: start, RunningAt: start, Price: six}}})
	l.after(time.Hour)
	changes := []money.PriceChange{{At: start.Add(30 * time.Minute), Price: five}}
	l.want(Accepted, Launched{Attempt: 1, Key: a.LaunchKey, Instances: []Instance{{ID: ids[0], LaunchedAt: start, RunningAt: start, Price: six, Prices: changes}}})
	want := transfer + six.ForDuration(30*time.Minute) + five.ForDuration(30*time.Minute)
	if got := l.r.CostAt(l.now); got != want {
		t.Fatalf("billed %s, want %s: the transfer and each price segment at its price", got, want)
	}
	// An older report, knowing fewer changes, changes nothing.
	l.want(Duplicate, Launched{Attempt: 1, Key: a.LaunchKey, Instances: []Instance{{ID: ids[0], LaunchedAt: start, RunningAt: start, Price: six}}})
}

// A notice: the agent is asked to checkpoint, a replacement is placed at
// once and held, the checkpoint releases the old capacity (not paid for
// until the deadline) and starts the replacement, which resumes from it.
func TestLifecycleNoticeCheckpointsAndMoves(t *testing.T) {
	l := newLife(t, nil)
	a := l.running(1)
	old := instances(1, 1)[0]
	l.after(time.Hour)
	l.want(Accepted, Progressed{Attempt: 1, Instance: old, Progress: 0.4})
	deadline := l.now.Add(2 * time.Minute)
	res := l.want(Accepted, Interruption{Key: a.LaunchKey, Instance: old, Kind: NoticeSpot, Deadline: deadline})
	l.state(Checkpointing)
	if ck := effectsOf[RequestCheckpoint](res); len(ck) != 1 || ck[0].Attempt != 1 || !ck[0].Deadline.Equal(deadline) {
		t.Fatalf("checkpoint requests %+v", ck)
	}
	if len(effectsOf[Alert](res)) != 1 || l.r.Status.Preemptions != 1 || l.r.Status.Previous == nil || l.r.Status.Current != nil {
		t.Fatalf("after the notice: %s", describe(l.r))
	}
	l.want(Duplicate, Interruption{Key: a.LaunchKey, Instance: old, Kind: NoticeSpot, Deadline: deadline})
	if !l.r.NeedsPlacement() {
		t.Fatal("no replacement wanted while the old attempt checkpoints")
	}
	l.after(time.Second)
	b := l.place(1, "us-east-1b")
	if !b.StartAfter.Equal(deadline) {
		t.Fatalf("replacement held until %v, want the deadline %v", b.StartAfter, deadline)
	}
	l.launch(b, true)
	l.state(Checkpointing) // the replacement runs when its agent starts
	l.after(20 * time.Second)
	storedAt := l.now
	res = l.want(Accepted, Checkpointed{Attempt: 1, Instance: old, Checkpoint: l.checkpoint(a, 400, 0.41)})
	l.state(Migrating)
	// The checkpoint is kept from now on: its storage is billed from the
	// first one stored.
	if !l.r.Status.CheckpointSince.Equal(storedAt) {
		t.Fatalf("checkpoints kept since %v, want %v", l.r.Status.CheckpointSince, storedAt)
	}
	if term := effectsOf[Terminate](res); len(term) != 1 || term[0].Key != a.LaunchKey {
		t.Fatalf("the stored checkpoint released %+v", term)
	}
	if st := effectsOf[StartWorkload](res); len(st) != 1 || st[0].Attempt != b.N {
		t.Fatalf("the replacement was not told to start: %+v", st)
	}
	l.after(5 * time.Second)
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: old, EndedAt: l.now, Reason: "terminated"}})
	first := l.r.Status.Attempts[0]
	if first.Outcome != OutcomePreempted || !first.EndedAt.Equal(l.now) || !first.EndedAt.Before(deadline) {
		t.Fatalf("old attempt closed %+v", first)
	}
	next := instances(b.N, 1)[0]
	l.want(Accepted, AgentStarted{Attempt: b.N, Instance: next, Progress: 0.41, Checkpoint: l.r.Status.Checkpoint})
	l.state(Running)
	if l.r.Status.WorkLost != 0 || l.r.Status.Progress != 0.41 {
		t.Fatalf("resumed at %v, %s lost", l.r.Status.Progress, l.r.Status.WorkLost.D())
	}
}

// A zone storm: the replacement's launch is refused for capacity, again
// and again. Each refusal buys nothing and ends its attempt; the job is
// placed again while the old attempt checkpoints, never with two launches
// for one decision.
func TestLifecycleStormRefusalsBuyNothing(t *testing.T) {
	l := newLife(t, nil)
	a := l.running(1)
	old := instances(1, 1)[0]
	l.want(Accepted, Interruption{Key: a.LaunchKey, Instance: old, Kind: NoticeSpot, Deadline: l.now.Add(2 * time.Minute)})
	for i := range 5 {
		b := l.place(1, "us-east-1a")
		res := l.want(Accepted, LaunchRefused{Attempt: b.N, Key: b.LaunchKey, Reason: "no capacity"})
		if len(effectsOf[Launch](res)) != 0 || l.r.Status.Current != nil || !l.r.NeedsPlacement() {
			t.Fatalf("refusal %d: %s", i, describe(l.r))
		}
		l.state(Checkpointing)
		// The same decision retried buys nothing.
		l.want(Stale, Place{Attempt: b.N, Placement: lifePlacement})
	}
	if n := len(l.r.Status.Attempts); n != 5 || l.r.Status.EndedCost != 0 {
		t.Fatalf("%d attempts ended costing %s", n, l.r.Status.EndedCost)
	}
}

// Events that do not come from the job's current attempt and its own
// instances change nothing: each of them was acted on once.
func TestLifecycleForgedEventsChangeNothing(t *testing.T) {
	l := newLife(t, nil)
	a := l.running(1)
	real := instances(1, 1)[0]
	l.want(Accepted, Progressed{Attempt: 1, Instance: real, Progress: 0.3})
	good := l.checkpoint(a, 300, 0.3)
	l.want(Accepted, Checkpointed{Attempt: 1, Instance: real, Checkpoint: good})
	outside := good
	outside.Step, outside.Location = 999999999, "s3://attacker/x"
	huge := good
	huge.Step, huge.Progress = 999999999, 0.99
	huge.Location = l.root + "/" + l.r.ID + "/step-999999999"
	older := good
	older.Step, older.Progress = 100, 0.1
	for name, in := range map[string]Input{
		"notice for a made-up instance":     Interruption{Key: a.LaunchKey, Instance: "i-madeup", Kind: NoticeSpot, Deadline: l.now.Add(time.Minute)},
		"notice for another key":            Interruption{Key: "j-x-a1", Instance: real, Kind: NoticeSpot, Deadline: l.now.Add(time.Minute)},
		"exit 0 from a made-up instance":    Exited{Attempt: 1, Instance: "i-madeup"},
		"exit 0 from an attempt never made": Exited{Attempt: 7, Instance: real},
		"checkpoint outside the location":   Checkpointed{Attempt: 1, Instance: real, Checkpoint: outside},
		"checkpoint from a made-up one":     Checkpointed{Attempt: 1, Instance: "i-madeup", Checkpoint: huge},
		"checkpoint older than the job's":   Checkpointed{Attempt: 1, Instance: real, Checkpoint: older},
		"checkpoint of another attempt":     Checkpointed{Attempt: 1, Instance: real, Checkpoint: CheckpointRef{Attempt: 3, Step: 500, Location: good.Location}},
		"instance running, made up":         InstanceRunning{Key: a.LaunchKey, Instance: Instance{ID: "i-madeup", RunningAt: l.now}},
		"instance gone, made up":            InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: "i-madeup", EndedAt: l.now}},
		"agent started on a made-up one":    AgentStarted{Attempt: 1, Instance: "i-madeup"},
		"progress from a made-up one":       Progressed{Attempt: 1, Instance: "i-madeup", Progress: 0.9},
		"checkpoint failed, made up":        CheckpointFailed{Attempt: 1, Instance: "i-madeup", Reason: "x"},
		"launch refused for a running one":  LaunchRefused{Attempt: 1, Key: a.LaunchKey, Reason: "x"},
	} {
		t.Run(name, func(t *testing.T) {
			before := l.r.Clone()
			res := Apply(l.r, in, l.now)
			if res.Changed() {
				t.Fatalf("accepted (%s): %s", res.Why, describe(l.r))
			}
			if len(effectsOf[Terminate](res))+len(effectsOf[Launch](res))+len(effectsOf[RequestCheckpoint](res)) > 0 {
				t.Fatalf("acted on it: %+v", res.Effects)
			}
			if !equalJSON(before, l.r) {
				t.Fatal("the record changed")
			}
		})
	}
	// The real agent's next checkpoint is still taken.
	l.want(Accepted, Checkpointed{Attempt: 1, Instance: real, Checkpoint: l.checkpoint(a, 400, 0.4)})
}

// One node of a multi-node job dies: the attempt is lost, its other nodes
// are released (and billed until their provider says they are gone), the
// work since the checkpoint is recorded lost and the job is placed again.
func TestLifecycleLostNodeReleasesTheOthers(t *testing.T) {
	l := newLife(t, map[string]string{"resources": "{accelerators: [A100], gpus_per_node: 8, nodes: 4}", "work": "24h on A100"})
	a := l.running(4)
	nodes := instances(1, 4)
	l.after(time.Hour)
	l.want(Accepted, Progressed{Attempt: 1, Instance: nodes[0], Progress: 0.2})
	l.want(Accepted, Checkpointed{Attempt: 1, Instance: nodes[0], Checkpoint: l.checkpoint(a, 100, 0.1)})
	res := l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: nodes[2], EndedAt: l.now, Reason: "hardware failure"}})
	l.state(Queued)
	term := effectsOf[Terminate](res)
	if len(term) != 1 || !slices.Equal(term[0].Instances, []string{nodes[0], nodes[1], nodes[3]}) {
		t.Fatalf("terminated %+v, want the three other nodes", term)
	}
	if lost := l.r.Status.WorkLost.D(); lost < 2*time.Hour || lost > 3*time.Hour || l.r.Status.Progress != 0.1 {
		t.Fatalf("progress %v, %s lost; want back to the checkpoint (0.1), 10%% of 24h lost", l.r.Status.Progress, lost)
	}
	if !l.r.NeedsPlacement() || l.r.Status.Previous == nil {
		t.Fatal("the lost attempt's nodes are not being released")
	}
	b := l.place(4, "us-east-1b") // placed while the old nodes go
	l.after(30 * time.Second)
	for _, id := range []string{nodes[0], nodes[1], nodes[3]} {
		l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: id, EndedAt: l.now}})
	}
	ended := l.r.Status.Attempts[0]
	want := money.MustParse("3.60").ForDuration(time.Hour + 3*(time.Hour+30*time.Second))
	if ended.Outcome != OutcomeLost || ended.Cost != want {
		t.Fatalf("lost attempt %q costs %s, want %s (one node an hour, three an hour and 30 s)", ended.Outcome, ended.Cost, want)
	}
	if l.r.Status.Current.N != b.N {
		t.Fatal("the replacement was dropped")
	}
}

// Reconciliation lists every instance first and then goes job by job: a
// launch recorded in between is not in the listing. Its instances are not
// taken for gone (found by the chaos run: the attempt was closed as lost,
// nothing was terminated, and its instances ran on, billed to nobody). A
// listing taken once they have had ListingGrace to show up, and still
// without them, does end them.
func TestLifecycleAListingOlderThanTheLaunchEndsNothing(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(2, "us-east-1a")
	listedAt := l.now.Add(time.Second)
	l.after(2 * time.Second)
	l.launch(a, true)
	l.state(Running)
	l.after(time.Second)
	for _, at := range []time.Time{listedAt, l.now, l.now.Add(-ListingGrace / 2)} {
		l.want(Duplicate, Observed{Key: a.LaunchKey, At: at})
		if l.r.Status.State != Running || len(liveInstances(l.r.Status.Current)) != 2 {
			t.Fatalf("a listing from %s, before the instances could be in it, ended them: %s", at, describe(l.r))
		}
	}
	l.after(ListingGrace)
	res := l.want(Accepted, Observed{Key: a.LaunchKey, At: l.now})
	l.state(Queued)
	if got := l.r.Status.Attempts[0]; got.Outcome != OutcomeLost || len(effectsOf[Terminate](res)) != 0 {
		t.Fatalf("instances missing from a listing a minute after their launch: attempt %s, effects %+v", got.Outcome, res.Effects)
	}
}

// Listings that find the instances alive are written down once every
// SeenEvery, not at every reconciliation round; an instance that vanishes
// without a trace is billed to the last sighting written.
func TestLifecycleSightingsAreWrittenEverySeenEvery(t *testing.T) {
	for _, c := range []struct {
		name string
		// vanish is when the instance leaves the listings, after its
		// workload started; billed is how long it is billed for.
		vanish, billed time.Duration
	}{
		// Its agent ran on it at its start: sightings within SeenEvery of
		// that say nothing new and are not written; a vanished instance
		// is billed to the start.
		{"vanished before a sighting was written", 3 * time.Minute, 0},
		// The sighting SeenEvery after the start is written, the next
		// ones within SeenEvery of it not; billed to it.
		{"vanished after one", SeenEvery + 3*time.Minute, SeenEvery},
		{"vanished after two", 2*SeenEvery + time.Minute, 2 * SeenEvery},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLife(t, nil)
			a := l.running(1)
			id, started := instances(1, 1)[0], l.now
			alive := func() Observed {
				return Observed{Key: a.LaunchKey, At: l.now, Instances: []Instance{{ID: id, LaunchedAt: started, RunningAt: started}}}
			}
			seen := started
			for l.now.Sub(started) < c.vanish {
				l.after(15 * time.Second)
				if l.now.Sub(seen) < SeenEvery {
					l.want(Duplicate, alive()) // a round like the last: nothing to write
					continue
				}
				l.want(Accepted, alive())
				if seen = l.now; !l.r.Status.Current.SeenAt.Equal(seen) {
					t.Fatalf("seen at %s, want the sighting of %s", l.r.Status.Current.SeenAt, seen)
				}
			}
			l.after(ListingGrace)
			l.want(Accepted, Observed{Key: a.LaunchKey, At: l.now}) // vanished
			ended := l.r.Status.Attempts[0]
			if want := money.MustParse("3.60").ForDuration(c.billed); ended.Cost != want || !ended.Spans[0].To.Equal(started.Add(c.billed)) {
				t.Fatalf("billed %s to %s, want %s to the last sighting written (%s)", ended.Cost, ended.Spans[0].To, want, started.Add(c.billed))
			}
		})
	}
}

// A notice can overtake the record of its launch (a storm just after it):
// the provider's listing confirms the instance, and it is billed from its
// launch at its price, as listed, not from the notice at the placement's
// price (found by the chaos run).
func TestLifecycleNoticeBeforeItsLaunchIsRecordedBillsFromTheLaunch(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(1, "us-east-1a")
	launched, price, id := l.now.Add(time.Second), money.MustParse("3.500001"), instances(1, 1)[0]
	l.after(time.Minute)
	notice := Interruption{Key: a.LaunchKey, Instance: id, Kind: NoticeSpot, Deadline: l.now.Add(2 * time.Minute)}
	l.want(Refused, notice)
	notice.Verified, notice.Listed = true, Instance{ID: id, LaunchedAt: launched, Price: price}
	l.want(Accepted, notice)
	l.want(Duplicate, Launched{Attempt: 1, Key: a.LaunchKey, Instances: []Instance{{ID: id, LaunchedAt: launched, Price: price}}})
	l.after(30 * time.Second)
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: id, EndedAt: l.now}})
	ended := l.r.Status.Attempts[0]
	if want := price.ForDuration(l.now.Sub(launched)); ended.Cost != want || len(ended.Spans) != 1 || !ended.Spans[0].From.Equal(launched) {
		t.Fatalf("billed %s from %s, want %s from the launch at %s: %s", ended.Cost, ended.Spans[0].From, want, launched, describe(l.r))
	}
}

// An instance its provider lists live under an attempt that has ended is
// terminated, even when the record took it for gone: it still costs, and
// its real end is billed.
func TestLifecycleAnInstanceListedLiveUnderAnEndedAttemptIsTerminated(t *testing.T) {
	l := newLife(t, nil)
	a := l.running(1)
	id := instances(1, 1)[0]
	launched := l.now
	l.after(ListingGrace + time.Minute)
	l.want(Accepted, Observed{Key: a.LaunchKey, At: l.now}) // it is missing: lost
	l.state(Queued)
	if ended := l.r.Status.Attempts[0]; ended.Outcome != OutcomeLost || ended.Spans[0].To.IsZero() {
		t.Fatalf("attempt %+v", ended)
	}
	l.after(time.Minute)
	res := l.want(Accepted, Observed{Key: a.LaunchKey, At: l.now, Instances: []Instance{{ID: id, LaunchedAt: launched, RunningAt: launched}}})
	if term := effectsOf[Terminate](res); len(term) != 1 || !slices.Equal(term[0].Instances, []string{id}) {
		t.Fatalf("an instance listed live under an ended attempt: effects %+v", res.Effects)
	}
	l.after(20 * time.Second)
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: id, EndedAt: l.now}})
	want := money.MustParse("3.60").ForDuration(l.now.Sub(launched))
	if got := l.r.Status.Attempts[0].Cost; got != want || l.r.Status.EndedCost != want {
		t.Fatalf("billed %s (job %s), want %s: to its real end", got, l.r.Status.EndedCost, want)
	}
}

// A listing taken before an instance's end (reconciliation lists first,
// then goes job by job) may still have it live: that says nothing against
// the end its provider reported, which stays billed as it was; only a
// listing taken after the end can say it still runs.
func TestLifecycleAStaleListingDoesNotUndoAKnownEnd(t *testing.T) {
	l := newLife(t, nil)
	a := l.running(1)
	id := instances(1, 1)[0]
	launched := l.now
	l.after(time.Hour)
	listed := l.now
	l.want(Accepted, Exited{Attempt: 1, Instance: id})
	l.after(20 * time.Second)
	l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: id, EndedAt: l.now}})
	ended := l.r.Status.Attempts[0]
	want := money.MustParse("3.60").ForDuration(l.now.Sub(launched))
	if ended.Cost != want {
		t.Fatalf("billed %s, want %s", ended.Cost, want)
	}
	l.after(time.Minute)
	res := l.apply(Observed{Key: a.LaunchKey, At: listed, Instances: []Instance{{ID: id, LaunchedAt: launched, RunningAt: launched}}})
	if term := effectsOf[Terminate](res); len(term) != 0 {
		t.Fatalf("a listing from before the end had the ended instance terminated: %+v", term)
	}
	if got := l.r.Status.Attempts[0]; got.Cost != want || got.Spans[0].To.IsZero() || l.r.Status.EndedCost != want {
		t.Fatalf("after a stale listing: billed %s (job %s), span %+v; want %s to the reported end", got.Cost, l.r.Status.EndedCost, got.Spans[0], want)
	}
}

// A job cancelled while its launch is under way: the attempt closes, and
// when the launch comes back its instances are billed to it and
// terminated.
func TestLifecycleCancelDuringLaunch(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(2, "us-east-1a")
	l.want(Accepted, Cancel{Message: "wrong data"})
	l.state(Cancelled)
	if l.r.Status.Current != nil || l.r.Status.Attempts[0].Outcome != OutcomeCancelled {
		t.Fatalf("after cancel: %s", describe(l.r))
	}
	l.want(Duplicate, Cancel{})
	l.after(10 * time.Second)
	res := l.apply(Launched{Attempt: a.N, Key: a.LaunchKey, Instances: []Instance{{ID: "i-x", LaunchedAt: l.now}, {ID: "i-y", LaunchedAt: l.now}}})
	if term := effectsOf[Terminate](res); len(term) != 1 || len(term[0].Instances) != 2 {
		t.Fatalf("late launch: %+v", res.Effects)
	}
	l.after(time.Minute)
	for _, id := range []string{"i-x", "i-y"} {
		l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: id, EndedAt: l.now}})
	}
	if want := money.MustParse("3.60").ForDuration(2 * time.Minute); l.r.Status.EndedCost != want {
		t.Fatalf("cost %s, want %s: two nodes a minute each", l.r.Status.EndedCost, want)
	}
}

// A launch whose outcome stays unknown is asked again with the same key,
// a bounded number of times, then given up: whatever it bought is
// terminated and the job is placed again.
func TestLifecycleUnknownLaunchOutcomeIsBounded(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(1, "us-east-1a")
	for try := 1; try < 3; try++ {
		res := l.want(Accepted, LaunchUnknown{Attempt: a.N, Key: a.LaunchKey, Err: "timeout", MaxTries: 3})
		if len(res.Effects) != 0 {
			t.Fatalf("try %d: %+v", try, res.Effects)
		}
		l.state(Placing)
		res = l.want(Duplicate, Observed{Key: a.LaunchKey})
		if got := effectsOf[Launch](res); len(got) != 1 || got[0].Attempt.LaunchKey != a.LaunchKey {
			t.Fatalf("reconciliation did not ask again with the same key: %+v", res.Effects)
		}
	}
	res := l.want(Accepted, LaunchUnknown{Attempt: a.N, Key: a.LaunchKey, Err: "timeout", MaxTries: 3})
	l.state(Queued)
	if term := effectsOf[Terminate](res); len(term) != 1 || term[0].Key != a.LaunchKey {
		t.Fatalf("giving up did not sweep the key: %+v", res.Effects)
	}
	if got := l.r.Status.Attempts[0].Outcome; got != OutcomeLaunchLost {
		t.Fatalf("outcome %q", got)
	}
}

// A refusal a retry will not change excludes the offer for the job, with
// the reason; a wrong account setup alerts.
func TestLifecyclePermanentRefusalExcludes(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(1, "us-east-1a")
	res := l.want(Accepted, LaunchRefused{Attempt: a.N, Key: a.LaunchKey, Permanent: true, Exclude: a.Placement.OfferID,
		Code: "AuthFailure.ServiceLinkedRoleCreationNotPermitted", Reason: "cannot create the spot service-linked role", Account: true})
	l.state(Queued)
	if ex := l.r.Status.Excluded; len(ex) != 1 || ex[0].Key != a.Placement.OfferID || !strings.Contains(ex[0].Reason, "service-linked") {
		t.Fatalf("excluded %+v", ex)
	}
	if al := effectsOf[Alert](res); len(al) != 1 || al[0].Severity != SeverityCritical {
		t.Fatalf("alerts %+v", al)
	}
}

// A move of spotwise's own: the job checkpoints where it runs, then its
// capacity is released and it is placed again; a move whose checkpoint
// never comes is given up and the job stays.
func TestLifecycleVoluntaryMove(t *testing.T) {
	t.Run("checkpointed", func(t *testing.T) {
		l := newLife(t, nil)
		a := l.running(1)
		id := instances(1, 1)[0]
		res := l.want(Accepted, StartMove{Attempt: 1, Kind: NoticeCheaper, Message: "cheaper elsewhere"})
		l.state(Checkpointing)
		if ck := effectsOf[RequestCheckpoint](res); len(ck) != 1 || !ck[0].Deadline.IsZero() {
			t.Fatalf("requests %+v", ck)
		}
		l.want(Accepted, Progressed{Attempt: 1, Instance: id, Progress: 0.2}) // still runs while it checkpoints
		res = l.want(Accepted, Checkpointed{Attempt: 1, Instance: id, Checkpoint: l.checkpoint(a, 200, 0.2)})
		l.state(Migrating)
		if term := effectsOf[Terminate](res); len(term) != 1 || l.r.Status.Previous == nil || l.r.Status.Previous.Closing != OutcomeMoved {
			t.Fatalf("after the checkpoint: %s, %+v", describe(l.r), res.Effects)
		}
		if !l.r.NeedsPlacement() {
			t.Fatal("not placed again")
		}
	})
	// Asked to move before it made any progress, an attempt stores the
	// checkpoint it resumed from, which the store names as the earlier
	// attempt's: the job has it, and the move goes on. Another attempt's
	// checkpoint that is not the job's is refused.
	t.Run("checkpointed where it resumed", func(t *testing.T) {
		l := newLife(t, nil)
		first := l.running(1)
		l.want(Accepted, StartMove{Attempt: 1, Kind: NoticeCheaper, Message: "cheaper elsewhere"})
		ck := l.checkpoint(first, 200, 0.2)
		l.want(Accepted, Checkpointed{Attempt: 1, Instance: instances(1, 1)[0], Checkpoint: ck})
		l.state(Migrating)
		l.want(Accepted, InstanceGone{Key: first.LaunchKey, Instance: Instance{ID: instances(1, 1)[0], EndedAt: l.now}})
		l.after(time.Minute)
		second := l.place(1, "us-east-1b")
		l.launch(second, true)
		id := instances(2, 1)[0]
		l.want(Accepted, AgentStarted{Attempt: second.N, Instance: id, Progress: 0.2, Checkpoint: l.r.Status.Checkpoint})
		l.state(Running)
		l.want(Accepted, StartMove{Attempt: 2, Kind: NoticeCheaper, Message: "cheaper still elsewhere"})
		other := ck
		other.Step, other.Location = 100, strings.Replace(ck.Location, "step-200", "step-100", 1)
		l.want(Refused, Checkpointed{Attempt: 2, Instance: id, Checkpoint: other})
		l.want(Accepted, Checkpointed{Attempt: 2, Instance: id, Checkpoint: ck})
		l.state(Migrating)
		if l.r.Status.Checkpoint == nil || *l.r.Status.Checkpoint != ck || !l.r.NeedsPlacement() {
			t.Fatalf("after the checkpoint it resumed from: %s, checkpoint %+v", describe(l.r), l.r.Status.Checkpoint)
		}
	})
	t.Run("given up", func(t *testing.T) {
		l := newLife(t, nil)
		a := l.running(1)
		l.want(Accepted, StartMove{Attempt: 1, Kind: NoticeCheaper, Message: "cheaper elsewhere"})
		live := []Instance{{ID: instances(1, 1)[0], LaunchedAt: t0, RunningAt: t0}}
		l.after(time.Minute)
		res := l.want(Duplicate, Observed{Key: a.LaunchKey, Instances: live}) // seen at its start
		if ck := effectsOf[RequestCheckpoint](res); len(ck) != 1 {
			t.Fatalf("the checkpoint request was not repeated: %+v", res.Effects)
		}
		l.after(MoveTimeout)
		res = l.want(Accepted, Observed{Key: a.LaunchKey, Instances: live})
		l.state(Running)
		if l.r.Status.Current.Notice != nil || !slices.Contains(historyKinds(res), KindCheckpointFailed) {
			t.Fatalf("after giving up: %s, %v", describe(l.r), historyKinds(res))
		}
	})
}

// The attempt under notice finishes the work inside its window: the job
// succeeds and the replacement is let go.
func TestLifecycleExitUnderNotice(t *testing.T) {
	l := newLife(t, nil)
	a := l.running(1)
	id := instances(1, 1)[0]
	l.want(Accepted, Interruption{Key: a.LaunchKey, Instance: id, Kind: NoticeSpot, Deadline: l.now.Add(2 * time.Minute)})
	b := l.place(1, "us-east-1b")
	l.launch(b, true)
	l.want(Stale, Exited{Attempt: 1, Instance: id, Code: 143}) // killed with its capacity
	res := l.want(Accepted, Exited{Attempt: 1, Instance: id})
	l.state(Succeeded)
	if term := effectsOf[Terminate](res); len(term) != 2 || l.r.Status.Current.Closing != OutcomeSuperseded {
		t.Fatalf("after the exit: %s, %+v", describe(l.r), res.Effects)
	}
}

// A waiting job that can no longer meet its deadline expires, or runs
// anyway when its spec says so.
func TestLifecycleExpire(t *testing.T) {
	l := newLife(t, map[string]string{"deadline": "12h"})
	res := l.want(Accepted, Expire{Message: "every offer finishes after the deadline"})
	l.state(Expired)
	if al := effectsOf[Alert](res); len(al) != 1 || al[0].Kind != "job-expired" {
		t.Fatalf("alerts %+v", al)
	}
	l.want(Stale, Expire{})
	running := newLife(t, nil)
	running.running(1)
	running.want(Stale, Expire{Message: "x"})
}

// The launch's answer may come after the provider told of the instance
// (its running event, verified by a listing): the history says
// "launched" before "running" all the same, once, and the late answer
// changes nothing.
func TestLifecycleInstanceKnownBeforeTheLaunchAnswers(t *testing.T) {
	l := newLife(t, nil)
	a := l.place(1, "us-east-1a")
	l.after(time.Minute)
	id := instances(1, 1)[0]
	res := l.want(Accepted, InstanceRunning{Key: a.LaunchKey, Verified: true, Instance: Instance{ID: id, LaunchedAt: l.now.Add(-30 * time.Second), RunningAt: l.now}})
	l.state(Running)
	if got := historyKinds(res); !slices.Equal(got, []string{KindLaunched, KindRunning}) {
		t.Fatalf("history %v, want launched then running", got)
	}
	res = l.want(Duplicate, Launched{Attempt: 1, Key: a.LaunchKey, Instances: []Instance{{ID: id, LaunchedAt: l.now.Add(-30 * time.Second)}}})
	if got := historyKinds(res); len(got) != 0 {
		t.Fatalf("the late launch answer added %v to the history", got)
	}
}

// An agent reports at each 1% but at most twice a minute between 10%
// marks: the record (written at most once a minute) always takes one of
// its reports within the next half minute.
func TestProgressReportWanted(t *testing.T) {
	at := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		reported, last float64
		after          time.Duration
		want           bool
	}{
		{0.015, 0.01, time.Hour, false},       // under 1% more
		{0.03, 0.02, 29 * time.Second, false}, // within half a minute
		{0.03, 0.02, 30 * time.Second, true},  // half a minute on
		{0.30, 0.29, time.Second, true},       // past the 30% mark
		{0.30, 0.0, 0, true},                  // the first report
		{1.0, 0.95, time.Second, true},        // done
		{0.101, 0.0999999999999, 0, false},    // floating noise passes no mark
	} {
		got := ProgressReportWanted(tc.reported, tc.last, at, at.Add(tc.after))
		if tc.last == 0 {
			got = ProgressReportWanted(tc.reported, tc.last, time.Time{}, at)
		}
		if got != tc.want {
			t.Errorf("report %.3f after %.3f, %s later: %v, want %v", tc.reported, tc.last, tc.after, got, tc.want)
		}
	}
}
