package agent_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/providers"
)

var (
	progressLine = regexp.MustCompile(`^step (\d+)/10000 \((\d+)%\)$`)
	savedLine    = regexp.MustCompile(`^checkpoint saved at (\d+\.\d)% \(step (\d+), periodic\)$`)
	resumedLine  = regexp.MustCompile(`^resuming from checkpoint at (\d+\.\d)% \(step (\d+), saved by attempt 1\)$`)
)

// TestSimWorkloadWritesATrainingScriptsOutput: the simulated workload
// writes what a training script would: where it runs, where it starts
// from, its progress every 5% (at the clock's times, one line per mark),
// each checkpoint saved, and its end; a replacement that resumes says from
// which checkpoint, and carries on from there.
func TestSimWorkloadWritesATrainingScriptsOutput(t *testing.T) {
	e := newEnv(t, 20)
	st, err := checkpoint.Open(context.Background(), "file://"+t.TempDir(), checkpoint.WithClock(e.clk))
	if err != nil {
		t.Fatal(err)
	}
	e.sw.Checkpoints = st
	w := bertOnV100(0)
	w.Checkpoint = providers.CheckpointPlan{Interval: 30 * time.Minute, Duration: time.Minute}
	first := instance("p4d.24xlarge")
	first.Zone = "us-east-1a"
	stop := e.sw.Start(first, w)
	e.advance(50 * time.Minute) // one periodic checkpoint, at 30 minutes
	stop()                      // the capacity goes
	before := e.rec.lines()

	second := first
	second.ID, second.Zone, second.Attempt, second.RunningAt = "i-0002", "us-east-1b", 2, e.clk.Now()
	stop = e.sw.Start(second, w)
	defer stop()
	e.runUntilExit(6 * time.Hour)
	all := e.rec.lines()
	if !slices.Equal(all[:len(before)], before) {
		t.Fatalf("the first attempt's output changed after it stopped")
	}
	after := all[len(before):]

	if len(before) < 3 || !strings.HasPrefix(before[0], "starting on i-0001 (aws us-east-1a p4d.24xlarge, A100") ||
		before[1] != "starting from step 0 of 10000" {
		t.Fatalf("the first attempt began with %q", before[:min(2, len(before))])
	}
	saved := ""
	for _, l := range before {
		if m := savedLine.FindStringSubmatch(l); m != nil {
			saved = m[1]
		}
	}
	if saved == "" {
		t.Fatalf("no checkpoint saved in %q", before)
	}
	if !strings.HasPrefix(after[0], "starting on i-0002 (aws us-east-1b") {
		t.Fatalf("the second attempt began with %q", after[0])
	}
	if m := resumedLine.FindStringSubmatch(after[1]); m == nil || m[1] != saved {
		t.Fatalf("the second attempt's second line is %q, want it to resume from the checkpoint at %s%%", after[1], saved)
	}
	if last := after[len(after)-1]; last != "training finished: step 10000/10000; exiting with code 0" {
		t.Fatalf("the output ends %q", last)
	}
	// Progress every 5%, going up, at most one line per mark: a bounded
	// count, whatever the run's length.
	for i, lines := range [][]string{before, after} {
		prev, n := -1, 0
		for _, l := range lines {
			m := progressLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			pct, _ := strconv.Atoi(m[2])
			if pct < prev+4 {
				t.Errorf("attempt %d: progress %d%% after %d%%: not one line per 5%%", i+1, pct, prev)
			}
			prev = pct
			n++
		}
		if n == 0 || n > 20 {
			t.Errorf("attempt %d wrote %d progress lines", i+1, n)
		}
	}
	resumedAt, _ := strconv.ParseFloat(saved, 64)
	if m := progressLine.FindStringSubmatch(after[2]); m == nil {
		t.Errorf("the line after resuming is %q, want progress", after[2])
	} else if pct, _ := strconv.Atoi(m[2]); float64(pct) < resumedAt {
		t.Errorf("the resumed attempt's first progress is %d%%, before its checkpoint's %.1f%%", pct, resumedAt)
	}
}

// TestSimWorkloadOfAFewMinutesLogsProgressHalfAMinuteApart: a short run's
// progress lines are at least 30 s of its clock apart, not a line every few seconds: thousands of short simulated jobs
// must not flood the log stream.
func TestSimWorkloadOfAFewMinutesLogsProgressHalfAMinuteApart(t *testing.T) {
	e := newEnv(t, 20)
	w := bertOnV100(0)
	w.ReferenceSeconds = (10 * time.Minute).Seconds()
	stop := e.sw.Start(instance("p4d.24xlarge"), w)
	defer stop()
	took := e.runUntilExit(time.Hour)
	e.rec.mu.Lock()
	lines, times := slices.Clone(e.rec.output), slices.Clone(e.rec.times)
	e.rec.mu.Unlock()
	var at []time.Time
	prev := -1
	for i, l := range lines {
		m := progressLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		pct, _ := strconv.Atoi(m[2])
		if pct <= prev {
			t.Errorf("progress line %q after %d%%", l, prev)
		}
		prev = pct
		at = append(at, times[i])
	}
	if want := int(took / (30 * time.Second)); len(at) < 2 || len(at) > want+1 {
		t.Fatalf("a run of %s wrote %d progress lines, want 2 to %d", took, len(at), want+1)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 30*time.Second {
			t.Errorf("progress lines %s apart (%d and %d of %d)", gap, i, i+1, len(at))
		}
	}
}
