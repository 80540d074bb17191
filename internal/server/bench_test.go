package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/scheduler"
)

func benchServer(b *testing.B, speed float64) *Server {
	b.Helper()
	cfg := testConfig(b.TempDir())
	cfg.Sim.Speed = speed
	cfg.Scheduler.ReconcileInterval = job.Duration(15 * time.Second)
	return startBenchServer(b, cfg)
}

// startBenchServer starts a server for a benchmark, closed at its end.
func startBenchServer(b *testing.B, cfg Config) *Server {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg, benchLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
}

// schedStats are the server's scheduler's counts; zero between terms
// (its lease lost).
func schedStats(s *Server) scheduler.Stats {
	if sc := s.Scheduler(); sc != nil {
		return sc.Stats()
	}
	return scheduler.Stats{}
}

// benchLogger writes the server's warnings and errors to stderr as they
// happen (a lost lease, a failed write): what explains a bad figure.
func benchLogger() *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	cfg.Sampling = &zap.SamplingConfig{Initial: 5, Thereafter: 1000}
	log, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return log
}

// fillStore gives a server the store of one that has run a while: ended
// jobs (submitted, then cancelled) and a backlog of queued jobs that cannot
// be placed (their max price is below every offer), which every cycle over
// a changed offer book looks at again.
func fillStore(b *testing.B, s *Server, ended, queued int) {
	b.Helper()
	svc := s.api
	done := []byte("name: done\nteam: history\ncommand: [python, train.py]\nresources: {gpus_per_node: 8, accelerators: [H100]}\nwork: 48h on V100\nmax_price_per_hour: 0.01\n")
	wait := []byte("name: backlog\nteam: bench\ncommand: [python, train.py]\nresources: {gpus_per_node: 8, accelerators: [H100, A100]}\nwork: 48h on V100\nmax_price_per_hour: 0.01\ndeadline: 30d\n")
	submitAll(b, ended+queued, func(ctx context.Context, i int) error {
		spec := wait
		if i < ended {
			spec = done
		}
		r, err := svc.Submit(asOperator(ctx), spec, "", "bench")
		if err == nil && i < ended {
			_, err = svc.Cancel(asOperator(ctx), r.Job.ID, "history")
		}
		return err
	})
	deadline := time.Now().Add(5 * time.Minute)
	for schedStats(s).Queued < int64(queued) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if q := schedStats(s).Queued; q < int64(queued) {
		b.Fatalf("%d of %d backlog jobs queued", q, queued)
	}
	time.Sleep(2 * time.Second) // the first cycles over the backlog
}

