package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// exampleYAML is the configuration documented in the package's README
// section of the server configuration.
const exampleYAML = `
regions:
  - name: us-east-1
    ami: ami-0abcdef1234567890
    subnets:
      us-east-1a: subnet-0a1a2b3c4d5e6f701
      us-east-1b: subnet-0b1a2b3c4d5e6f702
    security_groups: [sg-0123456789abcdef0]
    instance_profile: spotwise-node
    key_name: ops
  - name: eu-west-1
    ami: ami-0fedcba9876543210
    instance_profile: arn:aws:iam::123456789012:instance-profile/spotwise-node
instance_families: [p4d, p5, g6e]
instance_types: [p3.2xlarge]
launch_method: fleet
sqs_queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/spotwise-interruptions
spot_refresh: "@every 10m"
on_demand_refresh: "0 */12 * * *"
unavailable_for: 5m
reservations:
  ids: [cr-0123456789abcdef0]
  discover: true
agent:
  binary: /usr/local/bin/spotwise
  nats_url: nats://nats.internal:4222
  nats_creds_file: /etc/spotwise/agent.creds
  checkpoints: s3://my-checkpoints/spotwise
`

func TestConfigExample(t *testing.T) {
	var c Config
	if err := yaml.UnmarshalStrict([]byte(exampleYAML), &c); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("the example is invalid: %v", err)
	}
	if c.UnavailableFor.D() != 5*time.Minute || c.Regions[0].Subnets["us-east-1b"] != "subnet-0b1a2b3c4d5e6f702" ||
		!c.Reservations.Discover || c.Agent.NATSCredsFile != "/etc/spotwise/agent.creds" {
		t.Errorf("parsed %+v", c)
	}
	want := map[string]bool{"p4d.24xlarge": true, "p5.48xlarge": true, "g6e.xlarge": true, "p3.2xlarge": true,
		"p3.8xlarge": false, "g5.xlarge": false}
	wanted := c.typeFilter(nil)
	for typ, w := range want {
		if wanted(typ) != w {
			t.Errorf("wanted(%s) = %v", typ, !w)
		}
	}
	// Defaults.
	d := Config{Regions: c.Regions[:1], Agent: AgentConfig{NATSURL: "nats://n:4222"}}.WithDefaults()
	if d.LaunchMethod != LaunchFleet || d.SpotRefresh != "@every 10m" || d.OnDemandRefresh != "@every 12h" ||
		d.Agent.Binary != "/usr/local/bin/spotwise" || d.UnavailableFor.D() != 3*time.Minute {
		t.Errorf("defaults: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	cloud := awsfake.Start()
	t.Cleanup(cloud.Close)
	good := func() Config { return testConfig(cloud).WithDefaults() }
	tests := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"no region", func(c *Config) { c.Regions = nil }, "regions:"},
		{"unknown region", func(c *Config) { c.Regions[0].Name = "us-gov-west-1" }, "regions[0].name:"},
		{"an Azure region", func(c *Config) { c.Regions[0].Name = "eastus" }, "regions[0].name:"},
		{"region twice", func(c *Config) { c.Regions = append(c.Regions, c.Regions[0]) }, "regions[1].name:"},
		{"no AMI", func(c *Config) { c.Regions[0].AMI = "" }, "regions[0].ami:"},
		{"zone of another region", func(c *Config) { c.Regions[0].Subnets["us-west-2a"] = "subnet-0a1a2b3c4d5e6f701" }, "regions[0].subnets[us-west-2a]:"},
		{"not a subnet", func(c *Config) { c.Regions[0].Subnets["us-east-1a"] = "sg-0123456789abcdef0" }, "regions[0].subnets[us-east-1a]:"},
		{"not a security group", func(c *Config) { c.Regions[0].SecurityGroups = []string{"default"} }, "regions[0].security_groups[0]:"},
		{"a role ARN as profile", func(c *Config) { c.Regions[0].InstanceProfile = "arn:aws:iam::123456789012:role/x" }, "regions[0].instance_profile:"},
		{"bad type", func(c *Config) { c.InstanceTypes = []string{"P3 2xlarge"} }, "instance_types[0]:"},
		{"bad family", func(c *Config) { c.InstanceFamilies = []string{"p4d.24xlarge"} }, "instance_families[0]:"},
		{"launch method", func(c *Config) { c.LaunchMethod = "spot-fleet" }, "launch_method:"},
		{"queue URL", func(c *Config) { c.SQSQueueURL = "spotwise-interruptions" }, "sqs_queue_url:"},
		{"spot schedule", func(c *Config) { c.SpotRefresh = "every ten minutes" }, "spot_refresh:"},
		{"on-demand schedule", func(c *Config) { c.OnDemandRefresh = "* * *" }, "on_demand_refresh:"},
		{"TTL", func(c *Config) { c.UnavailableFor = Duration(-time.Second) }, "unavailable_for:"},
		{"reservation ID", func(c *Config) { c.Reservations.IDs = []string{"cb-123"} }, "reservations.ids[0]:"},
		{"endpoint", func(c *Config) { c.Endpoints.EC2 = "localhost:4566" }, "endpoints.ec2:"},
		{"relative binary", func(c *Config) { c.Agent.Binary = "spotwise" }, "agent.binary:"},
		{"no NATS URL", func(c *Config) { c.Agent.NATSURL = "" }, "agent.nats_url:"},
		{"credentials in the NATS URL", func(c *Config) { c.Agent.NATSURL = "nats://user:secret@nats:4222" }, "agent.nats_url:"},
		{"relative creds file", func(c *Config) { c.Agent.NATSCredsFile = "agent.creds" }, "agent.nats_creds_file:"},
		{"checkpoint store", func(c *Config) { c.Agent.Checkpoints = "my-bucket" }, "agent.checkpoints:"},
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("the test configuration is invalid: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			c.Regions[0].Subnets = map[string]string{"us-east-1a": "subnet-0a1a2b3c4d5e6f701"}
			tt.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "secret@") {
				t.Errorf("error repeats the credentials: %v", err)
			}
		})
	}
	// New refuses an invalid configuration and names every problem.
	c := good()
	c.Regions[0].AMI, c.Agent.NATSURL = "", ""
	_, err := New(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "regions[0].ami") || !strings.Contains(err.Error(), "agent.nats_url") {
		t.Errorf("New: %v", err)
	}
}

func TestQueueRegion(t *testing.T) {
	for url, want := range map[string]string{
		"https://sqs.eu-west-1.amazonaws.com/123456789012/q": "eu-west-1",
		"http://localhost:4566/000000000000/q":               "us-east-1",
	} {
		if got := queueRegion(url, "us-east-1"); got != want {
			t.Errorf("queueRegion(%s) = %s", url, got)
		}
	}
}
