package aws

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// EC2API is the part of the EC2 client the provider uses, one client per
// region.
type EC2API interface {
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// PricingAPI is the part of the Price List client the provider uses.
type PricingAPI interface {
	GetProducts(ctx context.Context, in *pricing.GetProductsInput, optFns ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// SQSAPI is the part of the SQS client the interruption consumer uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// pricingRegion is where the Price List API answers for every region.
const pricingRegion = "us-east-1"

// Retry bounds: throttling (RequestLimitExceeded, Throttling, 503) and
// transient errors are retried by the SDK's standard retryer, at most
// this many attempts per call with jittered exponential backoff.
const (
	defaultMaxAttempts = 5
	defaultMaxBackoff  = 20 * time.Second
)

// newRetryer is the retryer every client gets. Launch errors with a known
// outcome (launchCodes) are never retried, although EC2 sends some
// (InsufficientInstanceCapacity) as server errors: the scheduler tries
// another offer instead.
func newRetryer(attempts int, backoff time.Duration) func() awssdk.Retryer {
	return func() awssdk.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.MaxBackoff = backoff
			o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) awssdk.Ternary {
				if knownLaunchCode(errorCode(err)) {
					return awssdk.FalseTernary
				}
				return awssdk.UnknownTernary
			})}, o.Retryables...)
		})
	}
}

// loadAWSConfig resolves credentials and settings through the SDK's
// standard chain. The SDK's own request logging stays off: it would
// print session tokens.
func loadAWSConfig(ctx context.Context, region string, o *options) (awssdk.Config, error) {
	if o.awsConfig != nil {
		c := o.awsConfig.Copy()
		c.Retryer = newRetryer(o.maxAttempts, o.maxBackoff)
		c.ClientLogMode = 0
		return c, nil
	}
	c, err := config.LoadDefaultConfig(ctx, config.WithRegion(region),
		config.WithRetryer(newRetryer(o.maxAttempts, o.maxBackoff)), config.WithClientLogMode(0))
	if err != nil {
		return awssdk.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return c, nil
}

func newEC2(c awssdk.Config, region, endpoint string) EC2API {
	return ec2.NewFromConfig(c, func(o *ec2.Options) {
		o.Region = region
		if endpoint != "" {
			o.BaseEndpoint = awssdk.String(endpoint)
		}
	})
}

func newPricing(c awssdk.Config, endpoint string) PricingAPI {
	return pricing.NewFromConfig(c, func(o *pricing.Options) {
		o.Region = pricingRegion
		if endpoint != "" {
			o.BaseEndpoint = awssdk.String(endpoint)
		}
	})
}

func newSQS(c awssdk.Config, region, endpoint string) SQSAPI {
	return sqs.NewFromConfig(c, func(o *sqs.Options) {
		o.Region = region
		if endpoint != "" {
			o.BaseEndpoint = awssdk.String(endpoint)
		}
	})
}

// queueRegion reads the region from a queue URL
// (https://sqs.us-east-1.amazonaws.com/123456789012/name); other hosts
// (LocalStack) give fallback.
func queueRegion(queueURL, fallback string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return fallback
	}
	parts := strings.Split(u.Hostname(), ".")
	if len(parts) >= 4 && parts[0] == "sqs" && parts[2] == "amazonaws" {
		return parts[1]
	}
	return fallback
}
