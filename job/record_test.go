package job

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestMoveToKeepsTimes(t *testing.T) {
	r := &Record{ID: "j-1", Status: Status{State: Queued, SubmittedAt: t0}}
	steps := []struct {
		to       State
		at       time.Duration // after t0
		started  time.Duration // -1: not yet
		finished time.Duration // -1: not yet
	}{
		{Placing, 1 * time.Minute, -1, -1},
		{Running, 3 * time.Minute, 3 * time.Minute, -1},
		{Checkpointing, 60 * time.Minute, 3 * time.Minute, -1},
		{Migrating, 61 * time.Minute, 3 * time.Minute, -1},
		{Running, 65 * time.Minute, 3 * time.Minute, -1}, // StartedAt is the first start
		{Succeeded, 120 * time.Minute, 3 * time.Minute, 120 * time.Minute},
	}
	at := func(d time.Duration) time.Time {
		if d < 0 {
			return time.Time{}
		}
		return t0.Add(d)
	}
	for _, st := range steps {
		t.Run(string(st.to), func(t *testing.T) {
			msg := "to " + string(st.to)
			if err := r.moveTo(st.to, t0.Add(st.at), msg); err != nil {
				t.Fatal(err)
			}
			s := r.Status
			if s.State != st.to || s.Message != msg || !s.UpdatedAt.Equal(t0.Add(st.at)) {
				t.Errorf("state, message, updated = %s, %q, %v", s.State, s.Message, s.UpdatedAt)
			}
			if !s.StartedAt.Equal(at(st.started)) || !s.FinishedAt.Equal(at(st.finished)) {
				t.Errorf("started, finished = %v, %v; want %v, %v", s.StartedAt, s.FinishedAt, at(st.started), at(st.finished))
			}
		})
	}
	t.Run("terminal state cannot move", func(t *testing.T) {
		before := *r
		err := r.moveTo(Running, t0.Add(5*time.Hour), "again")
		if err == nil {
			t.Fatal("succeeded job moved to running")
		}
		if want := "job j-1: cannot move from succeeded to running"; err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
		if !reflect.DeepEqual(*r, before) {
			t.Errorf("refused move changed the record:\n%+v\n%+v", r.Status, before.Status)
		}
	})
	for _, end := range []State{Expired, Cancelled} {
		t.Run(string(end)+" sets FinishedAt", func(t *testing.T) {
			r := &Record{ID: "j-2", Status: Status{State: Queued}}
			if err := r.moveTo(end, t0, "x"); err != nil {
				t.Fatal(err)
			}
			if !r.Status.FinishedAt.Equal(t0) || !r.Status.StartedAt.IsZero() {
				t.Errorf("started, finished = %v, %v", r.Status.StartedAt, r.Status.FinishedAt)
			}
		})
	}
}

// placed returns a record with a current attempt on nodes instances at
// price per hour each, launched at t0.
func placed(price money.Micros, nodes int) *Record {
	r := &Record{ID: "j-1", Status: Status{State: Running, Attempt: 1}}
	r.Status.Current = &Attempt{
		N: 1, LaunchKey: LaunchKey("j-1", 1),
		Placement:  Placement{Provider: "aws", Nodes: nodes, PricePerHour: price},
		PlacedAt:   t0.Add(-time.Minute),
		LaunchedAt: t0,
	}
	return r
}

