package azure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

func TestWatchReportsRunningAndEviction(t *testing.T) {
	e := newEnv(t)
	c := e.watch(t)
	waitFor(t, func() error {
		if n := c.count(providers.EventOffers); n < 2 {
			return fmt.Errorf("%d offers events, want one per region", n)
		}
		return nil
	})
	o := e.offer(t, "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot")
	insts, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	name := insts[0].ID

	// Still booting: nothing to report.
	e.tick(t)
	if _, ok := c.find(providers.EventInstanceRunning, nil); ok {
		t.Fatal("running reported while the VM is still starting")
	}
	// Azure finishes: running.
	e.setState(t, name, "Succeeded", "running")
	e.tick(t)
	var running providers.Event
	waitFor(t, func() error {
		var ok bool
		if running, ok = c.find(providers.EventInstanceRunning, nil); !ok {
			return errors.New("no running event")
		}
		return nil
	})
	in := running.Instance
	if in.ID != name || in.JobID != "job-7f3a" || in.Attempt != 2 || in.IdempotencyKey != "job-7f3a-a2" || in.State != providers.InstanceRunning || in.RunningAt.IsZero() {
		t.Fatalf("running instance %+v", in)
	}
	// Polling again reports nothing new.
	e.tick(t)
	if n := c.count(providers.EventInstanceRunning); n != 1 {
		t.Fatalf("%d running events", n)
	}

	// Azure evicts the Spot VM (Delete policy: it is gone).
	if err := e.cloud.Evict(name); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.cloud.VM(name); ok {
		t.Fatal("an evicted VM with the Delete policy is still there")
	}
	e.tick(t)
	var ended providers.Event
	waitFor(t, func() error {
		var ok bool
		if ended, ok = c.find(providers.EventInstanceTerminated, nil); !ok {
			return errors.New("no terminated event")
		}
		return nil
	})
	if ended.Reason != ReasonEvicted || ended.Instance.ID != name || ended.Instance.State != providers.InstanceTerminated {
		t.Fatalf("terminated event %+v (instance %+v)", ended, ended.Instance)
	}
	// The ended instance is still listed for a while, then forgotten.
	insts, err = e.p.Instances(context.Background())
	if err != nil || len(insts) != 1 || insts[0].Reason != ReasonEvicted {
		t.Fatalf("Instances after eviction: %+v %v", insts, err)
	}
	e.clk.Advance(2 * time.Hour)
	e.asleep(t)
	if insts, _ = e.p.Instances(context.Background()); len(insts) != 0 {
		t.Fatalf("ended instance kept for ever: %+v", insts)
	}
}

func TestWatchStateMapping(t *testing.T) {
	tests := []struct {
		name        string
		spot        bool
		provision   string
		power       string
		terminate   bool // spotwise deleted it
		wantKind    providers.EventKind
		wantReason  string
		wantRunning bool // reported running first
	}{
		{"spot deallocated by Azure", true, "Succeeded", "deallocated", false, providers.EventInstanceTerminated, ReasonEvicted, true},
		{"regular deallocated by someone", false, "Succeeded", "deallocated", false, providers.EventInstanceTerminated, ReasonDeallocated, true},
		{"regular stopped", false, "Succeeded", "stopped", false, providers.EventInstanceTerminated, ReasonStopped, true},
		{"regular deleted by someone", false, "Deleting", "", false, providers.EventInstanceTerminated, ReasonDeleted, true},
		{"spot being deleted by Azure", true, "Deleting", "", false, providers.EventInstanceTerminated, ReasonEvicted, true},
		{"provisioning failed", false, "Failed", "", false, providers.EventInstanceFailed, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.watch(t)
			id := "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/on-demand"
			if tt.spot {
				id = "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot"
			}
			insts, err := e.p.Launch(context.Background(), launchReq(e.offer(t, id), "job-7f3a-a2", 1))
			if err != nil {
				t.Fatal(err)
			}
			name := insts[0].ID
			if tt.wantRunning {
				e.setState(t, name, "Succeeded", "running")
				e.tick(t)
			}
			e.setState(t, name, tt.provision, tt.power)
			e.tick(t)
			var ev providers.Event
			waitFor(t, func() error {
				var ok bool
				if ev, ok = c.find(tt.wantKind, nil); !ok {
					return fmt.Errorf("no %s event", tt.wantKind)
				}
				return nil
			})
			if tt.wantReason != "" && ev.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", ev.Reason, tt.wantReason)
			}
			if _, ok := c.find(providers.EventInstanceRunning, nil); ok != tt.wantRunning {
				t.Errorf("running reported: %v", ok)
			}
			if tt.wantKind == providers.EventInstanceFailed {
				waitFor(t, func() error {
					if len(e.cloud.Deleted()) == 0 {
						return errors.New("the failed VM was not deleted")
					}
					return nil
				})
			}
		})
	}
}

