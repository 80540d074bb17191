package awsfake_test

import (
	"context"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// A provider pointed at the fake prices what was seeded, buys, and the
// fake tells what it bought and how the instance would start its agent.
func Example() {
	c := awsfake.Start()
	defer c.Close()
	c.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
	c.SetOnDemandPrice("us-east-1", "g5.xlarge", "1.006")
	c.SetSpotPrice("us-east-1a", "g5.xlarge", "0.30", time.Now())

	ctx := context.Background()
	p, err := aws.New(ctx, aws.Config{
		Regions:       []aws.RegionConfig{{Name: "us-east-1", AMI: "ami-0abcdef1234567890"}},
		InstanceTypes: []string{"g5.xlarge"},
		SQSQueueURL:   c.QueueURL(),
		Endpoints:     aws.Endpoints{EC2: c.EC2URL(), Pricing: c.PricingURL(), SQS: c.SQSURL()},
		Agent:         aws.AgentConfig{NATSURL: "nats://127.0.0.1:4222"},
	}, aws.WithAWSConfig(awssdk.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", "")}))
	if err != nil {
		panic(err)
	}
	offers, _ := p.Offers(ctx)
	for _, o := range offers {
		fmt.Println(o.ID(), o.Price)
	}
	if _, err := p.Launch(ctx, providers.LaunchRequest{IdempotencyKey: "j-1-a1", Offer: offers[1], Count: 1, JobID: "j-1", Attempt: 1}); err != nil {
		panic(err)
	}
	l := c.Launches()[0]
	fmt.Println(l.Action, l.Market, l.Zone, l.MaxPrice)
	argv, _, err := awsfake.ParseUserData(l.UserData, l.InstanceIDs[0])
	if err != nil {
		panic(err)
	}
	fmt.Println(argv)
	// Output:
	// aws/us-east-1/us-east-1a/g5.xlarge/on-demand $1.006
	// aws/us-east-1/us-east-1a/g5.xlarge/spot $0.30
	// aws/us-east-1/us-east-1b/g5.xlarge/on-demand $1.006
	// CreateFleet spot us-east-1a 1.006000
	// [/usr/local/bin/spotwise agent --nats-url nats://127.0.0.1:4222 --job j-1 --attempt 1 --instance i-0000000000abc0001 --region us-east-1 --notices aws --workload /var/lib/spotwise/workload.json]
}
