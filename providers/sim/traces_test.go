package sim

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
)

// sharedTraces is ../shared/traces seen from this package.
const sharedTraces = "../../../shared/traces"

// busy is a seeded model that would interrupt everything at once, to show
// that a traced zone ignores it.
var busy = Interruptions{RateScale: 5000, StormsPerDay: 48, RebalanceShare: 1, MaintenancePerHour: 2, FailuresPerHour: 2}

// withTraces attaches traces to the cloud, sample 0 at t0.
func withTraces(traces map[string]Trace) func(*Options) {
	return func(o *Options) { o.Traces, o.TraceEpoch = traces, t0 }
}

// A 1-node trace with an outage at samples 3 and 4: the zone's spot
// instances get notices exactly when it starts, its spot offers show no
// capacity until it ends, and the trace starts over at its end.
func TestTraceOutage(t *testing.T) {
	step := 10 * time.Minute
	tr := Trace{Step: step, Values: []int{1, 1, 1, 0, 0, 1, 1, 1}}
	e := newEnv(t, model(busy), withTraces(map[string]Trace{"us-east-1b": tr}))
	rec, _, _ := watch(t, e.cloud)
	e.setAvailable(awsSmallSp, 4)
	spot := e.boot(awsSmallSp, "spot", 2)
	od := e.boot(awsSmallOD, "od", 1)[0]

	outage := t0.Add(3 * step)
	e.clk.Set(outage.Add(-time.Second))
	for _, in := range spot {
		if r := e.record(in.ID); r.Interruption != nil || r.Instance.State != providers.InstanceRunning {
			t.Fatalf("%s before the outage: %s, notice %+v", in.ID, r.Instance.State, r.Interruption)
		}
	}
	if o := e.offer(awsSmallSp); o.Available != 2 || o.Capacity == providers.CapacityNone {
		t.Errorf("before the outage: available %d, %s", o.Available, o.Capacity)
	}
	e.clk.Advance(time.Second)
	for _, in := range spot {
		ev := rec.wait(t, "notice", instanceEvent(providers.EventSpotInterruption, in.ID))
		if !ev.Time.Equal(outage) || ev.Reason != CauseTrace || !ev.Deadline.Equal(outage.Add(2*time.Minute)) {
			t.Errorf("notice %+v, want at %s", ev, outage)
		}
	}
	if o := e.offer(awsSmallSp); o.Available != 0 || o.Capacity != providers.CapacityNone {
		t.Errorf("during the outage: available %d, %s", o.Available, o.Capacity)
	}
	rec.wait(t, "offers without capacity", offerWith(awsSmallSp, func(o providers.Offer) bool { return o.Capacity == providers.CapacityNone }))
	if _, err := e.cloud.Launch(context.Background(), e.request(awsSmallSp, "during", 1)); !providers.IsInsufficientCapacity(err) {
		t.Errorf("launch during the outage: %v", err)
	}
	if o := e.offer(awsSmallOD); o.Available == 0 {
		t.Error("the outage took on-demand capacity")
	}
	e.clk.Advance(2 * time.Minute)
	for _, in := range spot {
		if got := e.instance(in.ID); got.State != providers.InstanceTerminated || got.Reason != ReasonReclaimed {
			t.Errorf("%s after the deadline: %s (%q)", in.ID, got.State, got.Reason)
		}
	}

	// Back at sample 5, less the capacity the interruptions hold.
	back := t0.Add(5 * step)
	e.clk.Set(back.Add(-time.Second))
	if o := e.offer(awsSmallSp); o.Capacity != providers.CapacityNone {
		t.Errorf("a second before the trace comes back: %s", o.Capacity)
	}
	e.clk.Advance(time.Second)
	if o := e.offer(awsSmallSp); o.Available != 2 {
		t.Errorf("once back: available %d, want 2 (4, 2 held)", o.Available)
	}

	// The trace starts over: the next outage is at sample 8+3.
	late := e.boot(awsSmallSp, "late", 1)[0]
	e.clk.Set(t0.Add(11 * step))
	if r := e.record(late.ID); r.Interruption == nil || !r.Interruption.SentAt.Equal(t0.Add(11*step)) {
		t.Errorf("second outage: notice %+v, want at %s", r.Interruption, t0.Add(11*step))
	}
	// Nothing seeded happens in the traced zone, to on-demand either.
	if r := e.record(od.ID); r.Instance.State != providers.InstanceRunning || r.Maintenance != nil {
		t.Errorf("on-demand instance in the traced zone: %s, maintenance %+v", r.Instance.State, r.Maintenance)
	}
	if rate, ok := e.cloud.InterruptionRate(awsSmallSp); !ok || math.Abs(rate-0.75) > 1e-9 {
		t.Errorf("traced rate %v per hour, want one outage per 80 minutes", rate)
	}
	if b := e.cloud.AdvisorBucket(awsSmallSp); b != ">20%" {
		t.Errorf("traced bucket %q", b)
	}
	if rate, _ := e.cloud.InterruptionRate(awsSmallOD); rate != 0 {
		t.Errorf("traced on-demand rate %v", rate)
	}
}

