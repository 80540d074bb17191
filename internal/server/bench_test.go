package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

func benchServer(b *testing.B, speed float64) *Server {
	b.Helper()
	cfg := testConfig(b.TempDir())
	cfg.Sim.Speed = speed
	cfg.Scheduler.ReconcileInterval = job.Duration(15 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
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
	for s.Scheduler().Stats().Queued < int64(queued) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if q := s.Scheduler().Stats().Queued; q < int64(queued) {
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
	const rate, total = 200, 1000
	s := benchServer(b, 1)
	fillStore(b, s, 20_000, 5_000)
	b.ResetTimer()
	// SPOTWISE_CPU_PROFILE profiles the measured part only.
	if path := os.Getenv("SPOTWISE_CPU_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	spec := []byte("name: bench\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\n")
	var mu sync.Mutex
	placedAt := map[string]time.Time{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	if _, err := s.Bus().Jobs().Watch(ctx, func(c events.JobChange) {
		if c.Record == nil || c.Record.Status.State == job.Queued {
			return
		}
		mu.Lock()
		if _, ok := placedAt[c.ID]; !ok {
			placedAt[c.ID] = time.Now()
		}
		mu.Unlock()
	}, func() { close(ready) }); err != nil {
		b.Fatal(err)
	}
	// The watch first goes through every record in the store: measure
	// from when it has, or its catching up would be counted as latency.
	<-ready
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	c := clientOf(s)
	c.HTTP = client
	var lat []time.Duration
	for b.Loop() {
		started := make(map[string]time.Time, total)
		var smu sync.Mutex
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / rate)
		for range total {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.Now()
				v, _, err := c.Submit(ctx, spec, "application/yaml", "")
				if err != nil {
					b.Error(err)
					return
				}
				smu.Lock()
				started[v.ID] = t
				smu.Unlock()
			}()
		}
		tick.Stop()
		wg.Wait()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := 0
			for id := range started {
				if _, ok := placedAt[id]; ok {
					n++
				}
			}
			mu.Unlock()
			if n == len(started) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		for id, t := range started {
			if p, ok := placedAt[id]; ok {
				lat = append(lat, p.Sub(t))
			} else {
				b.Errorf("job %s was not placed within 30s", id)
			}
		}
		mu.Unlock()
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
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
// the whole process's live heap once the scheduler has looked at all of
// them: the embedded NATS server, the scheduler's queue and index, and the
// API's listing index. The target is under 200 MB.
func BenchmarkMemory100kQueuedJobs(b *testing.B) {
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
		for s.Scheduler().Stats().Queued < total && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		// Let the first full cycle over the queue and its writes finish.
		time.Sleep(2 * time.Second)
		heap := func() float64 {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return float64(ms.HeapInuse) / (1 << 20)
		}
		busy := heap()
		// NATS drops its write caches after 10 s without writes: what a
		// quiet server holding the queue needs.
		time.Sleep(15 * time.Second)
		settled := heap()
		b.ReportMetric(busy, "heap-MB")
		b.ReportMetric(settled, "settled-heap-MB")
		debug.FreeOSMemory() // hand back what the submission burst used
		b.ReportMetric(rssMB(), "settled-rss-MB")
		b.ReportMetric(float64(s.Scheduler().Stats().Queued), "queued")
		if path := os.Getenv("SPOTWISE_HEAP_PROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		fmt.Printf("queued %d, heap in use %.0f MB (%.0f MB settled), last cycle %s\n", s.Scheduler().Stats().Queued, busy, settled, s.Scheduler().Stats().LastCycle)
		s.Close()
	}
}