// submitAll runs submit for 0..n-1 on 16 workers, stopping a worker at its
// first error.
func submitAll(b *testing.B, n int, submit func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := submit(ctx, i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkSubmitToPlaced200PerSecond submits jobs over HTTP at 200 per
// second to a server on the embedded NATS and measures, for each, the
// wall time from the start of its POST until the job-state bucket shows it
// placed (placing or later). The store holds what a server that has run a
// while holds: 20,000 ended jobs and a backlog of 5,000 queued that cannot
// be placed. The simulated cloud runs in real time: placement does not
// wait on simulated time, and a sped-up clock would multiply the reports
// and checkpoints of every job placed earlier in the run by its speed (at
// 120x, 1,000 jobs send what 120,000 would), a load no deployment sees.
// The target is p99 under 50 ms.
func BenchmarkSubmitToPlaced200PerSecond(b *testing.B) {
	if alone(b) {
		return
	}
	const rate, total = 200, 1000
	s := benchServer(b, 1)
	fillStore(b, s, 20_000, 5_000)
	placed, c := placedTimes(b, s), benchClient(s)
	b.ResetTimer()
	defer cpuProfile()()
	spec := []byte("name: bench\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\n")
	var lat []time.Duration
	for b.Loop() {
		started := submitAtRate(b, c, spec, rate, total)
		got := placed.wait(started, 30*time.Second)
		for id, t := range started {
			if p, ok := got[id]; ok {
				lat = append(lat, p.Sub(t))
			} else {
				b.Errorf("job %s was not placed within 30s", id)
			}
		}
	}
	reportLatency(b, lat, "")
}

// submitAtRate submits total jobs over HTTP, rate per second, and returns
// when each submission started.
func submitAtRate(b *testing.B, c *api.Client, spec []byte, rate, total int) map[string]time.Time {
	started, _ := submitAtRateTimed(b, c, spec, rate, total)
	return started
}

// submitAtRateTimed is submitAtRate that also returns how long each
// submission's HTTP request took (the server's answer, before placing).
func submitAtRateTimed(b *testing.B, c *api.Client, spec []byte, rate, total int) (started map[string]time.Time, answered []time.Duration) {
	started = make(map[string]time.Time, total)
	answered = make([]time.Duration, 0, total)
	var smu sync.Mutex
	var wg sync.WaitGroup
	slow := slowTracer()
	defer slow.stop()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for range total {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			v, _, err := c.Submit(context.Background(), spec, "application/yaml", "")
			if err != nil {
				b.Error(err)
				return
			}
			took := time.Since(t)
			slow.saw(took)
			smu.Lock()
			started[v.ID] = t
			answered = append(answered, took)
			smu.Unlock()
		}()
	}
	wg.Wait()
	return started, answered
}

// BenchmarkSubmitToPlacedAged200PerSecond is the same measurement on a
// server that has aged: 100,000 jobs in the store (90,000 ended, 10,000
// queued that cannot be placed), then submissions at 200 per second
// sustained for SPOTWISE_BENCH_MINUTES minutes (default 5), of jobs that
// run a minute each, so that what was placed earlier runs, reports and
// ends while later jobs come in. It reports the percentiles of the whole
// run and the p99 of its last minute (the latency must not grow as the
// run goes on). The target is p99 under 50 ms.
//
// The simulated cloud runs at 4 times real time (SPOTWISE_BENCH_SIM_SPEED
// sets it): its instances take 45-240 s of its time to boot, so at real
// time a job "of a minute" holds its instance for about three, and the
// run keeps some 40,000 instances alive, four times the running jobs one
// server is sized for (the 10,000 of scheduler's BenchmarkNotices); at 4 times
// about 10,000 while every job's lifecycle keeps up (when it does not,
// instances whose agents have not been heard from pile up: the log says
// so minute by minute).
//
// The jobs run on on-demand capacity: the simulated cloud's spot pools
// hold about 7,000 instances of one or two GPUs in all, fewer than the
// 10,000 this load keeps running, so jobs that wait for spot would
// measure the cloud's capacity, not the scheduler (their launches refused
// for capacity, they queue until instances end). On-demand pools hold
// about 26,000.
func BenchmarkSubmitToPlacedAged200PerSecond(b *testing.B) {
	if alone(b) {
		return
	}
	const rate = 200
	minutes := 5
	if v, err := strconv.Atoi(os.Getenv("SPOTWISE_BENCH_MINUTES")); err == nil && v > 0 {
		minutes = v
	}
	speed := 4.0
	if v, err := strconv.ParseFloat(os.Getenv("SPOTWISE_BENCH_SIM_SPEED"), 64); err == nil && v > 0 {
		speed = v
	}
	total := rate * 60 * minutes
	s := benchServer(b, speed)
	filled := time.Now()
	fillStore(b, s, 90_000, 10_000)
	b.Logf("store filled with 100,000 jobs in %s", time.Since(filled).Round(time.Second))
	placed, c := placedTimes(b, s), benchClient(s)
	if path := os.Getenv("SPOTWISE_HEAP_PROFILE"); path != "" {
		// The allocations of the run alone: go tool pprof -base path.start path
		if f, err := os.Create(path + ".start"); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	b.ResetTimer()
	// SPOTWISE_CPU_PROFILE profiles each minute into a file of its own
	// (minuteByMinute; the whole run: go tool pprof path.1 path.2 ...):
	// one CPU profile at a time, so not the run's as well.
	defer minuteByMinute(b, s)()
	defer mutexProfile()()
	spec := []byte("name: aged\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1m on T4\npurchase: on-demand\n")
	var lat, last []time.Duration
	unplaced := 0
	var started, got map[string]time.Time
	var answered []time.Duration
	for i := 0; b.Loop(); i++ {
		if i > 0 {
			continue // one sustained run, whatever -benchtime asks for
		}
		started, answered = submitAtRateTimed(b, c, spec, rate, total)
		end := time.Now()
		got = placed.wait(started, 60*time.Second)
		for id, t := range started {
			p, ok := got[id]
			if !ok {
				// Counted, not failed: the figures of the rest are
				// what says where the time went.
				unplaced++
				continue
			}
			lat = append(lat, p.Sub(t))
			if end.Sub(t) <= time.Minute {
				last = append(last, p.Sub(t))
			}
		}
	}
	b.ReportMetric(float64(unplaced), "unplaced")
	if unplaced > 0 {
		b.Logf("%d of %d jobs were not placed within a minute of the end (their latency is not in the percentiles)", unplaced, total)
	}
	if len(lat) == 0 {
		return
	}
	reportLatency(b, lat, "")
	reportLatency(b, last, "last-minute-")
	reportLatency(b, answered, "submit-answered-")
	var decided []time.Duration
	placed.mu.Lock()
	for id := range started {
		if d, ok := placed.decided[id]; ok {
			decided = append(decided, time.Duration(float64(d)/speed))
		}
	}
	placed.mu.Unlock()
	reportLatency(b, decided, "decided-")
	logWorstWindows(b, started, got)
	b.ReportMetric(float64(schedStats(s).Queued), "queued-at-end")
	b.ReportMetric(rssMB(), "rss-MB")
	if path := os.Getenv("SPOTWISE_HEAP_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			runtime.GC()
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
}

// logWorstWindows logs the five 10-second windows of submissions whose
// p99 was worst, and how many windows passed 50 ms: whether the tail is a
// few stalls or spread over the run says where to look.
func logWorstWindows(b *testing.B, started map[string]time.Time, placed map[string]time.Time) {
	const width = 10 * time.Second
	var first time.Time
	for _, t := range started {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	windows := map[int][]time.Duration{}
	for id, t := range started {
		if p, ok := placed[id]; ok {
			w := int(t.Sub(first) / width)
			windows[w] = append(windows[w], p.Sub(t))
		}
	}
	type window struct {
		at            int
		n             int
		p50, p99, max time.Duration
	}
	var all []window
	over := 0
	for at, lat := range windows {
		slices.Sort(lat)
		w := window{at: at, n: len(lat), p50: lat[len(lat)/2], p99: lat[int(0.99*float64(len(lat)-1))], max: lat[len(lat)-1]}
		if w.p99 > 50*time.Millisecond {
			over++
		}
		all = append(all, w)
	}
	slices.SortFunc(all, func(x, y window) int { return cmp.Compare(y.p99, x.p99) })
	b.Logf("%d of %d 10-second windows had a p99 over 50 ms; the worst:", over, len(all))
	for _, w := range all[:min(5, len(all))] {
		b.Logf("  from %3ds: %d placed, p50 %s, p99 %s, max %s", w.at*10, w.n, w.p50.Round(time.Millisecond), w.p99.Round(time.Millisecond), w.max.Round(time.Millisecond))
	}
}

// slowTraces keeps a flight recorder of the runtime's execution trace
// while SPOTWISE_SLOW_TRACE names a file and writes its last seconds to
// that file, with ".1", ".2", ... appended, when an answer (a submission's,
// a read's) took longer than 250 ms (three at most, 5 s apart): what every
// goroutine did while it waited (go tool trace).
type slowTraces struct {
	path string
	fr   *trace.FlightRecorder
	mu   sync.Mutex
	n    int
	last time.Time
}

func slowTracer() *slowTraces {
	t := &slowTraces{path: os.Getenv("SPOTWISE_SLOW_TRACE")}
	if t.path == "" {
		return t
	}
	t.fr = trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 3 * time.Second, MaxBytes: 256 << 20})
	if t.fr.Start() != nil {
		t.fr = nil
	}
	return t
}

func (t *slowTraces) saw(took time.Duration) {
	if t.fr == nil || took < 250*time.Millisecond {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n >= 3 || time.Since(t.last) < 5*time.Second {
		return
	}
	t.n++
	t.last = time.Now()
	if f, err := os.Create(fmt.Sprintf("%s.%d", t.path, t.n)); err == nil {
		_, _ = t.fr.WriteTo(f)
		f.Close()
	}
}

func (t *slowTraces) stop() {
	if t.fr != nil {
		t.fr.Stop()
	}
}

// mutexProfile samples lock contention (one in 20 contended waits) over
// the measured part of a benchmark into the file SPOTWISE_MUTEX_PROFILE
// names; the returned function writes it.
func mutexProfile() func() {
	path := os.Getenv("SPOTWISE_MUTEX_PROFILE")
	if path == "" {
		return func() {}
	}
	prev := runtime.SetMutexProfileFraction(20)
	return func() {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("mutex").WriteTo(f, 0)
			f.Close()
		}
		runtime.SetMutexProfileFraction(prev)
	}
}

// cpuProfile profiles the measured part of a benchmark into the file
// SPOTWISE_CPU_PROFILE names; the returned function stops it.
func cpuProfile() func() {
	path := os.Getenv("SPOTWISE_CPU_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// minuteByMinute logs, every minute of wall time until the returned
// function is called, what grows as a server ages (goroutines, live heap,
// the scheduler's counts, the simulated cloud's instances) and, when
// SPOTWISE_CPU_PROFILE names a file, profiles each minute into its own
// (the name with ".1", ".2", ... appended), so that the last minutes of a
// run can be compared with the first.
func minuteByMinute(b *testing.B, s *Server) func() {
	path := os.Getenv("SPOTWISE_CPU_PROFILE")
	profile := func(n int) func() {
		if path == "" {
			return func() {}
		}
		name := fmt.Sprintf("%s.%d", path, n)
		f, err := os.Create(name)
		if err != nil {
			return func() {}
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			// Not an empty file that reads as a profile of nothing.
			f.Close()
			os.Remove(name)
			b.Logf("minute %d: no CPU profile: %v", n, err)
			return func() {}
		}
		return func() { pprof.StopCPUProfile(); f.Close() }
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	lastCPU, lastPlaced := cpu(), schedStats(s).Placements
	lastWait := schedWaits()
	log := func(n int) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st := schedStats(s)
		if s.Scheduler() == nil {
			b.Logf("minute %d: this server holds no scheduler term (its lease was lost)", n)
		}
		insts := -1
		if t := s.term.Load(); t != nil && t.cloud != nil {
			if l, err := t.cloud.Instances(context.Background()); err == nil {
				insts = len(l)
			}
		}
		used := cpu()
		b.Logf("minute %d: process CPU %.1fs (%.2f ms per placement), goroutines %d, heap %d MB, GCs %d, placements %d, finished %d, queued %d, cycles %d (%.1fs; over every queued job %d, %.1fs), reconciles %d (%.1fs), instances listed %d; lifecycle inputs %v",
			n, (used - lastCPU).Seconds(), float64((used-lastCPU).Microseconds())/1000/float64(max(st.Placements-lastPlaced, 1)),
			runtime.NumGoroutine(), ms.HeapAlloc>>20, ms.NumGC, st.Placements, st.Finished, st.Queued, st.Cycles, st.CycleTime.Seconds(), st.WholeCycles, st.WholeCycleTime.Seconds(), st.Reconciles, st.ReconcileTime.Seconds(), insts, s.metrics.Verdicts())
		wait := schedWaits()
		b.Logf("minute %d: goroutines waited for a core: %s", n, waitPercentiles(lastWait, wait))
		lastCPU, lastPlaced, lastWait = used, st.Placements, wait
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		n := 1
		end := profile(n)
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				end()
				log(n)
				return
			case <-tick.C:
				end()
				log(n)
				n++
				end = profile(n)
			}
		}
	}()
	return func() { close(stop); <-done }
}

// schedWaits is the runtime's histogram of how long goroutines waited,
// ready to run, for a core.
func schedWaits() *metrics.Float64Histogram {
	m := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return m[0].Value.Float64Histogram()
}

// waitPercentiles says the median, 99th and 99.9th percentile of the waits
// counted between two readings of schedWaits.
func waitPercentiles(from, to *metrics.Float64Histogram) string {
	if from == nil || to == nil || len(from.Counts) != len(to.Counts) {
		return "not measured"
	}
	counts := make([]uint64, len(to.Counts))
	var total uint64
	for i := range counts {
		counts[i] = to.Counts[i] - from.Counts[i]
		total += counts[i]
	}
	if total == 0 {
		return "no waits"
	}
	at := func(p float64) time.Duration {
		want, seen := uint64(p*float64(total)), uint64(0)
		for i, c := range counts {
			if seen += c; seen > want {
				return time.Duration(to.Buckets[i+1] * float64(time.Second))
			}
		}
		return -1
	}
	return fmt.Sprintf("%d waits, p50 under %s, p99 under %s, p99.9 under %s", total, at(0.5), at(0.99), at(0.999))
}

// benchClient is an API client of the server that keeps enough
// connections for hundreds of submissions a second.
func benchClient(s *Server) *api.Client {
	c := clientOf(s)
	c.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return c
}

// placedAt records when the job-state bucket first shows each job placed
// (placing or later).
type placedAt struct {
	mu sync.Mutex
	at map[string]time.Time
	// decided is, by job, the simulated time from its submission to its
	// placement's decision (both stamped by the server's clock).
	decided map[string]time.Duration
}

func placedTimes(b *testing.B, s *Server) *placedAt {
	b.Helper()
	p := &placedAt{at: map[string]time.Time{}, decided: map[string]time.Duration{}}
	// The bucket is watched directly and only each record's state is
	// read: the benchmark shares the cores with the server it measures,
	// and a whole record decoded per change would be its largest cost.
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	// On a connection of its own, as an observer elsewhere would be.
	conn, err := s.Bus().Fork("spotwise-bench-watch")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	js, err := jetstream.New(conn.Conn())
	if err != nil {
		b.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, events.BucketJobs)
	if err != nil {
		b.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer w.Stop()
		var st struct {
			Status struct {
				State       job.State `json:"state"`
				SubmittedAt time.Time `json:"submitted_at"`
				Current     *struct {
					PlacedAt time.Time `json:"placed_at"`
				} `json:"current"`
			} `json:"status"`
		}
		for e := range w.Updates() {
			if e == nil {
				close(ready)
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			// Only a job's first record out of the queue says anything:
			// the later ones (eight or so a job) are not decoded.
			p.mu.Lock()
			_, known := p.at[e.Key()]
			p.mu.Unlock()
			if known {
				continue
			}
			st.Status.State, st.Status.Current = "", nil
			if json.Unmarshal(e.Value(), &st) != nil || st.Status.State == job.Queued {
				continue
			}
			p.mu.Lock()
			if _, ok := p.at[e.Key()]; !ok {
				p.at[e.Key()] = time.Now()
				if c := st.Status.Current; c != nil {
					p.decided[e.Key()] = c.PlacedAt.Sub(st.Status.SubmittedAt)
				}
			}
			p.mu.Unlock()
		}
	}()
	// The watch first goes through every record in the store: measure
	// from when it has, or its catching up would be counted as latency.
	<-ready
	return p
}

// wait waits up to limit for every started job to be placed and returns
// when each was.
func (p *placedAt) wait(started map[string]time.Time, limit time.Duration) map[string]time.Time {
	deadline := time.Now().Add(limit)
	got := make(map[string]time.Time, len(started))
	missing := make([]string, 0, len(started))
	for id := range started {
		missing = append(missing, id)
	}
	for {
		// Only the jobs not seen placed yet are looked up again: the
		// benchmark shares the cores with the server it measures.
		p.mu.Lock()
		missing = slices.DeleteFunc(missing, func(id string) bool {
			t, ok := p.at[id]
			if ok {
				got[id] = t
			}
			return ok
		})
		p.mu.Unlock()
		if len(missing) == 0 || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func reportLatency(b *testing.B, lat []time.Duration, prefix string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), prefix+"p50-ms")
	b.ReportMetric(pct(0.99), prefix+"p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, prefix+"max-ms")
}

// memBreakdown says where the process's memory is, beside its RSS: the
// heap, goroutine stacks and the runtime's own structures.
func memBreakdown() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	return fmt.Sprintf("rss %.0f MB (%.0f MB of it mapped from files: the binary's code and data): heap in use %.0f MB (live objects %.0f MB), idle not released %.0f MB, stacks %.0f MB (%d goroutines), GC metadata %.0f MB, spans %.0f MB, other %.0f MB; GOGC %d, %d collections",
		rssMB(), fileRSSMB(), mb(ms.HeapInuse), mb(ms.HeapAlloc), mb(ms.HeapIdle-ms.HeapReleased), mb(ms.StackSys), runtime.NumGoroutine(), mb(ms.GCSys), mb(ms.MSpanSys), mb(ms.OtherSys+ms.BuckHashSys+ms.MCacheSys), gogc(), ms.NumGC)
}

// cpuSeconds is the CPU time the process has used, and the runtime's
// estimate of the part of it spent collecting.
func cpuSeconds() (total, gc float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		total = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindFloat64 {
		gc = sample[0].Value.Float64()
	}
	return total, gc
}

// fileRSSMB is the part of the resident set mapped from files (the
// executable's text and data), from /proc (0 elsewhere).
func fileRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0
	}
	var rss, anon float64
	for _, line := range strings.Split(string(b), "\n") {
		var kb float64
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok {
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			rss = kb
		} else if rest, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			anon = kb
		}
	}
	return (rss - anon) / 1024
}

