package azure

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

// TestNoSecretsInLogs runs the provider through launches, a capacity
// error, polls, a failed creation and a termination with a debug-level
// logger, and checks that no line holds the credential's token, the SSH
// key or the custom data.
func TestNoSecretsInLogs(t *testing.T) {
	e := newEnv(t)
	c := e.watch(t)
	ctx := context.Background()
	spot := e.offer(t, "azure/eastus/eastus-1/Standard_NC24ads_A100_v4/spot")
	insts, err := e.p.Launch(ctx, launchReq(spot, "job-7f3a-a2", 2))
	if err != nil {
		t.Fatal(err)
	}
	e.setState(t, insts[0].ID, "Succeeded", "running")
	e.cloud.FailProvisioning("sw-job-fail", azurefake.LaunchFailure("AllocationFailed"))
	if _, err := e.p.Launch(ctx, launchReq(spot, "job-fail-a1", 1)); err != nil {
		t.Fatal(err)
	}
	e.cloud.RefuseCreates("sw-job-full", azurefake.LaunchFailure("ZonalAllocationFailed"))
	od := e.offer(t, "azure/eastus/eastus-2/Standard_NC24ads_A100_v4/on-demand")
	if _, err := e.p.Launch(ctx, launchReq(od, "job-full-a1", 1)); !providers.IsInsufficientCapacity(err) {
		t.Fatalf("capacity error: %v", err)
	}
	e.tick(t)
	e.tick(t)
	if err := e.p.Terminate(ctx, insts[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.Evict(insts[0].ID); err != nil {
		t.Fatal(err)
	}
	e.tick(t)
	waitFor(t, func() error {
		if _, ok := c.find(providers.EventInstanceTerminated, func(ev providers.Event) bool { return ev.Reason == ReasonEvicted }); !ok {
			return fmt.Errorf("eviction not seen yet")
		}
		return nil
	})

	// The token was really used: every ARM request carried it.
	for _, a := range e.cloud.Authorizations() {
		if a != "Bearer "+azurefake.AccessToken {
			t.Errorf("Authorization %q", a)
		}
	}

	var customData []string
	for _, cr := range e.cloud.Creates() {
		customData = append(customData, *cr.Request.Properties.OSProfile.CustomData, cr.CustomData)
	}
	secrets := append([]string{azurefake.AccessToken, testSSHKey, strings.Fields(testSSHKey)[1]}, customData...)
	entries := e.logs.All()
	if len(entries) < 5 {
		t.Fatalf("only %d log lines; the test should exercise the logging", len(entries))
	}
	for _, en := range entries {
		line := en.Message + " " + fmt.Sprint(en.ContextMap())
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("log line holds a secret: %s", line)
			}
		}
	}

	// Configuration errors do not echo the key either.
	cfg := testConfig("https://prices.example")
	cfg.SSHPublicKey = "ssh-rsa not base64 !!! " + azurefake.AccessToken
	err = cfg.Validate()
	if err == nil || strings.Contains(err.Error(), azurefake.AccessToken) {
		t.Fatalf("Validate = %v", err)
	}
}
