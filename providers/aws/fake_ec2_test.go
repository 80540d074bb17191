package aws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeEC2 is a local EC2 endpoint speaking the EC2 Query protocol: form
// encoded requests (Action=...), XML responses in the 2016-11-15
// namespace with a requestId, errors as <Response><Errors><Error>. It keeps
// instances, honours client tokens and tag filters, and can be told to
// fail.
type fakeEC2 struct {
	t   *testing.T
	srv *httptest.Server

	mu           sync.Mutex
	offerings    []fakeOffering
	types        map[string]fakeType
	spotPages    [][]fakeSpot
	reservations []fakeReservation
	instances    map[string]*fakeInstance
	order        []string            // instance IDs in launch order
	tokens       map[string][]string // client token -> instances
	templates    map[string]url.Values
	purchases    int // launches that started instances
	nextID       int
	calls        map[string]int
	forms        map[string][]url.Values
	failures     map[string][]fakeFault // queued per action
	fleetErrors  []fakeFleetError       // the next CreateFleet answers with these instead
	hideTags     bool                   // tag-filtered describes see nothing (eventual consistency)
	authHeaders  []string
	tokenHeaders []string
}

type fakeOffering struct{ instanceType, zone string }

type fakeType struct {
	vcpus, memMiB, gpus, gpuMemMiB int
	gpu                            string
}

type fakeSpot struct {
	zone, instanceType, price string
	at                        time.Time
}

type fakeReservation struct {
	id, instanceType, zone, kind string
	available, total             int
}

type fakeInstance struct {
	id, instanceType, zone, state, lifecycle, reservation string
	reasonCode, reasonMsg, transition                     string
	launched                                              time.Time
	tags                                                  map[string]string
}

type fakeFault struct {
	status int
	code   string
}

type fakeFleetError struct{ code, message string }

func newFakeEC2(t *testing.T) *fakeEC2 {
	f := &fakeEC2{t: t, types: map[string]fakeType{}, instances: map[string]*fakeInstance{}, tokens: map[string][]string{},
		templates: map[string]url.Values{}, calls: map[string]int{}, forms: map[string][]url.Values{}, failures: map[string][]fakeFault{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// fail queues faults for the next calls of an action.
func (f *fakeEC2) fail(action string, faults ...fakeFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[action] = append(f.failures[action], faults...)
}

// failFleet makes the next CreateFleet answer with these errors and no
// instances, as an instant fleet does when no override could be served.
func (f *fakeEC2) failFleet(errs ...fakeFleetError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fleetErrors = errs
}

func (f *fakeEC2) callCount(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[action]
}

func (f *fakeEC2) lastForm(action string) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.forms[action]
	if len(fs) == 0 {
		f.t.Fatalf("no %s request was made", action)
	}
	return fs[len(fs)-1]
}

func (f *fakeEC2) setState(id, state, code, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[id]
	if in == nil {
		f.t.Fatalf("no instance %s", id)
	}
	in.state, in.reasonCode, in.reasonMsg = state, code, msg
}

func (f *fakeEC2) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := r.PostForm.Get("Action")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[action]++
	f.forms[action] = append(f.forms[action], r.PostForm)
	f.authHeaders = append(f.authHeaders, r.Header.Get("Authorization"))
	f.tokenHeaders = append(f.tokenHeaders, r.Header.Get("X-Amz-Security-Token"))
	if q := f.failures[action]; len(q) > 0 {
		f.failures[action] = q[1:]
		writeEC2Error(w, q[0].status, q[0].code, "fake failure")
		return
	}
	var body string
	var err *fakeFault
	switch action {
	case "DescribeInstanceTypeOfferings":
		body = f.describeOfferings(r.PostForm)
	case "DescribeInstanceTypes":
		body = f.describeTypes(r.PostForm)
	case "DescribeSpotPriceHistory":
		body = f.describeSpot(r.PostForm)
	case "DescribeCapacityReservations":
		body = f.describeReservations()
	case "CreateLaunchTemplate":
		body, err = f.createTemplate(r.PostForm)
	case "CreateFleet":
		body, err = f.createFleet(r.PostForm)
	case "RunInstances":
		body, err = f.runInstances(r.PostForm)
	case "DescribeInstances":
		body, err = f.describeInstances(r.PostForm)
	case "TerminateInstances":
		body, err = f.terminate(r.PostForm)
	default:
		err = &fakeFault{400, "InvalidAction"}
	}
	if err != nil {
		writeEC2Error(w, err.status, err.code, "fake: "+action)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<%[1]sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>
%[2]s
</%[1]sResponse>`, action, body)
}

func writeEC2Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>`, code, esc(msg))
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
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

func matchAny(patterns []string, v string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, v); ok {
			return true
		}
	}
	return false
}

