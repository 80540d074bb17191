package server

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// The collector's headroom. Go's default (GOGC=100) lets the heap grow by
// as much as is live before it collects, and the runtime keeps what it
// holds for that heap: a server whose heap is mostly long-lived indexes
// (100,000 queued jobs: about 130 MB live; 1,000,000 finished: about
// 340 MB) shows twice its live heap, and more, in ps. TuneGC holds the
// growth between collections to a quarter of what is live, but never
// less than minHeadroom: a small heap keeps Go's default, a large one
// pays for its memory with more frequent collections (each marks only
// what is live; what they cost is what BenchmarkSubmitToPlacedAged and
// the others measure with it on).
const (
	headroomShare = 0.25
	minHeadroom   = 64 << 20
	// gcPercentStep: the percentage is set again only when it moves by
	// this much, so a heap that stays put does not touch the runtime.
	gcPercentStep = 5
)

// gcPercentFor is the GOGC that gives a heap of live bytes its headroom:
// minHeadroom or headroomShare of it, whichever is more, never above Go's
// default of 100.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return 100
	}
	headroom := max(float64(minHeadroom), headroomShare*float64(live))
	return min(100, max(int(100*headroom/float64(live)), int(100*headroomShare)))
}

// TuneGC sets the collector's percentage (GOGC) after every collection
// from the heap it found live (gcPercentFor), and every 30 s hands the
// heap's free pages back to the system when they are more than that
// headroom (handBack), for the life of the process, unless GOGC is set in the environment (the operator's word,
// "off" included). It logs the first percentage it sets and returns
// whether it is tuning.
func TuneGC(log *zap.Logger) bool {
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("collector percentage from GOGC", zap.String("GOGC", v))
		return false
	}
	if !tuning.CompareAndSwap(false, true) {
		return true
	}
	go handBack(tidyInterval)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := 100
	logged := false
	afterEachGC(func() bool {
		if !tuning.Load() {
			return false
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return false
		}
		live := sample[0].Value.Uint64()
		p := gcPercentFor(live)
		if p == current || (abs(p-current) < gcPercentStep && p != 100) {
			return true
		}
		debug.SetGCPercent(p)
		current = p
		if !logged {
			logged = true
			log.Info("collector percentage set from the live heap (GOGC overrides it)", zap.Int("gc_percent", p), zap.Uint64("live_bytes", live))
		}
		return true
	})
	return true
}

// tidyInterval is how often the tuner looks for free memory to hand back.
const tidyInterval = 30 * time.Second

// handBack hands the heap's free pages back to the system when there are
// more of them than the headroom: the runtime would keep them until it
// next collects and then give them back at its own pace, so a server that
// took a burst of submissions, or a start that read a large store, would
// hold the memory they needed for minutes. It forces one collection each
// time it does (cheap beside holding the memory: it marks what is live).
func handBack(every time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if !tuning.Load() {
			return
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[1].Value.Kind() != metrics.KindUint64 {
			return
		}
		live, free := sample[0].Value.Uint64(), sample[1].Value.Uint64()
		if float64(free) > max(float64(minHeadroom), headroomShare*float64(live)) {
			debug.FreeOSMemory()
		}
	}
}

// tuning is set while TuneGC's tuner runs: one a process.
var tuning atomic.Bool

// stopTuningGC stops the tuner (after the next collection) and puts Go's
// default back: for tests.
func stopTuningGC() {
	tuning.Store(false)
	debug.SetGCPercent(100)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// gcSentinel is garbage from the moment it is made: its finalizer runs
// after the collection that finds it so, and makes the next one.
type gcSentinel struct{ _ *int }

// afterEachGC calls fn, on the finalizer goroutine, after every
// collection until it returns false.
func afterEachGC(fn func() bool) {
	s := &gcSentinel{}
	runtime.SetFinalizer(s, func(*gcSentinel) {
		if fn() {
			afterEachGC(fn)
		}
	})
}
