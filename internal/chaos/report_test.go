package chaos

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// inst is an instance of a job's attempt, live from +from to +to minutes
// (to < 0: still live) at $3.60/h.
func inst(jobID string, attempt, node int, from, to int) providers.Instance {
	in := providers.Instance{ID: fmt.Sprintf("i-%s-%d-%d", jobID, attempt, node), JobID: jobID, Attempt: attempt, Node: node,
		IdempotencyKey: job.LaunchKey(jobID, attempt), Price: money.MustParse("3.60"), Purchase: providers.Spot,
		LaunchedAt: t0.Add(time.Duration(from) * time.Minute), State: providers.InstanceRunning}
	if to >= 0 {
		in.State, in.EndedAt = providers.InstanceTerminated, t0.Add(time.Duration(to)*time.Minute)
	}
	return in
}

func TestMaxLiveAttempts(t *testing.T) {
	now := t0.Add(100 * time.Minute)
	tests := []struct {
		name  string
		insts []providers.Instance
		want  int
		job   string
		at    time.Duration // after t0
	}{
		{name: "none"},
		{name: "one attempt of two nodes", insts: []providers.Instance{inst("a", 1, 0, 0, 10), inst("a", 1, 1, 0, 10)}, want: 1, job: "a"},
		{name: "an end at the next start does not overlap", insts: []providers.Instance{inst("a", 1, 0, 0, 10), inst("a", 2, 0, 10, 20), inst("a", 3, 0, 20, 30)}, want: 1, job: "a"},
		{name: "a move: old and new overlap", insts: []providers.Instance{inst("a", 1, 0, 0, 12), inst("a", 2, 0, 10, 20)}, want: 2, job: "a", at: 10 * time.Minute},
		{
			name:  "three at once, the last still live",
			insts: []providers.Instance{inst("a", 1, 0, 0, 5), inst("b", 1, 0, 0, 50), inst("b", 2, 0, 10, 60), inst("b", 3, 0, 40, -1)},
			want:  3, job: "b", at: 40 * time.Minute,
		},
		{name: "other jobs do not add up", insts: []providers.Instance{inst("a", 1, 0, 0, 50), inst("b", 1, 0, 0, 50), inst("c", 1, 0, 0, 50)}, want: 1, job: "a"},
		{name: "instances that never lived are left out", insts: []providers.Instance{inst("a", 1, 0, 0, 50), inst("a", 2, 0, 10, 10)}, want: 1, job: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, id, at := maxLiveAttempts(tt.insts, now)
			if n != tt.want || id != tt.job || (n > 0 && !at.Equal(t0.Add(tt.at))) {
				t.Errorf("got %d (%q at %s), want %d (%q at +%s)", n, id, at, tt.want, tt.job, tt.at)
			}
		})
	}
}

// recordOf is a succeeded job whose attempts billed the instances given,
// each at its own price.
func recordOf(id string, nodes int, insts ...providers.Instance) *job.Record {
	r := &job.Record{ID: id, Spec: job.Spec{Resources: job.Resources{Nodes: nodes}}, Status: job.Status{State: job.Succeeded}}
	byAttempt := map[int]*job.Attempt{}
	for _, in := range insts {
		a := byAttempt[in.Attempt]
		if a == nil {
			a = &job.Attempt{N: in.Attempt, LaunchKey: in.IdempotencyKey, Outcome: job.OutcomeSucceeded}
			byAttempt[in.Attempt] = a
			r.Status.Attempt = max(r.Status.Attempt, in.Attempt)
		}
		a.Instances = append(a.Instances, in.ID)
		a.Cost += InstanceBill(in, time.Time{})
	}
	for n := 1; n <= r.Status.Attempt; n++ {
		if a := byAttempt[n]; a != nil {
			r.Status.Attempts = append(r.Status.Attempts, *a)
			r.Status.EndedCost += a.Cost
		}
	}
	return r
}

