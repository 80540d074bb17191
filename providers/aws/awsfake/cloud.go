package awsfake

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Account is the account ID the fake answers for.
const Account = "123456789012"

// DefaultRegion is the region of a request whose signature names none.
const DefaultRegion = "us-east-1"

// Markets a launch buys in (Launch.Market, Instance.Market, SetCapacity).
const (
	MarketSpot          = "spot"
	MarketOnDemand      = "on-demand"
	MarketCapacityBlock = "capacity-block"
)

// Cloud is a fake AWS account: EC2, the Price List API and one SQS queue,
// each on its own loopback HTTP server. Start it, seed it, point the SDK
// clients at its URLs, and read back what was bought.
type Cloud struct {
	ec2Srv, pricingSrv, sqsSrv *httptest.Server

	now         func() time.Time
	bootDelay   time.Duration
	manual      bool
	stateEvents bool
	pageSize    int

	// mu guards the EC2 state. It may be held while taking the queue's or
	// the price list's lock, never the other way round.
	mu           sync.Mutex
	types        map[string]TypeInfo // defined with DefineInstanceType
	offerings    []offering
	spot         []spotEntry
	reservations []*Reservation
	subnets      map[string]string // subnet ID -> zone
	instances    map[string]*instance
	order        []string             // instance IDs in launch order
	tokens       map[string][]string  // region/client token -> instances
	templates    map[string]*template // region/name -> template
	capacity     map[capacityKey]int  // instances a pool can still start
	launches     []Launch             // purchases, in order
	requests     []Request            // every EC2 request
	faults       map[string][]Fault   // queued per action
	fleetErrors  []FleetError         // the next CreateFleet answers with these
	launchFaults []Fault              // the next launches fail with these (FailLaunches)
	hideTags     bool                 // tag filters see nothing (eventual consistency)
	nextID       int                  // instance IDs
	nextTemplate int                  // launch template IDs
	eventSeq     atomic.Int64         // EventBridge event IDs
	pricing      priceList
	queue        queue
}

// Option configures a Cloud.
type Option func(*Cloud)

// WithClock sets the time source for launch times, state changes, boot
// delays, message visibility and event times (default time.Now). Give it a
// fake clock's Now to keep a test's times exact.
func WithClock(now func() time.Time) Option { return func(c *Cloud) { c.now = now } }

// WithBootDelay sets how long instances stay pending (and shutting-down,
// stopping) before they move on by themselves: pending becomes running,
// shutting-down terminated, stopping stopped (default 500ms). The change
// is applied, at the time it was due, when the fake is next asked
// anything, so a daemon polling DescribeInstances, or consuming the
// queue, sees it. It undoes an earlier WithManualStates.
func WithBootDelay(d time.Duration) Option {
	return func(c *Cloud) { c.bootDelay, c.manual = d, false }
}

// WithManualStates stops instances from changing state by themselves: they
// stay pending until SetState says otherwise, and TerminateInstances leaves
// them shutting-down.
func WithManualStates() Option { return func(c *Cloud) { c.manual = true } }

// WithStateChangeEvents makes every state change (boot, SetState,
// TerminateInstances) put an "EC2 Instance State-change Notification" on
// the queue, as the EventBridge rule of the provider's README does.
func WithStateChangeEvents() Option { return func(c *Cloud) { c.stateEvents = true } }

// WithPageSize sets the page size of the paged answers (instance type
// offerings, spot price history, capacity reservations, instances, price
// list products); default 100. A request's smaller MaxResults wins.
func WithPageSize(n int) Option { return func(c *Cloud) { c.pageSize = max(n, 1) } }

