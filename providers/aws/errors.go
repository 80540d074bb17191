package aws

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// capacityCodes are the EC2 error codes that mean "not now, not here":
// the offer cannot be served and the scheduler should try the next one.
// They come back as API errors (RunInstances, a failed CreateFleet) or in
// an instant fleet's per-override Errors list.
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true,
	"InsufficientCapacity":                 true,
	"InsufficientHostCapacity":             true,
	"InsufficientReservedInstanceCapacity": true,
	"ReservationCapacityExceeded":          true,
	"MaxSpotInstanceCountExceeded":         true,
	"VcpuLimitExceeded":                    true,
	"SpotMaxPriceTooLow":                   true,
	"Unsupported":                          true,
	"UnfulfillableCapacity":                true,
	"InsufficientFreeAddressesInSubnet":    true,
}

// IsCapacityCode reports whether an EC2 error code means the offer has no
// capacity for us now.
func IsCapacityCode(code string) bool { return capacityCodes[code] }

// errorCode is the AWS error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// IsNotFound reports whether err says an EC2 resource (instance, launch
// template, reservation) does not exist.
func IsNotFound(err error) bool {
	switch errorCode(err) {
	case "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed",
		"InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound",
		"InvalidCapacityReservationId.NotFound":
		return true
	}
	return false
}

// IsAlreadyExists reports whether err says a launch template of that name
// exists already.
func IsAlreadyExists(err error) bool {
	return errorCode(err) == "InvalidLaunchTemplateName.AlreadyExistsException"
}

// capacityError turns a launch error into a *providers.InsufficientCapacityError:
// an EC2 error whose code says so, or one already of that type. It returns
// nil for other errors.
func capacityError(offerID string, err error) *providers.InsufficientCapacityError {
	var ice *providers.InsufficientCapacityError
	if errors.As(err, &ice) {
		return ice
	}
	code := errorCode(err)
	if !IsCapacityCode(code) {
		return nil
	}
	msg := code
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorMessage() != "" {
		msg = fmt.Sprintf("%s: %s", code, ae.ErrorMessage())
	}
	return &providers.InsufficientCapacityError{OfferID: offerID, Reason: msg}
}

// iceEntry is an offer marked unavailable after a capacity error.
type iceEntry struct {
	until  time.Time
	reason string
}

// markUnavailable records that an offer has no capacity for a while
// (Config.UnavailableFor) and republishes its region, now and when the
// mark runs out.
func (p *Provider) markUnavailable(o providers.Offer, reason string) {
	ttl := p.cfg.UnavailableFor.D()
	p.mu.Lock()
	p.ice[o.ID()] = iceEntry{until: p.clk.Now().Add(ttl), reason: reason}
	p.mu.Unlock()
	p.log.Info("offer has no capacity; marked unavailable", zap.String("offer", o.ID()),
		zap.Duration("for", ttl), zap.String("reason", reason))
	p.emitRegion(o.Region)
	p.clk.AfterFunc(ttl, func() { p.emitRegion(o.Region) })
}

// applyICELocked shows an offer marked unavailable as having no capacity,
// and forgets marks that ran out; called with mu held.
func (p *Provider) applyICELocked(o *providers.Offer, now time.Time) {
	id := o.ID()
	e, ok := p.ice[id]
	if !ok {
		return
	}
	if !now.Before(e.until) {
		delete(p.ice, id)
		return
	}
	o.Capacity, o.Available = providers.CapacityNone, 0
}
