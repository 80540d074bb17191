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

// An agent the cloud runs inside the server's process (the simulated
// cloud's) reports over the server's own connection: its attempt gets no
// NATS credential, and there is none to revoke when it ends. One on an
// instance of its own gets its credential, revoked when the attempt ends.
func TestCredentialsOnlyForAgentsOutsideTheServer(t *testing.T) {
	for _, c := range []struct {
		name      string
		elsewhere bool
	}{
		{"in the server's process", false},
		{"on an instance of its own", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOpt{workload: true, noScheduler: true, agentsElsewhere: c.elsewhere})
			var mu sync.Mutex
			var issued, ended []string
			s := scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: r.log, Clouds: map[string]providers.Provider{"aws": r.cloud},
				Throughput: catalog.Default(), ReconcileInterval: time.Hour, PolicyInterval: time.Hour, Debounce: time.Millisecond,
				CheckpointRoot: r.store.URI(), EndedWithin: time.Hour,
				AgentCredentials: func(id string, n int) (string, error) {
					mu.Lock()
					defer mu.Unlock()
					issued = append(issued, job.LaunchKey(id, n))
					return "creds of " + job.LaunchKey(id, n), nil
				},
				AttemptEnded: func(id string, n int) {
					mu.Lock()
					defer mu.Unlock()
					ended = append(ended, job.LaunchKey(id, n))
				}})
			r.s = s
			ctx, cancel := context.WithCancel(r.ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = s.Run(ctx) }()
			defer func() { cancel(); <-done }()

			rec := r.submit(t, "name: t\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 10m on T4\npurchase: on-demand\n")
			r.waitState(t, rec.ID, job.Placing)
			r.boot(t, rec.ID)
			r.advanceUntil(t, time.Minute, time.Hour, "succeeded", func(x *job.Record) bool {
				return x.Status.State == job.Succeeded && x.Status.Current == nil && x.Status.Previous == nil
			}, rec.ID)
			r.settle(t)

			var want []string
			if c.elsewhere {
				want = []string{job.LaunchKey(rec.ID, 1)}
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(issued, want) {
				t.Errorf("credentials issued for %v, want %v", issued, want)
			}
			if !slices.Equal(ended, want) {
				t.Errorf("ended attempts passed on for revocation: %v, want %v", ended, want)
			}
		})
	}
}