// quietRSS leaves the process alone for d, nothing forced, and returns
// its RSS then (the runtime hands back what a burst used at its own pace,
// in steps: on this machine about two minutes after 100,000 submissions).
func quietRSS(d time.Duration) float64 {
	time.Sleep(d)
	return rssMB()
}

// rssMB reads the process's resident set size from /proc (0 elsewhere).
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkMemory100kQueuedJobs queues 100,000 jobs that cannot be placed
// (their max price is below every offer) on a running server and reports
// the whole process's RSS once the scheduler has looked at all of them and
// the server has been left alone for two minutes, nothing
// forced (rss-MB, what ps shows; the target is under 200 MB); then its
// heap in use, after forced collections, and its RSS once every free page
// is handed back (collected-rss-MB, the floor): the embedded NATS server,
// the scheduler's queue and index, and the API's listing index. SPOTWISE_HEAP_PROFILE=f
// writes a heap profile at the end, SPOTWISE_HEAP_DUMP=f a heap dump
// (runtime/debug.WriteHeapDump: every object with its address and size,
// which is what says how full the heap's pages are, size class by size
// class: the gap between the heap in use and the live objects; `go run
// ./internal/heapclasses f` adds it up); SPOTWISE_ALLOC_PROFILE=f heap
// profiles at the start and the end of the two quiet minutes (f.before,
// f.after: `go tool pprof -sample_index=alloc_space -diff_base f.before
// f.after` is what the quiet server allocated).
func BenchmarkMemory100kQueuedJobs(b *testing.B) {
	if alone(b) {
		return
	}
	const total = 100_000
	for b.Loop() {
		s := benchServer(b, 120)
		svc := s.api // the server's own, so the listing index is counted once
		spec := []byte("name: queued\nteam: bench\ncommand: [python, train.py, --epochs, '90']\nimage: ghcr.io/example/train:1.0\nresources: {gpus_per_node: 8, accelerators: [H100, A100]}\nwork: 48h on V100\nmax_price_per_hour: 0.01\ndeadline: 30d\n")
		submitAll(b, total, func(ctx context.Context, _ int) error {
			_, err := svc.Submit(asOperator(ctx), spec, "", "bench")
			return err
		})
		deadline := time.Now().Add(10 * time.Minute)
		for schedStats(s).Queued < total && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		// Then the server is left alone, nothing forced, for two
		// minutes: what ps shows on a quiet server holding the queue,
		// the figure the target is for.
		writeProfile(os.Getenv("SPOTWISE_ALLOC_PROFILE") + ".before")
		changes := changesNow()
		cpu, gcCPU := cpuSeconds()
		b.ReportMetric(quietRSS(2*time.Minute), "rss-MB")
		writeProfile(os.Getenv("SPOTWISE_ALLOC_PROFILE") + ".after")
		cpu2, gcCPU2 := cpuSeconds()
		// What holding the heap down costs while quiet: the cycles
		// over the queue allocate, and each collection marks the queue.
		b.ReportMetric(cpu2-cpu, "quiet-cpu-s")
		quiet := fmt.Sprintf("%s; %d changes to the jobs' records in the two minutes, %.1f s of CPU (collections %.1f s)", memBreakdown(), changesNow()-changes, cpu2-cpu, gcCPU2-gcCPU)
		heap := func() float64 {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return float64(ms.HeapInuse) / (1 << 20)
		}
		busy := heap()
		// NATS drops its write caches after 10 s without writes: what a
		// quiet server holding the queue needs. SPOTWISE_SETTLE_LONG=1
		// waits 150 s, past the 2 minutes after which it also drops its
		// blocks' subject state.
		if os.Getenv("SPOTWISE_SETTLE_LONG") != "" {
			time.Sleep(150 * time.Second)
		} else {
			time.Sleep(15 * time.Second)
		}
		settled := heap()
		b.ReportMetric(busy, "heap-MB")
		b.ReportMetric(settled, "settled-heap-MB")
		// The floor: collections forced and every free page handed back.
		debug.FreeOSMemory()
		b.ReportMetric(rssMB(), "collected-rss-MB")
		b.ReportMetric(float64(schedStats(s).Queued), "queued")
		if path := os.Getenv("SPOTWISE_HEAP_PROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		if path := os.Getenv("SPOTWISE_HEAP_DUMP"); path != "" {
			if f, err := os.Create(path); err == nil {
				debug.WriteHeapDump(f.Fd())
				f.Close()
			}
		}
		fmt.Printf("queued %d, heap in use %.0f MB (%.0f MB settled), last cycle %s; quiet: %s; collected: %s\n", schedStats(s).Queued, busy, settled, schedStats(s).LastCycle, quiet, memBreakdown())
		s.Close()
	}
}

// writeProfile writes a heap profile to path unless path is just a suffix
// (the variable naming it was not set).
func writeProfile(path string) {
	if strings.HasPrefix(path, ".") {
		return
	}
	if f, err := os.Create(path); err == nil {
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
}
