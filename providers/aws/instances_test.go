package aws

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

func TestInstancesAndTerminate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	spot, err := h.p.Launch(ctx, launchReq(h.offer("us-east-1a", "p3.2xlarge", providers.Spot), "j-7f3a-a2", 3))
	if err != nil {
		t.Fatal(err)
	}
	od, err := h.p.Launch(ctx, launchReq(h.offer("us-east-1b", "p3.2xlarge", providers.OnDemand), "j-7f3a-a3", 1))
	if err != nil {
		t.Fatal(err)
	}
	// An instance spotwise did not start is never listed.
	h.cloud.AddInstance(awsfake.Instance{Zone: "us-east-1a", InstanceType: "p3.2xlarge", Tags: map[string]string{"Name": "someone else's"}})

	h.setState(spot[0].ID, "running", "")
	h.setState(spot[2].ID, "terminated", "Server.SpotInstanceTermination")
	h.setState(od[0].ID, "stopped", "Client.UserInitiatedShutdown")
	h.clk.Advance(time.Hour) // spotwise terminates one an hour after the launch
	if err := h.p.Terminate(ctx, spot[1].ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{spot[1].ID, "i-0000000000000dead"} { // again, and one never seen
		if err := h.p.Terminate(ctx, id); err != nil {
			t.Errorf("terminating %s: %v", id, err)
		}
	}
	describes := h.cloud.Calls("DescribeInstances")
	list, err := h.p.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.cloud.Calls("DescribeInstances") - describes; n != 2 {
		t.Errorf("%d DescribeInstances pages, want 2", n)
	}
	want := map[string]providers.Instance{
		spot[0].ID: {State: providers.InstanceRunning, Node: 0, Purchase: providers.Spot, Price: usd("0.9181"), IdempotencyKey: "j-7f3a-a2"},
		spot[1].ID: {State: providers.InstanceTerminated, Node: 1, Purchase: providers.Spot, Price: usd("0.9181"), IdempotencyKey: "j-7f3a-a2",
			Reason: ReasonTerminated, EndedAt: time.Date(2025, 6, 1, 13, 0, 0, 0, time.UTC)},
		spot[2].ID: {State: providers.InstanceTerminated, Node: 2, Purchase: providers.Spot, Price: usd("0.9181"), IdempotencyKey: "j-7f3a-a2",
			Reason: ReasonSpotReclaim},
		od[0].ID: {State: providers.InstanceTerminated, Node: 0, Purchase: providers.OnDemand, Price: usd("3.06"), IdempotencyKey: "j-7f3a-a3",
			Reason: ReasonStopped},
	}
	if len(list) != len(want) {
		t.Fatalf("listed %d instances, want %d: %+v", len(list), len(want), list)
	}
	for _, in := range list {
		w, ok := want[in.ID]
		if !ok {
			t.Errorf("unexpected instance %s", in.ID)
			continue
		}
		if in.State != w.State || in.Node != w.Node || in.Purchase != w.Purchase || in.Price != w.Price ||
			in.IdempotencyKey != w.IdempotencyKey || in.Reason != w.Reason || !in.EndedAt.Equal(w.EndedAt) {
			t.Errorf("%s: got %+v\nwant %+v", in.ID, in, w)
		}
		if in.JobID != "j-7f3a" || in.Provider != "aws" || in.Region != "us-east-1" || in.InstanceType != "p3.2xlarge" ||
			!in.LaunchedAt.Equal(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: %+v", in.ID, in)
		}
	}

	// After a restart the provider does not know who terminated what: the
	// reason is EC2's.
	fresh, err := New(ctx, h.cfg, WithAWSConfig(awssdk.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, testSecret, testSession)}),
		WithClock(h.clk), WithLogger(zap.NewNop()), WithRetry(2, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	list, err = fresh.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.ID == spot[1].ID && in.Reason != "Client.UserInitiatedShutdown: User initiated shutdown" {
			t.Errorf("after a restart: reason %q", in.Reason)
		}
	}
}

func TestStateOf(t *testing.T) {
	tests := []struct {
		state, code string
		t           *tracked
		want        providers.InstanceState
		reason      string
	}{
		{"pending", "", nil, providers.InstancePending, ""},
		{"running", "", nil, providers.InstanceRunning, ""},
		{"shutting-down", "", &tracked{byUs: true}, providers.InstanceTerminated, ReasonTerminated},
		{"terminated", "Server.SpotInstanceTermination", nil, providers.InstanceTerminated, ReasonSpotReclaim},
		{"terminated", "", &tracked{reclaim: true}, providers.InstanceTerminated, ReasonSpotReclaim},
		{"terminated", "Server.InternalError", nil, providers.InstanceFailed, "Server.InternalError"},
		{"terminated", "", nil, providers.InstanceTerminated, reasonUnknownEnded},
		{"stopping", "", nil, providers.InstanceTerminated, ReasonStopped},
		{"stopped", "", nil, providers.InstanceTerminated, ReasonStopped},
	}
	for _, tt := range tests {
		got, reason := stateOf(ec2State(tt.state), tt.code, "", tt.t)
		if got != tt.want || reason != tt.reason {
			t.Errorf("stateOf(%s, %s) = %s %q, want %s %q", tt.state, tt.code, got, reason, tt.want, tt.reason)
		}
	}
}

func ec2State(s string) ec2types.InstanceStateName { return ec2types.InstanceStateName(s) }