func (f *fakeEC2) describeOfferings(form url.Values) string {
	pats := filters(form)["instance-type"]
	var b strings.Builder
	b.WriteString("<instanceTypeOfferingSet>")
	for _, o := range f.offerings {
		if len(pats) > 0 && !matchAny(pats, o.instanceType) {
			continue
		}
		fmt.Fprintf(&b, "<item><instanceType>%s</instanceType><locationType>availability-zone</locationType><location>%s</location></item>",
			o.instanceType, o.zone)
	}
	b.WriteString("</instanceTypeOfferingSet>")
	return b.String()
}

func (f *fakeEC2) describeTypes(form url.Values) string {
	var b strings.Builder
	b.WriteString("<instanceTypeSet>")
	for _, name := range list(form, "InstanceType") {
		t, ok := f.types[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, `<item><instanceType>%s</instanceType><currentGeneration>true</currentGeneration>
<vCpuInfo><defaultVCpus>%d</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>%d</sizeInMiB></memoryInfo>`, name, t.vcpus, t.memMiB)
		if t.gpus > 0 {
			fmt.Fprintf(&b, `<gpuInfo><gpus><item><name>%s</name><manufacturer>NVIDIA</manufacturer><count>%d</count>
<memoryInfo><sizeInMiB>%d</sizeInMiB></memoryInfo></item></gpus><totalGpuMemoryInMiB>%d</totalGpuMemoryInMiB></gpuInfo>`,
				t.gpu, t.gpus, t.gpuMemMiB, t.gpus*t.gpuMemMiB)
		}
		b.WriteString("</item>")
	}
	b.WriteString("</instanceTypeSet>")
	return b.String()
}

func (f *fakeEC2) describeSpot(form url.Values) string {
	page := 0
	if tok := form.Get("NextToken"); tok != "" {
		page, _ = strconv.Atoi(strings.TrimPrefix(tok, "page-"))
	}
	types := list(form, "InstanceType")
	var b strings.Builder
	b.WriteString("<spotPriceHistorySet>")
	if page < len(f.spotPages) {
		for _, s := range f.spotPages[page] {
			if len(types) > 0 && !slices.Contains(types, s.instanceType) {
				continue
			}
			fmt.Fprintf(&b, `<item><instanceType>%s</instanceType><productDescription>Linux/UNIX</productDescription>
<spotPrice>%s</spotPrice><timestamp>%s</timestamp><availabilityZone>%s</availabilityZone></item>`,
				s.instanceType, s.price, s.at.UTC().Format("2006-01-02T15:04:05.000Z"), s.zone)
		}
	}
	b.WriteString("</spotPriceHistorySet>")
	if page+1 < len(f.spotPages) {
		fmt.Fprintf(&b, "<nextToken>page-%d</nextToken>", page+1)
	} else {
		b.WriteString("<nextToken/>")
	}
	return b.String()
}

func (f *fakeEC2) describeReservations() string {
	var b strings.Builder
	b.WriteString("<capacityReservationSet>")
	for _, r := range f.reservations {
		fmt.Fprintf(&b, `<item><capacityReservationId>%s</capacityReservationId><ownerId>123456789012</ownerId>
<instanceType>%s</instanceType><instancePlatform>Linux/UNIX</instancePlatform><availabilityZone>%s</availabilityZone>
<tenancy>default</tenancy><totalInstanceCount>%d</totalInstanceCount><availableInstanceCount>%d</availableInstanceCount>
<state>active</state><instanceMatchCriteria>targeted</instanceMatchCriteria><reservationType>%s</reservationType>
<endDateType>unlimited</endDateType></item>`, r.id, r.instanceType, r.zone, r.total, r.available, r.kind)
	}
	b.WriteString("</capacityReservationSet>")
	return b.String()
}

func (f *fakeEC2) createTemplate(form url.Values) (string, *fakeFault) {
	name := form.Get("LaunchTemplateName")
	if _, ok := f.templates[name]; ok {
		return "", &fakeFault{400, "InvalidLaunchTemplateName.AlreadyExistsException"}
	}
	f.templates[name] = form
	return fmt.Sprintf(`<launchTemplate><launchTemplateId>lt-0a20c965061f64abc</launchTemplateId><launchTemplateName>%s</launchTemplateName>
<createTime>2025-06-01T00:00:00.000Z</createTime><createdBy>arn:aws:iam::123456789012:user/spotwise</createdBy>
<defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>1</latestVersionNumber></launchTemplate>`, name), nil
}

