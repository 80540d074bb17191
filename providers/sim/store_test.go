package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
)

func TestRestart(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 10)
	latency := e.offer(awsSmallOD).LaunchLatency
	running := e.launch(awsSmallOD, "run", 2)
	e.clk.Advance(latency)
	for _, in := range running {
		e.runner.wait(t, in.ID, 1, 0)
	}
	e.clk.Advance(latency / 2)
	pending := e.launch(awsSmallOD, "pend", 1)[0]
	ended := e.launch(awsSmallOD, "gone", 1)[0]
	if err := e.cloud.Terminate(context.Background(), ended.ID); err != nil {
		t.Fatal(err)
	}
	before := e.offer(awsSmallOD).Available // 10 - 3 live

	e.cloud.Close() // the server goes down; the runners stop with it
	for _, in := range running {
		e.runner.wait(t, in.ID, 1, 1)
	}
	keys, _ := e.store.Keys(context.Background())
	for _, key := range keys {
		if !validKVKey(key) {
			t.Errorf("store key %q is not a valid NATS KV key", key)
		}
	}

	c2 := e.start()
	e.cloud = c2
	insts, err := c2.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]providers.InstanceState{}
	for _, in := range insts {
		states[in.ID] = in.State
	}
	want := map[string]providers.InstanceState{running[0].ID: providers.InstanceRunning, running[1].ID: providers.InstanceRunning,
		pending.ID: providers.InstancePending, ended.ID: providers.InstanceTerminated}
	if len(states) != len(want) {
		t.Fatalf("restored %v, want %v", states, want)
	}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("%s restored %s, want %s", id, states[id], s)
		}
	}
	for _, in := range running {
		e.runner.wait(t, in.ID, 2, 1) // started again
	}
	if got := offerOf(t, c2, awsSmallOD).Available; got != before {
		t.Errorf("available %d after restart, want %d", got, before)
	}
	// Retried launches buy nothing, whatever became of their instances.
	for key, want := range map[string][]string{"run": ids(running), "pend": {pending.ID}, "gone": {ended.ID}} {
		got, err := c2.Launch(context.Background(), e.request(awsSmallOD, key, len(want)))
		if err != nil || !slices.Equal(ids(got), want) {
			t.Errorf("retry of %s after restart: %v, %v; want %v", key, ids(got), err, want)
		}
	}
	if got := offerOf(t, c2, awsSmallOD).Available; got != before {
		t.Errorf("available %d after retries, want %d", got, before)
	}
	// The pending instance boots on its original schedule.
	e.clk.Set(pending.LaunchedAt.Add(latency - time.Second))
	if s := instanceOf(t, c2, pending.ID).State; s != providers.InstancePending {
		t.Errorf("state %s before the boot was due", s)
	}
	e.clk.Advance(time.Second)
	got := instanceOf(t, c2, pending.ID)
	if got.State != providers.InstanceRunning || !got.RunningAt.Equal(pending.LaunchedAt.Add(latency)) {
		t.Errorf("pending instance after restart: %s at %s, want running at %s", got.State, got.RunningAt, pending.LaunchedAt.Add(latency))
	}
	e.runner.wait(t, pending.ID, 1, 0)
}

func TestRestartAfterBootWasDue(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(gcpOD, 1)
	in := e.launch(gcpOD, "k", 1)[0]
	latency := e.offer(gcpOD).LaunchLatency
	e.cloud.Close()
	e.clk.Advance(time.Hour) // the server was down while the instance booted

	c2 := e.start()
	e.cloud = c2
	got := instanceOf(t, c2, in.ID)
	if got.State != providers.InstanceRunning || !got.RunningAt.Equal(t0.Add(latency)) {
		t.Errorf("%s at %s, want running since %s", got.State, got.RunningAt, t0.Add(latency))
	}
	e.runner.wait(t, in.ID, 1, 0)
}

