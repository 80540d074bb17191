package sim

import (
	"context"
	"slices"
	"testing"
)

// A crash between persisting the nodes of one launch leaves some of them;
// the launch retried with the same key after the restart completes it,
// keeping the nodes that exist.
func TestRetriedLaunchCompletesAPartialOne(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallOD, 10)
	first := e.launch(awsSmallOD, "multi", 4)
	e.cloud.Close()
	for _, in := range first[1:] {
		if err := e.store.Delete(context.Background(), storeKey(in.ID)); err != nil {
			t.Fatal(err)
		}
	}
	e.cloud = e.start()
	again := e.launch(awsSmallOD, "multi", 4)
	if len(again) != 4 {
		t.Fatalf("retried launch returned %d instances, want 4", len(again))
	}
	var ids, want []string
	for _, in := range again {
		ids = append(ids, in.ID)
	}
	for _, in := range first {
		want = append(want, in.ID)
	}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("instances %v, want the same IDs as the first launch %v", ids, want)
	}
	// A third call buys nothing more.
	if n := len(e.launch(awsSmallOD, "multi", 4)); n != 4 {
		t.Fatalf("third call returned %d", n)
	}
	if got := e.offer(awsSmallOD).Available; got != 6 {
		t.Fatalf("available %d, want 6 (10 minus the 4 nodes, counted once)", got)
	}
}
