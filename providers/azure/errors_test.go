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

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		capacity  bool
		regional  bool
		throttled bool
		notFound  bool
	}{
		{"zonal allocation", armError(409, "ZonalAllocationFailed", "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.", nil), true, false, false, false},
		{"allocation", armError(409, "AllocationFailed", "Allocation failed.", nil), true, false, false, false},
		{"overconstrained", armError(409, "OverconstrainedAllocationRequest", "Allocation failed. VM(s) with the following constraints cannot be allocated", nil), true, false, false, false},
		{"sku not available", armError(409, "SkuNotAvailable", "The requested VM size Standard_ND96asr_v4 is currently not available in location 'eastus'.", nil), true, false, false, false},
		{"quota exceeded", armError(409, "QuotaExceeded", "Operation could not be completed as it results in exceeding approved standardNDASv4_A100Family Cores quota.", nil), true, true, false, false},
		{"operation not allowed: quota", armError(409, "OperationNotAllowed", "Operation could not be completed as it results in exceeding approved Total Regional Low-priority vCPUs quota.", nil), true, true, false, false},
		{"operation not allowed: max price", armError(409, "OperationNotAllowed", "Unable to create the VM because the requested max price is lower than the current Spot price.", nil), true, false, false, false},
		{"operation not allowed: other", armError(409, "OperationNotAllowed", "The VM is being deleted.", nil), false, false, false, false},
		{"bad request", armError(400, "InvalidParameter", "The value of parameter imageReference is invalid.", nil), false, false, false, false},
		{"throttled", armError(429, "TooManyRequests", "The request is being throttled.", http.Header{"Retry-After": {"17"}}), false, false, true, false},
		{"not found", armError(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/virtualMachines/vm' was not found.", nil), false, false, false, true},
		{"not an Azure error", errors.New("connection reset"), false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := asCapacityFailure(tt.err)
			if ok != tt.capacity || f.Regional != tt.regional {
				t.Errorf("capacity %v regional %v, want %v %v", ok, f.Regional, tt.capacity, tt.regional)
			}
			if ok && !strings.HasPrefix(f.reason(), f.Code+": ") {
				t.Errorf("reason %q does not start with the code", f.reason())
			}
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
	if !errors.As(wrap("x", tests[9].err), &te) || te.RetryAfter != 17*time.Second {
		t.Errorf("Retry-After not read: %+v", te)
	}
}
