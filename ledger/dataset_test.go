package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

// datasetLife drives a job whose data lives in aws us-east-1 through the
// job lifecycle, every attempt placed in us-west-2.
type datasetLife struct {
	t   *testing.T
	r   *job.Record
	clk *clock.Fake
}

func (l *datasetLife) apply(in job.Input) {
	l.t.Helper()
	if res := job.Apply(l.r, in, l.clk.Now()); res.Verdict != job.Accepted {
		l.t.Fatalf("%s: %s (%s)", in.Name(), res.Verdict, res.Why)
	}
}

// place places the next attempt in us-west-2, charging egress for the
// data.
func (l *datasetLife) place(egress money.Micros) *job.Attempt {
	l.t.Helper()
	n := l.r.Status.Attempt + 1
	p := job.Placement{OfferID: "aws/us-west-2/us-west-2a/p4d.24xlarge/spot", Provider: "aws", Region: "us-west-2", Zone: "us-west-2a",
		InstanceType: "p4d.24xlarge", GPU: "A100", GPUs: 8, Nodes: 1, Purchase: "spot", PricePerHour: money.MustParse("6.01")}
	l.apply(job.Place{Attempt: n, Placement: p, EstimatedRuntime: 6 * time.Hour, CheckpointRoot: "file:///ckpt", DataTransfer: egress})
	return l.r.Status.Current
}

func (l *datasetLife) launch(a *job.Attempt) string {
	l.t.Helper()
	id := fmt.Sprintf("i-%d", a.N)
	now := l.clk.Now()
	l.apply(job.Launched{Attempt: a.N, Key: a.LaunchKey, Instances: []job.Instance{{ID: id, LaunchedAt: now, RunningAt: now}}})
	return id
}

