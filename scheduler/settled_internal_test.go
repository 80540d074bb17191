package scheduler

import (
	"testing"

	"github.com/spotwise/spotwise/providers"
)

// The launch keys of orphans dealt with are remembered while the clouds
// still list them (so that each round does not read their jobs again),
// and forgotten once a listing no longer has them: kept, they grew by
// every launch key of every job that ever finished.
func TestSettledKeysLeaveWithTheListing(t *testing.T) {
	s := &Scheduler{settled: map[string]int{}}
	ended := []providers.Instance{{ID: "i-1", IdempotencyKey: "k1", State: providers.InstanceTerminated}}
	live := []providers.Instance{{ID: "i-2", IdempotencyKey: "k2", State: providers.InstanceRunning}}
	s.settle("k1", ended)
	s.settle("k2", live) // not all ended: not settled
	if !s.settledKey("k1", ended) || s.settledKey("k2", live) {
		t.Fatalf("settled %v, want k1 only", s.settled)
	}
	more := append(ended[:1:1], providers.Instance{ID: "i-3", IdempotencyKey: "k1", State: providers.InstanceFailed})
	if s.settledKey("k1", more) {
		t.Error("a key whose listing changed is still taken for settled")
	}
	s.forgetSettled(map[string][]providers.Instance{"k1": ended, "k2": live})
	if !s.settledKey("k1", ended) {
		t.Error("k1 forgotten while it is still listed")
	}
	s.forgetSettled(map[string][]providers.Instance{"k2": live})
	if len(s.settled) != 0 {
		t.Errorf("settled %v after the listing dropped k1, want none", s.settled)
	}
}
