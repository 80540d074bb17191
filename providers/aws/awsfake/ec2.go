package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ec2Time is how EC2 writes times.
const ec2Time = "2006-01-02T15:04:05.000Z"

// serveEC2 answers the EC2 Query protocol: form-encoded requests
// (Action=...), XML answers in the 2016-11-15 namespace with a requestId,
// errors as <Response><Errors><Error>.
func (c *Cloud) serveEC2(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form, region := r.PostForm, requestRegion(r)
	action := form.Get("Action")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	c.requests = append(c.requests, Request{Action: action, Region: region, Form: form, Header: r.Header.Clone()})
	if q := c.faults[action]; len(q) > 0 {
		c.faults[action] = q[1:]
		writeEC2Error(w, &q[0])
		return
	}
	var body string
	var fault *Fault
	switch action {
	case "DescribeInstanceTypeOfferings":
		body = c.describeOfferingsLocked(region, form)
	case "DescribeInstanceTypes":
		body = c.describeTypesLocked(form)
	case "DescribeSpotPriceHistory":
		body, fault = c.describeSpotLocked(region, form)
	case "DescribeCapacityReservations":
		body = c.describeReservationsLocked(region, form)
	case "CreateLaunchTemplate":
		body, fault = c.createTemplateLocked(region, form)
	case "CreateFleet":
		body, fault = c.createFleetLocked(region, form)
	case "RunInstances":
		body, fault = c.runInstancesLocked(region, form)
	case "DescribeInstances":
		body, fault = c.describeInstancesLocked(region, form)
	case "TerminateInstances":
		body, fault = c.terminateLocked(region, form)
	default:
		fault = &Fault{400, "InvalidAction", "The action " + action + " is not valid for this web service."}
	}
	if fault != nil {
		writeEC2Error(w, fault)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<%[1]sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>59dbff89-35bd-4eac-99ed-%012[3]d</requestId>
%[2]s
</%[1]sResponse>`, action, body, len(c.requests))
}

func writeEC2Error(w http.ResponseWriter, f *Fault) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(f.Status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>`,
		esc(f.Code), esc(cmpOr(f.Message, "fake failure")))
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// list reads a query list: Prefix.1, Prefix.2, ...
func list(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// filters reads Filter.N.Name / Filter.N.Value.M.
func filters(form url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return out
		}
		out[name] = list(form, fmt.Sprintf("Filter.%d.Value", i))
	}
}

// matchAny matches EC2 filter values, which may hold * and ? wildcards.
func matchAny(patterns []string, v string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, v); ok {
			return true
		}
	}
	return false
}

// pageOf cuts one page out of n items by the request's NextToken and
// MaxResults; next is the following page's token, "" on the last page.
func (c *Cloud) pageOf(form url.Values, n int) (start, end int, next string) {
	size := c.pageSize
	if m, err := strconv.Atoi(form.Get("MaxResults")); err == nil && m > 0 {
		size = min(size, m)
	}
	if tok := form.Get("NextToken"); tok != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(tok, "page-"))
	}
	start = min(max(start, 0), n)
	end = min(start+size, n)
	if end < n {
		next = "page-" + strconv.Itoa(end)
	}
	return start, end, next
}

func nextToken(tok string) string {
	if tok == "" {
		return ""
	}
	return "<nextToken>" + tok + "</nextToken>"
}

func (c *Cloud) describeOfferingsLocked(region string, form url.Values) string {
	flt := filters(form)
	var match []offering
	for _, o := range c.offerings {
		if o.region != region || len(flt["instance-type"]) > 0 && !matchAny(flt["instance-type"], o.instanceType) ||
			len(flt["location"]) > 0 && !matchAny(flt["location"], o.zone) {
			continue
		}
		match = append(match, o)
	}
	start, end, next := c.pageOf(form, len(match))
	var b strings.Builder
	b.WriteString("<instanceTypeOfferingSet>")
	for _, o := range match[start:end] {
		fmt.Fprintf(&b, "<item><instanceType>%s</instanceType><locationType>availability-zone</locationType><location>%s</location></item>",
			o.instanceType, o.zone)
	}
	b.WriteString("</instanceTypeOfferingSet>" + nextToken(next))
	return b.String()
}

func (c *Cloud) describeTypesLocked(form url.Values) string {
	var b strings.Builder
	b.WriteString("<instanceTypeSet>")
	for _, name := range list(form, "InstanceType") {
		t, ok := c.typeInfoLocked(name)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, `<item><instanceType>%s</instanceType><currentGeneration>true</currentGeneration>
<vCpuInfo><defaultVCpus>%d</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>%d</sizeInMiB></memoryInfo>`, name, t.VCPUs, t.MemoryMiB)
		if t.GPUs > 0 {
			fmt.Fprintf(&b, `<gpuInfo><gpus><item><name>%s</name><manufacturer>%s</manufacturer><count>%d</count>
<memoryInfo><sizeInMiB>%d</sizeInMiB></memoryInfo></item></gpus><totalGpuMemoryInMiB>%d</totalGpuMemoryInMiB></gpuInfo>`,
				esc(t.GPU), esc(cmpOr(t.GPUMaker, "NVIDIA")), t.GPUs, t.GPUMemoryMiB, t.GPUs*t.GPUMemoryMiB)
		}
		b.WriteString("</item>")
	}
	b.WriteString("</instanceTypeSet>")
	return b.String()
}

