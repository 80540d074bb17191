package azure

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/spotwise/spotwise/providers"
)

func TestTerminateAndInstances(t *testing.T) {
	e := newEnv(t)
	c := e.watch(t)
	o := e.offer(t, "azure/eastus/eastus-2/Standard_ND96asr_v4/reserved")
	insts, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	name := insts[0].ID
	// A reserved instance takes one of the reservation's two.
	if got := e.offer(t, o.ID()); got.Available != 1 {
		t.Fatalf("reserved offer available %d after one launch, want 1", got.Available)
	}
	e.setState(t, name, "Succeeded", "running")
	putForeign(t, e.cloud, "someone-elses-vm")

	// A restarted daemon sees the same instance, from the VM's tags.
	p2 := newProviderLike(t, e)
	listed, err := p2.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 {
		t.Fatalf("Instances = %+v, want only spotwise's VM", listed)
	}
	want := providers.Instance{ID: name, Provider: Name, Region: "eastus", Zone: "eastus-2", InstanceType: "Standard_ND96asr_v4",
		Purchase: providers.Reserved, Price: usd("17.153311"), State: providers.InstanceRunning, JobID: "job-7f3a", Attempt: 2,
		Node: 0, IdempotencyKey: "job-7f3a-a2", LaunchedAt: t0, RunningAt: t0}
	if got := listed[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("instance from tags:\n got %+v\nwant %+v", got, want)
	}

	if err := e.p.Terminate(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if del := e.cloud.Deleted(); !slices.Contains(del, name) {
		t.Fatalf("BeginDelete not sent: %v", del)
	}
	waitFor(t, func() error {
		ev, ok := c.find(providers.EventInstanceTerminated, nil)
		if !ok {
			return errors.New("no terminated event")
		}
		if ev.Reason != ReasonTerminated {
			return fmt.Errorf("reason %q", ev.Reason)
		}
		return nil
	})
	if got := e.offer(t, o.ID()); got.Available != 2 {
		t.Fatalf("reserved offer available %d after termination, want 2", got.Available)
	}
	// The VM is gone: no second event; terminating again is fine.
	if _, ok := e.cloud.VM(name); ok {
		t.Fatal("the VM is still there after its deletion")
	}
	e.tick(t)
	if n := c.count(providers.EventInstanceTerminated); n != 1 {
		t.Fatalf("%d terminated events", n)
	}
	if err := e.p.Terminate(context.Background(), name); err != nil {
		t.Fatalf("terminating twice: %v", err)
	}
	if err := p2.Terminate(context.Background(), "sw-never-existed-n0"); err != nil {
		t.Fatalf("terminating a VM that is gone: %v", err)
	}
	if err := p2.Terminate(context.Background(), "someone-elses-vm"); !errors.Is(err, ErrNotManaged) {
		t.Fatalf("terminating a foreign VM: %v", err)
	}
}

func TestDecideState(t *testing.T) {
	tests := []struct {
		prov, power string
		spot, term  bool
		want        providers.InstanceState
		reason      string
	}{
		{"Creating", "", false, false, providers.InstancePending, ""},
		{"Succeeded", "starting", false, false, providers.InstancePending, ""},
		{"Succeeded", "running", true, false, providers.InstanceRunning, ""},
		{"Updating", "running", false, false, providers.InstanceRunning, ""},
		{"Succeeded", "", false, false, "", ""}, // unknown: no change
		{"Succeeded", "deallocated", true, false, providers.InstanceTerminated, ReasonEvicted},
		{"Succeeded", "deallocating", true, true, providers.InstanceTerminated, ReasonTerminated},
		{"Succeeded", "deallocated", false, false, providers.InstanceTerminated, ReasonDeallocated},
		{"Succeeded", "stopped", false, false, providers.InstanceTerminated, ReasonStopped},
		{"Deleting", "running", true, false, providers.InstanceTerminated, ReasonEvicted},
		{"Deleting", "", false, true, providers.InstanceTerminated, ReasonTerminated},
		{"Deleting", "", false, false, providers.InstanceTerminated, ReasonDeleted},
		{"Failed", "", false, false, providers.InstanceFailed, ""},
		{"Failed", "running", false, false, providers.InstanceRunning, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/spot=%v/ours=%v", tt.prov, tt.power, tt.spot, tt.term), func(t *testing.T) {
			got, reason := decideState(observed{provisioning: tt.prov, power: tt.power}, &vmRecord{spot: tt.spot, terminating: tt.term})
			if got != tt.want || reason != tt.reason {
				t.Errorf("decideState = %q %q, want %q %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestFailedDeletionIsRetried(t *testing.T) {
	e := newEnv(t)
	e.watch(t)
	insts, err := e.p.Launch(context.Background(), launchReq(e.offer(t, "azure/eastus/eastus-1/Standard_NC6s_v3/on-demand"), "job-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	name := insts[0].ID
	e.setState(t, name, "Succeeded", "running")
	e.cloud.FailDeletes(1)
	if err := e.p.Terminate(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	e.tick(t) // the deletion's operation fails, the VM is still there, so it is deleted again
	e.tick(t)
	waitFor(t, func() error {
		if n := len(e.cloud.Deleted()); n != 2 {
			return fmt.Errorf("%d deletions, want 2", n)
		}
		if _, ok := e.cloud.VM(name); ok {
			return errors.New("the VM is still there")
		}
		return nil
	})
}
