package server

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		live  uint64
		quiet bool
		want  int
	}{
		{0, true, 100},
		{10 * mib, true, 100},  // small heaps keep Go's default
		{16 * mib, true, 100},  // the minimum headroom is as much as is live
		{64 * mib, true, 25},   // 16 MiB of headroom
		{100 * mib, true, 16},  // still 16 MiB
		{128 * mib, true, 13},  // from here an eighth of what is live
		{4096 * mib, true, 13}, // however large
		{4096 * mib, false, 100},
		{128 * mib, false, 100}, // busy: Go's default
	} {
		if got := gcPercentFor(tt.live, tt.quiet); got != tt.want {
			t.Errorf("gcPercentFor(%d MiB, quiet %v) = %d, want %d", tt.live/mib, tt.quiet, got, tt.want)
		}
	}
}

// The jobs are quiet while their records changed fewer than busyChanges
// times in the last quietSpan's readings.
func TestQuietness(t *testing.T) {
	const ticks = 10
	for _, tt := range []struct {
		name      string
		readings  []uint64 // one a tick
		want      bool
		quietRuns int
	}{
		{"nothing changes", []uint64{5, 5, 5, 5}, true, 4},
		{"a few changes", []uint64{0, 3, 6, 9}, true, 4},
		{"ten in the window", []uint64{0, 3, 6, 10}, false, 0},
		{"a burst, then quiet for less than the window", []uint64{0, 100, 100, 100, 100}, false, 0},
		{"a burst out of the window", []uint64{0, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, true, 2},
		{"a counter that went back (a server gone)", []uint64{50, 50, 20, 20}, false, 0},
		{"one change a second", []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var q quietness
			var got bool
			for _, r := range tt.readings {
				got = q.observe(r, ticks)
			}
			if got != tt.want || q.quiet != tt.quietRuns {
				t.Errorf("quiet %v for %d ticks, want %v for %d", got, q.quiet, tt.want, tt.quietRuns)
			}
		})
	}
}

// gogc reads the collector's percentage as the runtime has it.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// With a large heap live and the jobs quiet the tuner lowers the
// percentage after a collection; once jobs change at more than one a
// second it puts Go's default back, whatever is live.
func TestTuneGCFollowsTheLiveHeapWhileQuiet(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	if tuning.Load() {
		t.Skip("a tuner already runs in this process")
	}
	// Only this test's counter of job changes counts (a server another
	// test left running would make the jobs busy).
	activity.Lock()
	others := activity.sources
	activity.sources = nil
	activity.Unlock()
	t.Cleanup(func() {
		activity.Lock()
		activity.sources = others
		activity.Unlock()
	})
	if !TuneGC(zap.NewNop()) {
		t.Fatal("TuneGC did not tune with GOGC unset")
	}
	t.Cleanup(stopTuningGC)
	waitFor := func(want uint64) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); gogc() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("GOGC %d, want %d", gogc(), want)
			}
			runtime.GC()
		}
	}
	base := debug.SetMemoryLimit(-1)
	big := make([]byte, 512<<20) // an eighth of it is more than 16 MiB
	waitFor(13)
	// Quiet: the memory limit is what the heap holds, and its headroom.
	if l := debug.SetMemoryLimit(-1); l >= base || l < 512<<20 {
		t.Errorf("memory limit %d MiB while quiet with 512 MiB live, want above that and under the one found (%d)", l>>20, base)
	}
	// Jobs change: a hundred changes at every reading.
	var changes atomic.Uint64
	defer countActivity(func() uint64 { return changes.Add(100) })()
	waitFor(100)
	if l := debug.SetMemoryLimit(-1); l != base {
		t.Errorf("memory limit %d while busy, want the one found, %d", l, base)
	}
	runtime.KeepAlive(big)
}

// GOGC in the environment is the operator's: the tuner leaves it.
func TestTuneGCLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	if TuneGC(zap.NewNop()) {
		t.Fatal("TuneGC tuned with GOGC set")
	}
}

// The tuner hands free pages back every tidyInterval of quiet, and on the
// first quiet tick after TidySoon (a start's loading is over), never while
// the jobs are busy.
func TestTidyDue(t *testing.T) {
	for _, tt := range []struct {
		name         string
		quiet        bool
		ticks, every int
		asked, want  bool
	}{
		{"quiet for a round", true, 30, 30, false, true},
		{"quiet for two", true, 60, 30, false, true},
		{"quiet, mid-round", true, 7, 30, false, false},
		{"quiet, mid-round, asked", true, 7, 30, true, true},
		{"busy, asked", false, 0, 30, true, false},
		{"busy", false, 0, 30, false, false},
	} {
		if got := tidyDue(tt.quiet, tt.ticks, tt.every, tt.asked); got != tt.want {
			t.Errorf("%s: tidyDue = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// While quiet the memory limit is what the process holds in use and the
// headroom of its live heap; while busy, and never below, the one it
// found (the operator's or the container's).
func TestMemoryLimitFor(t *testing.T) {
	const mib = 1 << 20
	none := int64(math.MaxInt64)
	// 220 MiB mapped, 10 handed back, 30 free: 180 in use.
	h := heapSample{live: 160 * mib, free: 30 * mib, total: 220 * mib, released: 10 * mib}
	for _, tt := range []struct {
		name  string
		h     heapSample
		quiet bool
		base  int64
		want  int64
	}{
		{"quiet: in use and an eighth of what is live", h, true, none, 200 * mib},
		{"quiet, a small heap: at least 16 MiB", heapSample{live: 40 * mib, total: 80 * mib, free: 20 * mib}, true, none, 76 * mib},
		{"quiet, under the operator's limit", h, true, 170 * mib, 170 * mib},
		{"busy: the operator's", h, false, 500 * mib, 500 * mib},
		{"busy: none", h, false, none, none},
		{"nothing live yet", heapSample{total: 50 * mib}, true, none, none},
	} {
		if got := memoryLimitFor(tt.h, tt.quiet, tt.base); got != tt.want {
			t.Errorf("%s: memoryLimitFor = %d MiB, want %d MiB", tt.name, got/mib, tt.want/mib)
		}
	}
}