func TestCloseAttemptBills(t *testing.T) {
	tests := []struct {
		name  string
		price money.Micros
		nodes int
		end   time.Duration
		want  money.Micros
	}{
		{"$3.06/h x 2 nodes x 90 min", money.MustParse("3.06"), 2, 90 * time.Minute, money.MustParse("9.18")},
		{"$32.77/h x 4 nodes x 10 h", money.MustParse("32.77"), 4, 10 * time.Hour, money.MustParse("1310.80")},
		{"$1/h x 1 node x 1 s", money.Dollar, 1, time.Second, 278},                                               // 277.78 rounds up
		{"$0.9731/h x 1 node x 7 min 3 s", money.MustParse("0.9731"), 1, 7*time.Minute + 3*time.Second, 114_339}, // 973100 x 423 / 3600 = 114339.25
		{"zero nodes read as one", money.MustParse("2.00"), 0, time.Hour, money.MustParse("2.00")},
		{"ended at launch", money.MustParse("3.06"), 2, 0, 0},
		{"ended before launch", money.MustParse("3.06"), 2, -time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := placed(tt.price, tt.nodes)
			r.Status.EndedCost = money.MustParse("1.00") // an earlier attempt
			end := t0.Add(tt.end)
			r.closeAttempt(&r.Status.Current, end, OutcomeLost)
			if r.Status.Current != nil {
				t.Fatal("attempt still current")
			}
			if len(r.Status.Attempts) != 1 {
				t.Fatalf("%d attempts in history, want 1", len(r.Status.Attempts))
			}
			a := r.Status.Attempts[0]
			if a.Cost != tt.want {
				t.Errorf("attempt cost = %s, want %s", a.Cost, tt.want)
			}
			if want := tt.want + money.Dollar; r.Status.EndedCost != want {
				t.Errorf("ended cost = %s, want %s", r.Status.EndedCost, want)
			}
			if a.Outcome != OutcomeLost || !a.EndedAt.Equal(end) {
				t.Errorf("outcome, ended = %q, %v", a.Outcome, a.EndedAt)
			}
		})
	}
	t.Run("never launched", func(t *testing.T) {
		r := placed(money.MustParse("3.06"), 2)
		r.Status.Current.LaunchedAt = time.Time{}
		r.closeAttempt(&r.Status.Current, t0.Add(time.Hour), OutcomeLaunchFailed)
		if c := r.Status.Attempts[0].Cost; c != 0 || r.Status.EndedCost != 0 {
			t.Errorf("unlaunched attempt cost %s (ended cost %s)", c, r.Status.EndedCost)
		}
	})
	t.Run("no current attempt", func(t *testing.T) {
		r := &Record{ID: "j-1", Status: Status{State: Queued, UpdatedAt: t0}}
		before := *r
		r.closeAttempt(&r.Status.Current, t0.Add(time.Hour), OutcomeLost)
		if !reflect.DeepEqual(*r, before) {
			t.Errorf("closing no attempt changed the record: %+v", r.Status)
		}
	})
}

func TestCloseAttemptKeepsLast20(t *testing.T) {
	r := &Record{ID: "j-1"}
	price := money.MustParse("1.00")
	for n := 1; n <= 25; n++ {
		start := t0.Add(time.Duration(n) * time.Hour)
		r.Status.Attempt = n
		r.Status.Current = &Attempt{N: n, Placement: Placement{Nodes: 1, PricePerHour: price}, LaunchedAt: start}
		r.closeAttempt(&r.Status.Current, start.Add(30*time.Minute), OutcomeLost)
	}
	if len(r.Status.Attempts) != 20 {
		t.Fatalf("history holds %d attempts, want 20", len(r.Status.Attempts))
	}
	for i, a := range r.Status.Attempts {
		if a.N != i+6 {
			t.Fatalf("history[%d] is attempt %d, want %d (oldest first, the last 20)", i, a.N, i+6)
		}
	}
	// Dropped attempts still count in the cost.
	if want := money.MustParse("12.50"); r.Status.EndedCost != want {
		t.Errorf("ended cost = %s, want %s for 25 half-hours at $1", r.Status.EndedCost, want)
	}
}