// describeSpotLocked answers with the region's Linux spot history: with a
// StartTime, the entries since it and, per zone and type, the last change
// before it (the price in effect at the start), as EC2 documents.
func (c *Cloud) describeSpotLocked(region string, form url.Values) (string, *Fault) {
	types := list(form, "InstanceType")
	var start time.Time
	if s := form.Get("StartTime"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return "", &Fault{400, "InvalidParameterValue", "start time " + s}
		}
		start = t
	}
	var match []spotEntry
	for _, s := range c.spot {
		if zoneRegion(s.zone) != region || len(types) > 0 && !slices.Contains(types, s.instanceType) {
			continue
		}
		if s.at.Before(start) && slices.ContainsFunc(c.spot, func(later spotEntry) bool {
			return later.zone == s.zone && later.instanceType == s.instanceType && later.at.Before(start) && later.at.After(s.at)
		}) {
			continue // not the last change before the start
		}
		match = append(match, s)
	}
	first, end, next := c.pageOf(form, len(match))
	var b strings.Builder
	b.WriteString("<spotPriceHistorySet>")
	for _, s := range match[first:end] {
		fmt.Fprintf(&b, `<item><instanceType>%s</instanceType><productDescription>Linux/UNIX</productDescription>
<spotPrice>%s</spotPrice><timestamp>%s</timestamp><availabilityZone>%s</availabilityZone></item>`,
			s.instanceType, esc(s.price), s.at.Format(ec2Time), s.zone)
	}
	b.WriteString("</spotPriceHistorySet>" + nextToken(next))
	return b.String(), nil
}

func (c *Cloud) describeReservationsLocked(region string, form url.Values) string {
	ids := list(form, "CapacityReservationId")
	var match []*Reservation
	for _, r := range c.reservations {
		if zoneRegion(r.Zone) == region && (len(ids) == 0 || slices.Contains(ids, r.ID)) {
			match = append(match, r)
		}
	}
	start, end, next := c.pageOf(form, len(match))
	var b strings.Builder
	b.WriteString("<capacityReservationSet>")
	for _, r := range match[start:end] {
		fmt.Fprintf(&b, `<item><capacityReservationId>%s</capacityReservationId><ownerId>%s</ownerId>
<instanceType>%s</instanceType><instancePlatform>Linux/UNIX</instancePlatform><availabilityZone>%s</availabilityZone>
<tenancy>default</tenancy><totalInstanceCount>%d</totalInstanceCount><availableInstanceCount>%d</availableInstanceCount>
<state>active</state><instanceMatchCriteria>targeted</instanceMatchCriteria><reservationType>%s</reservationType>
<endDateType>unlimited</endDateType></item>`, r.ID, Account, r.InstanceType, r.Zone, r.Total, r.Available, r.Type)
	}
	b.WriteString("</capacityReservationSet>" + nextToken(next))
	return b.String()
}

// template is a launch template; only what a launch reads of it is kept.
type template struct {
	id, name string
	userData string // base64, as sent
}

func (c *Cloud) createTemplateLocked(region string, form url.Values) (string, *Fault) {
	name := form.Get("LaunchTemplateName")
	key := region + "/" + name
	if _, ok := c.templates[key]; ok {
		return "", &Fault{400, "InvalidLaunchTemplateName.AlreadyExistsException",
			"Launch template name already in use."}
	}
	c.nextTemplate++
	t := &template{id: fmt.Sprintf("lt-%017x", 0xa20c000+c.nextTemplate), name: name, userData: form.Get("LaunchTemplateData.UserData")}
	c.templates[key] = t
	return fmt.Sprintf(`<launchTemplate><launchTemplateId>%s</launchTemplateId><launchTemplateName>%s</launchTemplateName>
<createTime>%s</createTime><createdBy>arn:aws:iam::%s:user/spotwise</createdBy>
<defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>1</latestVersionNumber></launchTemplate>`,
		t.id, esc(name), c.now().UTC().Format(ec2Time), Account), nil
}

// templateLocked finds the template a launch names, by name or ID.
func (c *Cloud) templateLocked(region, name, id string) *template {
	if name != "" {
		return c.templates[region+"/"+name]
	}
	for key, t := range c.templates {
		if t.id == id && strings.HasPrefix(key, region+"/") {
			return t
		}
	}
	return nil
}

// LaunchTemplates lists the launch templates' names as region/name.
func (c *Cloud) LaunchTemplates() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.templates))
	for key := range c.templates {
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}

// DeleteLaunchTemplates deletes every launch template, as someone
// tidying the account would.
func (c *Cloud) DeleteLaunchTemplates() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.templates)
}
