package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8/fake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/internal/clock"
	"github.com/spotwise/spotwise/internal/money"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
)

// Secrets the tests look for in the logs.
const (
	testToken  = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.test-secret-token"
	testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUm spotwise@test"
	testRG     = "spotwise-test"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// testConfig is a valid config pointing the Retail Prices API at prices.
func testConfig(prices string) Config {
	return Config{
		SubscriptionID: "00000000-0000-0000-0000-000000000001",
		ResourceGroup:  testRG,
		Regions:        []string{"eastus", "westus2"},
		VMSizes:        []string{"Standard_NC24ads_A100_v4", "Standard_ND96asr_v4", "Standard_NC6s_v3"},
		SubnetID:       "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/vnet/subnets/gpu",
		Subnets: map[string]string{
			"westus2": "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/vnet-w2/subnets/gpu",
		},
		Image:         Image{Publisher: "microsoft-dsvm", Offer: "ubuntu-hpc", SKU: "2204", Version: "latest"},
		AdminUsername: "spotwise",
		SSHPublicKey:  testSSHKey,
		Reservations:  []Reservation{{Region: "eastus", VMSize: "Standard_ND96asr_v4", Term: "1y", Count: 2}},
		Endpoints:     Endpoints{RetailPrices: prices},
		Agent: AgentBootstrap{
			NATSURL:       "nats://10.0.0.4:4222",
			NATSCredsFile: "/etc/spotwise/agent.creds",
			Checkpoints:   "azblob://spotwiseckpt/checkpoints",
		},
	}
}

// tokenCredential is a fake credential with a recognisable token.
type tokenCredential struct{}

func (tokenCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: testToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// env is one test's provider with its fakes.
type env struct {
	p      *Provider
	clk    *clock.Fake
	arm    *fakeARM
	prices *priceServer
	wire   *wire
	logs   *observer.ObservedLogs
}

type envOption func(*Config)

func newEnv(t *testing.T, mods ...envOption) *env {
	t.Helper()
	ps := newPriceServer(t)
	f := newFakeARM()
	w := &wire{next: fake.NewVirtualMachinesServerTransport(f.server()), throttle: map[string]int{}}
	core, logs := observer.New(zapcore.DebugLevel)
	clk := clock.NewFake(t0)
	cfg := testConfig(ps.srv.URL + "/api/retail/prices")
	for _, m := range mods {
		m(&cfg)
	}
	p, err := New(context.Background(), cfg,
		WithClock(clk), WithLogger(zap.New(core)), WithCredential(tokenCredential{}), WithTransport(w),
		WithHTTPClient(ps.srv.Client()),
		WithRetry(policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 3 * time.Second}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &env{p: p, clk: clk, arm: f, prices: ps, wire: w, logs: logs}
}

// offer finds an offer of the provider's book.
func (e *env) offer(t *testing.T, id string) providers.Offer {
	t.Helper()
	offers, err := e.p.Offers(context.Background())
	if err != nil {
		t.Fatalf("Offers: %v", err)
	}
	for _, o := range offers {
		if o.ID() == id {
			return o
		}
	}
	t.Fatalf("no offer %s", id)
	return providers.Offer{}
}

func launchReq(o providers.Offer, key string, count int) providers.LaunchRequest {
	return providers.LaunchRequest{
		IdempotencyKey: key, Offer: o, Count: count, JobID: "job-7f3a", Attempt: 2,
		Tags: map[string]string{"spotwise:job": "job-7f3a", "spotwise:attempt": "2", "spotwise:name": "bert-large", "spotwise:team": "nlp"},
		Workload: providers.Workload{
			Command: []string{"python", "train.py", "--lr", "3e-4"}, Image: "ghcr.io/example/bert:1.4",
			ReferenceGPU: "V100", ReferenceSeconds: 21600, Class: "train-mixed",
			Checkpoint: providers.CheckpointPlan{Duration: time.Minute},
		},
	}
}

// wire sits between the SDK's pipeline and the fake server: it records the
// Authorization header and answers 429 Too Many Requests to the next
// throttle[method] requests of that method.
type wire struct {
	next       policy.Transporter
	mu         sync.Mutex
	auth       []string
	throttle   map[string]int
	retryAfter string
	calls      map[string]int
}

func (w *wire) Do(req *http.Request) (*http.Response, error) {
	w.mu.Lock()
	w.auth = append(w.auth, req.Header.Get("Authorization"))
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[req.Method]++
	if w.throttle[req.Method] > 0 {
		w.throttle[req.Method]--
		after := w.retryAfter
		w.mu.Unlock()
		h := http.Header{"Content-Type": {"application/json"}, "X-Ms-Error-Code": {"TooManyRequests"}}
		if after != "" {
			h.Set("Retry-After", after)
		}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Request: req,
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":"TooManyRequests","message":"The request is being throttled."}}`))}, nil
	}
	w.mu.Unlock()
	return w.next.Do(req)
}

func (w *wire) count(method string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[method]
}

// fakeARM is a small Azure: VMs by name with provisioning and power state,
// behind armcompute's own fake server.
type fakeARM struct {
	mu       sync.Mutex
	vms      map[string]*armcompute.VirtualMachine
	power    map[string]string
	failure  map[string]string // name -> provisioning failure code
	creates  []armcompute.VirtualMachine
	deletes  []string
	syncErr  map[string]string // VM name prefix -> error code of a refused create
	asyncErr map[string]string // VM name prefix -> error code the creation ends with
	delFail  int               // the next n deletions end without deleting
}

func newFakeARM() *fakeARM {
	return &fakeARM{vms: map[string]*armcompute.VirtualMachine{}, power: map[string]string{}, failure: map[string]string{},
		syncErr: map[string]string{}, asyncErr: map[string]string{}}
}

func prefixed(m map[string]string, name string) string {
	for p, code := range m {
		if strings.HasPrefix(name, p) {
			return code
		}
	}
	return ""
}

func (f *fakeARM) server() *fake.VirtualMachinesServer {
	return &fake.VirtualMachinesServer{
		BeginCreateOrUpdate: func(_ context.Context, rg, name string, vm armcompute.VirtualMachine, opts *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.creates = append(f.creates, vm)
			if _, exists := f.vms[name]; exists && opts != nil && opts.IfNoneMatch != nil && *opts.IfNoneMatch == "*" {
				errResp.SetResponseError(http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
			if code := prefixed(f.syncErr, name); code != "" {
				errResp.SetResponseError(http.StatusConflict, code)
				return
			}
			stored := vm
			stored.Name = to.Ptr(name)
			stored.ID = to.Ptr("/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/" + name)
			props := *vm.Properties
			props.ProvisioningState = to.Ptr("Creating")
			props.OSProfile = nil // custom data is never returned
			stored.Properties = &props
			f.vms[name] = &stored
			f.power[name] = "starting"
			resp.AddNonTerminalResponse(http.StatusCreated, nil)
			if code := prefixed(f.asyncErr, name); code != "" {
				props.ProvisioningState = to.Ptr("Failed")
				f.power[name] = ""
				f.failure[name] = code
				resp.SetTerminalError(http.StatusConflict, code)
				return
			}
			resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientCreateOrUpdateResponse{VirtualMachine: stored}, nil)
			return
		},
		Get: func(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachinesClientGetResponse], errResp azfake.ErrorResponder) {
			f.mu.Lock()
			defer f.mu.Unlock()
			vm, ok := f.vms[name]
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armcompute.VirtualMachinesClientGetResponse{VirtualMachine: *vm}, nil)
			return
		},
		InstanceView: func(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientInstanceViewOptions) (resp azfake.Responder[armcompute.VirtualMachinesClientInstanceViewResponse], errResp azfake.ErrorResponder) {
			f.mu.Lock()
			defer f.mu.Unlock()
			vm, ok := f.vms[name]
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			prov := strings.ToLower(str(vm.Properties.ProvisioningState))
			if code := f.failure[name]; code != "" {
				prov += "/" + code
			}
			view := armcompute.VirtualMachineInstanceView{Statuses: []*armcompute.InstanceViewStatus{
				{Code: to.Ptr("ProvisioningState/" + prov), Message: to.Ptr("Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.")},
			}}
			if pw := f.power[name]; pw != "" {
				view.Statuses = append(view.Statuses, &armcompute.InstanceViewStatus{Code: to.Ptr("PowerState/" + pw)})
			}
			resp.SetResponse(http.StatusOK, armcompute.VirtualMachinesClientInstanceViewResponse{VirtualMachineInstanceView: view}, nil)
			return
		},
		BeginDelete: func(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientBeginDeleteOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientDeleteResponse], errResp azfake.ErrorResponder) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.deletes = append(f.deletes, name)
			if f.delFail > 0 {
				// The operation ends but the VM stays (an operation
				// preempted by the platform, say).
				f.delFail--
				resp.AddNonTerminalResponse(http.StatusAccepted, nil)
				resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
				return
			}
			if _, ok := f.vms[name]; !ok {
				resp.SetTerminalResponse(http.StatusNoContent, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
				return
			}
			f.vms[name].Properties.ProvisioningState = to.Ptr("Deleting")
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
			return
		},
		NewListPager: func(rg string, _ *armcompute.VirtualMachinesClientListOptions) (resp azfake.PagerResponder[armcompute.VirtualMachinesClientListResponse]) {
			f.mu.Lock()
			defer f.mu.Unlock()
			names := make([]string, 0, len(f.vms))
			for n := range f.vms {
				names = append(names, n)
			}
			slices.Sort(names)
			// Two VMs a page, so the pager is exercised.
			for i := 0; i < len(names); i += 2 {
				var page []*armcompute.VirtualMachine
				for _, n := range names[i:min(i+2, len(names))] {
					vm := *f.vms[n]
					page = append(page, &vm)
				}
				resp.AddPage(http.StatusOK, armcompute.VirtualMachinesClientListResponse{VirtualMachineListResult: armcompute.VirtualMachineListResult{Value: page}}, nil)
			}
			if len(names) == 0 {
				resp.AddPage(http.StatusOK, armcompute.VirtualMachinesClientListResponse{}, nil)
			}
			return
		},
	}
}

// set changes a VM's state as Azure would.
func (f *fakeARM) set(name, provisioning, power string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if vm, ok := f.vms[name]; ok {
		vm.Properties.ProvisioningState = to.Ptr(provisioning)
		f.power[name] = power
	}
}

// remove makes a VM disappear (a Spot eviction with the Delete policy).
func (f *fakeARM) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.vms, name)
}

