package aws

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// launchCodes is how EC2's launch error codes read, whether they come as
// the error of RunInstances or CreateFleet or in an instant fleet's
// per-override Errors list. A code not here (throttling that outlasted
// the SDK's retries, a 5xx, anything new) is an unknown outcome: EC2 may
// have started instances, and the scheduler asks again with the same
// client token a bounded number of times.
//
// Capacity: nothing was bought, and the scope reads "no capacity" for the
// TTL (shortage: Config.UnavailableFor; see providers.Lasting).
//
//	code                                  scope          TTL       why
//	InsufficientInstanceCapacity          offer          shortage  the zone has none of the type for the purchase option now
//	InsufficientCapacity                  offer          shortage  the same, said of the request as a whole
//	InsufficientHostCapacity              offer          shortage  no Dedicated Host capacity for the type in the zone
//	InsufficientReservedInstanceCapacity  offer          shortage  the reservation (a reserved offer of its own) is used up
//	ReservationCapacityExceeded           offer          shortage  the same for an ODCR or a Capacity Block
//	UnfulfillableCapacity                 offer          shortage  the fleet could not fill its one override now
//	SpotMaxPriceTooLow                    offer          price     the spot price is above the max price; the price moves
//	MaxSpotInstanceCountExceeded          spot-region    quota     the region's spot vCPU quota is used up
//	VcpuLimitExceeded                     region (*)     quota     the region's vCPU quota of the type's bucket (P, G, ...) is used up
//	InstanceLimitExceeded                 region (*)     quota     an instance count limit; instance-type when the message says it is the type's
//	InsufficientFreeAddressesInSubnet     zone           quota     the zone's subnet has no address left (EC2 subnets are zonal)
//
// (*) spot-region for a spot offer: spot has quotas of its own. Our own
// instances count against a quota, so it lifts as they end, and alerting
// operators every time it fills would be noise. A quota that can never
// hold the launch (the limit in the message is below what it asks for; a
// new account's limit of 0) is a refusal with Account instead, at the same
// scope: only a quota increase helps.
//
// Refusals: nothing was bought, and retrying will not change the answer.
// The scope is excluded for the job; Account alerts operators.
//
//	code                                         scope     account  why
//	Unsupported                                  offer     -        the type or purchase option is not sold in that zone
//	InvalidFleetConfiguration                    offer     -        the fleet's one override cannot be launched as asked
//	InvalidParameterValue, InvalidParameter,     offer     -        EC2 refuses the request as made for this offer
//	InvalidParameterCombination
//	PendingVerification                          provider  yes      AWS is still verifying the account
//	AuthFailure.ServiceLinkedRoleCreationNot...  provider  yes      the spot (or fleet) service-linked role is missing and may not be created: it is
//	                                                                account-wide, so spot fails in every region (no narrower scope covers that)
//	MaxFleetCountExceeded                        region    yes      the region's EC2 Fleet limit is reached (the limit is per region)
//	UnauthorizedOperation                        provider  yes      the credentials lack a permission launches need
//	AuthFailure, Blocked                         provider  yes      AWS does not accept the credentials, or the account is blocked
//	OptInRequired                                region    yes      the account has not opted in to the region, or to the AMI's Marketplace terms
//	InvalidAMIID.NotFound, .Malformed,           region    yes      the region's configured AMI cannot be used
//	.Unavailable
//	InvalidSubnetID.NotFound                     zone      yes      the zone's configured subnet does not exist
//	InvalidGroup.NotFound                        region    yes      a configured security group does not exist
//	InvalidKeyPair.NotFound                      region    yes      the configured key pair does not exist in the region
var launchCodes = map[string]providers.Outcome{
	"InsufficientInstanceCapacity":         {Scope: providers.ScopeOffer, Advice: "EC2 has no capacity for this type in the zone right now"},
	"InsufficientCapacity":                 {Scope: providers.ScopeOffer, Advice: "EC2 has no capacity for this request right now"},
	"InsufficientHostCapacity":             {Scope: providers.ScopeOffer, Advice: "no Dedicated Host capacity for this type in the zone right now"},
	"InsufficientReservedInstanceCapacity": {Scope: providers.ScopeOffer, Advice: "the reservation has no instances free"},
	"ReservationCapacityExceeded":          {Scope: providers.ScopeOffer, Advice: "the capacity reservation has no instances free"},
	"UnfulfillableCapacity":                {Scope: providers.ScopeOffer, Advice: "EC2 could not fill the fleet for this offer right now"},
	"SpotMaxPriceTooLow":                   {Scope: providers.ScopeOffer, Lasts: providers.LastsPrice, Advice: "the spot price is above the max price"},
	"MaxSpotInstanceCountExceeded": {Scope: providers.ScopeSpotRegion, Lasts: providers.LastsQuota,
		Advice: "the region's spot instance quota is used up; it frees as spot instances end (raise it in Service Quotas for more)"},
	"VcpuLimitExceeded": {Lasts: providers.LastsQuota,
		Advice: "the region's vCPU quota for this type's family is used up; it frees as instances end (raise it in Service Quotas for more)"},
	"InstanceLimitExceeded": {Lasts: providers.LastsQuota,
		Advice: "the region's instance limit is reached; it frees as instances end (raise it in Service Quotas for more)"},
	"InsufficientFreeAddressesInSubnet": {Scope: providers.ScopeZone, Lasts: providers.LastsQuota,
		Advice: "the zone's subnet has no free IP address; it frees as instances end (use a larger subnet for more)"},

	"Unsupported": {Refused: true, Scope: providers.ScopeOffer,
		Advice: "EC2 does not sell this type with this purchase option in the zone; the job can run on another offer"},
	"InvalidFleetConfiguration": {Refused: true, Scope: providers.ScopeOffer,
		Advice: "EC2 cannot launch this offer as configured (type, zone, subnet or launch template)"},
	"InvalidParameterValue":       {Refused: true, Scope: providers.ScopeOffer, Advice: "EC2 refuses the launch request for this offer"},
	"InvalidParameter":            {Refused: true, Scope: providers.ScopeOffer, Advice: "EC2 refuses the launch request for this offer"},
	"InvalidParameterCombination": {Refused: true, Scope: providers.ScopeOffer, Advice: "EC2 refuses the launch request for this offer"},
	"PendingVerification": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "AWS is still verifying the account: launches work once it is done (usually within hours); contact AWS Support if it takes longer"},
	"AuthFailure.ServiceLinkedRoleCreationNotPermitted": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the spot service-linked role is missing: create AWSServiceRoleForEC2Spot (aws iam create-service-linked-role --aws-service-name spot.amazonaws.com) or grant the server iam:CreateServiceLinkedRole"},
	"MaxFleetCountExceeded": {Refused: true, Scope: providers.ScopeRegion, Account: true,
		Advice: "the region's EC2 Fleet limit is reached: delete unused maintain or request fleets, ask AWS to raise the limit, or set launch_method: run-instances"},
	"UnauthorizedOperation": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "the server's credentials may not launch: grant ec2:CreateFleet, ec2:RunInstances, ec2:CreateTags and iam:PassRole on the instance profile's role (see providers/aws/README.md)"},
	"AuthFailure": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "AWS does not accept the server's credentials: check the credential chain (profile, role, keys)"},
	"Blocked": {Refused: true, Scope: providers.ScopeProvider, Account: true,
		Advice: "AWS has blocked the account: contact AWS Support"},
	"OptInRequired": {Refused: true, Scope: providers.ScopeRegion, Account: true,
		Advice: "the account is not opted in to the region, or has not accepted the AMI's Marketplace terms: opt in (or subscribe) in the AWS console"},
	"InvalidAMIID.NotFound":    {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "the region's AMI does not exist: fix regions[].ami"},
	"InvalidAMIID.Malformed":   {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "the region's AMI ID is malformed: fix regions[].ami"},
	"InvalidAMIID.Unavailable": {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "the region's AMI is not available: fix regions[].ami"},
	"InvalidSubnetID.NotFound": {Refused: true, Scope: providers.ScopeZone, Account: true, Advice: "the zone's subnet does not exist: fix regions[].subnets"},
	"InvalidGroup.NotFound":    {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "a security group does not exist: fix regions[].security_groups"},
	"InvalidKeyPair.NotFound":  {Refused: true, Scope: providers.ScopeRegion, Account: true, Advice: "the key pair does not exist in the region: fix regions[].key_name"},
}

