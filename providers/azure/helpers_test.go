package azure

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

// A secret the tests look for in the logs (with azurefake.AccessToken),
// and the resource group.
const (
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

// env is one test's provider on a fake Azure.
type env struct {
	p     *Provider
	clk   *clock.Fake
	cloud *azurefake.Cloud
	logs  *observer.ObservedLogs
}

type envOption func(*Config)

// newEnv builds a provider on a fake Azure whose VMs change state only
// when the test says (SetState), with the eastus feed of seedPrices and
// no westus2 prices. It needs nothing but the config, the transport and
// the credential, as a daemon would.
func newEnv(t *testing.T, mods ...envOption) *env {
	t.Helper()
	return newEnvOn(t, azurefake.New(azurefake.WithManualStates()), mods...)
}

// newEnvOn is newEnv on a fake built by the test.
func newEnvOn(t *testing.T, c *azurefake.Cloud, mods ...envOption) *env {
	t.Helper()
	t.Cleanup(c.Close)
	seedPrices(c)
	core, logs := observer.New(zapcore.DebugLevel)
	clk := clock.NewFake(t0)
	cfg := testConfig(c.RetailPricesURL())
	for _, m := range mods {
		m(&cfg)
	}
	p, err := New(context.Background(), cfg, append(fakeOptions(c, clk), WithLogger(zap.New(core)))...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &env{p: p, clk: clk, cloud: c, logs: logs}
}

// fakeOptions point a provider at the fake, with fast retries.
func fakeOptions(c *azurefake.Cloud, clk clock.Clock) []Option {
	return []Option{WithClock(clk), WithCredential(c.Credential()), WithTransport(c.Transport()),
		WithRetry(policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 3 * time.Second})}
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

// setState changes a VM's state as Azure would.
func (e *env) setState(t *testing.T, name, provisioning, power string) {
	t.Helper()
	if err := e.cloud.SetState(name, provisioning, power); err != nil {
		t.Fatal(err)
	}
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

// seedPrices gives eastus a realistic feed: on-demand, Spot, Low
// Priority, Windows, dev/test, a secondary meter region, and 1- and 3-year
// reservations (15 rows, so the API pages).
func seedPrices(c *azurefake.Cloud) {
	const a100, nd, nc = "Standard_NC24ads_A100_v4", "Standard_ND96asr_v4", "Standard_NC6s_v3"
	row := func(sku string, kind azurefake.PriceKind, usd string, tweak func(*azurefake.PriceRow)) {
		r := azurefake.NewPriceRow("eastus", sku, kind, usd)
		if tweak != nil {
			tweak(&r)
		}
		c.AddPriceRow(r)
	}
	windows := func(r *azurefake.PriceRow) { r.ProductName += " Windows" }
	row(a100, azurefake.Consumption, "3.673", nil)
	row(a100, azurefake.Spot, "0.4444326", nil)
	row(a100, azurefake.LowPriority, "0.7346", nil)
	row(a100, azurefake.Consumption, "4.409", windows)
	row(a100, azurefake.Spot, "0.6", windows)
	row(a100, azurefake.Consumption, "1.5", func(r *azurefake.PriceRow) { r.Type = "DevTestConsumption" })
	row(a100, azurefake.Reservation1Y, "19170", nil)
	row(nd, azurefake.Consumption, "27.197", nil)
	row(nd, azurefake.Consumption, "29.99", func(r *azurefake.PriceRow) { r.IsPrimaryMeterRegion = false })
	row(nd, azurefake.Spot, "2.99167", nil)
	row(nd, azurefake.Reservation1Y, "150263", nil)
	row(nd, azurefake.Reservation3Y, "292548", nil)
	row(nd, azurefake.Consumption, "31.613", windows)
	row(nc, azurefake.Consumption, "3.06", nil)
	row(nc, azurefake.LowPriority, "0.612", nil)
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
	calls := e.cloud.Calls(http.MethodGet)
	e.clk.Advance(DefaultPollInterval)
	waitFor(t, func() error {
		if e.cloud.Calls(http.MethodGet) == calls || e.clk.Timers() < 2 {
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

// putForeign adds a VM spotwise did not create.
func putForeign(t *testing.T, c *azurefake.Cloud, name string) {
	t.Helper()
	err := c.AddVM(testRG, armcompute.VirtualMachine{Name: to.Ptr(name), Location: to.Ptr("eastus"),
		Tags: map[string]*string{"owner": to.Ptr("someone-else")},
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes("Standard_D4s_v5"))}}})
	if err != nil {
		t.Fatal(err)
	}
}
