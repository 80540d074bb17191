package aws

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

func TestLaunchOutcomes(t *testing.T) {
	const (
		shortage = DefaultUnavailableFor
		price    = time.Minute
		quota    = 15 * time.Minute
	)
	vcpuLimit := func(n string) string {
		return "You have requested more vCPU capacity than your current vCPU limit of " + n +
			" allows for the instance bucket that the specified instance type belongs to."
	}
	tests := []struct {
		code     string
		note     string // tells cases of one code apart
		msg      string // "" is EC2's (awsfake.LaunchFault)
		purchase providers.PurchaseOption
		count    int // default 1
		kind     testutil.OutcomeKind
		scope    providers.Scope
		account  bool
		ttl      time.Duration
		advice   string // in the reason
	}{
		{code: "InsufficientInstanceCapacity", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: shortage},
		{code: "InsufficientCapacity", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: shortage},
		{code: "InsufficientHostCapacity", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: shortage},
		{code: "InsufficientReservedInstanceCapacity", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: shortage},
		{code: "ReservationCapacityExceeded", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: shortage},
		{code: "UnfulfillableCapacity", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: shortage},
		{code: "SpotMaxPriceTooLow", kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: price},
		{code: "MaxSpotInstanceCountExceeded", kind: testutil.Capacity, scope: providers.ScopeSpotRegion, ttl: quota},
		{code: "VcpuLimitExceeded", kind: testutil.Capacity, scope: providers.ScopeSpotRegion, ttl: quota},
		{code: "VcpuLimitExceeded", purchase: providers.OnDemand, kind: testutil.Capacity, scope: providers.ScopeRegion, ttl: quota},
		{code: "VcpuLimitExceeded", note: "limit 0", msg: vcpuLimit("0"), purchase: providers.OnDemand, kind: testutil.Refused, scope: providers.ScopeRegion,
			account: true, advice: "limit in us-east-1 is 0 and the launch needs 8"},
		{code: "VcpuLimitExceeded", note: "limit below the ask", msg: vcpuLimit("64"), count: 9, kind: testutil.Refused, scope: providers.ScopeSpotRegion, account: true,
			advice: "request a quota increase"},
		{code: "InstanceLimitExceeded", purchase: providers.OnDemand, kind: testutil.Capacity, scope: providers.ScopeRegion, ttl: quota},
		{code: "InstanceLimitExceeded", note: "the type's", msg: "You have requested more instances (2) than your current instance limit of 4 allows for the specified instance type.",
			count: 2, purchase: providers.OnDemand, kind: testutil.Capacity, scope: providers.ScopeInstanceType, ttl: quota},
		{code: "InstanceLimitExceeded", note: "the type's below the ask", msg: "You have requested more instances (2) than your current instance limit of 1 allows for the specified instance type.",
			count: 2, purchase: providers.OnDemand, kind: testutil.Refused, scope: providers.ScopeInstanceType, account: true},
		{code: "InsufficientFreeAddressesInSubnet", kind: testutil.Capacity, scope: providers.ScopeZone, ttl: quota},

		{code: "Unsupported", kind: testutil.Refused, scope: providers.ScopeOffer},
		{code: "InvalidFleetConfiguration", kind: testutil.Refused, scope: providers.ScopeOffer},
		{code: "InvalidParameterValue", kind: testutil.Refused, scope: providers.ScopeOffer},
		{code: "InvalidParameterCombination", kind: testutil.Refused, scope: providers.ScopeOffer},
		{code: "PendingVerification", kind: testutil.Refused, scope: providers.ScopeProvider, account: true},
		{code: "AuthFailure.ServiceLinkedRoleCreationNotPermitted", kind: testutil.Refused, scope: providers.ScopeProvider, account: true,
			advice: "create AWSServiceRoleForEC2Spot"},
		{code: "AuthFailure.ServiceLinkedRoleCreationNotPermitted", purchase: providers.OnDemand, kind: testutil.Refused, scope: providers.ScopeProvider, account: true,
			note: "fleet", msg: "The provided credentials do not have permission to create the service-linked role for EC2 Fleet.", advice: "AWSServiceRoleForEC2Fleet"},
		{code: "MaxFleetCountExceeded", kind: testutil.Refused, scope: providers.ScopeRegion, account: true},
		{code: "UnauthorizedOperation", kind: testutil.Refused, scope: providers.ScopeProvider, account: true, advice: "ec2:CreateFleet"},
		{code: "AuthFailure", kind: testutil.Refused, scope: providers.ScopeProvider, account: true},
		{code: "OptInRequired", kind: testutil.Refused, scope: providers.ScopeRegion, account: true},
		{code: "InvalidAMIID.NotFound", kind: testutil.Refused, scope: providers.ScopeRegion, account: true, advice: "regions[].ami"},

		{code: "InternalError", kind: testutil.Unknown},
		{code: "RequestLimitExceeded", kind: testutil.Unknown},
		{code: "SomethingNewFromEC2", kind: testutil.Unknown},
	}
	// Every code reads the same whichever way EC2 says it: RunInstances'
	// error response; an instant fleet as EC2 answers it (per override,
	// or for the request); and the other way round.
	channels := []struct {
		name, method string
		fail         func(c *awsfake.Cloud, f awsfake.Fault)
	}{
		{"RunInstances", LaunchRunInstances, func(c *awsfake.Cloud, f awsfake.Fault) { c.FailLaunches(5, f) }},
		{"CreateFleet", LaunchFleet, func(c *awsfake.Cloud, f awsfake.Fault) { c.FailLaunches(5, f) }},
		{"CreateFleet error response", LaunchFleet, func(c *awsfake.Cloud, f awsfake.Fault) {
			for range 5 {
				c.FailEC2("CreateFleet", f)
			}
		}},
		{"CreateFleet error list", LaunchFleet, func(c *awsfake.Cloud, f awsfake.Fault) {
			c.FailFleet(awsfake.FleetError{Code: f.Code, Message: f.Message})
		}},
	}
	for _, tt := range tests {
		for _, ch := range channels {
			purchase := cmp.Or(tt.purchase, providers.Spot)
			t.Run(strings.TrimSuffix(tt.code+"/"+tt.note, "/")+"/"+string(purchase)+"/"+ch.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, func(c *Config) { c.LaunchMethod = ch.method })
				o := h.offer("us-east-1a", "p3.2xlarge", purchase)
				f := awsfake.LaunchFault(tt.code, o.InstanceType, o.Zone)
				f.Message = cmpOr(tt.msg, f.Message)
				ch.fail(h.cloud, f)
				_, err := h.p.Launch(context.Background(), launchReq(o, "j-7f3a-a2", max(tt.count, 1)))
				testutil.CheckOutcome(t, err, testutil.Outcome{Kind: tt.kind, OfferID: o.ID(), Code: tt.code, Scope: tt.scope, Account: tt.account, For: tt.ttl})
				if t.Failed() {
					return
				}
				if n := len(h.cloud.Launches()); n != 0 {
					t.Errorf("%d launches bought capacity", n)
				}
				action := "CreateFleet"
				if ch.method == LaunchRunInstances {
					action = "RunInstances"
				}
				if n := h.cloud.Calls(action); tt.kind != testutil.Unknown && n != 1 {
					t.Errorf("%d %s calls: an answer with a known outcome is not retried", n, action)
				}
				if tt.advice != "" && !strings.Contains(err.Error(), tt.advice) {
					t.Errorf("reason %q does not say %q", err, tt.advice)
				}
				if strings.Contains(err.Error(), "Encoded authorization failure message") {
					t.Errorf("the reason carries the encoded request context: %v", err)
				}
				// Only capacity goes in the provider's own marks: a refusal
				// is the job's, and the offer stays on sale.
				if after := h.offer("us-east-1a", "p3.2xlarge", purchase); (after.Capacity == providers.CapacityNone) != (tt.kind == testutil.Capacity) {
					t.Errorf("after the launch the offer reads capacity %q", after.Capacity)
				}
			})
		}
	}
}

