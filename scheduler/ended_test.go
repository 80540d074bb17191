package scheduler_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/scheduler"
)

// A term that starts passes on the attempts an earlier term ended within
// EndedWithin (it may have stopped before their credentials were
// revoked), and no older ones.
func TestTermStartPassesOnRecentlyEndedAttempts(t *testing.T) {
	r := newRig(t, rigOpt{noFeed: true, noScheduler: true})
	now := r.clk.Now()
	spec, err := job.Parse([]byte(oneGPU), catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(state job.State, ended map[int]time.Duration) string {
		rec := &job.Record{ID: job.NewID(now), Spec: spec, Status: job.Status{State: state, SubmittedAt: now.Add(-5 * time.Hour),
			UpdatedAt: now, DeadlineAt: now.Add(time.Hour), SpecHash: spec.Hash()}}
		for n := 1; n <= len(ended); n++ {
			rec.Status.Attempts = append(rec.Status.Attempts, job.Attempt{N: n, LaunchKey: job.LaunchKey(rec.ID, n), EndedAt: now.Add(-ended[n])})
		}
		rec.Status.Attempt = len(ended)
		if _, err := r.bus.Jobs().Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	finished := mk(job.Succeeded, map[int]time.Duration{1: 3 * time.Hour, 2: 20 * time.Minute})
	requeued := mk(job.Queued, map[int]time.Duration{1: 10 * time.Minute}) // no offers: it stays queued
	old := mk(job.Failed, map[int]time.Duration{1: 2 * time.Hour})

	var mu sync.Mutex
	var got []string
	s := scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: r.log, Clouds: map[string]providers.Provider{"aws": r.cloud},
		Throughput: catalog.Default(), ReconcileInterval: time.Hour, PolicyInterval: time.Hour, Debounce: time.Millisecond,
		CheckpointRoot: "file://" + r.dir, EndedWithin: time.Hour,
		AttemptEnded: func(id string, n int) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, job.LaunchKey(id, n))
		}})
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := []string{job.LaunchKey(finished, 2), job.LaunchKey(requeued, 1)}
	slices.Sort(want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		g := slices.Clone(got)
		mu.Unlock()
		slices.Sort(g)
		if slices.Equal(g, want) {
			break
		}
		if len(g) > len(want) || time.Now().After(deadline) {
			t.Fatalf("passed on %v, want %v (not %s's, ended 2h ago)", g, want, old)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.settle(t)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Errorf("passed on %v after the start, want only %v", got, want)
	}
}
