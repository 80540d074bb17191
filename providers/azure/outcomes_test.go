package azure

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

// quotaMessage is Azure's quota error message for a quota (its name as
// Azure writes it), its limit and what the VM needs on top of the usage.
func quotaMessage(which, limit, need string) string {
	return "Operation could not be completed as it results in exceeding approved " + which + " quota. Additional details - " +
		"Deployment Model: Resource Manager, Location: eastus, Current Limit: " + limit + ", Current Usage: 0, Additional Required: " + need + "."
}

var outcomeCases = []struct {
	code     string
	note     string // tells cases of one code apart
	msg      string // "" is Azure's (azurefake.LaunchFailure)
	purchase providers.PurchaseOption
	kind     testutil.OutcomeKind
	scope    providers.Scope
	account  bool
	ttl      time.Duration
	advice   string // in the reason
}{
	{code: "ZonalAllocationFailed", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: DefaultCapacityTTL},
	{code: "OverconstrainedZonalAllocationRequest", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: DefaultCapacityTTL},
	{code: "AllocationFailed", kind: testutil.Capacity, scope: providers.ScopeInstanceType, ttl: DefaultCapacityTTL},
	{code: "OverconstrainedAllocationRequest", kind: testutil.Capacity, scope: providers.ScopeInstanceType, ttl: DefaultCapacityTTL},
	{code: "SkuNotAvailable", kind: testutil.Capacity, scope: providers.ScopeInstanceType, ttl: time.Hour},
	{code: "SpotPriceGreaterThanProvidedMaxPrice", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: time.Minute},
	{code: "OperationNotAllowed", note: "max price", msg: "Unable to create the VM because the requested max price is lower than the current Spot price.",
		kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: time.Minute},
	{code: "OperationNotAllowed", note: "spot quota", kind: testutil.Capacity, scope: providers.ScopeSpotRegion, ttl: 15 * time.Minute,
		advice: "Spot vCPU quota"},
	{code: "OperationNotAllowed", note: "spot quota of 0", msg: quotaMessage("LowPriorityCores", "0", "96"),
		kind: testutil.Refused, scope: providers.ScopeSpotRegion, account: true, advice: "in eastus is 0 and the VM needs 96"},
	{code: "QuotaExceeded", note: "family", purchase: providers.OnDemand, kind: testutil.Capacity, scope: providers.ScopeInstanceType,
		ttl: 15 * time.Minute, advice: "family"},
	{code: "QuotaExceeded", note: "family of 0", msg: quotaMessage("standardNDASv4_A100Family Cores", "0", "96"), purchase: providers.OnDemand,
		kind: testutil.Refused, scope: providers.ScopeInstanceType, account: true, advice: "request a quota increase"},
	{code: "QuotaExceeded", note: "regional", msg: quotaMessage("Total Regional Cores", "350", "96"), purchase: providers.OnDemand,
		kind: testutil.Capacity, scope: providers.ScopeRegion, ttl: 15 * time.Minute},
	{code: "InsufficientSubnetSize", kind: testutil.Capacity, scope: providers.ScopeRegion, ttl: 15 * time.Minute},

	{code: "MaxPriceValueInvalid", kind: testutil.Refused, scope: providers.ScopeOffer},
	{code: "AzureSpotIsNotSupportedForThisVMSize", kind: testutil.Refused, scope: providers.ScopeInstanceType},
	{code: "InvalidParameter", kind: testutil.Refused, scope: providers.ScopeOffer},
	{code: "AuthorizationFailed", kind: testutil.Refused, scope: providers.ScopeProvider, account: true, advice: "Virtual Machine Contributor"},
	{code: "SubscriptionNotRegistered", kind: testutil.Refused, scope: providers.ScopeProvider, account: true, advice: "az provider register"},
	{code: "MissingSubscriptionRegistration", kind: testutil.Refused, scope: providers.ScopeProvider, account: true, advice: "az provider register"},
	{code: "ResourceGroupNotFound", kind: testutil.Refused, scope: providers.ScopeProvider, account: true, advice: "resource_group"},
	{code: "RequestDisallowedByPolicy", kind: testutil.Refused, scope: providers.ScopeProvider, account: true},

	{code: "InternalExecutionError", kind: testutil.Unknown},
	{code: "OperationNotAllowed", note: "other", msg: "The VM is being deleted.", kind: testutil.Unknown},
	{code: "SomethingNewFromARM", kind: testutil.Unknown},
}