func TestCostAt(t *testing.T) {
	r := placed(money.MustParse("3.06"), 2)
	r.Status.EndedCost = money.MustParse("5.00")
	tests := []struct {
		at   time.Duration
		want money.Micros
	}{
		{-time.Minute, money.MustParse("5.00")},
		{0, money.MustParse("5.00")},
		{90 * time.Minute, money.MustParse("14.18")},
		{time.Second, money.MustParse("5.0017")}, // 6.12/3600 = 0.0017
	}
	for _, tt := range tests {
		t.Run(tt.at.String(), func(t *testing.T) {
			if got := r.CostAt(t0.Add(tt.at)); got != tt.want {
				t.Errorf("CostAt(t0%+v) = %s, want %s", tt.at, got, tt.want)
			}
		})
	}
	t.Run("matches what closing the attempt bills", func(t *testing.T) {
		end := t0.Add(77*time.Minute + 13*time.Second)
		want := r.CostAt(end)
		c := r.Clone()
		c.closeAttempt(&c.Status.Current, end, OutcomeSucceeded)
		if c.Status.EndedCost != want || c.CostAt(end.Add(time.Hour)) != want {
			t.Errorf("ended cost %s, cost an hour later %s; CostAt before the end said %s",
				c.Status.EndedCost, c.CostAt(end.Add(time.Hour)), want)
		}
	})
	t.Run("not launched yet", func(t *testing.T) {
		r := placed(money.MustParse("3.06"), 2)
		r.Status.Current.LaunchedAt = time.Time{}
		if got := r.CostAt(t0.Add(time.Hour)); got != 0 {
			t.Errorf("CostAt = %s before launch", got)
		}
	})
}

// Instances are billed each from its launch to the end its provider
// reports; an attempt closed before an instance's end is known bills it to
// the close, and the real end corrects the bill (the job's total with it).
func TestSpansBillEachInstanceToItsEnd(t *testing.T) {
	r := placed(money.MustParse("3.60"), 2) // $0.001 a second per node
	a := r.Status.Current
	a.Instances = []string{"i-1", "i-2"}
	a.Spans = []Span{{Instance: "i-1", From: t0}, {Instance: "i-2", From: t0.Add(10 * time.Second)}}
	a.Spans[0].To = t0.Add(100 * time.Second)
	if got, want := r.CostAt(t0.Add(200*time.Second)), money.Micros(100_000+190_000); got != want {
		t.Fatalf("CostAt = %s, want %s (i-1 100 s, i-2 190 s so far)", got, want)
	}
	closed := r.closeAttempt(&r.Status.Current, t0.Add(300*time.Second), OutcomeLost)
	if want := money.Micros(100_000 + 290_000); closed.Cost != want || r.Status.EndedCost != want {
		t.Fatalf("closed cost %s, ended cost %s; want %s", closed.Cost, r.Status.EndedCost, want)
	}
	// i-2's provider says it ended at 400 s: a tail of 100 s more.
	closed.Spans[1].To = t0.Add(400 * time.Second)
	r.rebill(closed)
	if want := money.Micros(100_000 + 390_000); closed.Cost != want || r.Status.EndedCost != want {
		t.Fatalf("after the real end: cost %s, ended cost %s; want %s", closed.Cost, r.Status.EndedCost, want)
	}
}

func TestPlacementHourlyCost(t *testing.T) {
	for _, tt := range []struct {
		nodes int
		want  string
	}{{0, "3.06"}, {1, "3.06"}, {2, "6.12"}, {512, "1566.72"}} {
		p := Placement{Nodes: tt.nodes, PricePerHour: money.MustParse("3.06")}
		if got := p.HourlyCost(); got != money.MustParse(tt.want) {
			t.Errorf("%d nodes: HourlyCost = %s, want $%s", tt.nodes, got, tt.want)
		}
	}
}

func TestLaunchKey(t *testing.T) {
	if got := LaunchKey("j-abc", 3); got != "j-abc-a3" {
		t.Errorf("LaunchKey = %q", got)
	}
}

