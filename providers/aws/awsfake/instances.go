package awsfake

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Instance is an EC2 instance of the fake.
type Instance struct {
	ID           string
	Region       string
	Zone         string
	InstanceType string
	// State is EC2's: pending, running, shutting-down, terminated,
	// stopping, stopped.
	State              string
	StateReasonCode    string // "Server.SpotInstanceTermination"
	StateReasonMessage string
	Market             string // MarketSpot, MarketOnDemand or MarketCapacityBlock
	Reservation        string
	LaunchTime         time.Time
	Tags               map[string]string
	UserData           string // decoded
}

// instance is an Instance with what the fake keeps beside it.
type instance struct {
	Instance
	stateAt    time.Time // when the current state began
	transition string    // StateTransitionReason
	released   bool      // its reservation seat was given back
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

// reasonMessages are EC2's state reason messages for the codes it sends.
var reasonMessages = map[string]string{
	"Server.SpotInstanceTermination":      "Server.SpotInstanceTermination: Spot instance termination",
	"Server.SpotInstanceShutdown":         "Server.SpotInstanceShutdown: Spot instance shutdown",
	"Server.InternalError":                "Server.InternalError: Internal error on launch",
	"Server.InsufficientInstanceCapacity": "Server.InsufficientInstanceCapacity: Insufficient capacity to satisfy launch request",
	"Server.ScheduledStop":                "Server.ScheduledStop: Stopped due to scheduled retirement",
	"Client.UserInitiatedShutdown":        "Client.UserInitiatedShutdown: User initiated shutdown",
	"Client.InstanceInitiatedShutdown":    "Client.InstanceInitiatedShutdown: Instance initiated shutdown",
}

// ErrNoInstance is returned for an instance ID the fake does not have.
var ErrNoInstance = errors.New("awsfake: no such instance")

// addLocked adds an instance, numbering it.
func (c *Cloud) addLocked(in Instance) *instance {
	now := c.now()
	c.nextID++
	in.ID = fmt.Sprintf("i-%017x", 0xabc0000+c.nextID)
	in.Region = cmpOr(in.Region, zoneRegion(in.Zone))
	in.Market = cmpOr(in.Market, MarketOnDemand)
	in.State = cmpOr(in.State, "pending")
	if in.LaunchTime.IsZero() {
		in.LaunchTime = now.UTC().Truncate(time.Second)
	}
	i := &instance{Instance: in, stateAt: now}
	c.instances[in.ID] = i
	c.order = append(c.order, in.ID)
	c.publishStateLocked(i, now)
	return i
}

// AddInstance adds an instance as if someone else had launched it (it is
// no Launch); Zone is required, the rest defaults (running, on-demand,
// launched now). It returns the instance's ID.
func (c *Cloud) AddInstance(in Instance) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	in.State = cmpOr(in.State, "running")
	in.Tags = maps.Clone(in.Tags)
	return c.addLocked(in).ID
}

// Instances lists every instance, ended ones included, in launch order.
func (c *Cloud) Instances() []Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	out := make([]Instance, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, c.instances[id].copy())
	}
	return out
}

// Instance returns one instance; false if there is none.
func (c *Cloud) Instance(id string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	in, ok := c.instances[id]
	if !ok {
		return Instance{}, false
	}
	return in.copy(), true
}

func (in *instance) copy() Instance {
	out := in.Instance
	out.Tags = maps.Clone(in.Tags)
	return out
}

// SetState puts an instance in a state now, with EC2's state reason for
// code ("Server.SpotInstanceTermination" for a reclaimed spot instance,
// "Server.InternalError" for one that failed to start; "" for none). An
// instance that ends gives its reservation seat back; with
// WithStateChangeEvents the change is put on the queue.
func (c *Cloud) SetState(id, state, code string) error {
	if _, ok := stateCodes[state]; !ok {
		return fmt.Errorf("awsfake: unknown instance state %q", state)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	in, ok := c.instances[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoInstance, id)
	}
	in.StateReasonCode, in.StateReasonMessage = code, ""
	if code != "" {
		in.StateReasonMessage = cmpOr(reasonMessages[code], code+": "+code)
	}
	c.setStateLocked(in, state, c.now())
	return nil
}

func (c *Cloud) setStateLocked(in *instance, state string, at time.Time) {
	if in.State == state {
		return
	}
	in.State, in.stateAt = state, at
	if state != "pending" && state != "running" && in.Reservation != "" && !in.released {
		in.released = true
		for _, r := range c.reservations {
			if r.ID == in.Reservation {
				r.Available = min(r.Available+1, r.Total)
			}
		}
	}
	c.publishStateLocked(in, at)
}

// advanceLocked moves instances on whose boot (or shutdown) delay has
// passed, at the time it passed.
func (c *Cloud) advanceLocked() {
	if c.manual {
		return
	}
	now := c.now()
	next := map[string]string{"pending": "running", "shutting-down": "terminated", "stopping": "stopped"}
	for _, id := range c.order {
		in := c.instances[id]
		if to, ok := next[in.State]; ok && !now.Before(in.stateAt.Add(c.bootDelay)) {
			c.setStateLocked(in, to, in.stateAt.Add(c.bootDelay))
		}
	}
}

