package scheduler_test

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/sim"
)

// series reads a registry as "name{label=value,...}" -> value; a
// histogram gives name_count and name_sum.
func series(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := func(name string) string { return name + "{" + strings.Join(ls, ",") + "}" }
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(mf.GetName())] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(mf.GetName())] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key(mf.GetName()+"_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key(mf.GetName()+"_sum")] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// want waits until every series has its value.
func wantSeries(t *testing.T, reg *prometheus.Registry, what string, want map[string]float64) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		got := series(t, reg)
		for k, v := range want {
			if math.Abs(got[k]-v) > 1e-9 {
				return fmt.Errorf("%s: %s = %v, want %v", what, k, got[k], v)
			}
		}
		return nil
	})
}

// A job's life in the metrics: its placement by provider, region and
// purchase option, its wait from submission to running, the notice to its
// checkpoint, the move a preemption forced, what it is billed by team, and
// the scheduler's count of jobs and instances by state; and the
// preemption's alert is resolved once the job runs again.
func TestMetricsFollowAPreemptedJob(t *testing.T) {
	r := newRig(t, rigOpt{workload: true})
	reg := prometheus.NewPedanticRegistry()
	if err := r.s.Metrics().Register(reg); err != nil {
		t.Fatal(err)
	}
	alerts := watchAlerts(t, r)

	rec := r.runToRunning(t, spotT4+"team: vision\ncheckpoint: {duration: 30s}\n")
	waited := rec.Status.StartedAt.Sub(rec.Status.SubmittedAt).Seconds()
	if waited <= 0 {
		t.Fatalf("started %s, submitted %s", rec.Status.StartedAt, rec.Status.SubmittedAt)
	}
	wantSeries(t, reg, "running", map[string]float64{
		"spotwise_placements_total{provider=aws,purchase=spot,region=us-east-1}": 1,
		"spotwise_queue_to_running_seconds_count{purchase=spot}":                 1,
		"spotwise_queue_to_running_seconds_sum{purchase=spot}":                   waited,
		"spotwise_jobs{state=running}":                                           1,
		"spotwise_jobs{state=queued}":                                            0,
		"spotwise_instances{provider=aws,state=running}":                         1,
	})

	rec = r.advanceUntil(t, time.Minute, 2*time.Hour, "progress", func(x *job.Record) bool { return x.Status.Progress >= 0.2 }, rec.ID)
	if err := r.cloud.Preempt(rec.Status.Current.Instances[0]); err != nil {
		t.Fatal(err)
	}
	noticeAt := r.clk.Now()
	var checkpointedAt time.Time
	rec = r.advanceUntil(t, 5*time.Second, 5*time.Minute, "checkpoint stored", func(x *job.Record) bool {
		checkpointedAt = r.clk.Now()
		return x.Status.State == job.Migrating && x.Status.Checkpoint != nil
	}, rec.ID)
	got := series(t, reg)
	if n := got["spotwise_notice_to_checkpoint_seconds_count{provider=aws}"]; n != 1 {
		t.Fatalf("notice -> checkpoint observed %v times, want 1", n)
	}
	// In the scheduler's (fake) clock: at most the time the rig let pass.
	if d := got["spotwise_notice_to_checkpoint_seconds_sum{provider=aws}"]; d <= 0 || d > checkpointedAt.Sub(noticeAt).Seconds() {
		t.Errorf("notice -> checkpoint %vs, want within the %s the clock moved", d, checkpointedAt.Sub(noticeAt))
	}
	if a := alerts.wait(t, "preemption", rec.ID); !a.Ongoing || a.Resolved || a.Details["team"] != "vision" {
		t.Errorf("preemption alert %+v: want ongoing, not resolved, team vision", a)
	}

	rec = r.advanceUntil(t, time.Minute, 30*time.Minute, "running again", func(x *job.Record) bool {
		return x.Status.State == job.Running && x.Status.Current.N == 2 && len(x.Status.Attempts) == 1
	}, rec.ID)
	wantSeries(t, reg, "moved", map[string]float64{
		"spotwise_moves_total{reason=preemption}":                                1,
		"spotwise_placements_total{provider=aws,purchase=spot,region=us-east-1}": 2,
		// The first run only: the wait to a job's first running.
		"spotwise_queue_to_running_seconds_count{purchase=spot}": 1,
		"spotwise_jobs{state=running}":                           1,
	})
	resolved := alerts.waitFor(t, rec.ID, func(a events.Alert) bool { return a.Kind == "preemption" && a.Resolved })
	if resolved.Severity != events.SeverityWarning || resolved.Details["team"] != "vision" || !strings.Contains(resolved.Summary, "runs again") {
		t.Errorf("resolved alert %+v: want the preemption's severity and team, saying it runs again", resolved)
	}

	rec = r.advanceUntil(t, 5*time.Minute, 3*time.Hour, "done", func(x *job.Record) bool {
		return x.Status.State == job.Succeeded && x.Status.Current == nil && x.Status.Previous == nil
	}, rec.ID)
	wantSeries(t, reg, "done", map[string]float64{
		"spotwise_jobs{state=running}":            0,
		"spotwise_moves_total{reason=preemption}": 1,
	})
	if n := alerts.count(rec.ID, func(a events.Alert) bool { return a.Kind == "preemption" && a.Resolved }); n != 1 {
		t.Errorf("%d resolved preemption alerts, want 1 (the job ending does not resolve it again)", n)
	}
}

// Launches that buy nothing are counted by where they were tried and by
// kind.
func TestMetricsCountLaunchErrors(t *testing.T) {
	tests := []struct {
		name   string
		faults sim.Faults
		kind   string
	}{
		{"no capacity", sim.Faults{Capacity: 1}, "capacity"},
		{"refused for good", sim.Faults{Permanent: 1}, "refused"},
		{"no answer", sim.Faults{Unknown: 1}, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, rigOpt{faults: &tt.faults})
			reg := prometheus.NewPedanticRegistry()
			if err := r.s.Metrics().Register(reg); err != nil {
				t.Fatal(err)
			}
			r.submit(t, spotT4)
			key := "spotwise_launch_errors_total{kind=" + tt.kind + ",provider=aws,purchase=spot,region=us-east-1}"
			testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
				got := series(t, reg)
				if got[key] < 1 {
					var have []string
					for k := range got {
						if strings.HasPrefix(k, "spotwise_launch_errors_total") {
							have = append(have, k)
						}
					}
					slices.Sort(have)
					return fmt.Errorf("%s = %v (launch errors: %v)", key, got[key], have)
				}
				return nil
			})
		})
	}
}