// quotaCodes are the codes of launchCodes whose scope is the region's
// for the purchase kind, and whose limit below the launch's ask makes them
// a refusal for operators.
var quotaCodes = map[string]bool{"VcpuLimitExceeded": true, "InstanceLimitExceeded": true}

// knownLaunchCode reports whether EC2's answer has a known outcome, so the
// SDK does not retry it (EC2 sends InsufficientInstanceCapacity as a 500).
func knownLaunchCode(code string) bool {
	_, ok := launchCodes[code]
	return ok
}

// limitIn reads the limit EC2 names in a quota message ("your current vCPU
// limit of 32", "your current instance limit of 1").
var limitIn = regexp.MustCompile(`limit of (\d+)`)

// launchOutcome reads EC2's code and message for a launch of count
// instances of o; ok is false when the outcome is unknown.
func (p *Provider) launchOutcome(o providers.Offer, count int, code, msg string) (providers.Outcome, bool) {
	oc, ok := launchCodes[code]
	if !ok {
		return providers.Outcome{}, false
	}
	if quotaCodes[code] {
		oc.Scope = providers.ScopeRegion
		if o.Purchase == providers.Spot {
			oc.Scope = providers.ScopeSpotRegion
		}
		ask, unit := count, "instances"
		if code == "VcpuLimitExceeded" {
			ask, unit = count*max(o.VCPUs, 1), "vCPUs"
		} else if strings.Contains(msg, "instance type") {
			oc.Scope = providers.ScopeInstanceType
		}
		if m := limitIn.FindStringSubmatch(msg); m != nil {
			if limit, err := strconv.Atoi(m[1]); err == nil && limit < ask {
				oc.Refused, oc.Account = true, true
				oc.Advice = fmt.Sprintf("the account's %s limit in %s is %d and the launch needs %d: request a quota increase in Service Quotas",
					unit, o.Region, limit, ask)
			}
		}
	}
	if code == "AuthFailure.ServiceLinkedRoleCreationNotPermitted" && strings.Contains(strings.ToLower(msg), "fleet") {
		oc.Advice = "the EC2 Fleet service-linked role is missing: create AWSServiceRoleForEC2Fleet (aws iam create-service-linked-role --aws-service-name ec2fleet.amazonaws.com) or grant the server iam:CreateServiceLinkedRole"
	}
	if !oc.Refused {
		oc.For = oc.Lasts.TTL(p.cfg.UnavailableFor.D())
	}
	return oc, true
}

