package awsfake

import (
	"net/http"
	"strings"
)

// FailLaunches makes the next n launches fail with f, as EC2 reports a
// failed launch: RunInstances answers with the XML error response; an
// instant CreateFleet lists the error in its Errors, with no instances,
// unless the code is one EC2 refuses the whole request with
// (authorization, opt-in, verification, the fleet limit), which is an
// error response there too. A launch is a call that would buy: a client
// token's replay, or a request refused before it (an unknown subnet or
// launch template), is not one. f's Status and Message default to EC2's
// for the code (LaunchFault), with the launch's type and zone.
func (c *Cloud) FailLaunches(n int, f Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range n {
		c.launchFaults = append(c.launchFaults, f)
	}
}

// nextLaunchFaultLocked takes the next FailLaunches fault, filled in for
// the launch.
func (c *Cloud) nextLaunchFaultLocked(instanceType, zone string) (Fault, bool) {
	if len(c.launchFaults) == 0 {
		return Fault{}, false
	}
	f := c.launchFaults[0]
	c.launchFaults = c.launchFaults[1:]
	def := LaunchFault(f.Code, instanceType, zone)
	return Fault{Status: cmpOrInt(f.Status, def.Status), Code: f.Code, Message: cmpOr(f.Message, def.Message)}, true
}

// requestLevel are the codes an instant fleet refuses the whole request
// with rather than listing them per override.
var requestLevel = map[string]bool{
	"UnauthorizedOperation": true, "AuthFailure": true, "Blocked": true, "OptInRequired": true,
	"PendingVerification": true, "MaxFleetCountExceeded": true, "RequestLimitExceeded": true,
	"InternalError": true, "Unavailable": true,
}

// launchFaultMessages are EC2's messages for launch errors, with {type}
// and {zone} for the launch's.
var launchFaultMessages = map[string]string{
	"InsufficientInstanceCapacity": "We currently do not have sufficient {type} capacity in the Availability Zone you requested ({zone}). " +
		"Our system will be working on provisioning additional capacity. You can currently get {type} capacity by not specifying " +
		"an Availability Zone in your request or choosing a different Availability Zone.",
	"InsufficientCapacity":                 "There is no capacity available that matches your request.",
	"InsufficientHostCapacity":             "Insufficient capacity on the Dedicated Hosts for instance type {type} in {zone}.",
	"InsufficientReservedInstanceCapacity": "Insufficient capacity in the reserved instances for instance type {type} in {zone}.",
	"ReservationCapacityExceeded":          "The requested number of instances exceeds the capacity available in the Capacity Reservation.",
	"UnfulfillableCapacity":                "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again.",
	"SpotMaxPriceTooLow":                   "Your Spot request price is lower than the minimum required Spot request fulfillment price.",
	"MaxSpotInstanceCountExceeded":         "Max spot instance count exceeded",
	"VcpuLimitExceeded": "You have requested more vCPU capacity than your current vCPU limit of 64 allows for the instance bucket " +
		"that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.",
	"InstanceLimitExceeded":             "Your quota allows for 0 more running instance(s). You requested at least 1.",
	"InsufficientFreeAddressesInSubnet": "There are not enough free addresses in the subnet of {zone} to satisfy the requested number of instances.",
	"Unsupported": "Your requested instance type ({type}) is not supported in your requested Availability Zone ({zone}). " +
		"Please retry your request by not specifying an Availability Zone or choosing a different one.",
	"InvalidFleetConfiguration":   "The fleet configuration is invalid: the override for {type} in {zone} cannot be launched.",
	"InvalidParameterValue":       "Value ({type}) for parameter instanceType is invalid.",
	"InvalidParameterCombination": "Network interfaces and an instance-level security groups may not be specified on the same request.",
	"PendingVerification": "Your request for accessing resources in this region is being validated, and you will not be able to " +
		"launch additional resources in this region until the validation is complete. We will notify you by email once your " +
		"request has been validated. While normally resolved within minutes, please allow up to 4 hours for this process to complete.",
	"AuthFailure.ServiceLinkedRoleCreationNotPermitted": "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances.",
	"MaxFleetCountExceeded":                             "You've reached the limit on the number of EC2 Fleets that you can create in this Region.",
	"UnauthorizedOperation": "You are not authorized to perform this operation. User: arn:aws:iam::" + Account + ":user/spotwise is not " +
		"authorized to perform: ec2:CreateFleet because no identity-based policy allows the ec2:CreateFleet action. " +
		"Encoded authorization failure message: 9nEBO0u7wW3mAJ8oGhFzH1vXm2Lq5T0pYkR4cN6sDfE8aBjWxZ",
	"AuthFailure":   "AWS was not able to validate the provided access credentials",
	"OptInRequired": "You are not subscribed to this service. Please go to http://aws.amazon.com to subscribe.",
}

// launchFaultStatus are the codes EC2 answers with another status than
// 400 Bad Request.
var launchFaultStatus = map[string]int{
	"InsufficientInstanceCapacity": http.StatusInternalServerError, "InsufficientCapacity": http.StatusInternalServerError,
	"InsufficientHostCapacity": http.StatusInternalServerError, "InsufficientReservedInstanceCapacity": http.StatusInternalServerError,
	"InternalError": http.StatusInternalServerError, "Unavailable": http.StatusServiceUnavailable,
	"RequestLimitExceeded": http.StatusServiceUnavailable, "UnauthorizedOperation": http.StatusForbidden,
	"AuthFailure": http.StatusUnauthorized, "OptInRequired": http.StatusUnauthorized, "Blocked": http.StatusForbidden,
}

// LaunchFault is EC2's answer to a launch of an instance type in a zone
// that fails with code: the HTTP status and the message EC2 gives (a
// generic one for a code it does not know).
func LaunchFault(code, instanceType, zone string) Fault {
	msg, ok := launchFaultMessages[code]
	if !ok {
		msg = "The request failed (" + code + ")."
	}
	return Fault{Status: cmpOrInt(launchFaultStatus[code], http.StatusBadRequest), Code: code,
		Message: strings.NewReplacer("{type}", instanceType, "{zone}", zone).Replace(msg)}
}

func cmpOrInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
