package azure

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

const moduleName, moduleVersion = "spotwise/providers/azure", "v1"

// vmAPI is the part of armcompute's VirtualMachinesClient spotwise uses.
type vmAPI interface {
	BeginCreateOrUpdate(ctx context.Context, resourceGroup, name string, vm armcompute.VirtualMachine, opts *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (*runtime.Poller[armcompute.VirtualMachinesClientCreateOrUpdateResponse], error)
	Get(ctx context.Context, resourceGroup, name string, opts *armcompute.VirtualMachinesClientGetOptions) (armcompute.VirtualMachinesClientGetResponse, error)
	InstanceView(ctx context.Context, resourceGroup, name string, opts *armcompute.VirtualMachinesClientInstanceViewOptions) (armcompute.VirtualMachinesClientInstanceViewResponse, error)
	BeginDelete(ctx context.Context, resourceGroup, name string, opts *armcompute.VirtualMachinesClientBeginDeleteOptions) (*runtime.Poller[armcompute.VirtualMachinesClientDeleteResponse], error)
	NewListPager(resourceGroup string, opts *armcompute.VirtualMachinesClientListOptions) *runtime.Pager[armcompute.VirtualMachinesClientListResponse]
}

var _ vmAPI = (*armcompute.VirtualMachinesClient)(nil)

// Option changes how a Provider is built.
type Option func(*options)

type options struct {
	clock      clock.Clock
	log        *zap.Logger
	cred       azcore.TokenCredential
	transport  policy.Transporter
	httpClient *http.Client
	retry      *policy.RetryOptions
	catalog    *catalog.Catalog
	// How long an ended VM's record is kept, and how long a VM being
	// created may be missing from the list.
	keepEnded     time.Duration
	creationGrace time.Duration
}

// WithClock sets the clock (default: the wall clock). Poll intervals, the
// price schedule and capacity marks run on it.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithCredential sets the Azure credential (default: azidentity's
// DefaultAzureCredential).
func WithCredential(c azcore.TokenCredential) Option { return func(o *options) { o.cred = c } }

// WithTransport sends ARM requests through t (azurefake's Transport in
// tests) instead of the network.
func WithTransport(t policy.Transporter) Option { return func(o *options) { o.transport = t } }

// WithHTTPClient sets the HTTP client for the Retail Prices API.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRetry replaces the bounded retry policy of ARM and Retail Prices
// calls (default: 4 retries, 1s exponential backoff capped at 30s, and a
// Retry-After longer than 30s is not waited for).
func WithRetry(r policy.RetryOptions) Option { return func(o *options) { o.retry = &r } }

// WithCatalog sets the catalog of GPU facts and fallback prices (default:
// the bundled one).
func WithCatalog(c *catalog.Catalog) Option { return func(o *options) { o.catalog = c } }

func buildOptions(opts []Option) options {
	o := options{
		clock: clock.Real{}, log: zap.NewNop(), catalog: catalog.Default(),
		keepEnded: time.Hour, creationGrace: 10 * time.Minute,
	}
	for _, f := range opts {
		f(&o)
	}
	if o.retry == nil {
		o.retry = &policy.RetryOptions{MaxRetries: 4, RetryDelay: time.Second, MaxRetryDelay: 30 * time.Second, TryTimeout: time.Minute}
	}
	if o.httpClient == nil {
		o.httpClient = &http.Client{Timeout: time.Minute}
	}
	return o
}

// Provider sells Azure GPU VMs: a providers.Provider. It is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	o      options
	log    *zap.Logger
	clk    clock.Clock
	cat    *catalog.Catalog
	vms    vmAPI
	prices *retailPrices
	sched  cron.Schedule

	refreshMu sync.Mutex // one price refresh at a time
	syncMu    sync.Mutex // one instance sync at a time (pollers are not concurrent-safe)
	keys      keyLocks

	mu       sync.Mutex
	books    map[string]*regionBook  // region -> offers before capacity overlays
	sources  map[string]string       // region -> "live" | "catalog"
	noCap    map[string]capacityMark // offer ID -> until when it shows no capacity
	records  map[string]*vmRecord    // VM name -> what we know of it
	byKey    map[string][]string     // launch key -> VM names
	watchers providers.Watchers
}

var (
	_ providers.Provider = (*Provider)(nil)
)

// New checks cfg and builds a Provider. It does not call Azure: prices are
// read on the first Offers or Watch, VMs on the first Instances or poll.
func New(ctx context.Context, cfg Config, opts ...Option) (*Provider, error) {
	o := buildOptions(opts)
	if err := cfg.validate(o.catalog); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(o.catalog)
	sched, err := cron.ParseStandard(cfg.PricesRefresh)
	if err != nil {
		return nil, fmt.Errorf("azure.prices_refresh: %w", err)
	}
	cred := o.cred
	if cred == nil {
		if cred, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
			return nil, fmt.Errorf("azure credentials: %w", err)
		}
	}
	// No automatic resource provider registration: it needs a permission
	// the identity should not have, and it would hold a launch for
	// minutes; MissingSubscriptionRegistration is a refusal operators
	// act on once.
	armOpts := &arm.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: *o.retry, Transport: o.transport},
		DisableRPRegistration: true}
	if cfg.Endpoints.ARM != DefaultARMEndpoint {
		armOpts.Cloud = cloud.Configuration{
			ActiveDirectoryAuthorityHost: cloud.AzurePublic.ActiveDirectoryAuthorityHost,
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Audience: cloud.AzurePublic.Services[cloud.ResourceManager].Audience, Endpoint: cfg.Endpoints.ARM},
			},
		}
		// A local test server speaks plain HTTP; azcore refuses to send a
		// bearer token there unless told.
		armOpts.InsecureAllowCredentialWithHTTP = strings.HasPrefix(cfg.Endpoints.ARM, "http://")
	}
	vms, err := armcompute.NewVirtualMachinesClient(cfg.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("azure compute client: %w", err)
	}
	var pricesTransport policy.Transporter = o.httpClient
	pl := runtime.NewPipeline(moduleName, moduleVersion, runtime.PipelineOptions{},
		&policy.ClientOptions{Retry: *o.retry, Transport: pricesTransport})
	return newProvider(cfg, o, sched, vms, &retailPrices{base: cfg.Endpoints.RetailPrices, pl: pl}), nil
}

func newProvider(cfg Config, o options, sched cron.Schedule, vms vmAPI, prices *retailPrices) *Provider {
	return &Provider{
		cfg: cfg, o: o, log: o.log.With(zap.String("provider", Name)), clk: o.clock, cat: o.catalog,
		vms: vms, prices: prices, sched: sched,
		books: map[string]*regionBook{}, sources: map[string]string{}, noCap: map[string]capacityMark{},
		records: map[string]*vmRecord{}, byKey: map[string][]string{},
	}
}

// Name is "azure".
func (p *Provider) Name() string { return Name }

// keyLocks serializes launches by idempotency key, so two concurrent
// launches of one decision cannot both create.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
