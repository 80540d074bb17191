package providers

import (
	"errors"
	"fmt"
	"time"
)

// A launch ends in one of three kinds of outcome, and the scheduler's
// retry logic branches on them:
//
//   - capacity: nothing was bought, and the offer (or a wider scope: the
//     instance type in every zone of the region, all spot in the region)
//     cannot be served for a while. The scheduler keeps that scope out of
//     placements for the TTL and places the job elsewhere.
//     *InsufficientCapacityError.
//   - permanent: nothing was bought, and retrying will not change the
//     answer for this job (an unsupported size, a malformed request, a
//     missing permission). The scope is excluded for the job, with a reason
//     a user can act on; Account marks a wrong account setup, which
//     operators hear about. *LaunchRefusedError.
//   - unknown: any other error. The provider may have started instances;
//     the launch is asked again with the same idempotency key, a bounded
//     number of times, and then given up (whatever it bought terminated).

// Scope is how far a refusal reaches.
type Scope string

// Scopes, narrowest first.
const (
	// ScopeOffer: this offer (instance type, zone, purchase option).
	ScopeOffer Scope = "offer"
	// ScopeZone: every offer of the zone.
	ScopeZone Scope = "zone"
	// ScopeInstanceType: the instance type with this purchase option in
	// every zone of the region.
	ScopeInstanceType Scope = "instance-type"
	// ScopeSpotRegion: every spot offer of the region (a spot quota).
	ScopeSpotRegion Scope = "spot-region"
	// ScopeRegion: every offer of the region (a regional quota, a subnet).
	ScopeRegion Scope = "region"
	// ScopeProvider: every offer of the provider (the account).
	ScopeProvider Scope = "provider"
)

// ScopeKey names the offers a scope of offer o covers, as the scheduler's
// unavailable marks and a job's exclusions store them.
func ScopeKey(s Scope, o Offer) string {
	switch s {
	case ScopeZone:
		return "zone:" + o.Provider + "/" + o.Zone
	case ScopeInstanceType:
		return "type:" + o.Provider + "/" + o.Region + "/" + o.InstanceType + "/" + string(o.Purchase)
	case ScopeSpotRegion:
		return "spot:" + o.Provider + "/" + o.Region
	case ScopeRegion:
		return "region:" + o.Provider + "/" + o.Region
	case ScopeProvider:
		return "provider:" + o.Provider
	}
	return o.ID()
}

// ScopeKeys lists every key that covers offer o, narrowest first: an
// offer is out when any of them is marked.
func ScopeKeys(o Offer) []string {
	keys := []string{o.ID(), ScopeKey(ScopeZone, o), ScopeKey(ScopeInstanceType, o)}
	if o.Purchase == Spot {
		keys = append(keys, ScopeKey(ScopeSpotRegion, o))
	}
	return append(keys, ScopeKey(ScopeRegion, o), ScopeKey(ScopeProvider, o))
}

// InsufficientCapacityError says an offer could not be served right now; the
// scheduler marks its scope unavailable for a while and falls through to
// the next offer.
type InsufficientCapacityError struct {
	OfferID string
	Reason  string
	// Code is the provider's error code ("InsufficientInstanceCapacity").
	Code string
	// Scope is how far the lack reaches (default ScopeOffer).
	Scope Scope
	// For is how long to keep the scope out; zero: the scheduler's
	// default.
	For time.Duration
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity for %s: %s", e.OfferID, e.Reason)
}

// IsInsufficientCapacity reports whether err, or an error it wraps, is an
// *InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var ice *InsufficientCapacityError
	return errors.As(err, &ice)
}

// LaunchRefusedError says a provider refused a launch for a reason that
// retrying will not change: nothing was bought.
type LaunchRefusedError struct {
	OfferID string
	// Code is the provider's error code.
	Code string
	// Reason says what is wrong and, where it can, what to do about it.
	Reason string
	// Scope is what the job must not be placed on again (default
	// ScopeOffer).
	Scope Scope
	// Account marks a wrong account setup (a permission, a verification,
	// a limit to raise): operators are alerted.
	Account bool
}

func (e *LaunchRefusedError) Error() string {
	return fmt.Sprintf("launch of %s refused (%s): %s", e.OfferID, e.Code, e.Reason)
}

// AsLaunchRefused returns the *LaunchRefusedError in err's chain, if any.
func AsLaunchRefused(err error) (*LaunchRefusedError, bool) {
	var lr *LaunchRefusedError
	ok := errors.As(err, &lr)
	return lr, ok
}

// ErrUnknownOffer is returned by Launch for an offer the provider does not
// sell (a permanent refusal for the offer).
var ErrUnknownOffer = errors.New("unknown offer")