// tagsOf reads TagSpecification.N of resource type instance.
func tagsOf(form url.Values, prefix string) map[string]string {
	for i := 1; ; i++ {
		rt := form.Get(fmt.Sprintf("%s.%d.ResourceType", prefix, i))
		if rt == "" {
			return nil
		}
		if rt != "instance" {
			continue
		}
		tags := map[string]string{}
		for j := 1; ; j++ {
			k, ok := form[fmt.Sprintf("%s.%d.Tag.%d.Key", prefix, i, j)]
			if !ok {
				break
			}
			tags[k[0]] = form.Get(fmt.Sprintf("%s.%d.Tag.%d.Value", prefix, i, j))
		}
		return tags
	}
}

func (f *fakeEC2) launch(n int, instanceType, zone, lifecycle, reservation string, tags map[string]string) []string {
	var ids []string
	for range n {
		f.nextID++
		id := fmt.Sprintf("i-%017x", 0xabc0000+f.nextID)
		f.instances[id] = &fakeInstance{id: id, instanceType: instanceType, zone: zone, state: "pending", lifecycle: lifecycle,
			reservation: reservation, launched: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), tags: tags}
		f.order = append(f.order, id)
		ids = append(ids, id)
	}
	f.purchases++
	return ids
}

func (f *fakeEC2) createFleet(form url.Values) (string, *fakeFault) {
	if form.Get("Type") != "instant" {
		return "", &fakeFault{400, "InvalidParameterValue"}
	}
	name := form.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName")
	if _, ok := f.templates[name]; !ok {
		return "", &fakeFault{400, "InvalidLaunchTemplateName.NotFoundException"}
	}
	token := form.Get("ClientToken")
	ids, seen := f.tokens[token]
	instanceType := form.Get("LaunchTemplateConfigs.1.Overrides.1.InstanceType")
	zone := f.zoneOf(form, "LaunchTemplateConfigs.1.Overrides.1.")
	lifecycle := form.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	if !seen {
		if len(f.fleetErrors) > 0 {
			var b strings.Builder
			b.WriteString("<fleetId>fleet-0eb1e8e2-28a4-4a5c-9d6e-0a1b2c3d4e5f</fleetId><errorSet>")
			for _, e := range f.fleetErrors {
				fmt.Fprintf(&b, `<item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateName>%s</launchTemplateName>
<version>$Latest</version></launchTemplateSpecification><overrides><instanceType>%s</instanceType><availabilityZone>%s</availabilityZone></overrides>
</launchTemplateAndOverrides><lifecycle>%s</lifecycle><errorCode>%s</errorCode><errorMessage>%s</errorMessage></item>`,
					name, instanceType, zone, lifecycle, e.code, esc(e.message))
			}
			b.WriteString("</errorSet><fleetInstanceSet/>")
			f.fleetErrors = nil
			return b.String(), nil
		}
		n, _ := strconv.Atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
		life := ""
		if lifecycle == "spot" {
			life = "spot"
		}
		ids = f.launch(n, instanceType, zone, life, "", tagsOf(form, "TagSpecification"))
		f.tokens[token] = ids
	}
	var b strings.Builder
	b.WriteString("<fleetId>fleet-0eb1e8e2-28a4-4a5c-9d6e-0a1b2c3d4e5f</fleetId><errorSet/><fleetInstanceSet><item>")
	fmt.Fprintf(&b, `<launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateName>%s</launchTemplateName><version>$Latest</version>
</launchTemplateSpecification><overrides><instanceType>%s</instanceType><availabilityZone>%s</availabilityZone></overrides></launchTemplateAndOverrides>
<lifecycle>%s</lifecycle><instanceIds>`, name, instanceType, zone, lifecycle)
	for _, id := range ids {
		fmt.Fprintf(&b, "<item>%s</item>", id)
	}
	fmt.Fprintf(&b, "</instanceIds><instanceType>%s</instanceType><platform/></item></fleetInstanceSet>", instanceType)
	return b.String(), nil
}

// zoneOf reads the zone a launch asks for: the override's or placement's
// zone, or the subnet's (subnet-<zone suffix>... in the tests' config).
func (f *fakeEC2) zoneOf(form url.Values, prefix string) string {
	if z := form.Get(prefix + "AvailabilityZone"); z != "" {
		return z
	}
	if z := form.Get(prefix + "Placement.AvailabilityZone"); z != "" {
		return z
	}
	return testSubnetZones[form.Get(prefix+"SubnetId")]
}