// TestWideCapacityMarks checks that a capacity error wider than its offer
// shows every offer of the scope without capacity, and no other, until
// its TTL runs out.
func TestWideCapacityMarks(t *testing.T) {
	tests := []struct {
		name     string
		fault    awsfake.Fault
		zone     string
		typ      string
		purchase providers.PurchaseOption
		covered  func(providers.Offer) bool
	}{
		{name: "the spot quota: every spot offer of the region", fault: awsfake.Fault{Code: "MaxSpotInstanceCountExceeded"},
			zone: "us-east-1b", typ: "p3.2xlarge", purchase: providers.Spot,
			covered: func(o providers.Offer) bool { return o.Purchase == providers.Spot }},
		{name: "an on-demand vCPU quota: the region", fault: awsfake.Fault{Code: "VcpuLimitExceeded"},
			zone: "us-east-1a", typ: "g5.xlarge", purchase: providers.OnDemand,
			covered: func(o providers.Offer) bool { return true }},
		{name: "a full subnet: the zone", fault: awsfake.Fault{Code: "InsufficientFreeAddressesInSubnet"},
			zone: "us-east-1b", typ: "p3.2xlarge", purchase: providers.OnDemand,
			covered: func(o providers.Offer) bool { return o.Zone == "us-east-1b" }},
		{name: "a type's instance limit: the type on demand in every zone", fault: awsfake.Fault{Code: "InstanceLimitExceeded",
			Message: "You have requested more instances (1) than your current instance limit of 8 allows for the specified instance type."},
			zone: "us-east-1a", typ: "p3.2xlarge", purchase: providers.OnDemand,
			covered: func(o providers.Offer) bool {
				return o.InstanceType == "p3.2xlarge" && o.Purchase == providers.OnDemand
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			o := h.offer(tt.zone, tt.typ, tt.purchase)
			h.cloud.FailLaunches(1, tt.fault)
			_, err := h.p.Launch(context.Background(), launchReq(o, "j-7f3a-a2", 1))
			var ice *providers.InsufficientCapacityError
			if !errors.As(err, &ice) {
				t.Fatalf("launch: %v", err)
			}
			offers := h.offers()
			var in, out int
			for _, x := range offers {
				if none := x.Capacity == providers.CapacityNone && x.Available == 0; none != tt.covered(x) {
					t.Errorf("%s: capacity %q available %d", x.ID(), x.Capacity, x.Available)
				} else if none {
					in++
				} else {
					out++
				}
			}
			if in < 2 || out == 0 && tt.fault.Code != "VcpuLimitExceeded" {
				t.Errorf("%d offers covered, %d not: the test shows too little", in, out)
			}
			h.clk.Advance(ice.For)
			for _, x := range h.offers() {
				if !x.HasCapacity(1) {
					t.Errorf("after %s, %s still reads capacity %q", ice.For, x.ID(), x.Capacity)
				}
			}
		})
	}
}
