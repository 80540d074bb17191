package server

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

// BenchmarkReaders1000 is a dashboard's load on a server that has aged:
// 100,000 jobs in the store (90,000 ended, 10,000 queued), 1,000 running
// with a history of placements and reports, and 1,000 readers, each on
// its own connection, each polling once a second (1,000 requests a second
// in all, at random phases) for SPOTWISE_BENCH_READ_SECONDS seconds
// (default 30). First every reader has one job's page open and reads it
// (half of them a running job, half any job in the store: most of those
// finished long ago, and the first read of each comes from disk), then
// every reader lists a page of 100 (the newest jobs, a state, a team, or a
// page further down, at random). With SPOTWISE_BENCH_RESTART set, the
// server restarts on its store before the readers come, and it reports
// how long until its copy of job pages had caught up. It
// reports the percentiles of each (the first reads apart, those of running
// jobs' pages and of any job's apart again), the requests that failed, and
// the process's RSS. The targets are GET p99 under 20 ms and list p99 under
// 50 ms.
func BenchmarkReaders1000(b *testing.B) {
	if alone(b) {
		return
	}
	const readers = 1000
	seconds := 30
	if v, err := strconv.Atoi(os.Getenv("SPOTWISE_BENCH_READ_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	s := benchServer(b, 1)
	fillStore(b, s, 90_000, 10_000)
	c := benchClient(s)
	run := []byte("name: reader-bench\nteam: vision\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 4h on T4\ncheckpoint: {duration: 10s}\n")
	running := make([]string, 0, 1000)
	var rmu sync.Mutex
	submitAll(b, cap(running), func(ctx context.Context, _ int) error {
		v, _, err := c.Submit(ctx, run, "application/yaml", "")
		if err == nil {
			rmu.Lock()
			running = append(running, v.ID)
			rmu.Unlock()
		}
		return err
	})
	nrunning := func() int {
		l, err := c.ListAll(context.Background(), api.Query{States: []job.State{job.Running}, Limit: 1000}, 0)
		if err != nil {
			b.Fatal(err)
		}
		return len(l)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for nrunning() < len(running) && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	if len(running) == 0 {
		b.Fatal("no job to run")
	}
	all, err := c.ListAll(context.Background(), api.Query{Limit: 1000}, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d jobs in the store, %d running", len(all), nrunning())
	var restarted time.Duration
	if os.Getenv("SPOTWISE_BENCH_RESTART") != "" {
		// The server restarts on its store: its local copy of job pages
		// is made again, from a replay of every job's events.
		cfg := s.cfg
		s.Close()
		start := time.Now()
		s = startBenchServer(b, cfg)
		for !s.api.PagesCopied() {
			if time.Since(start) > 10*time.Minute {
				b.Fatal("the copy of job pages never caught up")
			}
			time.Sleep(10 * time.Millisecond)
		}
		restarted = time.Since(start)
		c = benchClient(s)
		b.Logf("restarted: copy caught up after %v, %d running", time.Since(start).Round(time.Millisecond), nrunning())
	}

	// Every reader has its own connection, as 1,000 browsers would, and
	// reads the answer without decoding it: the server's time is what is
	// measured, and the readers share its two cores.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers, MaxConnsPerHost: readers}}
	slow := slowTracer()
	defer slow.stop()
	fetch := func(path string) error {
		defer func(t time.Time) { slow.saw(time.Since(t)) }(time.Now())
		req, err := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	}
	teams := []string{"vision", "history", "bench"}
	// Each reader has one job's page open: half of them a running job's,
	// half any job's in the store (most of them finished long ago).
	watched := make([]string, readers)
	wrng := rand.New(rand.NewPCG(3, 4))
	for r := range watched {
		watched[r] = all[wrng.IntN(len(all))].ID
		if r%2 == 0 {
			watched[r] = running[wrng.IntN(len(running))]
		}
	}
	get := func(r int, _ *rand.Rand) error { return fetch("/v1/jobs/" + watched[r]) }
	list := func(_ int, rng *rand.Rand) error {
		q := "/v1/jobs?limit=100"
		switch rng.IntN(4) {
		case 1:
			q += "&state=running"
		case 2:
			q += "&team=" + teams[rng.IntN(len(teams))]
		case 3:
			q += "&after=" + all[rng.IntN(len(all))].ID
		}
		return fetch(q)
	}
	b.ResetTimer()
	defer cpuProfile()()
	for i := 0; b.Loop(); i++ {
		if i > 0 {
			continue // one run, whatever -benchtime asks for
		}
		lat, firsts, failed := pollEach(readers, time.Duration(seconds)*time.Second, get)
		var first, firstRunning, firstAny []time.Duration
		for r, f := range firsts {
			if f == 0 {
				continue
			}
			first = append(first, f)
			if r%2 == 0 {
				firstRunning = append(firstRunning, f)
			} else {
				firstAny = append(firstAny, f)
			}
		}
		reportLatency(b, lat, "get-")
		reportLatency(b, first, "get-first-")
		reportLatency(b, firstRunning, "get-first-running-")
		reportLatency(b, firstAny, "get-first-any-")
		reportLatency(b, after(lat, first), "get-again-")
		b.ReportMetric(float64(failed), "get-failed")
		lat, _, failed = poll(readers, time.Duration(seconds)*time.Second, list)
		reportLatency(b, lat, "list-")
		b.ReportMetric(float64(failed), "list-failed")
	}
	b.ReportMetric(rssMB(), "rss-MB")
	if restarted > 0 {
		b.ReportMetric(restarted.Seconds(), "restart-copied-s")
	}
}

// after is lat without first (each taken out once).
func after(lat, first []time.Duration) []time.Duration {
	out := slices.Clone(lat)
	for _, f := range first {
		if i := slices.Index(out, f); i >= 0 {
			out[i] = out[len(out)-1]
			out = out[:len(out)-1]
		}
	}
	return out
}

// poll runs readers goroutines for d, each calling req once a second from
// a random phase, and returns the latency of every call that succeeded, of
// every reader's first call (which all come in the first second) and how
// many failed.
func poll(readers int, d time.Duration, req func(reader int, rng *rand.Rand) error) (lat, first []time.Duration, failed int) {
	lat, firsts, failed := pollEach(readers, d, req)
	for _, f := range firsts {
		if f > 0 {
			first = append(first, f)
		}
	}
	return lat, first, failed
}

// pollEach is poll, with each reader's first latency at its index (zero
// when its first request failed).
func pollEach(readers int, d time.Duration, req func(reader int, rng *rand.Rand) error) (lat, first []time.Duration, failed int) {
	first = make([]time.Duration, readers)
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			next := time.Now().Add(time.Duration(rng.Int64N(int64(time.Second))))
			var mine []time.Duration
			bad := 0
			for {
				time.Sleep(time.Until(next))
				if next.After(end) {
					break
				}
				t := time.Now()
				if err := req(r, rng); err != nil {
					bad++
				} else {
					mine = append(mine, time.Since(t))
				}
				if len(mine)+bad == 1 && bad == 0 {
					first[r] = mine[0]
				}
				next = next.Add(time.Second)
			}
			mu.Lock()
			lat, failed = append(lat, mine...), failed+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, first, failed
}