// Start starts the fake's servers on loopback. Close stops them.
func Start(opts ...Option) *Cloud {
	c := &Cloud{
		now: time.Now, bootDelay: 500 * time.Millisecond, pageSize: 100,
		types: map[string]TypeInfo{}, subnets: map[string]string{}, instances: map[string]*instance{},
		tokens: map[string][]string{}, templates: map[string]*template{}, capacity: map[capacityKey]int{},
		faults: map[string][]Fault{},
	}
	for _, o := range opts {
		o(c)
	}
	c.pricing.init()
	c.queue.init(c.now)
	c.ec2Srv = httptest.NewServer(http.HandlerFunc(c.serveEC2))
	c.pricingSrv = httptest.NewServer(http.HandlerFunc(c.servePricing))
	c.sqsSrv = httptest.NewServer(http.HandlerFunc(c.serveSQS))
	return c
}

// Close stops the servers, waiting for requests in flight.
func (c *Cloud) Close() {
	c.queue.close()
	c.ec2Srv.Close()
	c.pricingSrv.Close()
	c.sqsSrv.Close()
}

// EC2URL is the base URL for the EC2 client (every region).
func (c *Cloud) EC2URL() string { return c.ec2Srv.URL }

// PricingURL is the base URL for the Price List client.
func (c *Cloud) PricingURL() string { return c.pricingSrv.URL }

// SQSURL is the base URL for the SQS client.
func (c *Cloud) SQSURL() string { return c.sqsSrv.URL }

// QueueURL is the interruption queue's URL, in AWS's form so that the
// provider reads its region (us-east-1) from it; requests for it go to
// SQSURL. Other queue URLs are refused as QueueDoesNotExist.
func (c *Cloud) QueueURL() string { return queueURL }

const queueURL = "https://sqs.us-east-1.amazonaws.com/" + Account + "/spotwise-interruptions"

// Fault is an error answer queued with FailEC2.
type Fault struct {
	Status  int    // HTTP status: 400 for client errors, 500/503 for server ones
	Code    string // EC2 error code ("RequestLimitExceeded")
	Message string // optional
}

// FleetError is one entry of an instant fleet's error list (FailFleet).
type FleetError struct{ Code, Message string }

// Request is one EC2 request as the fake received it.
type Request struct {
	Action string
	Region string // from the signature
	Form   url.Values
	Header http.Header
}

// FailEC2 queues error answers for the next calls of an EC2 action, one
// call each.
func (c *Cloud) FailEC2(action string, faults ...Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[action] = append(c.faults[action], faults...)
}

// FailFleet makes the next CreateFleet that would buy answer with these
// errors and no instances, as an instant fleet does when no override could
// be served. No errors clears it.
func (c *Cloud) FailFleet(errs ...FleetError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fleetErrors = errs
}

// HideTags makes tag-filtered DescribeInstances see nothing, as EC2 does
// for a moment after a launch (tags are eventually consistent).
func (c *Cloud) HideTags(hide bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hideTags = hide
}

// Requests lists the EC2 requests of an action, oldest first; "" lists
// every request.
func (c *Cloud) Requests(action string) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.requests {
		if action == "" || r.Action == action {
			out = append(out, Request{Action: r.Action, Region: r.Region, Form: cloneValues(r.Form), Header: r.Header.Clone()})
		}
	}
	return out
}

// Calls counts the EC2 requests of an action, failed ones included.
func (c *Cloud) Calls(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.requests {
		if r.Action == action {
			n++
		}
	}
	return n
}

// LastForm is the form of the last request of an action; nil if none.
func (c *Cloud) LastForm(action string) url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.requests) - 1; i >= 0; i-- {
		if c.requests[i].Action == action {
			return cloneValues(c.requests[i].Form)
		}
	}
	return nil
}

func cloneValues(v url.Values) url.Values { return url.Values(http.Header(v).Clone()) }

// requestRegion reads the region from a SigV4 Authorization header
// (Credential=AKID/20250601/us-east-1/ec2/aws4_request).
func requestRegion(r *http.Request) string {
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return DefaultRegion
	}
	parts := strings.Split(cred, "/")
	if len(parts) < 3 || parts[2] == "" {
		return DefaultRegion
	}
	return parts[2]
}

// zoneRegion is the region of a zone name ("us-east-1a" is in
// "us-east-1").
func zoneRegion(zone string) string {
	return strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz")
}
