package server

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/spotwise/spotwise/providers/aws"
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

// bufferLogger logs everything, at debug level, as JSON into a buffer.
func bufferLogger(buf *bytes.Buffer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(&syncBuffer{b: buf}), zapcore.DebugLevel))
}

type syncBuffer struct{ b *bytes.Buffer }

func (s *syncBuffer) Write(p []byte) (int, error) { return s.b.Write(p) }

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
	var logs, out bytes.Buffer
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
