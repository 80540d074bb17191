package server

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// The collector's headroom. Go's default (GOGC=100) lets the heap grow by
// as much as is live before it collects, and the runtime keeps what it
// holds for that heap: a server whose heap is mostly long-lived indexes
// (100,000 queued jobs: about 130 MB live; 1,000,000 finished: about
// 360 MB) shows twice its live heap, and more, in ps, long after a burst
// of work. While the jobs are quiet (fewer than busyChanges changes to
// their records in the last quietSpan), TuneGC holds the growth between
// collections to an eighth of what is live, but never less than
// minHeadroom (a small heap keeps Go's default), holds the memory the
// runtime keeps from the system to what the heap uses and that headroom
// (a memory limit, memoryLimitFor: the free pages a collection leaves are
// handed back as they come, not left for minutes), and hands every free
// page back when it tidies. The cost is CPU while quiet: 100,000
// queued jobs and the simulated cloud's prices at 120 times real time,
// two quiet minutes took 16.0 s of CPU (4.7 s of it collecting) against
// 10.4 s (1.2 s) with a quarter and at least 64 MiB, for an RSS of
// 287 MB against 342 MB (BenchmarkMemory100kQueuedJobs, quiet-cpu-s). While jobs are submitted and change it
// leaves Go's default: more frequent collections, each marking all that
// is live, take the cores the work needs (measured with the tuning on
// throughout: 200 submissions a second with 100,000 jobs in the store,
// submit -> placed p99 39 ms against 14 ms). Quiet is told by the jobs'
// changes, not by how fast the process allocates: a scheduler looking
// over a large unchanged queue at every price tick allocates fast and
// needs no latency.
const (
	headroomShare = 0.125
	minHeadroom   = 16 << 20
	// quietSpan and busyChanges: the jobs are busy while their records
	// changed at least busyChanges times in the last quietSpan (one a
	// second: far below the rates whose latency matters).
	quietSpan   = 10 * time.Second
	busyChanges = 10
	// tunerTick is how often the tuner reads the jobs' changes.
	tunerTick = time.Second
	// gcPercentStep: the percentage is set again only when it moves by
	// this much, so a heap that stays put does not touch the runtime.
	gcPercentStep = 5
	// tidyInterval is how long the jobs must have been quiet before the
	// tuner hands free memory back, and how often it looks again.
	tidyInterval = 30 * time.Second
)

// headroomFor is the growth allowed between collections while quiet, for
// a heap of live bytes.
func headroomFor(live uint64) float64 {
	return max(float64(minHeadroom), headroomShare*float64(live))
}

// gcPercentFor is the GOGC for a heap of live bytes: Go's default of 100
// while busy; while quiet, the one that gives it its headroom
// (headroomFor), never above 100.
func gcPercentFor(live uint64, isQuiet bool) int {
	if live == 0 || !isQuiet {
		return 100
	}
	return min(100, max(int(100*headroomFor(live)/float64(live)), int(math.Round(100*headroomShare))))
}

// memoryLimitFor is the Go memory limit for the heap of h: while quiet,
// the memory the process holds in use now and the headroom of its live
// heap (headroomFor) on top, so that the free pages a collection leaves
// go back to the system as the heap gives them up, not at the next tidy,
// while the pages the heap grows into between collections are still
// there; while busy, base (the operator's limit, or the container's:
// SetMemoryLimit; math.MaxInt64 for none). Never above base.
func memoryLimitFor(h heapSample, isQuiet bool, base int64) int64 {
	if !isQuiet || h.live == 0 || h.total < h.released+h.free {
		return base
	}
	return min(base, int64(h.total-h.released-h.free)+int64(headroomFor(h.live)))
}

// heapSample reads what the tuner goes by: the heap live at the last
// collection, the heap's free pages not yet handed back, all the memory
// the runtime has mapped, and what of it was handed back.
type heapSample struct{ live, free, total, released uint64 }

var heapMetrics = []string{"/gc/heap/live:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes"}

func readHeap() (heapSample, bool) {
	s := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return heapSample{}, false
		}
	}
	return heapSample{s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()}, true
}

// activity are the counters of job changes the tuner reads: one for each
// server running in the process (its API's view of the bucket).
var activity struct {
	sync.Mutex
	next    int
	sources map[int]func() uint64
}

// countActivity adds a counter of job changes for the tuner to read, until
// the returned function removes it.
func countActivity(changes func() uint64) (remove func()) {
	activity.Lock()
	defer activity.Unlock()
	if activity.sources == nil {
		activity.sources = map[int]func() uint64{}
	}
	activity.next++
	k := activity.next
	activity.sources[k] = changes
	return func() {
		activity.Lock()
		delete(activity.sources, k)
		activity.Unlock()
	}
}

// changesNow adds up the counters of job changes.
func changesNow() uint64 {
	activity.Lock()
	defer activity.Unlock()
	var n uint64
	for _, f := range activity.sources {
		n += f()
	}
	return n
}

// quietness tells, from a reading of the job changes every tick, whether
// the jobs are quiet (fewer than busyChanges in the last quietSpan) and
// for how many ticks they have been.
type quietness struct {
	window []uint64 // the readings of the last quietSpan, oldest first
	quiet  int      // ticks quiet in a row
}