func (c caseName) String() string { return strings.TrimSuffix(c.code+"/"+c.note, "/") }

type caseName struct{ code, note string }

// TestLaunchOutcomes: Azure refusing the PUT with each code reads as the
// right outcome, and only capacity marks the provider's offers.
func TestLaunchOutcomes(t *testing.T) {
	for _, tt := range outcomeCases {
		t.Run(caseName{tt.code, tt.note}.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/"+string(cmp.Or(tt.purchase, providers.Spot)))
			f := azurefake.LaunchFailure(tt.code)
			f.Message = cmp.Or(tt.msg, f.Message)
			e.cloud.RefuseCreates("sw-", f)
			_, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1))
			testutil.CheckOutcome(t, err, testutil.Outcome{Kind: tt.kind, OfferID: o.ID(), Code: tt.code, Scope: tt.scope, Account: tt.account, For: tt.ttl})
			if t.Failed() {
				return
			}
			if tt.advice != "" && !strings.Contains(err.Error(), tt.advice) {
				t.Errorf("reason %q does not say %q", err, tt.advice)
			}
			if tt.kind != testutil.Unknown && len(e.cloud.Creates()) != 1 {
				t.Errorf("%d PUTs: an answer with a known outcome is not retried", len(e.cloud.Creates()))
			}
			if after := e.offer(t, o.ID()); (after.Capacity == providers.CapacityNone) != (tt.kind == testutil.Capacity) {
				t.Errorf("after the launch the offer reads capacity %q", after.Capacity)
			}
		})
	}
}

// TestAsyncLaunchOutcomes: the same codes, when the PUT is accepted and
// the creation fails later, end the instance with the outcome's reason;
// a capacity error marks its scope, so the next launch of the offer is a
// capacity error without asking Azure.
func TestAsyncLaunchOutcomes(t *testing.T) {
	for _, tt := range outcomeCases {
		t.Run(caseName{tt.code, tt.note}.String(), func(t *testing.T) {
			e := newEnv(t)
			c := e.watch(t)
			o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/"+string(cmp.Or(tt.purchase, providers.Spot)))
			f := azurefake.LaunchFailure(tt.code)
			f.Message = cmp.Or(tt.msg, f.Message)
			e.cloud.FailProvisioning("sw-", f)
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
			if !strings.Contains(ev.Reason, tt.code) || tt.advice != "" && !strings.Contains(ev.Reason, tt.advice) {
				t.Errorf("failed with reason %q", ev.Reason)
			}
			if after := e.offer(t, o.ID()); (after.Capacity == providers.CapacityNone) != (tt.kind == testutil.Capacity) {
				t.Errorf("after the failure the offer reads capacity %q", after.Capacity)
			}
			e.cloud.ClearFailures()
			_, err = e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a3", 1))
			if tt.kind == testutil.Capacity {
				testutil.CheckOutcome(t, err, testutil.Outcome{Kind: testutil.Capacity, OfferID: o.ID(), Code: tt.code, Scope: tt.scope, For: tt.ttl})
			} else if err != nil {
				t.Errorf("the next launch: %v", err)
			}
		})
	}
}

