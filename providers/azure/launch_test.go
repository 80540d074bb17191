package azure

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

func TestLaunchSendsTheVM(t *testing.T) {
	tests := []struct {
		name      string
		offer     string
		maxPrice  money.Micros
		eviction  string
		priority  armcompute.VirtualMachinePriorityTypes
		wantPrice *float64 // nil: no billing profile
	}{
		{"spot capped at on-demand", "azure/eastus/eastus-2/Standard_NC24ads_A100_v4/spot", 0, "", armcompute.VirtualMachinePriorityTypesSpot, ptr(-1.0)},
		{"spot with an explicit cap", "azure/eastus/eastus-2/Standard_NC24ads_A100_v4/spot", usd("3.06"), EvictDeallocate, armcompute.VirtualMachinePriorityTypesSpot, ptr(3.06)},
		{"on-demand", "azure/eastus/eastus-3/Standard_ND96asr_v4/on-demand", 0, "", armcompute.VirtualMachinePriorityTypesRegular, nil},
		{"reserved", "azure/eastus/eastus-1/Standard_ND96asr_v4/reserved", 0, "", armcompute.VirtualMachinePriorityTypesRegular, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.SpotEvictionPolicy = tt.eviction })
			o := e.offer(t, tt.offer)
			req := launchReq(o, "job-7f3a-a2", 1)
			req.MaxPrice = tt.maxPrice
			insts, err := e.p.Launch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(insts) != 1 || insts[0].State != providers.InstancePending || insts[0].Price != o.Price || insts[0].Purchase != o.Purchase {
				t.Fatalf("instances %+v", insts)
			}
			reqs := e.cloud.Creates()
			if len(reqs) != 1 {
				t.Fatalf("%d create requests", len(reqs))
			}
			cr := reqs[0]
			if cr.Name != insts[0].ID || cr.ResourceGroup != testRG || cr.Region != "eastus" || cr.Zone != o.Zone[len("eastus-"):] || cr.Size != o.InstanceType {
				t.Errorf("created %s in %s/%s zone %s size %s", cr.Name, cr.ResourceGroup, cr.Region, cr.Zone, cr.Size)
			}
			if cr.Priority != string(tt.priority) {
				t.Errorf("priority %s", cr.Priority)
			}
			vm := cr.Request
			props := vm.Properties
			if len(vm.Zones) != 1 {
				t.Errorf("zones %v", vm.Zones)
			}
			if tt.wantPrice == nil {
				if props.BillingProfile != nil || props.EvictionPolicy != nil || cr.MaxPrice != nil {
					t.Errorf("a regular VM got spot settings")
				}
			} else {
				if cr.MaxPrice == nil || *cr.MaxPrice != *tt.wantPrice {
					t.Errorf("max price %v, want %v", cr.MaxPrice, *tt.wantPrice)
				}
				if want := cmpOr(tt.eviction, EvictDelete); props.EvictionPolicy == nil || cr.EvictionPolicy != want {
					t.Errorf("eviction policy %s, want %s sent", cr.EvictionPolicy, want)
				}
			}
			wantTags := map[string]string{"spotwise-job": "job-7f3a", "spotwise-attempt": "2", "spotwise-launch-key": "job-7f3a-a2",
				"spotwise-name": "bert-large", "spotwise-team": "nlp", "spotwise-node": "0", "spotwise-purchase": string(o.Purchase),
				"spotwise-price": o.Price.Decimal()}
			for k, v := range wantTags {
				if got := cr.Tags[k]; got != v {
					t.Errorf("tag %s = %q, want %q", k, got, v)
				}
			}
			for k := range cr.Tags {
				if strings.Contains(k, ":") {
					t.Errorf("tag name %q holds ':'", k)
				}
			}
			nic := props.NetworkProfile.NetworkInterfaceConfigurations[0].Properties
			if *nic.DeleteOption != armcompute.DeleteOptionsDelete || *props.StorageProfile.OSDisk.DeleteOption != armcompute.DiskDeleteOptionTypesDelete {
				t.Error("NIC and OS disk must be deleted with the VM")
			}
			if *nic.IPConfigurations[0].Properties.Subnet.ID != e.p.cfg.SubnetID {
				t.Errorf("subnet %s", *nic.IPConfigurations[0].Properties.Subnet.ID)
			}
			lc := props.OSProfile.LinuxConfiguration
			if !*lc.DisablePasswordAuthentication || props.OSProfile.AdminPassword != nil || *lc.SSH.PublicKeys[0].KeyData != testSSHKey {
				t.Error("login must be the SSH key only")
			}
			argv, _, err := azurefake.ParseCustomData(cr.CustomData)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range [][2]string{{"--job", "job-7f3a"}, {"--attempt", "2"}, {"--instance", insts[0].ID}, {"--region", "eastus"},
				{"--notices", "azure"}, {"--nats-creds", "/etc/spotwise/agent.creds"}, {"--checkpoints", "azblob://spotwiseckpt/checkpoints"}} {
				if i := slices.Index(argv, want[0]); i < 0 || i+1 == len(argv) || argv[i+1] != want[1] {
					t.Errorf("agent arguments %q lack %s %s", argv, want[0], want[1])
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestLaunchIsIdempotentByName(t *testing.T) {
	e := newEnv(t)
	o := e.offer(t, "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot")
	req := launchReq(o, "job-7f3a-a2", 2)
	first, err := e.p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].ID == first[1].ID || !strings.HasSuffix(first[1].ID, "-n1") {
		t.Fatalf("instances %+v", first)
	}
	again, err := e.p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].ID != first[0].ID || again[1].ID != first[1].ID {
		t.Fatalf("retry returned %+v", again)
	}
	if n := len(e.cloud.Creates()); n != 2 {
		t.Fatalf("%d create requests after a retry, want 2", n)
	}

	// A restarted daemon (a new provider, nothing in memory) finds the
	// VMs by name and buys nothing either.
	p2 := newProviderLike(t, e)
	third, err := p2.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != 2 || third[0].ID != first[0].ID || third[0].JobID != "job-7f3a" || third[0].Attempt != 2 || third[1].Node != 1 {
		t.Fatalf("after restart: %+v", third)
	}
	if n := len(e.cloud.Creates()); n != 2 {
		t.Fatalf("%d create requests after a restart retry, want 2", n)
	}

	// A VM of that name without the key's tag is not adopted.
	putForeign(t, e.cloud, vmName("job-other-a1", 0))
	if _, err := e.p.Launch(context.Background(), launchReq(o, "job-other-a1", 1)); err == nil || providers.IsInsufficientCapacity(err) {
		t.Fatalf("launch over a foreign VM: %v", err)
	}
}

// newProviderLike builds a second provider on the same fakes, as a
// restarted daemon would be.
func newProviderLike(t *testing.T, e *env) *Provider {
	t.Helper()
	p, err := New(context.Background(), e.p.cfg, fakeOptions(e.cloud, e.clk)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLaunchCapacityError(t *testing.T) {
	tests := []struct {
		code     string
		regional bool // every zone of the region: the size's, or all Spot
		ttl      time.Duration
	}{
		{"ZonalAllocationFailed", false, DefaultCapacityTTL},
		{"SkuNotAvailable", true, time.Hour},
		{"QuotaExceeded", true, 15 * time.Minute},       // the size's family quota
		{"OperationNotAllowed", true, 15 * time.Minute}, // the regional Spot vCPU quota
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			e := newEnv(t)
			c := e.watch(t)
			o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/spot")
			e.cloud.RefuseCreates("sw-", azurefake.LaunchFailure(tt.code))
			_, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1))
			var ice *providers.InsufficientCapacityError
			if !errors.As(err, &ice) || ice.OfferID != o.ID() || !strings.Contains(ice.Reason, tt.code) || ice.For != tt.ttl {
				t.Fatalf("err = %v (for %s), want an InsufficientCapacityError naming %s for %s", err, ice.For, tt.code, tt.ttl)
			}
			if got := e.offer(t, o.ID()); got.Capacity != providers.CapacityNone || got.Available != 0 || got.HasCapacity(1) {
				t.Fatalf("offer after the error: capacity %q available %d", got.Capacity, got.Available)
			}
			other := e.offer(t, "azure/eastus/eastus-2/Standard_ND96asr_v4/spot")
			if marked := other.Capacity == providers.CapacityNone; marked != tt.regional {
				t.Errorf("other zone marked %v, want %v", marked, tt.regional)
			}
			// The scheduler hears it too.
			waitFor(t, func() error {
				if _, ok := c.find(providers.EventOffers, func(ev providers.Event) bool {
					for _, eo := range ev.Offers {
						if eo.ID() == o.ID() && eo.Capacity == providers.CapacityNone {
							return true
						}
					}
					return false
				}); !ok {
					return errors.New("no offers event with the offer marked")
				}
				return nil
			})
			// A second launch inside the TTL does not even ask Azure.
			before := len(e.cloud.Creates())
			var again *providers.InsufficientCapacityError
			if _, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a3", 1)); !errors.As(err, &again) ||
				again.Code != tt.code || again.Scope != ice.Scope || again.For != tt.ttl {
				t.Fatalf("second launch: %v", err)
			}
			if len(e.cloud.Creates()) != before {
				t.Error("a marked offer was asked for again")
			}
			// After the TTL the offer is back, and watchers are told.
			e.cloud.ClearFailures()
			e.clk.Advance(tt.ttl)
			e.tick(t)
			if got := e.offer(t, o.ID()); got.Capacity == providers.CapacityNone || !got.HasCapacity(1) {
				t.Fatalf("offer still without capacity after the TTL")
			}
			waitFor(t, func() error {
				if _, ok := c.find(providers.EventOffers, func(ev providers.Event) bool {
					return !ev.Time.Before(t0.Add(tt.ttl)) && ev.Region == "eastus"
				}); !ok {
					return errors.New("no offers event after the mark expired")
				}
				return nil
			})
			if _, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a4", 1)); err != nil {
				t.Fatalf("launch after the TTL: %v", err)
			}
		})
	}
}