// observe takes one reading of the changes counter and reports whether
// the jobs are quiet now. A counter that went back (a server gone) counts
// as a change.
func (q *quietness) observe(changes uint64, ticks int) bool {
	q.window = append(q.window, changes)
	if len(q.window) > ticks+1 {
		q.window = q.window[1:]
	}
	first := q.window[0]
	busy := changes < first || changes-first >= busyChanges
	for i := 1; i < len(q.window) && !busy; i++ {
		busy = q.window[i] < q.window[i-1]
	}
	if busy {
		q.quiet = 0
	} else {
		q.quiet++
	}
	return !busy
}

// TuneGC tunes the collector for the life of the process, unless GOGC is
// set in the environment (the operator's word, "off" included): every
// tunerTick it reads whether the jobs are quiet; while they are busy the
// percentage is Go's default, set back at once; while they are quiet it
// is set after every collection from the heap found live (gcPercentFor),
// and once they have been quiet for tidyInterval the heap's free pages
// are handed back to the system when they are more than the headroom
// (every tidyInterval). It logs that it does and returns whether it is
// tuning.
func TuneGC(log *zap.Logger) bool {
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("collector percentage from GOGC", zap.String("GOGC", v))
		return false
	}
	if !tuning.CompareAndSwap(false, true) {
		return true
	}
	log.Info("tuning the collector to the live heap while the jobs are quiet (GOGC overrides it)")
	tuner.Lock()
	tuner.percent = 100
	tuner.base = debug.SetMemoryLimit(-1)
	tuner.limit = tuner.base
	tuner.Unlock()
	var quietNow atomic.Bool
	set := func() {
		tuner.Lock()
		defer tuner.Unlock()
		h, ok := readHeap()
		if !ok || !tuning.Load() {
			return
		}
		isQuiet := quietNow.Load()
		if now := debug.SetMemoryLimit(-1); now != tuner.limit {
			tuner.base = now // set by someone else since: theirs
		}
		if l := memoryLimitFor(h, isQuiet, tuner.base); l != tuner.limit && (l == tuner.base || abs(l-tuner.limit) >= memoryLimitStep) {
			debug.SetMemoryLimit(l)
			tuner.limit = l
		}
		p := gcPercentFor(h.live, isQuiet)
		if p == tuner.percent || (abs(p-tuner.percent) < gcPercentStep && p != 100) {
			return
		}
		debug.SetGCPercent(p)
		tuner.percent = p
	}
	afterEachGC(func() bool {
		if !tuning.Load() {
			return false
		}
		set()
		return true
	})
	go func() {
		t := time.NewTicker(tunerTick)
		defer t.Stop()
		var q quietness
		ticks, tidy := int(quietSpan/tunerTick), int(tidyInterval/tunerTick)
		for range t.C {
			if !tuning.Load() {
				return
			}
			was := quietNow.Load()
			now := q.observe(changesNow(), ticks)
			quietNow.Store(now)
			if now != was {
				set()
			}
			if tidyDue(now, q.quiet, tidy, tidyAsked.Load()) {
				tidyAsked.Store(false)
				if h, ok := readHeap(); ok && float64(h.free) > headroomFor(h.live) {
					// The runtime would keep them until it next
					// collects, and then hand them back at its own
					// pace: a server that took a burst of submissions,
					// or a start that read a large store, would hold
					// the memory they needed for minutes.
					debug.FreeOSMemory()
				}
			}
		}
	}()
	return true
}

// tidyAsked is set by TidySoon: the tuner hands free pages back on the
// next tick the jobs are quiet, not at its next round.
var tidyAsked atomic.Bool

// TidySoon tells the tuner that work which took memory for a while is
// over (a start that read a large store: the copy of job pages has caught
// up): the free pages beyond the headroom go back to the system on the
// next quiet tick, not up to tidyInterval later, so a server that has
// just started does not show what its start took while it serves.
func TidySoon() { tidyAsked.Store(true) }

// tidyDue says whether the tuner hands free pages back on this tick:
// the jobs are quiet, and have been for a multiple of every ticks, or a
// tidy was asked for.
func tidyDue(quiet bool, quietTicks, every int, asked bool) bool {
	return quiet && (quietTicks%every == 0 || asked)
}

// tuning is set while TuneGC's tuner runs: one a process. tuner is the
// percentage and the memory limit it set last and the limit it found
// (base), and holds one setter at a time.
var (
	tuning atomic.Bool
	tuner  struct {
		sync.Mutex
		percent     int
		base, limit int64
	}
)

// memoryLimitStep: the memory limit is set again while quiet only when it
// moves by this much.
const memoryLimitStep = 1 << 20

// stopTuningGC stops the tuner and puts Go's default and the limit it
// found back: for tests.
func stopTuningGC() {
	tuner.Lock()
	defer tuner.Unlock()
	tuning.Store(false)
	debug.SetGCPercent(100)
	tuner.percent = 100
	if tuner.base != 0 && debug.SetMemoryLimit(-1) == tuner.limit {
		debug.SetMemoryLimit(tuner.base)
	}
}

func abs[T int | int64](v T) T {
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