// putForeign adds a VM spotwise did not create.
func (f *fakeARM) putForeign(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vms[name] = &armcompute.VirtualMachine{Name: to.Ptr(name), Location: to.Ptr("eastus"),
		Tags: map[string]*string{"owner": to.Ptr("someone-else")},
		Properties: &armcompute.VirtualMachineProperties{ProvisioningState: to.Ptr("Succeeded"),
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes("Standard_D4s_v5"))}}}
	f.power[name] = "running"
}

func (f *fakeARM) createRequests() []armcompute.VirtualMachine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.creates)
}

func (f *fakeARM) deleted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deletes)
}

// priceServer is the Azure Retail Prices API: pages of realistic rows per
// region, or a failure for the regions in fail.
type priceServer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	fail     map[string]int // region -> status to answer with
	throttle int            // answer 429 to the next n requests
	requests []string       // $filter of each first-page request
	rows     map[string][]map[string]any
}

// retailRow is one row as the API writes it; price is the JSON number's
// literal text.
func retailRow(region, sku, skuName, product, typ, price, term string, primary bool) map[string]any {
	r := map[string]any{
		"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": json.Number(price), "unitPrice": json.Number(price),
		"armRegionName": region, "location": "US East", "effectiveStartDate": "2024-08-01T00:00:00Z",
		"meterId": "00000000-0000-0000-0000-" + fmt.Sprintf("%012d", len(sku)+len(skuName)), "meterName": skuName,
		"productId": "DZH318Z0BQ4L", "skuId": "DZH318Z0BQ4L/00B4", "productName": product, "skuName": skuName,
		"serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8", "serviceFamily": "Compute",
		"unitOfMeasure": "1 Hour", "type": typ, "isPrimaryMeterRegion": primary, "armSkuName": sku,
	}
	if term != "" {
		r["reservationTerm"] = term
	}
	return r
}