// fullRecord has every map, slice and pointer a record can hold filled.
func fullRecord(t *testing.T) *Record {
	t.Helper()
	s := mustParse(t, yamlSpec(map[string]string{
		"labels":     "{project: squad}",
		"env":        "{EPOCHS: '3'}",
		"placement":  "{providers: [aws], deny_providers: [gcp], regions: [eu-west-1], deny_regions: [eu-north-1], geographies: [eu]}",
		"checkpoint": "{command: [save, now]}",
		"data":       "{provider: aws, region: eu-west-1, size_gb: 250}",
	}))
	r := placed(money.MustParse("3.06"), 2)
	r.Spec = s
	r.Status.Current.Instances = []string{"i-1", "i-2"}
	r.Status.Current.Running = []string{"i-1"}
	r.Status.Attempts = []Attempt{{N: 0, Instances: []string{"i-0"}, Running: []string{"i-0"}, Outcome: "lost"}}
	return r
}

func TestCloneIsDeep(t *testing.T) {
	mutations := map[string]func(r *Record){
		"priority":              func(r *Record) { *r.Spec.Priority = 7 },
		"labels":                func(r *Record) { r.Spec.Labels["project"] = "x" },
		"env":                   func(r *Record) { r.Spec.Env["EPOCHS"] = "9" },
		"command":               func(r *Record) { r.Spec.Command[0] = "rm" },
		"accelerators":          func(r *Record) { r.Spec.Resources.Accelerators[0] = "T4" },
		"providers":             func(r *Record) { r.Spec.Placement.Providers[0] = "azure" },
		"deny providers":        func(r *Record) { r.Spec.Placement.DenyProviders[0] = "aws" },
		"regions":               func(r *Record) { r.Spec.Placement.Regions[0] = "us-east-1" },
		"deny regions":          func(r *Record) { r.Spec.Placement.DenyRegions[0] = "us-east-1" },
		"geographies":           func(r *Record) { r.Spec.Placement.Geographies[0] = "us" },
		"checkpoint command":    func(r *Record) { r.Spec.Checkpoint.Command[0] = "x" },
		"current":               func(r *Record) { r.Status.Current.Outcome = "x" },
		"current instances":     func(r *Record) { r.Status.Current.Instances[0] = "x" },
		"current running":       func(r *Record) { r.Status.Current.Running[0] = "x" },
		"current running grown": func(r *Record) { r.Status.Current.Running = append(r.Status.Current.Running, "x") },
		"attempts":              func(r *Record) { r.Status.Attempts[0].Outcome = "x" },
		"attempt instances":     func(r *Record) { r.Status.Attempts[0].Instances[0] = "x" },
		"attempt running":       func(r *Record) { r.Status.Attempts[0].Running[0] = "x" },
		"status":                func(r *Record) { r.Status.State = Failed },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			orig := fullRecord(t)
			before := mustJSON(t, orig)
			c := orig.Clone()
			if !reflect.DeepEqual(c, orig) {
				t.Fatalf("clone differs from the original:\n%s\n%s", mustJSON(t, c), before)
			}
			mutate(c)
			if after := mustJSON(t, orig); !bytes.Equal(after, before) {
				t.Errorf("changing the clone's %s changed the original", name)
			}
			if bytes.Equal(mustJSON(t, c), before) {
				t.Errorf("mutation of %s did not change the clone; the test is broken", name)
			}
		})
	}
	t.Run("empty record", func(t *testing.T) {
		r := &Record{ID: "j-1"}
		if c := r.Clone(); !reflect.DeepEqual(c, r) {
			t.Errorf("clone of an empty record = %+v", c)
		}
	})
}

func TestRecordJSONRoundTrip(t *testing.T) {
	r := fullRecord(t)
	r.Status.SubmittedAt = t0
	r.Status.WorkLost = Duration(time.Hour)
	b := mustJSON(t, r)
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if again := mustJSON(t, &back); !bytes.Equal(again, b) {
		t.Errorf("record changed through JSON:\n%s\n%s", b, again)
	}
	if back.Spec.Hash() != r.Spec.Hash() {
		t.Error("spec hash changed through JSON")
	}
	if !strings.Contains(string(b), `"price_per_hour":3.060000`) {
		t.Errorf("price not written as a decimal number: %s", b)
	}
}