func (f *fakeEC2) runInstances(form url.Values) (string, *fakeFault) {
	token := form.Get("ClientToken")
	ids, seen := f.tokens[token]
	if !seen {
		n, _ := strconv.Atoi(form.Get("MinCount"))
		life := ""
		if form.Get("InstanceMarketOptions.MarketType") == "spot" {
			life = "spot"
		}
		ids = f.launch(n, form.Get("InstanceType"), f.zoneOf(form, ""), life,
			form.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"), tagsOf(form, "TagSpecification"))
		f.tokens[token] = ids
	}
	var b strings.Builder
	b.WriteString("<reservationId>r-1234567890abcdef0</reservationId><ownerId>123456789012</ownerId><groupSet/><instancesSet>")
	for _, id := range ids {
		b.WriteString(f.instanceXML(f.instances[id]))
	}
	b.WriteString("</instancesSet>")
	return b.String(), nil
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func (f *fakeEC2) instanceXML(in *fakeInstance) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<item><instanceId>%s</instanceId><imageId>ami-0abcdef1234567890</imageId>
<instanceState><code>%d</code><name>%s</name></instanceState><privateDnsName>ip-10-0-0-1.ec2.internal</privateDnsName>
<reason>%s</reason><amiLaunchIndex>0</amiLaunchIndex><instanceType>%s</instanceType><launchTime>%s</launchTime>
<placement><availabilityZone>%s</availabilityZone><groupName/><tenancy>default</tenancy></placement>
<monitoring><state>disabled</state></monitoring><architecture>x86_64</architecture><rootDeviceType>ebs</rootDeviceType>`,
		in.id, stateCodes[in.state], in.state, esc(in.transition), in.instanceType, in.launched.Format("2006-01-02T15:04:05.000Z"), in.zone)
	if in.lifecycle != "" {
		fmt.Fprintf(&b, "<instanceLifecycle>%s</instanceLifecycle>", in.lifecycle)
	}
	if in.reservation != "" {
		fmt.Fprintf(&b, "<capacityReservationId>%s</capacityReservationId>", in.reservation)
	}
	if in.reasonCode != "" {
		fmt.Fprintf(&b, "<stateReason><code>%s</code><message>%s</message></stateReason>", in.reasonCode, esc(in.reasonMsg))
	}
	b.WriteString("<tagSet>")
	keys := make([]string, 0, len(in.tags))
	for k := range in.tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "<item><key>%s</key><value>%s</value></item>", esc(k), esc(in.tags[k]))
	}
	b.WriteString("</tagSet></item>")
	return b.String()
}

// describeInstances answers by IDs (unknown IDs are an error, as on EC2) or
// by filters, two reservations per page.
func (f *fakeEC2) describeInstances(form url.Values) (string, *fakeFault) {
	ids := list(form, "InstanceId")
	for _, id := range ids {
		if f.instances[id] == nil {
			return "", &fakeFault{400, "InvalidInstanceID.NotFound"}
		}
	}
	flt := filters(form)
	var match []string
	for _, id := range f.order {
		in := f.instances[id]
		if len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		ok := true
		for name, vals := range flt {
			switch {
			case name == "tag-key":
				_, has := in.tags[vals[0]]
				ok = ok && has && !f.hideTags
			case strings.HasPrefix(name, "tag:"):
				ok = ok && slices.Contains(vals, in.tags[strings.TrimPrefix(name, "tag:")]) && !f.hideTags
			case name == "instance-state-name":
				ok = ok && slices.Contains(vals, in.state)
			}
		}
		if ok {
			match = append(match, id)
		}
	}
	start := 0
	if tok := form.Get("NextToken"); tok != "" {
		start, _ = strconv.Atoi(tok)
	}
	end := min(start+2, len(match))
	var b strings.Builder
	b.WriteString("<reservationSet>")
	for _, id := range match[start:end] {
		fmt.Fprintf(&b, "<item><reservationId>r-%s</reservationId><ownerId>123456789012</ownerId><groupSet/><instancesSet>%s</instancesSet></item>",
			strings.TrimPrefix(id, "i-"), f.instanceXML(f.instances[id]))
	}
	b.WriteString("</reservationSet>")
	if end < len(match) {
		fmt.Fprintf(&b, "<nextToken>%d</nextToken>", end)
	}
	return b.String(), nil
}

func (f *fakeEC2) terminate(form url.Values) (string, *fakeFault) {
	ids := list(form, "InstanceId")
	for _, id := range ids {
		if f.instances[id] == nil {
			return "", &fakeFault{400, "InvalidInstanceID.NotFound"}
		}
	}
	var b strings.Builder
	b.WriteString("<instancesSet>")
	for _, id := range ids {
		in := f.instances[id]
		prev := in.state
		if in.state != "terminated" {
			in.state = "shutting-down"
			in.reasonCode, in.reasonMsg = "Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"
			in.transition = "User initiated (2025-06-01 13:00:00 GMT)"
		}
		fmt.Fprintf(&b, `<item><instanceId>%s</instanceId><currentState><code>%d</code><name>%s</name></currentState>
<previousState><code>%d</code><name>%s</name></previousState></item>`, id, stateCodes[in.state], in.state, stateCodes[prev], prev)
	}
	b.WriteString("</instancesSet>")
	return b.String(), nil
}
