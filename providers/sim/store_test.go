package sim

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

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
