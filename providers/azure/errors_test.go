package azure

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
)

// armError is an error as the SDK returns it for an ARM error body.
func armError(status int, code, message string, header http.Header) error {
	req, _ := http.NewRequest(http.MethodPut, "https://management.azure.com/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm", nil)
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	body := fmt.Sprintf(`{"error":{"code":%q,"message":%q}}`, code, message)
	return runtime.NewResponseError(&http.Response{StatusCode: status, Header: header, Request: req, Body: io.NopCloser(strings.NewReader(body))})
}

// TestErrorClassification reads error bodies as the SDK hands them over:
// quota messages decide the scope (and whether the quota can ever hold
// the VM), and only throttling and 404s read as such.
func TestErrorClassification(t *testing.T) {
	e := newEnv(t)
	o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/spot")
	tests := []struct {
		name      string
		err       error
		kind      testutil.OutcomeKind
		scope     providers.Scope
		ttl       time.Duration
		throttled bool
		notFound  bool
	}{
		{name: "zonal allocation", err: armError(409, "ZonalAllocationFailed", "Allocation failed.", nil), kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: DefaultCapacityTTL},
		{name: "allocation", err: armError(409, "AllocationFailed", "Allocation failed.", nil), kind: testutil.Capacity, scope: providers.ScopeInstanceType, ttl: DefaultCapacityTTL},
		{name: "family quota", err: armError(409, "QuotaExceeded", quotaMessage("standardNDASv4_A100Family Cores", "96", "96"), nil),
			kind: testutil.Capacity, scope: providers.ScopeInstanceType, ttl: 15 * time.Minute},
		{name: "family quota of 0", err: armError(409, "QuotaExceeded", quotaMessage("standardNDASv4_A100Family Cores", "0", "96"), nil),
			kind: testutil.Refused, scope: providers.ScopeInstanceType},
		{name: "regional quota", err: armError(409, "QuotaExceeded", quotaMessage("Total Regional Cores", "350", "96"), nil),
			kind: testutil.Capacity, scope: providers.ScopeRegion, ttl: 15 * time.Minute},
		{name: "spot quota", err: armError(409, "OperationNotAllowed", quotaMessage("LowPriorityCores", "100", "96"), nil),
			kind: testutil.Capacity, scope: providers.ScopeSpotRegion, ttl: 15 * time.Minute},
		{name: "spot quota, old wording", err: armError(409, "OperationNotAllowed", quotaMessage("Total Regional Low-priority vCPUs", "24", "96"), nil),
			kind: testutil.Refused, scope: providers.ScopeSpotRegion},
		{name: "operation not allowed: max price", err: armError(409, "OperationNotAllowed", "Unable to create the VM because the requested max price is lower than the current Spot price.", nil),
			kind: testutil.Capacity, scope: providers.ScopeOffer, ttl: time.Minute},
		{name: "operation not allowed: other", err: armError(409, "OperationNotAllowed", "The VM is being deleted.", nil)},
		{name: "bad request", err: armError(400, "InvalidParameter", "The value of parameter imageReference is invalid.", nil), kind: testutil.Refused, scope: providers.ScopeOffer},
		{name: "throttled", err: armError(429, "TooManyRequests", "The request is being throttled.", http.Header{"Retry-After": {"17"}}), throttled: true},
		{name: "not found", err: armError(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/virtualMachines/vm' was not found.", nil), notFound: true},
		{name: "resource group not found", err: armError(404, "ResourceGroupNotFound", "Resource group 'rg' could not be found.", nil),
			kind: testutil.Refused, scope: providers.ScopeProvider, notFound: true},
		{name: "not an Azure error", err: errors.New("connection reset")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.p.launchError(o, tt.err)
			var code string
			if lr, ok := providers.AsLaunchRefused(err); ok {
				code = lr.Code
			}
			var ice *providers.InsufficientCapacityError
			if errors.As(err, &ice) {
				code = ice.Code
			}
			testutil.CheckOutcome(t, err, testutil.Outcome{Kind: tt.kind, OfferID: o.ID(), Code: code, Scope: tt.scope,
				Account: tt.kind == testutil.Refused && tt.scope != providers.ScopeOffer, For: tt.ttl})
			wrapped := wrap("launching x", tt.err)
			if IsThrottled(wrapped) != tt.throttled {
				t.Errorf("throttled %v", IsThrottled(wrapped))
			}
			if IsNotFound(wrapped) != tt.notFound {
				t.Errorf("not found %v", IsNotFound(wrapped))
			}
			if !errors.Is(wrapped, tt.err) {
				t.Error("the SDK error is not wrapped")
			}
		})
	}
	var te *ThrottledError
	if !errors.As(wrap("x", tests[10].err), &te) || te.RetryAfter != 17*time.Second {
		t.Errorf("Retry-After not read: %+v", te)
	}
}
