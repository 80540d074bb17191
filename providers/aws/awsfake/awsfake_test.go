package awsfake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func sdkConfig(region string) awssdk.Config {
	return awssdk.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", "")}
}

func ec2Client(c *awsfake.Cloud, region string) *ec2.Client {
	return ec2.NewFromConfig(sdkConfig(region), func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(c.EC2URL()) })
}

func sqsClient(c *awsfake.Cloud) *sqs.Client {
	return sqs.NewFromConfig(sdkConfig("us-east-1"), func(o *sqs.Options) { o.BaseEndpoint = awssdk.String(c.SQSURL()) })
}

// start is a fake on a fake clock with g5.xlarge in two zones.
func start(t *testing.T, opts ...awsfake.Option) (*awsfake.Cloud, *clock.Fake) {
	clk := clock.NewFake(t0)
	c := awsfake.Start(append([]awsfake.Option{awsfake.WithClock(clk.Now)}, opts...)...)
	t.Cleanup(c.Close)
	c.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
	c.SetSpotPrice("us-east-1a", "g5.xlarge", "0.30", t0.Add(-time.Hour))
	return c, clk
}

func run(t *testing.T, c *awsfake.Cloud, token string, mods ...func(*ec2.RunInstancesInput)) []string {
	t.Helper()
	in := &ec2.RunInstancesInput{ImageId: awssdk.String("ami-0abcdef1234567890"), InstanceType: "g5.xlarge",
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), ClientToken: awssdk.String(token),
		Placement: &ec2types.Placement{AvailabilityZone: awssdk.String("us-east-1a")}}
	for _, m := range mods {
		m(in)
	}
	out, err := ec2Client(c, "us-east-1").RunInstances(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, awssdk.ToString(i.InstanceId))
	}
	return ids
}

func state(t *testing.T, c *awsfake.Cloud, id string) string {
	t.Helper()
	out, err := ec2Client(c, "us-east-1").DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	return string(out.Reservations[0].Instances[0].State.Name)
}

func TestInstancesBootAndShutDownByThemselves(t *testing.T) {
	c, clk := start(t, awsfake.WithBootDelay(30*time.Second))
	id := run(t, c, "tok-1")[0]
	if got := state(t, c, id); got != "pending" {
		t.Fatalf("just launched: %s", got)
	}
	clk.Advance(30 * time.Second)
	if got := state(t, c, id); got != "running" {
		t.Fatalf("after the boot delay: %s", got)
	}
	if _, err := ec2Client(c, "us-east-1").TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if got := state(t, c, id); got != "shutting-down" {
		t.Fatalf("terminating: %s", got)
	}
	clk.Advance(time.Minute)
	if in, _ := c.Instance(id); in.State != "terminated" || in.StateReasonCode != "Client.UserInitiatedShutdown" {
		t.Errorf("after the delay: %+v", in)
	}
}