// cloudMessage is the part of an EC2 message a reason keeps: an
// UnauthorizedOperation's encoded authorization failure (the whole request
// context, for sts decode-authorization-message) is left out.
func cloudMessage(msg string) string {
	if i := strings.Index(msg, "Encoded authorization failure message:"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// fleetError is an instant fleet that started fewer instances than asked:
// its Errors list, one entry per failed override.
type fleetError struct {
	errs           []ec2types.CreateFleetError
	started, asked int
}

func (e *fleetError) Error() string {
	if len(e.errs) == 0 {
		return fmt.Sprintf("CreateFleet started %d of %d instances", e.started, e.asked)
	}
	var said []string
	for _, fe := range e.errs {
		said = append(said, awssdk.ToString(fe.ErrorCode)+": "+providers.TrimMessage(cloudMessage(awssdk.ToString(fe.ErrorMessage))))
	}
	return "CreateFleet started no instances: " + strings.Join(said, "; ")
}

// launchError turns a failed launch of count instances of o into what
// Launch returns: a capacity error (its scope marked unavailable), a
// refusal, or, for an unknown outcome, the error wrapped. An instant
// fleet's Errors are read like API errors: a refusal among them wins over
// a lack of capacity, and a fleet short without errors lacks capacity.
func (p *Provider) launchError(o providers.Offer, count int, err error) error {
	type said struct{ code, msg string }
	var answers []said
	var fe *fleetError
	var ae smithy.APIError
	switch {
	case errors.As(err, &fe):
		for _, e := range fe.errs {
			answers = append(answers, said{awssdk.ToString(e.ErrorCode), awssdk.ToString(e.ErrorMessage)})
		}
		if len(answers) == 0 {
			oc := providers.Outcome{Scope: providers.ScopeOffer, For: p.cfg.UnavailableFor.D(), Advice: "EC2 started fewer instances than asked"}
			return p.capacityLacking(o, oc.Err(o.ID(), "", err.Error()))
		}
	case errors.As(err, &ae):
		answers = append(answers, said{ae.ErrorCode(), ae.ErrorMessage()})
	}
	var capacity error
	for _, a := range answers {
		oc, ok := p.launchOutcome(o, count, a.code, a.msg)
		switch {
		case ok && oc.Refused:
			lr := oc.Err(o.ID(), a.code, cloudMessage(a.msg))
			p.log.Warn("launch refused", zap.String("offer", o.ID()), zap.String("code", a.code),
				zap.String("scope", string(oc.Scope)), zap.Bool("account", oc.Account), zap.Error(lr))
			return lr
		case ok && capacity == nil:
			capacity = oc.Err(o.ID(), a.code, cloudMessage(a.msg))
		}
	}
	if capacity != nil {
		return p.capacityLacking(o, capacity)
	}
	return fmt.Errorf("launching %s: %w", o.ID(), err)
}

// capacityLacking marks the scope of a capacity error and returns it.
func (p *Provider) capacityLacking(o providers.Offer, err error) error {
	var ice *providers.InsufficientCapacityError
	if errors.As(err, &ice) {
		p.markUnavailable(o, ice)
	}
	return err
}

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

// iceEntry is a scope marked unavailable after a capacity error.
type iceEntry struct {
	until  time.Time
	reason string
}

// markUnavailable shows every offer of the error's scope (around offer o)
// with no capacity for the error's For (Config.UnavailableFor when it has
// none), and republishes the regions the scope covers, now and when the
// mark runs out.
func (p *Provider) markUnavailable(o providers.Offer, ice *providers.InsufficientCapacityError) {
	ttl := ice.For
	if ttl <= 0 {
		ttl = p.cfg.UnavailableFor.D()
	}
	key := providers.ScopeKey(ice.Scope, o)
	p.mu.Lock()
	p.ice[key] = iceEntry{until: p.clk.Now().Add(ttl), reason: ice.Reason}
	p.mu.Unlock()
	p.log.Info("no capacity; marked unavailable", zap.String("offer", o.ID()), zap.String("scope", key),
		zap.String("code", ice.Code), zap.Duration("for", ttl), zap.String("reason", ice.Reason))
	for _, r := range p.cfg.Regions {
		if r.Name == o.Region || ice.Scope == providers.ScopeProvider {
			p.emitRegion(r.Name)
			p.clk.AfterFunc(ttl, func() { p.emitRegion(r.Name) })
		}
	}
}

// applyICELocked shows an offer that a live mark covers (see
// providers.ScopeKeys) as having no capacity, and forgets the marks that
// ran out; called with mu held.
func (p *Provider) applyICELocked(o *providers.Offer, now time.Time) {
	for _, key := range providers.ScopeKeys(*o) {
		e, ok := p.ice[key]
		switch {
		case !ok:
		case !now.Before(e.until):
			delete(p.ice, key)
		default:
			o.Capacity, o.Available = providers.CapacityNone, 0
		}
	}
}