func (in *instance) xml() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<item><instanceId>%s</instanceId><imageId>ami-0abcdef1234567890</imageId>
<instanceState><code>%d</code><name>%s</name></instanceState><privateDnsName>ip-10-0-0-1.ec2.internal</privateDnsName>
<reason>%s</reason><amiLaunchIndex>0</amiLaunchIndex><instanceType>%s</instanceType><launchTime>%s</launchTime>
<placement><availabilityZone>%s</availabilityZone><groupName/><tenancy>default</tenancy></placement>
<monitoring><state>disabled</state></monitoring><architecture>x86_64</architecture><rootDeviceType>ebs</rootDeviceType>`,
		in.ID, stateCodes[in.State], in.State, esc(in.transition), esc(in.InstanceType), in.LaunchTime.UTC().Format(ec2Time), esc(in.Zone))
	if in.Market != MarketOnDemand {
		fmt.Fprintf(&b, "<instanceLifecycle>%s</instanceLifecycle>", in.Market)
	}
	if in.Reservation != "" {
		fmt.Fprintf(&b, "<capacityReservationId>%s</capacityReservationId>", esc(in.Reservation))
	}
	if in.StateReasonCode != "" {
		fmt.Fprintf(&b, "<stateReason><code>%s</code><message>%s</message></stateReason>", esc(in.StateReasonCode), esc(in.StateReasonMessage))
	}
	b.WriteString("<tagSet>")
	for _, k := range slices.Sorted(maps.Keys(in.Tags)) {
		fmt.Fprintf(&b, "<item><key>%s</key><value>%s</value></item>", esc(k), esc(in.Tags[k]))
	}
	b.WriteString("</tagSet></item>")
	return b.String()
}

// regionInstancesLocked resolves instance IDs in a region; an unknown one
// fails the whole call, as on EC2.
func (c *Cloud) regionInstancesLocked(region string, ids []string) ([]*instance, *Fault) {
	out := make([]*instance, 0, len(ids))
	for _, id := range ids {
		in := c.instances[id]
		if in == nil || in.Region != region {
			return nil, &Fault{400, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		out = append(out, in)
	}
	return out, nil
}

// describeInstancesLocked answers by IDs or filters, one reservation per
// instance, paged.
func (c *Cloud) describeInstancesLocked(region string, form url.Values) (string, *Fault) {
	ids := list(form, "InstanceId")
	if _, fault := c.regionInstancesLocked(region, ids); fault != nil {
		return "", fault
	}
	flt := filters(form)
	var match []*instance
	for _, id := range c.order {
		in := c.instances[id]
		if in.Region != region || len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		ok, fault := c.matchLocked(in, flt)
		if fault != nil {
			return "", fault
		}
		if ok {
			match = append(match, in)
		}
	}
	start, end, next := c.pageOf(form, len(match))
	var b strings.Builder
	b.WriteString("<reservationSet>")
	for _, in := range match[start:end] {
		fmt.Fprintf(&b, "<item><reservationId>r-%s</reservationId><ownerId>%s</ownerId><groupSet/><instancesSet>%s</instancesSet></item>",
			strings.TrimPrefix(in.ID, "i-"), Account, in.xml())
	}
	b.WriteString("</reservationSet>" + nextToken(next))
	return b.String(), nil
}

func (c *Cloud) matchLocked(in *instance, flt map[string][]string) (bool, *Fault) {
	for name, vals := range flt {
		var ok bool
		switch {
		case name == "tag-key":
			ok = !c.hideTags && slices.ContainsFunc(vals, func(k string) bool { _, has := in.Tags[k]; return has })
		case strings.HasPrefix(name, "tag:"):
			v, has := in.Tags[strings.TrimPrefix(name, "tag:")]
			ok = !c.hideTags && has && matchAny(vals, v)
		case name == "instance-state-name":
			ok = slices.Contains(vals, in.State)
		case name == "instance-id":
			ok = slices.Contains(vals, in.ID)
		case name == "instance-type":
			ok = matchAny(vals, in.InstanceType)
		case name == "availability-zone":
			ok = slices.Contains(vals, in.Zone)
		default:
			return false, &Fault{400, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name)}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func (c *Cloud) terminateLocked(region string, form url.Values) (string, *Fault) {
	insts, fault := c.regionInstancesLocked(region, list(form, "InstanceId"))
	if fault != nil {
		return "", fault
	}
	now := c.now()
	var b strings.Builder
	b.WriteString("<instancesSet>")
	for _, in := range insts {
		prev := in.State
		if prev != "terminated" && prev != "shutting-down" {
			in.StateReasonCode, in.StateReasonMessage = "Client.UserInitiatedShutdown", reasonMessages["Client.UserInitiatedShutdown"]
			in.transition = "User initiated (" + now.UTC().Format(time.DateTime) + " GMT)"
			c.setStateLocked(in, "shutting-down", now)
		}
		fmt.Fprintf(&b, `<item><instanceId>%s</instanceId><currentState><code>%d</code><name>%s</name></currentState>
<previousState><code>%d</code><name>%s</name></previousState></item>`, in.ID, stateCodes[in.State], in.State, stateCodes[prev], prev)
	}
	b.WriteString("</instancesSet>")
	return b.String(), nil
}
