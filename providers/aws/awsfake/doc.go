// Package awsfake is a fake AWS account for tests: EC2, the Price List API
// and one SQS queue on loopback HTTP servers that speak each service's wire
// format to the real aws-sdk-go-v2 clients (EC2 Query with XML answers,
// awsJson1_1 GetProducts, SQS AWS JSON 1.0), and an IMDSv2 server per
// simulated instance. It lets tests of the AWS provider, and end-to-end
// tests of the whole daemon, buy capacity, watch it boot, interrupt it and
// read back what was bought, without an account or a network.
//
// Seeding "g5.xlarge in us-east-1a and us-east-1b at 1.006 on demand and
// 0.30 spot" takes three lines:
//
//	c := awsfake.Start()
//	defer c.Close()
//	c.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
//	c.SetOnDemandPrice("us-east-1", "g5.xlarge", "1.006")
//	c.SetSpotPrice("us-east-1a", "g5.xlarge", "0.30", time.Now())
//
// and the provider is pointed at it with endpoints {ec2: c.EC2URL(),
// pricing: c.PricingURL(), sqs: c.SQSURL()} and sqs_queue_url c.QueueURL().
// One EC2 endpoint serves every region: a request's region is read from
// its SigV4 signature, as AWS routes it by host.
//
// What it does like AWS: client tokens (a retried launch returns the first
// call's instances and buys nothing), tag filters, paging, the spot price
// history's StartTime (the price in effect at the start is included), spot
// max prices below the market, capacity reservations that fill up,
// instances that boot (pending, then running) and shut down by themselves,
// and optionally the EventBridge state-change notifications on the queue.
// What it does not: security groups, networking, volumes, IAM, quotas;
// their refusals are made to order (FailLaunches, with EC2's own status
// and message from LaunchFault, sent the way EC2 sends each code: an error
// response, or an instant fleet's Errors entry).
//
// Every exported method is safe for concurrent use.
package awsfake
