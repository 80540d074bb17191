package aws

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// ProviderName is the name offers and instances carry.
const ProviderName = "aws"

// Provider sells AWS GPU capacity. It implements providers.Provider; its
// methods are safe for concurrent use.
type Provider struct {
	cfg     Config
	cat     *catalog.Catalog
	clk     clock.Clock
	log     *zap.Logger
	ec2     map[string]EC2API // by region
	pricing PricingAPI
	sqs     SQSAPI // nil without a queue

	spotSched, odSched cron.Schedule
	pollEvery          time.Duration
	wanted             func(instanceType string) bool

	// refreshMu serialises price refreshes; mu guards everything below.
	refreshMu sync.Mutex
	mu        sync.Mutex
	regions   map[string]*regionState
	ice       map[string]iceEntry              // offer ID -> unavailable until
	known     map[string]*tracked              // instance ID -> what we know of it
	templates map[string]string                // region -> launch template name in use
	seen      map[string]time.Time             // EventBridge event IDs handled -> when
	spotHist  map[zoneType][]money.PriceChange // spot prices noted, by zone and type (spotbill.go)
	watchers  providers.Watchers               // open Watch calls
	bgStop    context.CancelFunc               // stops the background feed (refreshes, SQS, poll)
	bgDone    chan struct{}

	garbled atomic.Int64 // SQS messages that could not be parsed
}

// Option configures a Provider.
type Option func(*options)

type options struct {
	clk         clock.Clock
	log         *zap.Logger
	cat         *catalog.Catalog
	awsConfig   *awssdk.Config
	ec2         map[string]EC2API
	pricing     PricingAPI
	sqs         SQSAPI
	maxAttempts int
	maxBackoff  time.Duration
	pollEvery   time.Duration
}

// WithClock sets the clock (default: the wall clock). Refresh schedules,
// the insufficient-capacity cache and launch times read it.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clk = c } }

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithCatalog sets the catalog for GPU facts and fallback prices (default:
// catalog.Default()).
func WithCatalog(c *catalog.Catalog) Option { return func(o *options) { o.cat = c } }

// WithAWSConfig uses c instead of loading the standard chain (tests pass
// static credentials). The provider still sets its own retryer.
func WithAWSConfig(c awssdk.Config) Option { return func(o *options) { o.awsConfig = &c } }

// WithEC2 replaces the EC2 client of one region.
func WithEC2(region string, api EC2API) Option {
	return func(o *options) {
		if o.ec2 == nil {
			o.ec2 = map[string]EC2API{}
		}
		o.ec2[region] = api
	}
}

// WithPricing replaces the Price List client.
func WithPricing(api PricingAPI) Option { return func(o *options) { o.pricing = api } }

// WithSQS replaces the SQS client.
func WithSQS(api SQSAPI) Option { return func(o *options) { o.sqs = api } }

// WithRetry bounds the SDK's retries: attempts per call (default 5) and the
// longest backoff between them (default 20s).
func WithRetry(maxAttempts int, maxBackoff time.Duration) Option {
	return func(o *options) { o.maxAttempts, o.maxBackoff = maxAttempts, maxBackoff }
}

// WithPollInterval sets how often pending and recently launched instances
// are described while Watch runs (default 15s), the fallback for the
// EventBridge state-change events.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollEvery = d } }

// New checks cfg (with defaults applied) and builds the provider. It makes
// no AWS call: prices are read on the first Offers or Watch.
func New(ctx context.Context, cfg Config, opts ...Option) (*Provider, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("aws: invalid configuration:\n%w", err)
	}
	o := &options{clk: clock.Real{}, log: zap.NewNop(), cat: catalog.Default(),
		maxAttempts: defaultMaxAttempts, maxBackoff: defaultMaxBackoff, pollEvery: 15 * time.Second}
	for _, opt := range opts {
		opt(o)
	}
	spot, _ := cron.ParseStandard(cfg.SpotRefresh) // Validate parsed them
	od, _ := cron.ParseStandard(cfg.OnDemandRefresh)
	p := &Provider{
		cfg: cfg, cat: o.cat, clk: o.clk, log: o.log.With(zap.String("provider", ProviderName)),
		ec2: map[string]EC2API{}, pricing: o.pricing, sqs: o.sqs,
		spotSched: spot, odSched: od, pollEvery: o.pollEvery, wanted: cfg.typeFilter(o.cat),
		regions: map[string]*regionState{}, ice: map[string]iceEntry{}, known: map[string]*tracked{},
		templates: map[string]string{}, seen: map[string]time.Time{},
	}
	var awsCfg *awssdk.Config
	load := func() (awssdk.Config, error) {
		if awsCfg == nil {
			c, err := loadAWSConfig(ctx, cfg.Regions[0].Name, o)
			if err != nil {
				return awssdk.Config{}, err
			}
			awsCfg = &c
		}
		return *awsCfg, nil
	}
	for _, r := range cfg.Regions {
		p.regions[r.Name] = &regionState{}
		if api := o.ec2[r.Name]; api != nil {
			p.ec2[r.Name] = api
			continue
		}
		c, err := load()
		if err != nil {
			return nil, err
		}
		p.ec2[r.Name] = newEC2(c, r.Name, cfg.Endpoints.EC2)
	}
	if p.pricing == nil {
		c, err := load()
		if err != nil {
			return nil, err
		}
		p.pricing = newPricing(c, cfg.Endpoints.Pricing)
	}
	if p.sqs == nil && cfg.SQSQueueURL != "" {
		c, err := load()
		if err != nil {
			return nil, err
		}
		p.sqs = newSQS(c, queueRegion(cfg.SQSQueueURL, cfg.Regions[0].Name), cfg.Endpoints.SQS)
	}
	return p, nil
}

// Name returns "aws".
func (p *Provider) Name() string { return ProviderName }

// GarbledMessages is how many SQS messages were dropped because they could
// not be read.
func (p *Provider) GarbledMessages() int64 { return p.garbled.Load() }

var _ providers.Provider = (*Provider)(nil)