func TestLaunchPartialMultiNodeIsUndone(t *testing.T) {
	// Capacity and refusals alike: nothing of the launch may run.
	for _, code := range []string{"AllocationFailed", "AuthorizationFailed"} {
		t.Run(code, func(t *testing.T) {
			e := newEnv(t)
			o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/on-demand")
			e.cloud.RefuseCreates(vmName("job-big-a1", 1), azurefake.LaunchFailure(code))
			_, err := e.p.Launch(context.Background(), launchReq(o, "job-big-a1", 2))
			if _, refused := providers.AsLaunchRefused(err); !refused && !providers.IsInsufficientCapacity(err) {
				t.Fatalf("err = %v", err)
			}
			if del := e.cloud.Deleted(); len(del) != 1 || del[0] != vmName("job-big-a1", 0) {
				t.Fatalf("deleted %v, want node 0 undone", del)
			}
			insts, err := e.p.Instances(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range insts {
				if in.IdempotencyKey == "job-big-a1" && (in.State != providers.InstanceTerminated || in.Reason != ReasonTerminated) {
					t.Errorf("a refused launch left %+v", in)
				}
			}
		})
	}
}

func TestLaunchThrottledThenServed(t *testing.T) {
	e := newEnv(t)
	o := e.offer(t, "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot")
	e.cloud.Throttle(http.MethodPut, 1, time.Second) // the retry policy honours Retry-After
	start := time.Now()
	insts, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1))
	if err != nil {
		t.Fatalf("launch after a 429: %v", err)
	}
	if len(insts) != 1 || e.cloud.Calls(http.MethodPut) != 2 {
		t.Fatalf("%d instances, %d PUTs; want 1 and 2", len(insts), e.cloud.Calls(http.MethodPut))
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("retried after %s; Retry-After said 1s", waited)
	}

	// Throttling beyond the retries is a ThrottledError, not capacity.
	e.cloud.Throttle(http.MethodPut, 10, 0)
	_, err = e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a3", 1))
	if !IsThrottled(err) || providers.IsInsufficientCapacity(err) {
		t.Fatalf("err = %v, want throttled", err)
	}
	// A Retry-After beyond the policy's cap is not waited for.
	e.cloud.Throttle(http.MethodPut, 10, 10*time.Minute)
	start = time.Now()
	_, err = e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a4", 1))
	var te *ThrottledError
	if !errors.As(err, &te) || te.RetryAfter != 10*time.Minute || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