func TestRestartIgnoresOtherClouds(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(gcpOD, 1)
	e.launch(gcpOD, "k", 1)
	e.cloud.Close()
	e.opts.Name = "sim-b"
	c2 := e.start()
	e.cloud = c2
	if insts, _ := c2.Instances(context.Background()); len(insts) != 0 {
		t.Errorf("cloud sim-b restored sim's instances: %v", ids(insts))
	}
}

func TestLaunchNotStored(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 4)
	e.store.setFailPuts(true)
	if insts, err := e.cloud.Launch(context.Background(), e.request(awsSmallOD, "k", 2)); err == nil {
		t.Fatalf("launch succeeded without a store: %v", ids(insts))
	}
	if insts, _ := e.cloud.Instances(context.Background()); len(insts) != 0 {
		t.Errorf("unstored launch left instances %v", ids(insts))
	}
	if got := e.offer(awsSmallOD).Available; got != 4 {
		t.Errorf("unstored launch took capacity: %d available", got)
	}
	e.store.setFailPuts(false)
	in := e.launch(awsSmallOD, "k", 2)[0]

	// A later write that fails is retried: the instance boots while the
	// store is down and the record catches up.
	e.store.setFailPuts(true)
	e.clk.Advance(e.offer(awsSmallOD).LaunchLatency)
	e.store.setFailPuts(false)
	e.instance(in.ID) // any call retries
	if rec := storedRecord(t, e.store, in.ID); rec.Instance.State != providers.InstanceRunning {
		t.Errorf("stored state %s, want running", rec.Instance.State)
	}
}

// Records are stored behind the cloud's lock, many at once, and nothing
// is told before it is stored: launches made together are written
// together and each returns once its records are stored; an instance's
// running event waits for the write of its running record.
func TestRecordsAreStoredTogetherAndBeforeAnyoneIsTold(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 8)
	rec, _, _ := watch(t, e.cloud)
	reqs := make([]providers.LaunchRequest, 8)
	for n := range reqs {
		reqs[n] = e.request(awsSmallOD, fmt.Sprintf("k%d", n), 1)
	}
	var wg sync.WaitGroup
	launched := make(chan providers.Instance, len(reqs))
	launch := func(n int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			insts, err := e.cloud.Launch(context.Background(), reqs[n])
			if err != nil {
				t.Errorf("launch %d: %v", n, err)
				return
			}
			launched <- insts[0]
		}()
	}
	held := func(want int) {
		t.Helper()
		testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
			if n := e.store.heldPuts(); n < want {
				return fmt.Errorf("%d writes under way, want %d", n, want)
			}
			return nil
		})
	}
	// The first launch's write hangs; the seven launched meanwhile queue
	// theirs.
	release := e.store.holdPuts(t)
	launch(0)
	held(1)
	for n := 1; n < len(reqs); n++ {
		launch(n)
	}
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		// Queued behind the first: the seven launches' records (the
		// pending count would also count events held back).
		e.cloud.mu.Lock()
		n := len(e.cloud.bh.queue)
		e.cloud.mu.Unlock()
		if n < len(reqs)-1 {
			return fmt.Errorf("%d writes queued behind the first", n)
		}
		return nil
	})
	// Under one lock held for each write, the seven would be written one
	// after another: here they are under way at once.
	releaseRest := e.store.holdPuts(t)
	release()
	held(len(reqs) - 1)
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if len(launched) == 0 {
			return errors.New("the first launch has not returned")
		}
		return nil
	})
	if len(launched) != 1 {
		t.Fatalf("%d launches returned, want the first only: the others' records are not stored", len(launched))
	}
	releaseRest()
	wg.Wait()
	close(launched)
	var first providers.Instance
	for in := range launched {
		if storedRecord(t, e.store, in.ID).Instance.State != providers.InstancePending {
			t.Errorf("%s: stored state is not pending", in.ID)
		}
		first = in
	}

	// The instances boot while the store holds their running records
	// back: no watcher hears of it until they are stored.
	release = e.store.holdPuts(t)
	e.clk.Advance(e.offer(awsSmallOD).LaunchLatency)
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if n := e.store.heldPuts(); n == 0 {
			return errors.New("no running record written yet")
		}
		return nil
	})
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if n := e.cloud.watchers.Pending(); n > 0 {
			return fmt.Errorf("%d events on their way to the watcher", n)
		}
		return nil
	})
	if slices.ContainsFunc(rec.all(), instanceEvent(providers.EventInstanceRunning, first.ID)) {
		t.Fatal("a watcher heard an instance was running before its record was stored")
	}
	if !e.cloud.Busy() {
		t.Error("the cloud is not busy with an event it holds back")
	}
	release()
	rec.wait(t, "running", instanceEvent(providers.EventInstanceRunning, first.ID))
	if got := storedRecord(t, e.store, first.ID).Instance.State; got != providers.InstanceRunning {
		t.Errorf("stored state %s after the running event, want running", got)
	}
}

