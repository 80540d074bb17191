package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

const autoT4 = "command: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\npurchase: auto\ncheckpoint: {duration: 30s}\n"

// t4Reservation is one g4dn.xlarge (T4) slot in us-east-1a at $0.30 an
// instance-hour from t0 for length.
func t4Reservation(id string, length time.Duration, block bool) providers.Reservation {
	return providers.Reservation{ID: id, Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge",
		Count: 1, CapacityBlock: block, Start: t0, End: t0.Add(length), Price: money.MustParse("0.30")}
}

// A reservation is used before spot and on-demand: the first job lands on
// its slot and is billed the reservation's hourly price; with the slot
// taken, the next job goes to spot or on-demand; the hours nobody used
// are the reservation's idle cost.
func TestReservationIsUsedFirstAndItsIdleHoursShow(t *testing.T) {
	res := t4Reservation("r-t4", 30*24*time.Hour, false)
	r := newRig(t, rigOpt{workload: true, reservations: []providers.Reservation{res}})
	r.advance(t, 10*time.Minute) // idle for its first 10 minutes
	a := r.runToRunning(t, "name: a\nwork: 1h on T4\n"+autoT4)
	cur := a.Status.Current
	if cur.Placement.Purchase != string(providers.Reserved) || cur.Placement.Zone != "us-east-1a" || cur.Placement.PricePerHour != 0 {
		t.Fatalf("job a placed on %+v, want the reserved slot (at no extra cost)", cur.Placement)
	}
	insts := r.instancesFor(t, a.ID)
	if len(insts) != 1 || insts[0].Reservation != "r-t4" || insts[0].Price != res.Price {
		t.Fatalf("job a's instances = %+v, want one on r-t4 billed 0.30/h", insts)
	}

	b := r.runToRunning(t, "name: b\nwork: 1h on T4\n"+autoT4)
	if p := b.Status.Current.Placement.Purchase; p == string(providers.Reserved) {
		t.Fatalf("job b placed on %s with the only slot taken", p)
	}

	a = r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "a done", func(x *job.Record) bool { return x.Status.State == job.Succeeded }, a.ID)
	// Billed what the reservation's instance cost it, from launch to end.
	var used providers.ReservationUse
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		in := r.instancesFor(t, a.ID)[0]
		if !in.State.Ended() {
			return fmt.Errorf("instance %s still %s", in.ID, in.State)
		}
		used = providers.ReservationUse{Instance: in.ID, From: in.LaunchedAt, To: in.EndedAt}
		x := r.get(t, a.ID)
		if len(x.Status.Attempts) == 0 {
			return errors.New("attempt not closed yet")
		}
		if got, want := x.CostAt(r.clk.Now()), res.Price.ForDuration(in.EndedAt.Sub(in.LaunchedAt)); got != want {
			return fmt.Errorf("job a costs %s, the reservation's instance %s", got, want)
		}
		return nil
	})
	r.advance(t, time.Hour)

	st, err := r.cloud.Reservations(context.Background())
	if err != nil || len(st) != 1 || st[0].InUse != 0 || !slices.Equal(st[0].Uses, []providers.ReservationUse{used}) {
		t.Fatalf("reservations = %+v, %v; want r-t4 free again, used once by %+v", st, err, used)
	}
	now := r.clk.Now()
	u := res.Usage(st[0].Uses, now)
	if len(u.Spans) != 2 || !u.Spans[0].From.Equal(t0) || !u.Spans[0].To.Equal(used.From) ||
		!u.Spans[1].From.Equal(used.To) || !u.Spans[1].To.Equal(now) {
		t.Fatalf("idle spans = %+v, want before job a and after it", u.Spans)
	}
	paid := res.Price.ForDuration(now.Sub(t0))
	if u.Paid != paid || u.Used+u.Idle != paid || u.Idle != res.Price.ForDuration(now.Sub(t0))-res.Price.ForDuration(used.To.Sub(t0))+res.Price.ForDuration(used.From.Sub(t0)) {
		t.Fatalf("paid %s used %s idle %s; want paid %s", u.Paid, u.Used, u.Idle, paid)
	}
}

// A capacity block ending: its job gets a maintenance notice 30 minutes
// ahead, checkpoints, and moves to other capacity with its progress. (3
// hours of the block and 1 at on-demand cost less than 4 on spot.)
func TestCapacityBlockEndMovesItsJobWithACheckpoint(t *testing.T) {
	block := t4Reservation("cb-t4", 3*time.Hour, true)
	r := newRig(t, rigOpt{workload: true, reservations: []providers.Reservation{block}})
	rec := r.runToRunning(t, "name: long\nwork: 4h on T4\n"+autoT4)
	first := *rec.Status.Current
	if first.Placement.Purchase != string(providers.Reserved) {
		t.Fatalf("placed on %s, want the capacity block", first.Placement.Purchase)
	}
	rec = r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "moved off the block", func(x *job.Record) bool {
		return x.Status.State == job.Running && x.Status.Current != nil && x.Status.Current.N == 2 && x.Status.Previous == nil
	}, rec.ID)
	if p := rec.Status.Current.Placement.Purchase; p == string(providers.Reserved) {
		t.Fatalf("moved to %s: the block is over", p)
	}
	if len(rec.Status.Attempts) != 1 || rec.Status.Checkpoint == nil || rec.Status.Checkpoint.Progress < 0.5 || rec.Status.WorkLost != 0 {
		t.Fatalf("attempts %+v, checkpoint %+v, work lost %s: want the first attempt closed with a checkpoint of its work",
			rec.Status.Attempts, rec.Status.Checkpoint, rec.Status.WorkLost.D())
	}
	if end := rec.Status.Attempts[0].EndedAt; end.After(block.End) {
		t.Fatalf("the block's attempt ended at %s, after the block (%s)", end, block.End)
	}
	h := r.history(t, rec.ID)
	for _, k := range []string{events.KindNotice, events.KindCheckpoint, events.KindMigrating} {
		if !slices.Contains(h, k) {
			t.Errorf("history %v lacks %s", h, k)
		}
	}
	r.advanceUntil(t, 5*time.Minute, 4*time.Hour, "done", func(x *job.Record) bool { return x.Status.State == job.Succeeded }, rec.ID)
}
