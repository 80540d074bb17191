package aws

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// Recognisable credentials: no log line may ever contain the secret or
// the session token.
const (
	testAccessKey = "AKIASPOTWISETESTKEY1"
	testSecret    = "SECRET-spotwise-do-not-log-0123456789abcdef"
	testSession   = "SESSION-spotwise-do-not-log-FwoGZXIvYXdzEBY"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// harness is a provider wired to a fake AWS account (EC2, the Price List
// API and SQS) through the real SDK clients.
type harness struct {
	t     *testing.T
	cloud *awsfake.Cloud
	clk   *clock.Fake
	logs  *observer.ObservedLogs
	core  zapcore.Core
	cfg   Config
	p     *Provider
}

func testConfig(c *awsfake.Cloud) Config {
	return Config{
		Regions: []RegionConfig{{
			Name: "us-east-1", AMI: "ami-0abcdef1234567890",
			Subnets:        map[string]string{"us-east-1a": "subnet-0a1a2b3c4d5e6f701", "us-east-1b": "subnet-0b1a2b3c4d5e6f702"},
			SecurityGroups: []string{"sg-0123456789abcdef0"}, InstanceProfile: "spotwise-node", KeyName: "ops",
		}},
		SQSQueueURL: c.QueueURL(),
		Endpoints:   Endpoints{EC2: c.EC2URL(), Pricing: c.PricingURL(), SQS: c.SQSURL()},
		Agent:       AgentConfig{NATSURL: "nats://nats.internal:4222", NATSCredsFile: "/etc/spotwise/agent.creds", Checkpoints: "s3://ckpt/spotwise"},
	}
}

// startCloud starts a fake account on the test's clock, seeded with a
// small, realistic region: three GPU types over three zones (us-east-1c
// has no subnet, so it is not sold), spot history over two pages with the
// newest price of us-east-1a on the second. Instances change state only
// when a test says so, unless opts say otherwise.
func startCloud(t *testing.T, clk *clock.Fake, opts ...awsfake.Option) *awsfake.Cloud {
	c := awsfake.Start(append([]awsfake.Option{awsfake.WithClock(clk.Now), awsfake.WithManualStates(), awsfake.WithPageSize(3)}, opts...)...)
	t.Cleanup(c.Close)
	c.AddSubnet("subnet-0a1a2b3c4d5e6f701", "us-east-1a")
	c.AddSubnet("subnet-0b1a2b3c4d5e6f702", "us-east-1b")
	c.AddInstanceType("us-east-1", "p3.2xlarge", "us-east-1a", "us-east-1b", "us-east-1c")
	c.AddInstanceType("us-east-1", "p4d.24xlarge", "us-east-1a")
	c.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
	c.SetSpotPrice("us-east-1a", "p3.2xlarge", "0.950000", t0.Add(-2*time.Hour)) // the last change before t0: listed
	c.SetSpotPrice("us-east-1b", "p3.2xlarge", "0.980000", t0.Add(-time.Hour))
	c.SetSpotPrice("us-east-1a", "p4d.24xlarge", "8.123400", t0.Add(-3*time.Hour))
	c.SetSpotPrice("us-east-1a", "p3.2xlarge", "0.918100", t0)
	c.SetSpotPrice("us-east-1a", "g5.xlarge", "0.405100", t0.Add(-10*time.Minute))
	c.SetSpotPrice("us-east-1c", "p3.2xlarge", "0.700000", t0.Add(-10*time.Minute))
	// Superseded before t0: not listed.
	c.SetSpotPrice("us-east-1a", "p3.2xlarge", "0.500000", t0.Add(-5*time.Hour))
	// Linux with SQL Web: not ours.
	c.AddPriceDocument("us-east-1", "p3.2xlarge", awsfake.PriceDocument("p3.2xlarge", "us-east-1", "RunInstances:0004", "4.2000000000"))
	c.SetOnDemandPrice("us-east-1", "p3.2xlarge", "3.0600000000")
	c.SetOnDemandPrice("us-east-1", "p4d.24xlarge", "21.9576420000")
	// g5.xlarge has no product: its price comes from the catalog.
	return c
}

func newHarness(t *testing.T, mods ...func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, nil, mods...)
}