func TestRetention(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 1)
	in := e.launch(awsSmallOD, "old", 1)[0]
	if err := e.cloud.Terminate(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(Retention - time.Hour)
	e.instance(in.ID) // still listed

	e.clk.Advance(2 * time.Hour)
	if insts, _ := e.cloud.Instances(context.Background()); len(insts) != 0 {
		t.Errorf("instance listed %s after it ended", Retention+time.Hour)
	}
	rec := storedRecord(t, e.store, in.ID)
	if !rec.Pruned || rec.Workload.Image != "" {
		t.Errorf("record not slimmed: %+v", rec)
	}
	if got := e.launch(awsSmallOD, "old", 1); len(got) != 1 || got[0].ID != in.ID {
		t.Errorf("retry after Retention: %v, want %s", ids(got), in.ID)
	}

	// After KeyRetention the launch is forgotten: the key buys again.
	e.clk.Advance(KeyRetention)
	e.cloud.Instances(context.Background())
	if _, _, err := e.store.Get(context.Background(), storeKey(in.ID)); err == nil {
		t.Errorf("record kept %s after the instance ended", KeyRetention+Retention)
	}
	if got := e.launch(awsSmallOD, "old", 1); got[0].State != providers.InstancePending {
		t.Errorf("retry after KeyRetention: %+v, want a new launch", got[0])
	}
	if got := e.offer(awsSmallOD).Available; got != 0 {
		t.Errorf("available %d, want 0", got)
	}
}

func storedRecord(t testing.TB, s *memStore, id string) record {
	t.Helper()
	b, _, err := s.Get(context.Background(), storeKey(id))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// validKVKey reports whether key uses only the characters NATS KV allows.
func validKVKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' {
		return false
	}
	for _, r := range key {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.=/", r)
		if !ok {
			return false
		}
	}
	return true
}

// InstancesSince lists the live instances and those that ended at or
// after a time; Instances lists every one kept.
func TestInstancesSince(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 3)
	old := e.launch(awsSmallOD, "old", 1)[0]
	recent := e.launch(awsSmallOD, "recent", 1)[0]
	live := e.launch(awsSmallOD, "live", 1)[0]
	ctx := context.Background()
	if err := e.cloud.Terminate(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(2 * time.Hour)
	if err := e.cloud.Terminate(ctx, recent.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	since, _ := e.cloud.InstancesSince(ctx, e.clk.Now().Add(-time.Hour))
	if got, want := sortedIDs(since), sortedIDs([]providers.Instance{recent, live}); !slices.Equal(got, want) {
		t.Errorf("since an hour ago: %v, want %v", got, want)
	}
	all, _ := e.cloud.Instances(ctx)
	if got, want := sortedIDs(all), sortedIDs([]providers.Instance{old, recent, live}); !slices.Equal(got, want) {
		t.Errorf("every instance: %v, want %v", got, want)
	}
}

func sortedIDs(insts []providers.Instance) []string {
	out := ids(insts)
	slices.Sort(out)
	return out
}
