package awsfake

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Launch is one CreateFleet or RunInstances call that bought capacity. A
// call replayed by its client token is not another launch.
type Launch struct {
	Action       string // "CreateFleet" or "RunInstances"
	ClientToken  string
	Region       string
	Zone         string
	InstanceType string
	Market       string // MarketSpot, MarketOnDemand or MarketCapacityBlock
	MaxPrice     string // the spot max price asked; "" when none
	Reservation  string // the capacity reservation launched into, if any
	InstanceIDs  []string
	Tags         map[string]string // the instances' tags
	UserData     string            // decoded: the boot script
	Time         time.Time
}

// Launches lists the launches so far, oldest first.
func (c *Cloud) Launches() []Launch {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Launch, len(c.launches))
	for i, l := range c.launches {
		l.InstanceIDs = slices.Clone(l.InstanceIDs)
		l.Tags = maps.Clone(l.Tags)
		out[i] = l
	}
	return out
}

// launchAsk is a launch as read from either call.
type launchAsk struct {
	action, token, region, zone, instanceType, market, maxPrice, reservation string
	min, max                                                                 int
	tags                                                                     map[string]string
	userData                                                                 string // base64
}

// tagsOf reads the instance tags of TagSpecification.N.
func tagsOf(form url.Values) map[string]string {
	for i := 1; ; i++ {
		prefix := fmt.Sprintf("TagSpecification.%d.", i)
		rt := form.Get(prefix + "ResourceType")
		if rt == "" {
			return nil
		}
		if rt != "instance" {
			continue
		}
		tags := map[string]string{}
		for j := 1; ; j++ {
			k, ok := form[fmt.Sprintf("%sTag.%d.Key", prefix, j)]
			if !ok {
				break
			}
			tags[k[0]] = form.Get(fmt.Sprintf("%sTag.%d.Value", prefix, j))
		}
		return tags
	}
}

// zoneLocked reads where a launch asks to go: a zone, or a subnet's zone,
// or else the first zone the type is offered in (EC2's default subnet).
func (c *Cloud) zoneLocked(region, instanceType string, form url.Values, prefix string) (string, *Fault) {
	zone := cmpOr(form.Get(prefix+"AvailabilityZone"), form.Get(prefix+"Placement.AvailabilityZone"))
	if s := form.Get(prefix + "SubnetId"); zone == "" && s != "" {
		z, ok := c.subnets[s]
		if !ok {
			return "", &Fault{400, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", s)}
		}
		zone = z
	}
	if zone == "" {
		for _, o := range c.offerings {
			if o.region == region && o.instanceType == instanceType {
				return o.zone, nil
			}
		}
	}
	if zoneRegion(zone) != region {
		return "", &Fault{400, "InvalidParameterValue", fmt.Sprintf("Invalid availability zone: [%s]", zone)}
	}
	return zone, nil
}

// decLess compares two decimal strings exactly.
func decLess(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) < 0
}

// buyLocked starts the instances of a launch, as many as it can up to
// a.max. The fault says why it started fewer (or none): fewer than a.min
// (at least one) starts none.
func (c *Cloud) buyLocked(a launchAsk) ([]string, *Fault) {
	now := c.now()
	switch {
	case a.max <= 0:
		return nil, &Fault{400, "InvalidParameterValue", "the target capacity must be positive"}
	case !c.offeredLocked(a.region, a.instanceType, a.zone):
		return nil, &Fault{400, "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).",
			a.instanceType, a.zone)}
	}
	if cur, ok := c.spotPriceLocked(a.zone, a.instanceType, now); ok && a.market == MarketSpot && a.maxPrice != "" && decLess(a.maxPrice, cur) {
		return nil, &Fault{400, "SpotMaxPriceTooLow", fmt.Sprintf(
			"Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", a.maxPrice, cur)}
	}
	n := a.max
	var short *Fault
	var res *Reservation
	if a.reservation != "" {
		i := slices.IndexFunc(c.reservations, func(r *Reservation) bool { return r.ID == a.reservation && zoneRegion(r.Zone) == a.region })
		if i < 0 {
			return nil, &Fault{400, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation '%s' does not exist", a.reservation)}
		}
		res = c.reservations[i]
		if res.InstanceType != a.instanceType || res.Zone != a.zone {
			return nil, &Fault{400, "InvalidParameterCombination", "The instance does not match the capacity reservation's type and zone."}
		}
		if res.Available < n {
			n, short = res.Available, &Fault{400, "ReservationCapacityExceeded",
				fmt.Sprintf("The requested number of instances exceeds the capacity available in the Capacity Reservation %s.", res.ID)}
		}
	} else if free := c.freeLocked(a.zone, a.instanceType, a.market); free >= 0 && free < n {
		n, short = free, &Fault{500, "InsufficientInstanceCapacity", fmt.Sprintf(
			"We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.",
			a.instanceType, a.zone)}
	}
	if n < max(a.min, 1) {
		if short == nil {
			short = &Fault{400, "InvalidParameterValue", fmt.Sprintf("the minimum %d exceeds the target %d", a.min, a.max)}
		}
		return nil, short
	}
	if res != nil {
		res.Available -= n
	} else if free := c.freeLocked(a.zone, a.instanceType, a.market); free >= 0 {
		c.capacity[capacityKey{a.zone, a.instanceType, a.market}] = free - n
	}
	ud, _ := base64.StdEncoding.DecodeString(a.userData)
	var ids []string
	for range n {
		in := c.addLocked(Instance{Region: a.region, Zone: a.zone, InstanceType: a.instanceType, State: "pending",
			Market: a.market, Reservation: a.reservation, Tags: maps.Clone(a.tags), UserData: string(ud)})
		ids = append(ids, in.ID)
	}
	if a.token != "" {
		c.tokens[a.region+"/"+a.token] = ids
	}
	c.launches = append(c.launches, Launch{Action: a.action, ClientToken: a.token, Region: a.region, Zone: a.zone,
		InstanceType: a.instanceType, Market: a.market, MaxPrice: a.maxPrice, Reservation: a.reservation,
		InstanceIDs: slices.Clone(ids), Tags: maps.Clone(a.tags), UserData: string(ud), Time: now})
	return ids, short
}