func TestWatchReportsAsyncCapacityFailure(t *testing.T) {
	e := newEnv(t)
	c := e.watch(t)
	o := e.offer(t, "azure/eastus/eastus-3/Standard_ND96asr_v4/spot")
	// Azure accepts the PUT, and the operation ends in ZonalAllocationFailed.
	e.cloud.FailProvisioning("sw-", azurefake.LaunchFailure("ZonalAllocationFailed"))
	insts, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1))
	if err != nil || insts[0].State != providers.InstancePending {
		t.Fatalf("launch: %+v %v", insts, err)
	}
	e.tick(t)
	var ev providers.Event
	waitFor(t, func() error {
		var ok bool
		if ev, ok = c.find(providers.EventInstanceFailed, nil); !ok {
			return errors.New("no failed event")
		}
		return nil
	})
	if ev.Instance.ID != insts[0].ID || ev.Reason == "" {
		t.Fatalf("failed event %+v", ev)
	}
	if got := e.offer(t, o.ID()); got.Capacity != providers.CapacityNone {
		t.Fatalf("offer not marked after an asynchronous ZonalAllocationFailed")
	}
	if n := c.count(providers.EventInstanceFailed); n != 1 {
		t.Fatalf("%d failed events", n)
	}
}

func TestWatchRefreshesPricesOnSchedule(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PricesRefresh = "@every 1h" })
	c := e.watch(t)
	waitFor(t, func() error {
		if n := c.count(providers.EventOffers); n < 2 {
			return fmt.Errorf("%d offers events", n)
		}
		return nil
	})
	before := len(e.cloud.PriceRequests())
	e.cloud.SetPrice("eastus", "Standard_NC24ads_A100_v4", azurefake.Consumption, "3.5")
	e.clk.Advance(time.Hour)
	waitFor(t, func() error {
		if len(e.cloud.PriceRequests()) < before+2 {
			return errors.New("prices not read again")
		}
		return nil
	})
	waitFor(t, func() error {
		if _, ok := c.find(providers.EventOffers, func(ev providers.Event) bool {
			for _, o := range ev.Offers {
				if o.ID() == "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/on-demand" && o.Price == usd("3.5") {
					return true
				}
			}
			return false
		}); !ok {
			return errors.New("no offers event with the new price")
		}
		return nil
	})
}

// TestWatchOnAFakeThatRunsByItself is what a daemon sees of the fake left
// to itself: the VM runs without the test's help, and a Spot eviction is
// reported under either eviction policy.
func TestWatchOnAFakeThatRunsByItself(t *testing.T) {
	for _, evict := range []string{EvictDelete, EvictDeallocate} {
		t.Run(evict, func(t *testing.T) {
			e := newEnvOn(t, azurefake.New(), func(c *Config) { c.SpotEvictionPolicy = evict })
			c := e.watch(t)
			insts, err := e.p.Launch(context.Background(), launchReq(e.offer(t, "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot"), "job-7f3a-a2", 1))
			if err != nil {
				t.Fatal(err)
			}
			name := insts[0].ID
			e.tick(t)
			waitFor(t, func() error {
				if _, ok := c.find(providers.EventInstanceRunning, nil); !ok {
					return errors.New("no running event")
				}
				return nil
			})
			if err := e.cloud.Evict(name); err != nil {
				t.Fatal(err)
			}
			e.tick(t)
			waitFor(t, func() error {
				ev, ok := c.find(providers.EventInstanceTerminated, nil)
				if !ok {
					return errors.New("no terminated event")
				}
				if ev.Reason != ReasonEvicted || ev.Instance.ID != name {
					return fmt.Errorf("terminated event %+v", ev)
				}
				return nil
			})
			// With Deallocate the VM stays, deallocated, until the
			// provider deletes its remains; nothing is left either way.
			e.tick(t)
			waitFor(t, func() error {
				if vm, there := e.cloud.VM(name); there {
					return fmt.Errorf("after the eviction the VM is still there: %+v", vm)
				}
				return nil
			})
			if deleted := e.cloud.Deleted(); slices.Contains(deleted, name) != (evict == EvictDeallocate) {
				t.Fatalf("deleted %v: the provider deletes only a deallocated VM's remains", deleted)
			}
			if n := c.count(providers.EventInstanceTerminated); n != 1 {
				t.Fatalf("%d terminated events", n)
			}
		})
	}
}