// A job run in another region than its data pays the data's egress once
// per attempt whose capacity was bought: preempted once and relaunched
// there, it has two dataset entries, distinct from its checkpoint's; the
// launch refused in between bought nothing and has none. Its entries, as
// the writer appends them to the ledger, add up to its cost_usd while it
// runs and once it is done, and rebuilding its charges from the record
// gives the ledger's entries.
func TestDatasetEgressIsChargedPerLaunchedAttempt(t *testing.T) {
	clk := clock.NewFake(at(0))
	bus := eventstest.NewBus(t, clk)
	w := ledger.NewWriter(bus, clk, eventstest.Logger(t))
	spec := job.Spec{Name: "train", Team: "vision", Command: []string{"train"}, Resources: job.Resources{GPUsPerNode: 8},
		Work: job.Work{Duration: job.Duration(6 * time.Hour), ReferenceGPU: "A100"},
		Data: job.Data{Provider: "aws", Region: "us-east-1", SizeGB: 500}}
	spec.Normalize()
	r := &job.Record{ID: job.NewID(at(0)), Spec: spec, Status: job.Status{State: job.Queued, SubmittedAt: at(0), UpdatedAt: at(0)}}
	l := &datasetLife{t: t, r: r, clk: clk}
	egress := money.MustParse("10") // 500 GB between two AWS regions at $0.02/GB

	a1 := l.place(egress)
	if got := r.CostAt(at(30)); got != 0 {
		t.Fatalf("placed, nothing bought: billed %s", got)
	}
	first := l.launch(a1)
	clk.Set(at(60))
	l.apply(job.Progressed{Attempt: 1, Instance: first, Progress: 0.2})
	l.apply(job.Interruption{Key: a1.LaunchKey, Instance: first, Kind: job.NoticeSpot, Deadline: at(62)})
	// The replacement's launch is refused: nothing bought, nothing read.
	a2 := l.place(egress)
	l.apply(job.LaunchRefused{Attempt: a2.N, Key: a2.LaunchKey, Reason: "no capacity"})
	a3 := l.place(egress)
	third := l.launch(a3)
	clk.Set(at(61))
	ck := job.CheckpointRef{Attempt: 1, Step: 100, Progress: 0.2, SHA256: "abc", Size: 4e9, Location: "file:///ckpt/" + r.ID + "/step-100", At: clk.Now()}
	l.apply(job.Checkpointed{Attempt: 1, Instance: first, Checkpoint: ck})
	l.apply(job.InstanceGone{Key: a1.LaunchKey, Instance: job.Instance{ID: first, EndedAt: clk.Now(), Reason: "spot interruption"}})
	l.apply(job.AgentStarted{Attempt: 3, Instance: third, Progress: 0.2, Checkpoint: r.Status.Checkpoint})

	datasets := func(es []ledger.Entry) map[string]ledger.Entry {
		out := map[string]ledger.Entry{}
		for _, e := range es {
			if e.Kind == ledger.Transfer && e.Category == ledger.CategoryDataset {
				out[e.ID] = e
			}
		}
		return out
	}
	check := func(when string, wantOpen bool) {
		t.Helper()
		if _, err := w.Record(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		es := stored(t, bus, r.ID)
		closed, open := ledger.Charges(r, clk.Now())
		if got, want := sum(es)+sum(open), r.CostAt(clk.Now()); got != want {
			t.Errorf("%s: entries %s + open %s, cost_usd %s", when, sum(es), sum(open), want)
		}
		if (len(open) > 0) != wantOpen {
			t.Errorf("%s: %d open charges", when, len(open))
		}
		got := datasets(es)
		if len(got) != 2 {
			t.Fatalf("%s: dataset entries %+v, want one per launched attempt (1 and 3)", when, got)
		}
		for _, n := range []int{1, 3} {
			e, ok := got[fmt.Sprintf("%s/a%d/dataset", r.ID, n)]
			if !ok || e.Cost != egress || e.Quantity != 500 || e.Unit != "GB" || e.Provider != "aws" || e.Region != "us-east-1" ||
				e.Attempt != n || e.Team != "vision" || e.Start != e.End {
				t.Errorf("%s: attempt %d's dataset entry %+v", when, n, e)
			}
		}
		if _, ok := got[fmt.Sprintf("%s/a%d/dataset", r.ID, a2.N)]; ok {
			t.Errorf("%s: the refused launch is charged the dataset", when)
		}
		// Rebuilt from the record, the charges are the ledger's.
		kept := ledger.Fold(es)
		if len(kept) != len(closed) {
			t.Errorf("%s: %d charges rebuilt, %d in the ledger", when, len(closed), len(kept))
		}
		for _, e := range closed {
			if k, ok := kept[e.ID]; !ok || k.Cost != e.Cost || !k.Start.Equal(e.Start) || k.Category != e.Category {
				t.Errorf("%s: rebuilt %+v, the ledger has %+v", when, e, k)
			}
		}
	}
	clk.Set(at(90))
	check("running again", true)

	clk.Set(at(300))
	l.apply(job.Exited{Attempt: 3, Instance: third, Code: 0})
	l.apply(job.InstanceGone{Key: a3.LaunchKey, Instance: job.Instance{ID: third, EndedAt: clk.Now(), Reason: "terminated"}})
	if r.Status.State != job.Succeeded || r.Status.Current != nil {
		t.Fatalf("the job is %s", r.Status.State)
	}
	check("done", false)
	if got := r.Status.Attempts[len(r.Status.Attempts)-1].Cost; got <= egress {
		t.Errorf("the last attempt cost %s, its instance and the data's egress %s", got, egress)
	}
	var refused *job.Attempt
	for i := range r.Status.Attempts {
		if r.Status.Attempts[i].N == a2.N {
			refused = &r.Status.Attempts[i]
		}
	}
	if refused == nil || refused.Cost != 0 || refused.DataTransfer != egress {
		t.Errorf("the refused attempt %+v: placed with the egress, billed nothing", refused)
	}
}