func TestVMName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}[a-z0-9]$`)
	keys := []string{"job-7f3a-a2", "JOB_7F3A/a2", "", "---", strings.Repeat("verylongjobname", 10) + "-a12", "ünïcødé-a1"}
	seen := map[string]string{}
	for _, k := range keys {
		for node := range 3 {
			n := vmName(k, node)
			if !valid.MatchString(n) || len(n) > 64 {
				t.Errorf("vmName(%q, %d) = %q is not a valid Azure VM name", k, node, n)
			}
			if vmName(k, node) != n {
				t.Errorf("vmName(%q) is not deterministic", k)
			}
			if prev, dup := seen[n]; dup {
				t.Errorf("%q and %q share the name %s", prev, k, n)
			}
			seen[n] = k
		}
	}
	if got := vmName("job-7f3a-a2", 0); !strings.HasPrefix(got, "sw-job-7f3a-a2-") || !strings.HasSuffix(got, "-n0") {
		t.Errorf("vmName = %s", got)
	}
}

func TestLaunchInterruptedIsCompletedByRetry(t *testing.T) {
	e := newEnv(t)
	o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/on-demand")
	req := launchReq(o, "job-big-a1", 2)
	// Node 1's PUT fails for a reason that is not capacity (and
	// outlasts the SDK's retries).
	e.cloud.RefuseCreates(vmName("job-big-a1", 1), azurefake.Failure{Status: http.StatusInternalServerError,
		Code: "InternalExecutionError", Message: "An internal execution error occurred. Please retry later."})
	if _, err := e.p.Launch(context.Background(), req); err == nil || providers.IsInsufficientCapacity(err) {
		t.Fatalf("err = %v", err)
	}
	e.cloud.ClearFailures()
	insts, err := e.p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 || insts[0].State != providers.InstancePending || insts[1].State != providers.InstancePending {
		t.Fatalf("retry: %+v", insts)
	}
	// Node 0 once, node 1 refused three times (a try and two retries),
	// then node 1 on the retry.
	if n, del := len(e.cloud.Creates()), e.cloud.Deleted(); n != 5 || len(del) != 0 {
		t.Fatalf("%d creates and deletions %v; want node 0 kept and node 1 created on the retry", n, del)
	}
}