// TestWideCapacityMarks: a capacity error wider than its offer, refused
// at once or failing the creation later as Azure sends its code, shows
// every offer of its scope without capacity, and every other offer with
// it, until its TTL runs out.
func TestWideCapacityMarks(t *testing.T) {
	tests := []struct {
		name    string
		code    string
		offer   string
		ttl     time.Duration
		covered func(providers.Offer) bool
	}{
		{"the size in every zone", "AllocationFailed", "azure/eastus/eastus-2/Standard_ND96asr_v4/spot", DefaultCapacityTTL,
			func(o providers.Offer) bool {
				return o.Region == "eastus" && o.InstanceType == "Standard_ND96asr_v4" && o.Purchase == providers.Spot
			}},
		{"all Spot of the region", "OperationNotAllowed", "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot", 15 * time.Minute,
			func(o providers.Offer) bool { return o.Region == "eastus" && o.Purchase == providers.Spot }},
		{"the region", "InsufficientSubnetSize", "azure/eastus/eastus-3/Standard_NC6s_v3/on-demand", 15 * time.Minute,
			func(o providers.Offer) bool { return o.Region == "eastus" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			// westus2 is sold too, so "elsewhere" has offers.
			e.cloud.AddPriceRow(azurefake.NewPriceRow("westus2", "Standard_NC24ads_A100_v4", azurefake.Consumption, "3.673"))
			e.cloud.AddPriceRow(azurefake.NewPriceRow("westus2", "Standard_NC24ads_A100_v4", azurefake.Spot, "0.52"))
			e.watch(t)
			o := e.offer(t, tt.offer)
			e.cloud.FailLaunches(1, azurefake.LaunchFailure(tt.code))
			if _, err := e.p.Launch(context.Background(), launchReq(o, "job-7f3a-a2", 1)); err == nil {
				e.tick(t) // the creation fails later
			} else if !providers.IsInsufficientCapacity(err) {
				t.Fatalf("launch: %v", err)
			}
			offers, err := e.p.Offers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var in, out int
			for _, x := range offers {
				none := x.Capacity == providers.CapacityNone && x.Available == 0
				switch {
				case none != tt.covered(x):
					t.Errorf("%s: capacity %q available %d", x.ID(), x.Capacity, x.Available)
				case none:
					in++
				default:
					out++
				}
			}
			if in < 3 || out < 2 {
				t.Errorf("%d offers covered, %d not: the test shows too little", in, out)
			}
			e.clk.Advance(tt.ttl) // from the mark: the failure's time
			offers, _ = e.p.Offers(context.Background())
			for _, x := range offers {
				if x.Capacity == providers.CapacityNone && x.Purchase != providers.Reserved {
					t.Errorf("after %s, %s still reads no capacity", tt.ttl, x.ID())
				}
			}
		})
	}
}

// TestMaxPriceOnTheWire: the Spot max price Azure receives has at most 5
// decimals, rounded up so the cap is never below the price decided; -1
// stands for "up to on-demand".
func TestMaxPriceOnTheWire(t *testing.T) {
	tests := []struct {
		max  string // the scheduler's; "" for none
		want string // as the request's JSON writes it
	}{
		{"0.123456", "0.12346"},
		{"0.123451", "0.12346"},
		{"0.12345", "0.12345"},
		{"2.999991", "3"},
		{"3.06", "3.06"},
		{"0.000001", "0.00001"},
		{"", "-1"},
	}
	e := newEnv(t)
	o := e.offer(t, "azure/eastus/eastus-2/Standard_NC24ads_A100_v4/spot")
	for i, tt := range tests {
		req := launchReq(o, "job-price-a"+string(rune('1'+i)), 1)
		if tt.max != "" {
			req.MaxPrice = usd(tt.max)
		}
		if _, err := e.p.Launch(context.Background(), req); err != nil {
			t.Fatalf("max price %s: %v", tt.max, err)
		}
		creates := e.cloud.Creates()
		got := creates[len(creates)-1].MaxPriceText
		if got != tt.want {
			t.Errorf("max price %s went out as %s, want %s", tt.max, got, tt.want)
		}
		if tt.max != "" && usd(got) < usd(tt.max) {
			t.Errorf("max price %s was rounded down to %s", tt.max, got)
		}
	}
	if n := e.cloud.Calls(http.MethodPut); n != len(tests) {
		t.Errorf("%d PUTs for %d launches: one was refused", n, len(tests))
	}
}
