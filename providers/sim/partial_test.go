package sim

import (
	"context"
	"slices"
	"testing"

	"github.com/spotwise/spotwise/providers"
)

// A crash between persisting the nodes of one launch leaves some of them;
// the launch retried with the same key after the restart completes it,
// keeping the nodes that exist.
func TestRetriedLaunchCompletesAPartialOne(t *testing.T) {
	e := newEnv(t)
	first := e.crashMidLaunch(t)
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

// A crash that stored only some nodes of a launch does not leave a job on
// part of its machines: the restarted cloud has every node of the launch,
// booting with the stored ones, before anyone asks again.
func TestRestartRestoresTheNodesOfAPartlyStoredLaunch(t *testing.T) {
	e := newEnv(t)
	first := e.crashMidLaunch(t)
	all, err := e.cloud.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(all), ids(first); !slices.Equal(got, want) {
		t.Fatalf("after the restart the cloud lists %v, want every node of the launch %v", got, want)
	}
	for _, in := range all {
		if in.State != first[0].State || !in.LaunchedAt.Equal(first[0].LaunchedAt) || in.Price != first[0].Price {
			t.Fatalf("restored node %+v differs from the stored one %+v", in, first[0])
		}
	}
	if got := e.offer(awsSmallOD).Available; got != 6 {
		t.Fatalf("available %d, want 6 (every node of the launch holds capacity)", got)
	}
}

// crashMidLaunch launches 4 nodes, then restarts the cloud with only the
// first node's record stored, as a crash between the nodes' writes leaves
// it; it returns the launch's instances.
func (e *env) crashMidLaunch(t *testing.T) []providers.Instance {
	e.setAvailable(awsSmallOD, 10)
	first := e.launch(awsSmallOD, "multi", 4)
	e.cloud.Close()
	for _, in := range first[1:] {
		if err := e.store.Delete(context.Background(), storeKey(in.ID)); err != nil {
			t.Fatal(err)
		}
	}
	e.cloud = e.start()
	return first
}