// An N-node trace counts as an outage while fewer than N instances were
// available.
func TestTraceNodes(t *testing.T) {
	step := 10 * time.Minute
	for _, tt := range []struct {
		name   string
		trace  Trace
		notice time.Duration // after t0; 0 = none within two cycles
	}{
		{"4-node short of one", Trace{Step: step, Values: []int{4, 4, 3, 4}, Nodes: 4}, 2 * step},
		{"4-node full", Trace{Step: step, Values: []int{4, 4, 4, 4}, Nodes: 4}, 0},
		{"4-node more than asked", Trace{Step: step, Values: []int{5, 4, 6, 4}, Nodes: 4}, 0},
		{"1-node", Trace{Step: step, Values: []int{1, 0, 1, 1}}, step},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, model(busy), withTraces(map[string]Trace{"us-east-1a": tt.trace}))
			if tt.trace.Values[0] < max(tt.trace.Nodes, 1) {
				t.Fatal("bad test: the zone must have capacity at t0")
			}
			e.setAvailable(awsBigSpot, 2)
			ins := e.launch(awsBigSpot, "k", 2)
			e.clk.Advance(8 * step)
			for _, in := range ins {
				r := e.record(in.ID)
				switch {
				case tt.notice == 0 && r.Interruption != nil:
					t.Errorf("%s: notice %+v", in.ID, r.Interruption)
				case tt.notice != 0 && (r.Interruption == nil || !r.Interruption.SentAt.Equal(t0.Add(tt.notice))):
					t.Errorf("%s: notice %+v, want at t0+%s", in.ID, r.Interruption, tt.notice)
				}
			}
		})
	}
}

func TestLoadTraces(t *testing.T) {
	dir := filepath.Join(sharedTraces, "availability/1-node/aws-02-15-2023")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no traces: %v", err)
	}
	traces, err := LoadTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 9 {
		t.Errorf("%d zones, want 9", len(traces))
	}
	for zone, tr := range traces {
		if tr.Step != 195*time.Second || len(tr.Values) != 20158 || tr.Nodes != 1 {
			t.Errorf("%s: step %s, %d samples, %d nodes", zone, tr.Step, len(tr.Values), tr.Nodes)
		}
	}
	if _, ok := traces["us-east-1a"]; !ok {
		t.Error("no us-east-1a")
	}

	sixteen, err := LoadTraces(filepath.Join(sharedTraces, "availability/16-node/aws-08-27-2023"))
	if err != nil {
		t.Fatal(err)
	}
	for zone, tr := range sixteen {
		if tr.Nodes != 16 {
			t.Errorf("%s: %d nodes, want 16", zone, tr.Nodes)
		}
	}
	// A set with several traces per zone needs its files named.
	two := filepath.Join(sharedTraces, "availability/1-node/aws-10-26-2022")
	if _, err := LoadTraces(two); err == nil || !strings.Contains(err.Error(), "pass the files") {
		t.Errorf("several traces of a zone: %v", err)
	}
	picked, err := LoadTraces(filepath.Join(two, "us-west-2a_v100_1.json"), filepath.Join(two, "us-west-2b_v100_1.json"))
	if err != nil || len(picked) != 2 {
		t.Errorf("two files: %d zones, %v", len(picked), err)
	}

	// The loaded traces drive a cloud over the bundled catalog.
	cat := defaultCatalog(t)
	c, err := New(context.Background(), Options{Catalog: cat, Clock: clock.NewFake(t0), Providers: []string{"aws"},
		Regions: []string{"us-east-1", "us-west-2"}, Traces: traces})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	traced := 0
	for _, o := range mustOffers(t, c) {
		x := c.traces[o.Zone]
		if x == nil || o.Purchase != providers.Spot {
			continue
		}
		traced++
		if rate, _ := c.InterruptionRate(o.ID()); rate != x.perHour || c.AdvisorBucket(o.ID()) != bucketOf(x.perHour) {
			t.Errorf("%s: rate %v, want the trace's %v", o.ID(), rate, x.perHour)
		}
		if x.outAt(t0) && o.Capacity != providers.CapacityNone {
			t.Errorf("%s: capacity %s during the trace's outage", o.ID(), o.Capacity)
		}
	}
	if traced == 0 {
		t.Error("no offer in a traced zone")
	}
}

func TestLoadTracesErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("us-east-1a_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": [1, 0, 1]}`)
	for _, tt := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"missing", []string{filepath.Join(dir, "nope.json")}, "no such file"},
		{"not JSON", []string{write("us-east-1b_v100_1.json", `{"data": [1,`)}, "unexpected end"},
		{"no step", []string{write("us-east-1c_v100_1.json", `{"metadata": {}, "data": [1]}`)}, "gap_seconds"},
		{"no samples", []string{write("us-east-1d_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": []}`)}, "gap_seconds"},
		{"negative", []string{write("us-east-1e_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": [1, -1]}`)}, "not a count"},
		{"fraction", []string{write("us-east-1f_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": [0.5]}`)}, "not a count"},
		{"no zone", []string{write("_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": [1]}`)}, "no zone"},
		{"twice", []string{good, good}, "has a trace already"},
		{"empty directory", []string{t.TempDir()}, "none in"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadTraces(tt.paths...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
	traces, err := LoadTraces(good)
	if err != nil {
		t.Fatal(err)
	}
	if tr := traces["us-east-1a"]; tr.Step != time.Minute || tr.Nodes != 1 || len(tr.Values) != 3 {
		t.Errorf("trace %+v", tr)
	}
	// Bad traces are refused by New too.
	for _, tr := range []Trace{{Step: 0, Values: []int{1}}, {Step: time.Minute}, {Step: time.Minute, Values: []int{-1}}} {
		if c, err := New(context.Background(), Options{Catalog: testCatalog(t), Clock: clock.NewFake(t0),
			Traces: map[string]Trace{"us-east-1a": tr}}); err == nil {
			c.Close()
			t.Errorf("New accepted trace %+v", tr)
		}
	}
}

func TestTraceIndex(t *testing.T) {
	x, err := newTraceIndex("z", Trace{Step: time.Minute, Values: []int{1, 0, 0, 1, 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tt := range []struct {
		t      time.Time
		out    bool
		outage time.Time // firstOutage
		change time.Time // nextChange
	}{
		{at(0), false, at(1), at(1)},
		{at(1), true, at(1), at(3)},
		{at(2).Add(30 * time.Second), true, at(2).Add(30 * time.Second), at(3)},
		{at(4), false, at(6), at(6)},  // wraps: sample 6 is sample 1
		{at(-1), false, at(1), at(1)}, // before the epoch: sample -1 is sample 4
		{at(-4), true, at(-4), at(-2)},
	} {
		if got := x.outAt(tt.t); got != tt.out {
			t.Errorf("outAt(%s) = %v", tt.t.Sub(t0), got)
		}
		if got, _ := x.firstOutage(tt.t); !got.Equal(tt.outage) {
			t.Errorf("firstOutage(%s) = %s, want %s", tt.t.Sub(t0), got.Sub(t0), tt.outage.Sub(t0))
		}
		if got, _ := x.nextChange(tt.t); !got.Equal(tt.change) {
			t.Errorf("nextChange(%s) = %s, want %s", tt.t.Sub(t0), got.Sub(t0), tt.change.Sub(t0))
		}
	}
	always, _ := newTraceIndex("z", Trace{Step: time.Minute, Values: []int{1, 1}}, t0)
	if _, ok := always.firstOutage(t0); ok {
		t.Error("an outage in a trace without one")
	}
	if _, ok := always.nextChange(t0); ok {
		t.Error("a change in a constant trace")
	}
}
