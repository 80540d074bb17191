package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// launchCodes is how Azure's error codes for a VM creation read, whether
// the PUT is refused or its long-running operation fails. A code not here
// (throttling past the retry policy, a 5xx, OperationNotAllowed about
// anything but quota or price, anything new) is an unknown outcome: the
// scheduler retries with the same key, which finds a VM that was created.
//
// Capacity: nothing runs, and the scope shows no capacity for the TTL
// (shortage: Config.CapacityTTL; see providers.Lasting).
//
//	code                                    scope          TTL       why
//	ZonalAllocationFailed                   offer          shortage  the zone has no capacity for the size now
//	OverconstrainedZonalAllocationRequest   offer          shortage  the same, with the VM's constraints in the zone
//	AllocationFailed                        instance-type  shortage  the size is not available in the region now
//	OverconstrainedAllocationRequest        instance-type  shortage  no zone of the region can place the size as asked
//	SkuNotAvailable                         instance-type  long      the size is not offered to the subscription in the region
//	SpotPriceGreaterThanProvidedMaxPrice    offer          price     the Spot price is above the max price; the price moves
//	  (or OperationNotAllowed about the max price)
//	QuotaExceeded, OperationNotAllowed      (see below)    quota     a vCPU quota is used up, by our own VMs too
//	  about a quota
//	InsufficientSubnetSize, SubnetIsFull    region         quota     the region's subnet has no address left (Azure subnets are regional)
//
// A quota reads from its message: LowPriorityCores (Spot) is every Spot
// offer of the region (spot-region), a VM family's cores quota the size
// (instance-type: the family's other sizes are tried and learnt in turn,
// which is better than keeping other families out), the total regional
// cores, or any other, the region. A quota lifts as our own VMs end, so
// operators are not alerted; but one whose Current Limit is below the
// launch's Additional Required can never hold it, and is a refusal with
// Account: only a quota increase helps.
//
// Refusals: nothing runs, and retrying will not change the answer.
//
//	code                                    scope          account  why
//	MaxPriceValueInvalid                    offer          -        the max price is not one Azure takes (it has at most 5 decimals now)
//	AzureSpotIsNotSupportedForThisVMSize    instance-type  -        the size is not sold as Spot
//	InvalidParameter                        offer          -        Azure refuses the VM as specified for this offer
//	AuthorizationFailed,                    provider       yes      the identity may not create VMs in the group or join the subnet
//	  LinkedAuthorizationFailed
//	SubscriptionNotRegistered,              provider       yes      the Microsoft.Compute resource provider is not registered
//	  MissingSubscriptionRegistration,                              (the SDK's automatic registration is off: see New)
//	  MissingRegistrationForResourceProvider
//	ResourceGroupNotFound                   provider       yes      the configured resource group does not exist
//	RequestDisallowedByPolicy               provider       yes      an Azure Policy forbids the VM
//	ReadOnlyDisabledSubscription            provider       yes      the subscription is disabled
//	MarketplacePurchaseEligibilityFailed,   provider       yes      the image's Marketplace terms are not accepted
//	  ResourcePurchaseValidationFailed
//	PlatformImageNotFound, ImageNotFound    region         yes      the configured image is not found in the region
//	InvalidResourceReference                region         yes      a resource the VM names (the region's subnet) does not exist
var launchCodes = map[string]providers.Outcome{
	"ZonalAllocationFailed":                 {Scope: providers.ScopeOffer, Advice: "Azure has no capacity for this size in the zone right now"},
	"OverconstrainedZonalAllocationRequest": {Scope: providers.ScopeOffer, Advice: "Azure cannot place this size in the zone as asked right now"},
	"AllocationFailed":                      {Scope: providers.ScopeInstanceType, Advice: "Azure has no capacity for this size in the region right now"},
	"OverconstrainedAllocationRequest":      {Scope: providers.ScopeInstanceType, Advice: "Azure cannot place this size in the region as asked right now"},
	"SkuNotAvailable": {Scope: providers.ScopeInstanceType, Lasts: providers.LastsLong,
		Advice: "the size is not offered to the subscription in the region (az vm list-skus shows its restrictions)"},
	"SpotPriceGreaterThanProvidedMaxPrice": {Scope: providers.ScopeOffer, Lasts: providers.LastsPrice, Advice: "the Spot price is above the max price"},
	"InsufficientSubnetSize": {Scope: providers.ScopeRegion, Lasts: providers.LastsQuota,
		Advice: "the region's subnet has no free address; it frees as VMs end (use a larger subnet for more)"},
	"SubnetIsFull": {Scope: providers.ScopeRegion, Lasts: providers.LastsQuota,
		Advice: "the region's subnet has no free address; it frees as VMs end (use a larger subnet for more)"},

	"MaxPriceValueInvalid": {Refused: true, Scope: providers.ScopeOffer, Advice: "Azure does not take the Spot max price sent"},
	"AzureSpotIsNotSupportedForThisVMSize": {Refused: true, Scope: providers.ScopeInstanceType,
		Advice: "Azure does not sell this size as Spot; the job can run on demand or on another size"},
	"InvalidParameter": {Refused: true, Scope: providers.ScopeOffer, Advice: "Azure refuses the VM as specified for this offer"},
	"AuthorizationFailed": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the identity may not create VMs: grant it Virtual Machine Contributor on the resource group (see providers/azure/README.md)"},
	"LinkedAuthorizationFailed": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the identity may not use a linked resource: grant it subnets/join/action on the subnets and Managed Identity Operator on the identity"},
	"SubscriptionNotRegistered": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the subscription is not registered for VMs: az provider register --namespace Microsoft.Compute (and Microsoft.Network)"},
	"MissingSubscriptionRegistration": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the subscription is not registered for VMs: az provider register --namespace Microsoft.Compute (and Microsoft.Network)"},
	"MissingRegistrationForResourceProvider": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the subscription is not registered for VMs: az provider register --namespace Microsoft.Compute (and Microsoft.Network)"},
	"ResourceGroupNotFound": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the resource group does not exist: create it or fix resource_group"},
	"RequestDisallowedByPolicy": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "an Azure Policy forbids the VM: exempt the resource group or change the policy"},
	"ReadOnlyDisabledSubscription": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the subscription is disabled: re-enable it"},
	"MarketplacePurchaseEligibilityFailed": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the image's Marketplace terms are not accepted: az vm image terms accept"},
	"ResourcePurchaseValidationFailed": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the image's Marketplace terms are not accepted: az vm image terms accept"},
	"PlatformImageNotFound": {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "the image is not found in the region: fix image"},
	"ImageNotFound":         {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "the image is not found in the region: fix image"},
	"InvalidResourceReference": {Refused: true, Scope: providers.ScopeRegion, Account: true,
		Advice: "a resource the VM refers to does not exist: check the region's subnet and user_assigned_identity"},
}

