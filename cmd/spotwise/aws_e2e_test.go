package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// awsNotice is how long before the capacity goes the test's interruption
// warning reaches the daemon: EC2 gives 2 minutes from the event's time;
// the test's event is dated so that 10 s are left (a warning that spent
// time on its way).
const awsNotice = 10 * time.Second

// A job on AWS: priced from the (fake) Price List and spot price history,
// launched as spot through CreateFleet with a client token, interrupted by
// an "EC2 Spot Instance Interruption Warning" on the SQS queue (and the
// instance's own IMDS instance-action): checkpointed, relaunched under a
// new client token, resumed, finished with the uninterrupted run's result.
func TestAWSJobSurvivesASpotInterruptionEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end on the fake AWS")
	}
	// Credentials from the standard chain (environment), never a real
	// account or the real metadata service.
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	cloud := awsfake.Start(awsfake.WithStateChangeEvents())
	t.Cleanup(cloud.Close)
	cloud.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
	cloud.SetOnDemandPrice("us-east-1", "g5.xlarge", "1.006")
	cloud.SetSpotPrice("us-east-1a", "g5.xlarge", "0.3017", time.Now().Add(-time.Hour))
	cloud.SetSpotPrice("us-east-1b", "g5.xlarge", "0.3120", time.Now().Add(-time.Hour))
	cs := startCloudServer(t, func(c *server.Config, natsURL, ckptURI string) {
		c.Providers.AWS = &aws.Config{
			Regions:       []aws.RegionConfig{{Name: "us-east-1", AMI: "ami-0abcdef1234567890"}},
			InstanceTypes: []string{"g5.xlarge"},
			SQSQueueURL:   cloud.QueueURL(),
			Endpoints:     aws.Endpoints{EC2: cloud.EC2URL(), Pricing: cloud.PricingURL(), SQS: cloud.SQSURL()},
			Agent:         aws.AgentConfig{NATSURL: natsURL, Checkpoints: ckptURI},
		}
	})

	id := cs.submit(t, strings.Replace(cloudJob("aws"), "A100", "A10G", 2))
	boot := func(n int) (awsfake.Launch, *awsfake.IMDS, *bootedAgent) {
		t.Helper()
		testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if len(cloud.Launches()) < n {
				return fmt.Errorf("launch %d not made yet (%d)", n, len(cloud.Launches()))
			}
			return nil
		})
		l := cloud.Launches()[n-1]
		if len(l.InstanceIDs) != 1 {
			t.Fatalf("launch %d bought %v", n, l.InstanceIDs)
		}
		argv, workload, err := awsfake.ParseUserData(l.UserData, l.InstanceIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		md := cloud.StartIMDS(l.InstanceIDs[0])
		t.Cleanup(md.Close)
		return l, md, bootAgent(t, argv, workload, scriptCreds(t, l.UserData), "--metadata-endpoint", md.URL())
	}
	l1, md1, agent1 := boot(1)
	cur := cs.waitJob(t, id, "running", 60*time.Second, func(j *api.JobView) bool {
		return j.State == job.Running && j.Progress >= 0.25
	})
	if p := cur.Placement; p.Provider != "aws" || p.Zone != "us-east-1a" || p.Purchase != "spot" || p.PricePerHour != money.MustParse("0.3017") {
		t.Fatalf("placed on %+v, want spot g5.xlarge in us-east-1a at the spot history's $0.3017/h", p)
	}
	if l1.Action != "CreateFleet" || l1.Market != awsfake.MarketSpot || !strings.HasPrefix(l1.ClientToken, "spotwise-") || l1.Tags["spotwise:job"] != id {
		t.Fatalf("launch 1: %s %s token %q tags %v", l1.Action, l1.Market, l1.ClientToken, l1.Tags)
	}

	// The warning comes through EventBridge and SQS; the instance's own
	// metadata says the same.
	deadline := time.Now().Add(awsNotice).Truncate(time.Second)
	msg := cloud.SendSpotInterruptionWarning(l1.InstanceIDs[0], deadline.Add(-2*time.Minute))
	md1.SetSpotInstanceAction("terminate", deadline)
	l2, _, agent2 := boot(2)
	if l2.ClientToken == l1.ClientToken || l2.Zone == l1.Zone || l2.Market != awsfake.MarketSpot {
		t.Fatalf("replacement %s %s token %q after %s token %q", l2.Zone, l2.Market, l2.ClientToken, l1.Zone, l1.ClientToken)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !slices.Contains(cloud.Deleted(), msg) {
			return fmt.Errorf("the warning %s is still on the queue", msg)
		}
		return nil
	})
	// With its checkpoint stored, spotwise terminates the instance rather
	// than pay for it until EC2 takes it back at the deadline.
	testutil.CheckFor(t, time.Until(deadline), 20*time.Millisecond, func() error {
		for _, in := range cloud.Instances() {
			if in.ID == l1.InstanceIDs[0] && in.State != "shutting-down" && in.State != "terminated" {
				return fmt.Errorf("instance %s still %s after its checkpoint", in.ID, in.State)
			}
		}
		return nil
	})
	agent1.kill()

	done := cs.waitJob(t, id, "finished", 90*time.Second, func(j *api.JobView) bool { return j.State.Terminal() })
	checkSurvived(t, done, agent2)
	if n := len(cloud.Launches()); n != 2 {
		t.Errorf("%d launches, want 2: nothing bought twice", n)
	}
	// The finished job's instance is terminated; nothing is left running.
	testutil.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		for _, in := range cloud.Instances() {
			if in.State != "terminated" {
				return fmt.Errorf("instance %s is %s after the job", in.ID, in.State)
			}
		}
		return nil
	})
}
