package azurefake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

const testRG = "rg"

func client(t *testing.T, c *Cloud) *armcompute.VirtualMachinesClient {
	t.Helper()
	cl, err := armcompute.NewVirtualMachinesClient("00000000-0000-0000-0000-000000000001", c.Credential(),
		&arm.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: c.Transport(), Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func spotVM(eviction armcompute.VirtualMachineEvictionPolicyTypes) armcompute.VirtualMachine {
	return armcompute.VirtualMachine{Location: ptr("eastus"), Zones: []*string{ptr("2")}, Tags: map[string]*string{"k": ptr("v")},
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: ptr(armcompute.VirtualMachineSizeTypes("Standard_NC24ads_A100_v4"))},
			Priority:        ptr(armcompute.VirtualMachinePriorityTypesSpot),
			EvictionPolicy:  &eviction,
			BillingProfile:  &armcompute.BillingProfile{MaxPrice: ptr(-1.0)},
			OSProfile:       &armcompute.OSProfile{ComputerName: ptr("vm"), CustomData: ptr("IyEvYmluL2Jhc2gK")}, // "#!/bin/bash\n"
		}}
}

// TestBoot: a created VM runs at once, after the boot delay, or when the
// test says; its creation's operation follows.
func TestBoot(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	tests := []struct {
		name  string
		opts  []Option
		after func(c *Cloud) // what makes the VM run
	}{
		{"at once", nil, func(*Cloud) {}},
		{"after the boot delay", []Option{WithClock(clock), WithBootDelay(time.Minute)}, func(*Cloud) {
			later := t0.Add(time.Minute)
			now.Store(&later)
		}},
		{"when told", []Option{WithManualStates()}, func(c *Cloud) { _ = c.SetState("vm1", "Succeeded", "running") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now.Store(&t0)
			c := New(tt.opts...)
			defer c.Close()
			ctx := context.Background()
			poller, err := client(t, c).BeginCreateOrUpdate(ctx, testRG, "vm1", spotVM(armcompute.VirtualMachineEvictionPolicyTypesDelete), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := poller.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			vm, _ := c.VM("vm1")
			if booted := vm.Power == "running"; booted != (tt.opts == nil) || poller.Done() != booted {
				t.Fatalf("before: %+v, operation done %v", vm, poller.Done())
			}
			tt.after(c)
			if _, err := poller.Poll(ctx); err != nil || !poller.Done() {
				t.Fatalf("operation not done once the VM runs: %v", err)
			}
			res, err := poller.Result(ctx)
			if err != nil || str(res.Properties.ProvisioningState) != "Succeeded" || res.Properties.OSProfile.CustomData != nil {
				t.Fatalf("result %+v %v", res.Properties, err)
			}
			view, err := client(t, c).InstanceView(ctx, testRG, "vm1", nil)
			if err != nil || len(view.Statuses) != 2 || str(view.Statuses[1].Code) != "PowerState/running" {
				t.Fatalf("instance view %+v %v", view, err)
			}
			cr := c.Creates()[0]
			if cr.Region != "eastus" || cr.Zone != "2" || cr.Priority != "Spot" || cr.EvictionPolicy != "Delete" ||
				*cr.MaxPrice != -1 || cr.Tags["k"] != "v" || cr.CustomData != "#!/bin/bash\n" {
				t.Fatalf("create %+v", cr)
			}
		})
	}
}

// TestFailures: refusals and failed provisioning read as ARM errors with
// their code and message, and a create-only PUT of an existing VM is 412.
func TestFailures(t *testing.T) {
	c := New()
	defer c.Close()
	ctx := context.Background()
	cl := client(t, c)
	c.RefuseCreates("full-", LaunchFailure("OperationNotAllowed"))
	c.FailProvisioning("late-", LaunchFailure("ZonalAllocationFailed"))
	_, err := cl.BeginCreateOrUpdate(ctx, testRG, "full-1", spotVM("Delete"), nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusConflict || re.ErrorCode != "OperationNotAllowed" || !strings.Contains(err.Error(), "Low-priority vCPUs quota") {
		t.Fatalf("refusal: %v", err)
	}
	poller, err := cl.BeginCreateOrUpdate(ctx, testRG, "late-1", spotVM("Delete"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); !errors.As(err, &re) || re.ErrorCode != "ZonalAllocationFailed" {
		t.Fatalf("failed provisioning: %v", err)
	}
	if vm, _ := c.VM("late-1"); vm.Provisioning != "Failed" || vm.FailureCode != "ZonalAllocationFailed" {
		t.Fatalf("failed VM %+v", vm)
	}
	if _, err := cl.BeginCreateOrUpdate(ctx, testRG, "late-1", spotVM("Delete"),
		&armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{IfNoneMatch: ptr("*")}); !errors.As(err, &re) || re.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("create-only PUT over a VM: %v", err)
	}
	if err := c.SetState("late-1", "Succeeded", "running"); err != nil {
		t.Fatal(err)
	}
	regular := spotVM("")
	regular.Properties.Priority, regular.Properties.EvictionPolicy, regular.Properties.BillingProfile = nil, nil, nil
	if _, err := cl.BeginCreateOrUpdate(ctx, testRG, "regular", regular, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Evict("regular"); err == nil {
		t.Fatal("a Regular VM was evicted")
	}
	c.FailDeletes(1)
	del, err := cl.BeginDelete(ctx, testRG, "regular", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := del.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); !errors.As(err, &re) || re.ErrorCode != "OperationPreempted" {
		t.Fatalf("failed deletion: %v", err)
	}
	if _, ok := c.VM("regular"); !ok {
		t.Fatal("a failed deletion deleted the VM")
	}
	c.Throttle(http.MethodGet, 1, 7*time.Second)
	if _, err := cl.Get(ctx, testRG, "regular", nil); !errors.As(err, &re) || re.StatusCode != http.StatusTooManyRequests ||
		re.RawResponse.Header.Get("Retry-After") != "7" {
		t.Fatalf("throttled: %v", err)
	}
}

// TestFailLaunches: the next creations fail the way Azure sends each
// code (a placement failure from the operation, anything else as the
// PUT's answer, with Azure's status), and then creations work again; a
// Spot max price with more than 5 decimals is refused as Azure does.
func TestFailLaunches(t *testing.T) {
	c := New()
	defer c.Close()
	ctx := context.Background()
	cl := client(t, c)
	c.FailLaunches(2, Failure{Code: "AuthorizationFailed"})
	c.FailLaunches(1, LaunchFailure("ZonalAllocationFailed"))
	var re *azcore.ResponseError
	for _, name := range []string{"a", "b"} {
		if _, err := cl.BeginCreateOrUpdate(ctx, testRG, name, spotVM("Delete"), nil); !errors.As(err, &re) ||
			re.StatusCode != http.StatusForbidden || re.ErrorCode != "AuthorizationFailed" || !strings.Contains(err.Error(), "does not have authorization") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	poller, err := cl.BeginCreateOrUpdate(ctx, testRG, "c", spotVM("Delete"), nil)
	if err != nil {
		t.Fatalf("a placement failure refused the PUT: %v", err)
	}
	if _, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); !errors.As(err, &re) || re.ErrorCode != "ZonalAllocationFailed" {
		t.Fatalf("c's creation: %v", err)
	}
	if _, err := cl.BeginCreateOrUpdate(ctx, testRG, "d", spotVM("Delete"), nil); err != nil {
		t.Fatalf("after the failures: %v", err)
	}
	for price, ok := range map[float64]bool{0.12346: true, 0.123456: false, -1: true, 0: false, 3: true} {
		vm := spotVM("Delete")
		vm.Properties.BillingProfile.MaxPrice = &price
		_, err := cl.BeginCreateOrUpdate(ctx, testRG, fmt.Sprintf("p-%v", price), vm, nil)
		if refused := errors.As(err, &re) && re.ErrorCode == "MaxPriceValueInvalid" && re.StatusCode == http.StatusBadRequest; refused == ok {
			t.Errorf("max price %v: %v", price, err)
		}
	}
	if got := c.Creates()[len(c.Creates())-1].MaxPriceText; got == "" {
		t.Error("the max price's text is not recorded")
	}
}

// TestConcurrentUse creates, lists, reads, evicts and deletes VMs from
// many goroutines: every listing pages on its own.
func TestConcurrentUse(t *testing.T) {
	c := New()
	defer c.Close()
	ctx := context.Background()
	cl := client(t, c)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 3 {
				name := fmt.Sprintf("vm-%d-%d", g, i)
				if _, err := cl.BeginCreateOrUpdate(ctx, testRG, name, spotVM("Deallocate"), nil); err != nil {
					errs <- err
					return
				}
				seen := map[string]bool{}
				for pager := cl.NewListPager(testRG, nil); pager.More(); {
					page, err := pager.NextPage(ctx)
					if err != nil {
						errs <- err
						return
					}
					for _, vm := range page.Value {
						if seen[*vm.Name] {
							errs <- fmt.Errorf("%s listed twice", *vm.Name)
						}
						seen[*vm.Name] = true
					}
				}
				if !seen[name] {
					errs <- fmt.Errorf("%s not listed", name)
				}
				if _, err := cl.InstanceView(ctx, testRG, name, nil); err != nil {
					errs <- err
				}
				_ = c.Evict(name)
				_ = c.Creates()
			}
			if _, err := cl.BeginDelete(ctx, testRG, fmt.Sprintf("vm-%d-0", g), nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(c.VMs()); n != 16 {
		t.Fatalf("%d VMs, want 16", n)
	}
	if vm, _ := c.VM("vm-3-2"); vm.Power != "deallocated" || vm.Provisioning != "Succeeded" {
		t.Fatalf("evicted with Deallocate: %+v", vm)
	}
}
