package server

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{10 * mib, 100},  // small heaps keep Go's default
		{64 * mib, 100},  // the minimum headroom is as much as is live
		{128 * mib, 50},  // 64 MiB of headroom
		{200 * mib, 32},  // still 64 MiB
		{256 * mib, 25},  // from here a quarter of what is live
		{4096 * mib, 25}, // however large
	} {
		if got := gcPercentFor(tt.live); got != tt.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tt.live/mib, got, tt.want)
		}
	}
}

// gogc reads the collector's percentage as the runtime has it.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// With a large heap live the tuner lowers the percentage after a
// collection, and puts Go's default back once the heap is small again.
func TestTuneGCFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	if tuning.Load() {
		t.Skip("a tuner already runs in this process")
	}
	if !TuneGC(zap.NewNop()) {
		t.Fatal("TuneGC did not tune with GOGC unset")
	}
	t.Cleanup(stopTuningGC)
	waitFor := func(want uint64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); gogc() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("GOGC %d, want %d", gogc(), want)
			}
			runtime.GC()
		}
	}
	big := make([]byte, 512<<20) // a quarter of it is more than 64 MiB
	waitFor(25)
	runtime.KeepAlive(big) // and dead from here
	waitFor(100)
}

// GOGC in the environment is the operator's: the tuner leaves it.
func TestTuneGCLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	if TuneGC(zap.NewNop()) {
		t.Fatal("TuneGC tuned with GOGC set")
	}
}