func TestStateChangeEvents(t *testing.T) {
	c, clk := start(t, awsfake.WithBootDelay(10*time.Second), awsfake.WithStateChangeEvents())
	id := run(t, c, "tok-1")[0]
	clk.Advance(10 * time.Second)
	if err := c.SetState(id, "terminated", "Server.SpotInstanceTermination"); err != nil {
		t.Fatal(err)
	}
	var got []string
	client := sqsClient(c)
	for len(got) < 3 {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: awssdk.String(c.QueueURL()), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("only %v on the queue", got)
		}
		for _, m := range out.Messages {
			var e struct {
				DetailType string    `json:"detail-type"`
				Time       time.Time `json:"time"`
				Region     string    `json:"region"`
				Detail     struct {
					InstanceID string `json:"instance-id"`
					State      string `json:"state"`
				} `json:"detail"`
			}
			if err := json.Unmarshal([]byte(awssdk.ToString(m.Body)), &e); err != nil {
				t.Fatal(err)
			}
			if e.DetailType != "EC2 Instance State-change Notification" || e.Detail.InstanceID != id || e.Region != "us-east-1" {
				t.Errorf("event %+v", e)
			}
			got = append(got, fmt.Sprintf("%s@%s", e.Detail.State, e.Time.Sub(t0)))
		}
	}
	if want := []string{"pending@0s", "running@10s", "terminated@10s"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestClientTokensAndMarkets(t *testing.T) {
	c, _ := start(t, awsfake.WithManualStates())
	first := run(t, c, "tok-1", func(in *ec2.RunInstancesInput) { in.MinCount, in.MaxCount = awssdk.Int32(2), awssdk.Int32(2) })
	again := run(t, c, "tok-1", func(in *ec2.RunInstancesInput) { in.MinCount, in.MaxCount = awssdk.Int32(2), awssdk.Int32(2) })
	if len(first) != 2 || !slices.Equal(first, again) || len(c.Launches()) != 1 || len(c.Instances()) != 2 {
		t.Fatalf("replay: %v then %v, %d launches", first, again, len(c.Launches()))
	}
	// Another region has its own tokens (and no g5 offered).
	_, err := ec2Client(c, "eu-west-1").RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: awssdk.String("ami-1"), InstanceType: "g5.xlarge", MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1),
		ClientToken: awssdk.String("tok-1"), Placement: &ec2types.Placement{AvailabilityZone: awssdk.String("eu-west-1a")}})
	if err == nil || !strings.Contains(err.Error(), "Unsupported") {
		t.Errorf("eu-west-1: %v", err)
	}
	spot := func(max string) func(*ec2.RunInstancesInput) {
		return func(in *ec2.RunInstancesInput) {
			in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot,
				SpotOptions: &ec2types.SpotMarketOptions{MaxPrice: awssdk.String(max)}}
		}
	}
	id := run(t, c, "tok-2", spot("0.35"))[0]
	if l := c.Launches()[1]; l.Market != awsfake.MarketSpot || l.MaxPrice != "0.35" || l.InstanceIDs[0] != id {
		t.Errorf("spot launch %+v", l)
	}
	c.SetSpotPrice("us-east-1a", "g5.xlarge", "0.40", t0)
	_, err = ec2Client(c, "us-east-1").RunInstances(context.Background(), &ec2.RunInstancesInput{ImageId: awssdk.String("ami-1"),
		InstanceType: "g5.xlarge", MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), ClientToken: awssdk.String("tok-3"),
		InstanceMarketOptions: &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot,
			SpotOptions: &ec2types.SpotMarketOptions{MaxPrice: awssdk.String("0.35")}}})
	if err == nil || !strings.Contains(err.Error(), "SpotMaxPriceTooLow") {
		t.Errorf("the market rose past the max price: %v", err)
	}
}

// TestFailLaunches checks that a launch failure comes the way EC2 sends
// it: an error response from RunInstances, an instant fleet's Errors
// entry, or the fleet's error response for a request-level refusal.
func TestFailLaunches(t *testing.T) {
	c, _ := start(t, awsfake.WithManualStates())
	ctx := context.Background()
	api := ec2Client(c, "us-east-1")
	c.FailLaunches(1, awsfake.Fault{Code: "InsufficientInstanceCapacity"})
	_, err := api.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: awssdk.String("ami-1"), InstanceType: "g5.xlarge",
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), ClientToken: awssdk.String("tok-1"),
		Placement: &ec2types.Placement{AvailabilityZone: awssdk.String("us-east-1a")}},
		func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InsufficientInstanceCapacity" || !strings.Contains(ae.ErrorMessage(), "sufficient g5.xlarge capacity") ||
		!errors.As(err, &re) || re.HTTPStatusCode() != 500 {
		t.Errorf("RunInstances: %v", err)
	}
	if _, err := api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: awssdk.String("lt"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: awssdk.String("ami-1")}}); err != nil {
		t.Fatal(err)
	}
	fleet := func(token string) (*ec2.CreateFleetOutput, error) {
		return api.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: awssdk.String(token),
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: awssdk.String("lt"), Version: awssdk.String("$Latest")},
				Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "g5.xlarge", AvailabilityZone: awssdk.String("us-east-1b")}}}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: awssdk.Int32(1),
				DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot}})
	}
	c.FailLaunches(1, awsfake.Fault{Code: "Unsupported"})
	c.FailLaunches(1, awsfake.Fault{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."})
	out, err := fleet("tok-2")
	if err != nil || len(out.Instances) != 0 || len(out.Errors) != 1 || awssdk.ToString(out.Errors[0].ErrorCode) != "Unsupported" ||
		!strings.Contains(awssdk.ToString(out.Errors[0].ErrorMessage), "(us-east-1b)") {
		t.Errorf("a fleet's launch error: %v, %+v", err, out)
	}
	if _, err = fleet("tok-3"); !errors.As(err, &ae) || ae.ErrorCode() != "UnauthorizedOperation" || ae.ErrorMessage() != "You are not authorized to perform this operation." {
		t.Errorf("a fleet's request-level refusal: %v", err)
	}
	if out, err := fleet("tok-4"); err != nil || len(out.Instances) != 1 || len(c.Launches()) != 1 {
		t.Errorf("after the failures: %v, %+v", err, out)
	}
}

func TestReservationsFillAndEmpty(t *testing.T) {
	c, _ := start(t)
	c.AddReservation(awsfake.Reservation{ID: "cr-0a1b2c3d4e5f60718", InstanceType: "g5.xlarge", Zone: "us-east-1b", Total: 1, Available: 1})
	into := func(in *ec2.RunInstancesInput) {
		in.Placement.AvailabilityZone = awssdk.String("us-east-1b")
		in.CapacityReservationSpecification = &ec2types.CapacityReservationSpecification{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: awssdk.String("cr-0a1b2c3d4e5f60718")}}
	}
	id := run(t, c, "tok-1", into)[0]
	if r := c.Reservations()[0]; r.Available != 0 {
		t.Fatalf("after a launch into it: %+v", r)
	}
	if err := c.SetState(id, "terminated", ""); err != nil {
		t.Fatal(err)
	}
	if r := c.Reservations()[0]; r.Available != 1 {
		t.Errorf("after the instance ended: %+v", r)
	}
}