// eastusRows is the eastus feed: on-demand, Spot, Low Priority, Windows,
// dev/test, a secondary meter region, and 1- and 3-year reservations.
func eastusRows() []map[string]any {
	const a100, nd, nc = "Standard_NC24ads_A100_v4", "Standard_ND96asr_v4", "Standard_NC6s_v3"
	return []map[string]any{
		retailRow("eastus", a100, "NC24ads A100 v4", "Virtual Machines NCads A100 v4 Series", "Consumption", "3.673", "", true),
		retailRow("eastus", a100, "NC24ads A100 v4 Spot", "Virtual Machines NCads A100 v4 Series", "Consumption", "0.4444326", "", true),
		retailRow("eastus", a100, "NC24ads A100 v4 Low Priority", "Virtual Machines NCads A100 v4 Series", "Consumption", "0.7346", "", true),
		retailRow("eastus", a100, "NC24ads A100 v4", "Virtual Machines NCads A100 v4 Series Windows", "Consumption", "4.409", "", true),
		retailRow("eastus", a100, "NC24ads A100 v4 Spot", "Virtual Machines NCads A100 v4 Series Windows", "Consumption", "0.6", "", true),
		retailRow("eastus", a100, "NC24ads A100 v4", "Virtual Machines NCads A100 v4 Series", "DevTestConsumption", "1.5", "", true),
		retailRow("eastus", a100, "NC24ads A100 v4", "Virtual Machines NCads A100 v4 Series", "Reservation", "19170", "1 Year", true),
		retailRow("eastus", nd, "ND96asr v4", "Virtual Machines NDasr A100 v4 Series", "Consumption", "27.197", "", true),
		retailRow("eastus", nd, "ND96asr v4", "Virtual Machines NDasr A100 v4 Series", "Consumption", "29.99", "", false),
		retailRow("eastus", nd, "ND96asr v4 Spot", "Virtual Machines NDasr A100 v4 Series", "Consumption", "2.99167", "", true),
		retailRow("eastus", nd, "ND96asr v4", "Virtual Machines NDasr A100 v4 Series", "Reservation", "150263", "1 Year", true),
		retailRow("eastus", nd, "ND96asr v4", "Virtual Machines NDasr A100 v4 Series", "Reservation", "292548", "3 Years", true),
		retailRow("eastus", nd, "ND96asr v4", "Virtual Machines NDasr A100 v4 Series Windows", "Consumption", "31.613", "", true),
		retailRow("eastus", nc, "NC6s v3", "Virtual Machines NCSv3 Series", "Consumption", "3.06", "", true),
		retailRow("eastus", nc, "NC6s v3 Low Priority", "Virtual Machines NCSv3 Series", "Consumption", "0.612", "", true),
	}
}

