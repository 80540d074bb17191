package server

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
	"github.com/spotwise/spotwise/providers/azure"
)

// closedURL is a loopback address nothing listens on: every call to it is
// refused at once, like an API that cannot be reached.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// staticToken is an Azure credential that hands out a fixed token.
type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// bufferLogger logs everything, at debug level, as JSON into a buffer
// that goroutines (the embedded NATS server's among them) may write at
// once.
func bufferLogger(buf *syncBuffer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(buf), zapcore.DebugLevel))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A dry run with a real-looking AWS and Azure configuration and no
// reachable API prices from the bundled catalog, says so per region, and
// plans; the secrets in the environment never reach the logs or the
// output.
func TestDryRunWithRealCloudsWithoutTheirAPIs(t *testing.T) {
	const (
		awsSecret   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY"
		awsSession  = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
		azureSecret = "azure-client-secret-value-Q~EXAMPLE"
		azureToken  = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.EXAMPLE-ACCESS-TOKEN"
		natsPass    = "nats-password-EXAMPLE"
	)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", awsSecret)
	t.Setenv("AWS_SESSION_TOKEN", awsSession)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AZURE_CLIENT_SECRET", azureSecret)

	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Sim.Speed = 1
	cfg.Sim.Regions = []string{"us-central1"}
	cfg.Log.Level = "debug"
	cfg.NATS.Password = natsPass // unused by the embedded server, never logged
	examples := exampleProviders(t)
	awsCfg, azureCfg := *examples.AWS, *examples.Azure
	awsCfg.Endpoints = aws.Endpoints{EC2: closedURL(t), Pricing: closedURL(t), SQS: closedURL(t)}
	azureCfg.Endpoints = azure.Endpoints{ARM: closedURL(t), RetailPrices: closedURL(t)}
	cfg.Providers = ProvidersConfig{AWS: &awsCfg, Azure: &azureCfg}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs syncBuffer
	var out bytes.Buffer
	err := DryRun(ctx, cfg, &out, bufferLogger(&logs),
		WithAWSOptions(aws.WithRetry(1, time.Millisecond)),
		WithAzureOptions(azure.WithCredential(staticToken(azureToken)), azure.WithRetry(policy.RetryOptions{MaxRetries: -1})))
	if err != nil {
		t.Fatalf("dry run: %v\nlogs:\n%s", err, logs.String())
	}
	text := out.String()
	for _, want := range []string{"nothing will be launched", "Plan for 0 waiting job(s)"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Each configured region reads from the catalog; the simulated
	// cloud sells only what no real cloud does.
	rows := map[string]string{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) > 2 && (f[0] == "aws" || f[0] == "azure" || f[0] == "gcp") {
			rows[f[0]+"/"+f[1]] = f[len(f)-1]
		}
	}
	want := map[string]string{"aws/us-east-1": "catalog", "azure/eastus": "catalog", "azure/westeurope": "catalog", "gcp/us-central1": "sim"}
	for k, src := range want {
		if rows[k] != src {
			t.Errorf("%s prices from %q, want %q:\n%s", k, rows[k], src, text)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("offer rows %v, want exactly %v", rows, want)
	}
	for _, secret := range []string{awsSecret, awsSession, azureSecret, azureToken, natsPass} {
		if strings.Contains(logs.String(), secret) || strings.Contains(text, secret) {
			t.Errorf("a secret (%.8s...) appears in the logs or the output", secret)
		}
	}
	if !strings.Contains(logs.String(), "catalog") {
		t.Errorf("the logs do not say the catalog stands in:\n%s", logs.String())
	}
}

// A dry run against AWS's price APIs (a local fake speaking their wire
// format) prints live prices and the plan for the queued job, and buys
// nothing: no fleet, no instance, no launch template.
func TestDryRunOnLiveAWSPricesLaunchesNothing(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
	} {
		t.Setenv(k, v)
	}
	cloud := awsfake.Start()
	t.Cleanup(cloud.Close)
	cloud.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
	cloud.AddInstanceType("us-east-1", "p4d.24xlarge", "us-east-1a")
	cloud.SetOnDemandPrice("us-east-1", "g5.xlarge", "1.006")
	cloud.SetOnDemandPrice("us-east-1", "p4d.24xlarge", "32.7726")
	cloud.SetSpotPrice("us-east-1a", "g5.xlarge", "0.3017", time.Now().Add(-time.Hour))
	cloud.SetSpotPrice("us-east-1b", "g5.xlarge", "0.4120", time.Now().Add(-time.Hour))

	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Sim.Enabled = false
	cfg.Providers.AWS = &aws.Config{
		Regions:       []aws.RegionConfig{{Name: "us-east-1", AMI: "ami-0abcdef1234567890"}},
		InstanceTypes: []string{"g5.xlarge", "p4d.24xlarge"},
		SQSQueueURL:   cloud.QueueURL(),
		Endpoints:     aws.Endpoints{EC2: cloud.EC2URL(), Pricing: cloud.PricingURL(), SQS: cloud.SQSURL()},
		Agent:         aws.AgentConfig{NATSURL: "nats://10.0.0.4:4222"},
	}
	bus := eventstest.OpenBus(t, dir, "", nil)
	svc := api.NewService(bus, nil, clock.Real{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := svc.Submit(asOperator(ctx), []byte("name: inference\ncommand: [serve]\nresources: {gpus_per_node: 1, accelerators: [A10G]}\nwork: 3h on A10G\npurchase: spot\n"), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	bus.Close()

	var out strings.Builder
	if err := DryRun(ctx, cfg, &out, eventstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"aws       us-east-1  5       2     3          0         $0.3017 (g5.xlarge spot)  live",
		"Plan for 1 waiting job(s)",
		rec.Job.ID + "  1 x aws/us-east-1a g5.xlarge",
		"spot      $0.3017",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, text)
		}
	}
	for _, action := range []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate", "TerminateInstances"} {
		if n := cloud.Calls(action); n != 0 {
			t.Errorf("the dry run called %s %d times", action, n)
		}
	}
	if n := len(cloud.Launches()); n != 0 {
		t.Errorf("the dry run launched %d times", n)
	}
}
