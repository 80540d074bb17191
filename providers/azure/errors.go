package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// capacityCodes are Azure's error codes for a VM it cannot place for lack
// of capacity for the size in the zone or region. Quota errors
// (QuotaExceeded, or OperationNotAllowed about a quota) count too: quota is
// per region (per VM family, with a separate pool for Spot), so nothing of
// the kind fits in any zone of the region.
var capacityCodes = map[string]bool{
	"SkuNotAvailable":                       true,
	"ZonalAllocationFailed":                 true,
	"AllocationFailed":                      true,
	"OverconstrainedAllocationRequest":      true,
	"OverconstrainedZonalAllocationRequest": true,
}

// capacityFailure is what an Azure capacity or quota error says.
type capacityFailure struct {
	Code     string
	Message  string
	Regional bool // quota: every zone of the region is affected
}

func (c capacityFailure) reason() string {
	if c.Message == "" {
		return c.Code
	}
	return c.Code + ": " + c.Message
}

// asCapacityFailure reports whether err is Azure refusing a VM for lack of
// capacity or quota.
func asCapacityFailure(err error) (capacityFailure, bool) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return capacityFailure{}, false
	}
	return capacityFromCode(re.ErrorCode, responseMessage(re))
}

// capacityFromCode classifies an error by code and message (from a response
// or an instance view status). OperationNotAllowed counts when its message
// is about quota, or about the Spot max price being below the current
// price.
func capacityFromCode(code, msg string) (capacityFailure, bool) {
	low := strings.ToLower(msg)
	switch {
	case capacityCodes[code]:
		return capacityFailure{Code: code, Message: msg}, true
	case code == "QuotaExceeded", code == "OperationNotAllowed" && strings.Contains(low, "quota"):
		return capacityFailure{Code: code, Message: msg, Regional: true}, true
	case code == "OperationNotAllowed" && (strings.Contains(low, "max price") || strings.Contains(low, "maxprice")):
		return capacityFailure{Code: code, Message: msg}, true
	}
	return capacityFailure{}, false
}

// responseMessage is the message of an ARM error body
// ({"error":{"code":...,"message":...}}), or "".
func responseMessage(re *azcore.ResponseError) string {
	if re.RawResponse == nil {
		return ""
	}
	body, err := runtime.Payload(re.RawResponse)
	if err != nil {
		return ""
	}
	var doc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	const limit = 300
	m := doc.Error.Message
	if len(m) > limit {
		m = m[:limit] + "..."
	}
	return m
}

// ThrottledError says Azure kept answering 429 Too Many Requests after the
// bounded retries of the SDK's retry policy (or asked to wait longer than
// it allows).
type ThrottledError struct {
	Op         string
	RetryAfter time.Duration
	Err        error
}

func (e *ThrottledError) Error() string {
	s := e.Op + ": throttled by Azure"
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s + ": " + e.Err.Error()
}

func (e *ThrottledError) Unwrap() error { return e.Err }

// IsThrottled reports whether err, or an error it wraps, is a
// *ThrottledError.
func IsThrottled(err error) bool {
	var te *ThrottledError
	return errors.As(err, &te)
}

// ErrNotManaged is returned by Terminate for a VM that exists but carries no
// spotwise launch tag: spotwise never deletes what it did not create.
var ErrNotManaged = errors.New("the VM is not managed by spotwise")

// IsNotFound reports whether err is Azure saying the resource does not
// exist (HTTP 404).
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// errorCode is the ARM error code of err, or "".
func errorCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// wrap adds the operation to an SDK error, turning a final 429 into a
// *ThrottledError.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusTooManyRequests {
		var after time.Duration
		if re.RawResponse != nil {
			if v := re.RawResponse.Header.Get("Retry-After"); v != "" {
				if d, perr := time.ParseDuration(v + "s"); perr == nil {
					after = d
				}
			}
		}
		return &ThrottledError{Op: op, RetryAfter: after, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}