func newPriceServer(t *testing.T) *priceServer {
	ps := &priceServer{fail: map[string]int{}, rows: map[string][]map[string]any{"eastus": eastusRows(), "westus2": nil}}
	ps.srv = httptest.NewServer(http.HandlerFunc(ps.serve))
	t.Cleanup(ps.srv.Close)
	return ps
}

const pageSize = 4

func (ps *priceServer) serve(w http.ResponseWriter, r *http.Request) {
	filter := r.URL.Query().Get("$filter")
	if r.URL.Path != "/api/retail/prices" || r.URL.Query().Get("currencyCode") != "'USD'" ||
		!strings.Contains(filter, "serviceName eq 'Virtual Machines'") {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ps.mu.Lock()
	skip, _ := strconv.Atoi(r.URL.Query().Get("$skip"))
	if skip == 0 {
		ps.requests = append(ps.requests, filter)
	}
	var region string
	for reg := range ps.rows {
		if strings.Contains(filter, "armRegionName eq '"+reg+"'") {
			region = reg
		}
	}
	status, throttled := ps.fail[region], ps.throttle > 0
	if throttled {
		ps.throttle--
	}
	rows := ps.rows[region]
	ps.mu.Unlock()
	switch {
	case throttled:
		w.Header().Set("Retry-After", "0")
		http.Error(w, `{"error":"too many requests"}`, http.StatusTooManyRequests)
		return
	case status != 0:
		http.Error(w, "unavailable", status)
		return
	}
	end := min(skip+pageSize, len(rows))
	page := map[string]any{"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
		"Items": rows[min(skip, len(rows)):end], "Count": end - min(skip, len(rows)), "NextPageLink": nil}
	if end < len(rows) {
		q := r.URL.Query()
		q.Set("$skip", strconv.Itoa(end))
		page["NextPageLink"] = "http://" + r.Host + r.URL.Path + "?" + q.Encode()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

func (ps *priceServer) setFail(region string, status int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.fail[region] = status
}

// collector gathers what a Watch reports.
type collector struct {
	mu     sync.Mutex
	events []providers.Event
}

func (c *collector) sink(e providers.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *collector) find(kind providers.EventKind, match func(providers.Event) bool) (providers.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if e.Kind == kind && (match == nil || match(e)) {
			return e, true
		}
	}
	return providers.Event{}, false
}

func (c *collector) count(kind providers.EventKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// watch runs Watch until the test ends and waits until it sleeps.
func (e *env) watch(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.p.Watch(ctx, c.sink) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	e.asleep(t)
	return c
}

// tick advances the clock by one poll interval and waits for the poll to
// finish (Watch is back asleep with both timers set).
func (e *env) tick(t *testing.T) {
	t.Helper()
	e.asleep(t)
	calls := e.wire.count(http.MethodGet)
	e.clk.Advance(DefaultPollInterval)
	waitFor(t, func() error {
		if e.wire.count(http.MethodGet) == calls || e.clk.Timers() < 2 {
			return fmt.Errorf("poll not done")
		}
		return nil
	})
}

// asleep waits until Watch waits on both its timers.
func (e *env) asleep(t *testing.T) {
	t.Helper()
	waitFor(t, func() error {
		if n := e.clk.Timers(); n < 2 {
			return fmt.Errorf("watch has %d timers", n)
		}
		return nil
	})
}

func waitFor(t *testing.T, fn func() error) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, fn)
}

func usd(s string) money.Micros { return money.MustParse(s) }

func decodeQuery(u string) url.Values {
	pu, _ := url.Parse(u)
	return pu.Query()
}