// newHarnessWith is newHarness with options for the fake account.
func newHarnessWith(t *testing.T, opts []awsfake.Option, mods ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clk: clock.NewFake(t0)}
	h.cloud = startCloud(t, h.clk, opts...)
	h.cfg = testConfig(h.cloud)
	for _, m := range mods {
		m(&h.cfg)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs, h.core = logs, core
	p, err := New(context.Background(), h.cfg, WithAWSConfig(testAWSConfig()),
		WithClock(h.clk), WithLogger(zap.New(core)), WithRetry(4, 2*time.Millisecond), WithPollInterval(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	return h
}

// lastForm is the last request of an EC2 action.
func (h *harness) lastForm(action string) url.Values {
	h.t.Helper()
	f := h.cloud.LastForm(action)
	if f == nil {
		h.t.Fatalf("no %s request was made", action)
	}
	return f
}

// lastLaunch is the last launch that bought capacity.
func (h *harness) lastLaunch() awsfake.Launch {
	h.t.Helper()
	ls := h.cloud.Launches()
	if len(ls) == 0 {
		h.t.Fatal("nothing was launched")
	}
	return ls[len(ls)-1]
}

// setState sets an instance's EC2 state.
func (h *harness) setState(id, state, code string) {
	h.t.Helper()
	if err := h.cloud.SetState(id, state, code); err != nil {
		h.t.Fatal(err)
	}
}

func testAWSConfig() awssdk.Config {
	return awssdk.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, testSecret, testSession)}
}

func (h *harness) offers() []providers.Offer {
	h.t.Helper()
	os, err := h.p.Offers(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return os
}

func (h *harness) offer(zone, instanceType string, po providers.PurchaseOption) providers.Offer {
	h.t.Helper()
	id := providers.OfferID("aws", "us-east-1", zone, instanceType, po)
	for _, o := range h.offers() {
		if o.ID() == id {
			return o
		}
	}
	h.t.Fatalf("no offer %s", id)
	return providers.Offer{}
}

func launchReq(o providers.Offer, key string, n int) providers.LaunchRequest {
	return providers.LaunchRequest{
		IdempotencyKey: key, Offer: o, Count: n, JobID: "j-7f3a", Attempt: 2,
		Tags: map[string]string{TagJob: "j-7f3a", TagAttempt: "2", TagName: "bert-large-finetune", TagTeam: "nlp"},
		Workload: providers.Workload{Image: "ghcr.io/example/bert:1.4", Command: []string{"python", "run_squad.py"},
			ReferenceGPU: "V100", ReferenceSeconds: 6 * 3600, Class: "train-mixed",
			Checkpoint: providers.CheckpointPlan{Duration: 2 * time.Minute, Signal: "SIGUSR1"}},
	}
}

// watch runs Watch until the test ends and collects its events.
type watchLog struct {
	mu     sync.Mutex
	events []providers.Event
}

func (h *harness) watch() *watchLog {
	h.t.Helper()
	w := &watchLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.p.Watch(ctx, func(e providers.Event) {
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
		})
	}()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Watch returned %v", err)
		}
	})
	w.waitFor(h.t, "the first offers", func(e providers.Event) bool { return e.Kind == providers.EventOffers })
	return w
}

func (w *watchLog) all(kind providers.EventKind) []providers.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []providers.Event
	for _, e := range w.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (w *watchLog) waitFor(t *testing.T, what string, match func(providers.Event) bool) providers.Event {
	t.Helper()
	var found providers.Event
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		i := slices.IndexFunc(w.events, match)
		if i < 0 {
			return fmt.Errorf("no event: %s (have %d)", what, len(w.events))
		}
		found = w.events[i]
		return nil
	})
	return found
}

func usd(s string) money.Micros { return money.MustParse(s) }