// dataEgress has j-a's second attempt (on instance in) read its data in
// another region, $10 of egress billed with it, and a third attempt
// placed there whose launch was refused: it read nothing.
func dataEgress(f *Final, in providers.Instance) {
	r := f.Records["j-a"]
	a := &r.Status.Attempts[1]
	a.LaunchedAt, a.EndedAt, a.DataTransfer = in.LaunchedAt, in.EndedAt, money.MustParse("10")
	a.Cost += a.DataTransfer
	r.Status.EndedCost += a.DataTransfer
	r.Status.Attempts = append(r.Status.Attempts, job.Attempt{N: 3, LaunchKey: job.LaunchKey("j-a", 3), Outcome: job.OutcomeLaunchFailed,
		DataTransfer: money.MustParse("10")})
	r.Status.Attempt = 3
}

func TestCompute(t *testing.T) {
	a1, a2 := inst("j-a", 1, 0, 0, 30), inst("j-a", 2, 0, 29, 60)
	b1, b2 := inst("j-b", 1, 0, 0, 20), inst("j-b", 1, 1, 0, 20)
	orphan := inst("j-c", 1, 0, 0, 5)
	base := func() Final {
		return Final{
			Acked:     map[string]string{"k-a": "j-a", "k-b": "j-b"},
			Records:   map[string]*job.Record{"j-a": recordOf("j-a", 1, a1, a2), "j-b": recordOf("j-b", 2, b1, b2)},
			Instances: []providers.Instance{a1, a2, b1, b2},
			Backwards: map[string]string{}, Why: map[string]string{},
			Now: t0.Add(2 * time.Hour),
		}
	}
	t.Run("a clean run meets every target", func(t *testing.T) {
		r := Compute(base())
		if missed := r.Missed(); len(missed) != 0 {
			t.Fatalf("missed %v", missed)
		}
		var want money.Micros
		for _, in := range []providers.Instance{a1, a2, b1, b2} {
			want += InstanceBill(in, time.Time{})
		}
		if r.CloudBill != want || r.Attributed != want || r.Unattributed != 0 {
			t.Errorf("bill %s, attributed %s, unattributed %s; want %s both", r.CloudBill, r.Attributed, r.Unattributed, want)
		}
		if r.Jobs != 2 || r.MaxLiveAttempts != 2 || r.MaxLiveAttemptsJob != "j-a" || r.MaxInstances != 2 || r.Instances != 4 {
			t.Errorf("report %+v", r)
		}
	})
	tests := []struct {
		name   string
		edit   func(f *Final)
		missed string
		check  func(t *testing.T, r Report)
	}{
		{name: "an acknowledged job without a record is lost", edit: func(f *Final) { f.Acked["k-x"] = "j-x" }, missed: "1 jobs lost"},
		{name: "a record that went backwards is lost", edit: func(f *Final) { f.Backwards["j-a"] = "revision 3 after revision 9" }, missed: "1 jobs lost"},
		{name: "a job not ended is stuck, with why", edit: func(f *Final) {
			f.Records["j-b"].Status.State = job.Queued
			f.Why["j-b"] = "queued: no capacity"
		}, missed: "1 jobs stuck", check: func(t *testing.T, r Report) {
			if !reflect.DeepEqual(r.Stuck, []Problem{{"j-b", "queued: no capacity"}}) {
				t.Errorf("stuck %+v", r.Stuck)
			}
		}},
		{name: "an orphan without overhead is billed to no job", edit: func(f *Final) { f.Instances = append(f.Instances, orphan) }, missed: "billed to no job",
			check: func(t *testing.T, r Report) {
				if r.Unattributed != InstanceBill(orphan, time.Time{}) || len(r.Unbilled) != 1 || !strings.Contains(r.Unbilled[0].Why, orphan.ID) {
					t.Errorf("unattributed %s, unbilled %+v", r.Unattributed, r.Unbilled)
				}
			}},
		{name: "an orphan with its overhead recorded is accounted for", edit: func(f *Final) {
			f.Instances = append(f.Instances, orphan)
			f.Overheads = []scheduler.Overhead{{Instance: orphan.ID, Cost: InstanceBill(orphan, time.Time{})}}
			f.Acked["k-c"] = "j-c"
			f.Records["j-c"] = &job.Record{ID: "j-c", Spec: job.Spec{Resources: job.Resources{Nodes: 1}}, Status: job.Status{State: job.Failed, Attempt: 1}}
		}},
		{name: "an attempt billed at another price than charged", edit: func(f *Final) {
			f.Records["j-a"].Status.Attempts[1].Cost += 5
			f.Records["j-a"].Status.EndedCost += 5
		}, missed: "-0.000005 of spend billed to no job", check: func(t *testing.T, r Report) {
			if len(r.Unbilled) != 1 || !strings.Contains(r.Unbilled[0].Why, "attempt 2") {
				t.Errorf("unbilled %+v", r.Unbilled)
			}
		}},
		{name: "the data's egress is billed to the jobs apart from their instances", edit: func(f *Final) {
			dataEgress(f, a2)
		}, check: func(t *testing.T, r Report) {
			if r.DataTransfers != money.MustParse("10") || r.Transfers != 0 || r.Unattributed != 0 || r.CloudBill != r.Attributed {
				t.Errorf("data transfers %s, transfers %s, attributed %s of a bill of %s", r.DataTransfers, r.Transfers, r.Attributed, r.CloudBill)
			}
		}},
		{name: "the data's egress is no attempt's difference with the cloud", edit: func(f *Final) {
			dataEgress(f, a2)
			f.Instances = append(f.Instances, orphan)
		}, missed: "billed to no job", check: func(t *testing.T, r Report) {
			if r.DataTransfers != money.MustParse("10") || r.Unattributed != InstanceBill(orphan, time.Time{}) || len(r.Unbilled) != 1 || !strings.Contains(r.Unbilled[0].Why, orphan.ID) {
				t.Errorf("data transfers %s, unattributed %s, unbilled %+v", r.DataTransfers, r.Unattributed, r.Unbilled)
			}
		}},
		{name: "a third attempt live at once", edit: func(f *Final) {
			a3 := inst("j-a", 3, 0, 29, 31)
			f.Instances = append(f.Instances, a3)
			f.Records["j-a"] = recordOf("j-a", 1, a1, a2, a3)
		}, missed: "3 live attempts of one job at once"},
		{name: "more instances than nodes under one key", edit: func(f *Final) {
			extra := inst("j-a", 2, 1, 29, 60)
			f.Instances = append(f.Instances, extra)
			f.Records["j-a"] = recordOf("j-a", 1, a1, a2, extra)
		}, missed: "1 launch keys with extra instances"},
		{name: "instances of a launch the record says was refused", edit: func(f *Final) {
			f.Records["j-a"].Status.Attempts[1].Outcome = job.OutcomeLaunchFailed
		}, missed: "1 launch keys with extra instances"},
		{name: "instances of an attempt the job never placed", edit: func(f *Final) {
			f.Records["j-a"].Status.Attempt = 1
		}, missed: "1 launch keys with extra instances"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base()
			tt.edit(&f)
			r := Compute(f)
			missed := strings.Join(r.Missed(), "; ")
			if tt.missed == "" && missed != "" || !strings.Contains(missed, tt.missed) {
				t.Errorf("missed %q, want %q", missed, tt.missed)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
			var b strings.Builder
			r.Print(&b) // it prints whatever it found
			if !strings.Contains(b.String(), "billed to no job") {
				t.Errorf("report:\n%s", b.String())
			}
		})
	}
}

func TestPlanIsSeeded(t *testing.T) {
	o := DefaultOptions()
	o.Seed = 42
	a, b := NewPlan(o), NewPlan(o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew two plans")
	}
	o.Seed = 43
	if c := NewPlan(o); reflect.DeepEqual(a.Jobs, c.Jobs) || reflect.DeepEqual(a.Kills, c.Kills) {
		t.Fatal("seeds 42 and 43 drew the same plan")
	}
	if len(a.Jobs) != o.Jobs || len(a.Kills) != o.Kills || len(a.Storms) != o.Storms {
		t.Fatalf("plan of %d jobs, %d kills, %d storms", len(a.Jobs), len(a.Kills), len(a.Storms))
	}
	for _, j := range a.Jobs {
		if _, err := job.Parse(j.Spec, catalog.Default()); err != nil {
			t.Errorf("job %s does not parse: %v\n%s", j.Key, err, j.Spec)
		}
	}
	for i := 1; i < len(a.Kills); i++ {
		if gap := a.Kills[i].At - a.Kills[i-1].At - a.Kills[i-1].Down; gap < o.MinKillGap {
			t.Errorf("kills %d and %d are %s apart", i-1, i, gap)
		}
	}
}