// createFleetLocked answers an instant fleet with one launch template
// config and its first override, the way spotwise asks.
func (c *Cloud) createFleetLocked(region string, form url.Values) (string, *Fault) {
	if form.Get("Type") != "instant" {
		return "", &Fault{400, "InvalidParameterValue", "only instant fleets are faked"}
	}
	const spec = "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
	const ov = "LaunchTemplateConfigs.1.Overrides.1."
	token := form.Get("ClientToken")
	instanceType := form.Get(ov + "InstanceType")
	market := cmpOr(form.Get("TargetCapacitySpecification.DefaultTargetCapacityType"), MarketOnDemand)
	name := form.Get(spec + "LaunchTemplateName")
	ids, replay := c.tokens[region+"/"+token]
	var errs []FleetError
	zone := form.Get(ov + "AvailabilityZone")
	if !replay {
		lt := c.templateLocked(region, name, form.Get(spec+"LaunchTemplateId"))
		if lt == nil {
			return "", &Fault{400, "InvalidLaunchTemplateName.NotFoundException",
				fmt.Sprintf("The specified launch template, with template name %s, does not exist.", name)}
		}
		name = lt.name
		z, fault := c.zoneLocked(region, instanceType, form, ov)
		if fault != nil {
			return "", fault
		}
		zone = z
		total, _ := strconv.Atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
		minimum, _ := strconv.Atoi(cmpOr(form.Get("SpotOptions.MinTargetCapacity"), form.Get("OnDemandOptions.MinTargetCapacity")))
		if len(c.fleetErrors) > 0 {
			errs, c.fleetErrors = c.fleetErrors, nil
		} else if f, failed := c.nextLaunchFaultLocked(instanceType, zone); failed {
			if requestLevel[f.Code] {
				return "", &f
			}
			errs = append(errs, FleetError{f.Code, f.Message})
		} else {
			var short *Fault
			ids, short = c.buyLocked(launchAsk{action: "CreateFleet", token: token, region: region, zone: zone,
				instanceType: instanceType, market: market, maxPrice: form.Get(ov + "MaxPrice"), min: minimum, max: total,
				tags: tagsOf(form), userData: cmpOr(form.Get(spec+"LaunchTemplateSpecificationUserData"), lt.userData)})
			if short != nil {
				errs = append(errs, FleetError{short.Code, short.Message})
			}
		}
	} else if in := c.instances[ids[0]]; in != nil {
		zone = in.Zone
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<fleetId>fleet-%08x-28a4-4a5c-9d6e-0a1b2c3d4e5f</fleetId><errorSet>", len(c.requests))
	overrides := fmt.Sprintf(`<launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateName>%s</launchTemplateName>
<version>$Latest</version></launchTemplateSpecification><overrides><instanceType>%s</instanceType><availabilityZone>%s</availabilityZone></overrides>
</launchTemplateAndOverrides><lifecycle>%s</lifecycle>`, esc(name), esc(instanceType), esc(zone), esc(market))
	for _, e := range errs {
		fmt.Fprintf(&b, "<item>%s<errorCode>%s</errorCode><errorMessage>%s</errorMessage></item>", overrides, esc(e.Code), esc(e.Message))
	}
	b.WriteString("</errorSet><fleetInstanceSet>")
	if len(ids) > 0 {
		b.WriteString("<item>" + overrides + "<instanceIds>")
		for _, id := range ids {
			fmt.Fprintf(&b, "<item>%s</item>", id)
		}
		fmt.Fprintf(&b, "</instanceIds><instanceType>%s</instanceType><platform/></item>", esc(instanceType))
	}
	b.WriteString("</fleetInstanceSet>")
	return b.String(), nil
}

func (c *Cloud) runInstancesLocked(region string, form url.Values) (string, *Fault) {
	token := form.Get("ClientToken")
	ids, replay := c.tokens[region+"/"+token]
	if !replay {
		instanceType := form.Get("InstanceType")
		zone, fault := c.zoneLocked(region, instanceType, form, "")
		if fault != nil {
			return "", fault
		}
		if f, failed := c.nextLaunchFaultLocked(instanceType, zone); failed {
			return "", &f
		}
		minimum, _ := strconv.Atoi(form.Get("MinCount"))
		maximum, _ := strconv.Atoi(form.Get("MaxCount"))
		ids, fault = c.buyLocked(launchAsk{action: "RunInstances", token: token, region: region, zone: zone,
			instanceType: instanceType, market: cmpOr(form.Get("InstanceMarketOptions.MarketType"), MarketOnDemand),
			maxPrice:    form.Get("InstanceMarketOptions.SpotOptions.MaxPrice"),
			reservation: form.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
			min:         minimum, max: maximum, tags: tagsOf(form), userData: form.Get("UserData")})
		if len(ids) == 0 {
			return "", fault
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<reservationId>r-%017x</reservationId><ownerId>%s</ownerId><groupSet/><instancesSet>", len(c.requests), Account)
	for _, id := range ids {
		b.WriteString(c.instances[id].xml())
	}
	b.WriteString("</instancesSet>")
	return b.String(), nil
}
