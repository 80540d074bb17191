package aws

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// TestNoSecretsInLogs runs the provider with credentials from the
// standard chain (the environment), through successes and every kind of
// failure, logging at debug level, and checks that no log line carries the
// secret key or the session token.
func TestNoSecretsInLogs(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": testAccessKey, "AWS_SECRET_ACCESS_KEY": testSecret, "AWS_SESSION_TOKEN": testSession,
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	} {
		t.Setenv(k, v)
	}
	clk := clock.NewFake(t0)
	cloud := startCloud(t, clk)
	cfg := testConfig(cloud)
	core, logs := observer.New(zapcore.DebugLevel)
	p, err := New(context.Background(), cfg, WithClock(clk), WithLogger(zap.New(core)), WithRetry(2, time.Millisecond),
		WithPollInterval(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cloud: cloud, clk: clk, logs: logs, cfg: cfg, p: p}
	ctx := context.Background()

	cloud.SetPricingDown(true) // errors from the SDK are logged
	authFailure := awsfake.Fault{Status: 403, Code: "AuthFailure"}
	cloud.FailEC2("DescribeSpotPriceHistory", authFailure, authFailure)
	spot := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
	// Errors returned to the scheduler end up in its logs: they are
	// checked too.
	var returned []error
	cloud.FailFleet(awsfake.FleetError{Code: "InsufficientInstanceCapacity", Message: "no capacity"})
	if _, err := p.Launch(ctx, launchReq(spot, "k-1", 1)); !providers.IsInsufficientCapacity(err) {
		t.Fatalf("launch: %v", err)
	} else {
		returned = append(returned, err)
	}
	throttled := awsfake.Fault{Status: 503, Code: "RequestLimitExceeded"}
	cloud.FailEC2("CreateFleet", throttled, throttled)
	if _, err := p.Launch(ctx, launchReq(h.offer("us-east-1b", "p3.2xlarge", providers.Spot), "k-2", 1)); err == nil {
		t.Fatal("throttled launch succeeded")
	} else {
		returned = append(returned, err)
	}
	insts, err := p.Launch(ctx, launchReq(h.offer("us-east-1b", "p3.2xlarge", providers.OnDemand), "k-3", 1))
	if err != nil {
		t.Fatal(err)
	}
	w := h.watch()
	cloud.Send("{garbled")
	cloud.SendSpotInterruptionWarning(insts[0].ID, t0.Add(5*time.Minute))
	w.waitFor(t, "the warning", func(e providers.Event) bool { return e.Kind == providers.EventSpotInterruption })
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if len(cloud.Deleted()) < 2 {
			return fmt.Errorf("messages not handled")
		}
		return nil
	})
	if err := p.Terminate(ctx, insts[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Instances(ctx); err != nil {
		t.Fatal(err)
	}

	// The credentials reached AWS (the fakes saw them)...
	var sawKey, sawToken bool
	for _, r := range cloud.Requests("") {
		sawKey = sawKey || strings.Contains(r.Header.Get("Authorization"), "Credential="+testAccessKey+"/")
		sawToken = sawToken || r.Header.Get("X-Amz-Security-Token") == testSession
	}
	if !sawKey || !sawToken {
		t.Fatalf("requests were not signed with the environment's credentials (key %v, token %v)", sawKey, sawToken)
	}
	// ...and no log line carries the secret parts.
	entries := logs.AllUntimed()
	if len(entries) < 8 {
		t.Fatalf("only %d log entries: the test exercised too little", len(entries))
	}
	var lines []string
	for _, e := range entries {
		enc := zapcore.NewMapObjectEncoder()
		for _, f := range e.Context {
			f.AddTo(enc)
		}
		lines = append(lines, e.Message+" "+fmt.Sprint(enc.Fields))
	}
	for _, err := range returned {
		lines = append(lines, err.Error())
	}
	for _, line := range lines {
		for _, secret := range []string{testSecret, testSession} {
			if strings.Contains(line, secret) {
				t.Errorf("log line carries a credential: %s", line)
			}
		}
	}
}