// TestConcurrentUse drives every part of the fake from many goroutines at
// once; run with -race.
func TestConcurrentUse(t *testing.T) {
	c := awsfake.Start(awsfake.WithBootDelay(time.Millisecond), awsfake.WithStateChangeEvents())
	defer c.Close()
	c.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a")
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				out, err := ec2Client(c, "us-east-1").RunInstances(ctx, &ec2.RunInstancesInput{ImageId: awssdk.String("ami-1"),
					InstanceType: "g5.xlarge", MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1),
					ClientToken: awssdk.String(fmt.Sprintf("tok-%d-%d", g, i))})
				if err != nil {
					t.Error(err)
					return
				}
				id := awssdk.ToString(out.Instances[0].InstanceId)
				c.SendSpotInterruptionWarning(id, time.Now())
				if err := c.SetState(id, "running", ""); err != nil {
					t.Error(err)
				}
				c.SetSpotPrice("us-east-1a", "g5.xlarge", "0.3", time.Now())
				_ = c.Instances()
				_ = c.Launches()
			}
		})
	}
	wg.Go(func() {
		client := sqsClient(c)
		for range 20 {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: awssdk.String(c.QueueURL()), MaxNumberOfMessages: 10})
			if err != nil {
				t.Error(err)
				return
			}
			for _, m := range out.Messages {
				if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: awssdk.String(c.QueueURL()), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Error(err)
				}
			}
		}
	})
	wg.Wait()
	if n := len(c.Launches()); n != 40 {
		t.Errorf("%d launches, want 40", n)
	}
	if len(c.Deleted()) == 0 {
		t.Error("nothing was received")
	}
}

func TestParseUserDataErrors(t *testing.T) {
	for name, script := range map[string]string{
		"no args block":        "#!/bin/bash\necho hi\n",
		"unterminated args":    "#!/bin/bash\nargs=(\n  /bin/agent\n",
		"no workload":          "#!/bin/bash\nargs=(\n  /bin/agent --instance \"$instance\"\n)\n",
		"a broken shell quote": "#!/bin/bash\nargs=(\n  '/bin/agent\n)\n",
	} {
		if _, _, err := awsfake.ParseUserData(script, "i-1"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	argv, w, err := awsfake.ParseUserData("#!/bin/bash\nbase64 -d > /w <<'SPOTWISE_WORKLOAD'\neyJ4Ijox\nfQ==\nSPOTWISE_WORKLOAD\n"+
		"args=(\n  '/bin/agent' --instance \"$instance\"\n)\n", "i-0abc'$(id)")
	if err != nil || !slices.Equal(argv, []string{"/bin/agent", "--instance", "i-0abc'$(id)"}) || string(w) != `{"x":1}` {
		t.Errorf("got %q %s %v", argv, w, err)
	}
}