// quotaFigures reads Azure's "Current Limit: 24, Current Usage: 24,
// Additional Required: 96".
var quotaFigures = regexp.MustCompile(`(?i)current limit:\s*(\d+).*additional required:\s*(\d+)`)

// quotaOutcome reads a quota error's message: which quota, and whether it
// can ever hold the VM.
func quotaOutcome(region, msg string) providers.Outcome {
	low := strings.ToLower(msg)
	oc := providers.Outcome{Scope: providers.ScopeRegion, Lasts: providers.LastsQuota, Advice: "the subscription's regional vCPU quota"}
	switch {
	case strings.Contains(low, "lowpriority") || strings.Contains(low, "low-priority") || strings.Contains(low, "spot"):
		oc.Scope, oc.Advice = providers.ScopeSpotRegion, "the subscription's Spot vCPU quota (LowPriorityCores)"
	case strings.Contains(low, "family"):
		oc.Scope, oc.Advice = providers.ScopeInstanceType, "the subscription's vCPU quota for this size's family"
	}
	if m := quotaFigures.FindStringSubmatch(msg); m != nil {
		limit, _ := strconv.Atoi(m[1])
		need, _ := strconv.Atoi(m[2])
		if need > limit {
			oc.Refused, oc.Account = true, true
			oc.Advice = fmt.Sprintf("%s in %s is %d and the VM needs %d: request a quota increase (Azure portal, Quotas)", oc.Advice, region, limit, need)
			return oc
		}
	}
	oc.Advice += " in " + region + " is used up; it frees as VMs end (request an increase for more)"
	return oc
}

// launchOutcome reads Azure's code and message for a VM of offer o; ok is
// false when the outcome is unknown.
func (p *Provider) launchOutcome(o providers.Offer, code, msg string) (providers.Outcome, bool) {
	low := strings.ToLower(msg)
	oc, ok := launchCodes[code]
	switch {
	case code == "QuotaExceeded", code == "OperationNotAllowed" && strings.Contains(low, "quota"):
		oc, ok = quotaOutcome(o.Region, msg), true
	case code == "OperationNotAllowed" && (strings.Contains(low, "max price") || strings.Contains(low, "maxprice")):
		oc, ok = launchCodes["SpotPriceGreaterThanProvidedMaxPrice"], true
	}
	if !ok {
		return providers.Outcome{}, false
	}
	if !oc.Refused {
		oc.For = oc.Lasts.TTL(p.cfg.CapacityTTL.D())
	}
	return oc, true
}

// launchError is what Launch returns for an ARM error creating a VM of
// offer o: a capacity error (its scope marked), a refusal, or, for an
// unknown outcome, the error wrapped.
func (p *Provider) launchError(o providers.Offer, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		msg := responseMessage(re)
		if oc, ok := p.launchOutcome(o, re.ErrorCode, msg); ok {
			out := oc.Err(o.ID(), re.ErrorCode, msg)
			p.mu.Lock()
			p.noteOutcomeLocked(o, out, p.clk.Now())
			p.mu.Unlock()
			return out
		}
	}
	return wrap("launching "+o.ID(), err)
}

// noteOutcomeLocked marks a capacity error's scope, and logs a refusal;
// called with mu held.
func (p *Provider) noteOutcomeLocked(o providers.Offer, err error, now time.Time) {
	var ice *providers.InsufficientCapacityError
	if errors.As(err, &ice) {
		p.markNoCapacityLocked(o, ice, now)
		return
	}
	if lr, ok := providers.AsLaunchRefused(err); ok {
		p.log.Warn("launch refused", zap.String("offer", o.ID()), zap.String("code", lr.Code),
			zap.String("scope", string(lr.Scope)), zap.Bool("account", lr.Account), zap.String("reason", lr.Reason))
	}
}

// responseMessage is the message of an ARM error body
// ({"error":{"code":...,"message":...}}, or an operation's status with its
// error), or "".
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
	return providers.TrimMessage(doc.Error.Message)
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
