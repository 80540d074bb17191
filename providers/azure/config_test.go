package azure

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers/azure/azurefake"
	"sigs.k8s.io/yaml"
)

// exampleYAML is the provider's block of the server config, as documented.
const exampleYAML = `
subscription_id: 00000000-0000-0000-0000-000000000001
resource_group: spotwise-gpu
regions: [eastus, westus2]
vm_sizes: [Standard_NC24ads_A100_v4, Standard_ND96asr_v4]
zones:
  eastus: ["1", "2"]
subnets:
  eastus: /subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/gpu-eastus/subnets/jobs
  westus2: /subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/gpu-westus2/subnets/jobs
image:
  publisher: microsoft-dsvm
  offer: ubuntu-hpc
  sku: "2204"
  version: latest
admin_username: spotwise
ssh_public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywt ops@example
user_assigned_identity: /subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/ops/providers/Microsoft.ManagedIdentity/userAssignedIdentities/spotwise-agent
spot_eviction_policy: Delete
reservations:
  - {region: eastus, vm_size: Standard_ND96asr_v4, term: 1y, count: 2}
prices_refresh: "@every 12h"
poll_interval: 30s
capacity_ttl: 5m
agent:
  binary: /usr/local/bin/spotwise
  nats_url: tls://nats.internal.example:4222
  nats_creds_file: /etc/spotwise/agent.creds
  checkpoints: azblob://spotwiseckpt/checkpoints
`

func TestConfigExample(t *testing.T) {
	var c Config
	if err := yaml.UnmarshalStrict([]byte(exampleYAML), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the documented example is invalid: %v", err)
	}
	if c.PollInterval.D() != 30*time.Second || c.Reservations[0].Count != 2 || c.Zones["eastus"][1] != "2" {
		t.Fatalf("decoded %+v", c)
	}
	fake := azurefake.New()
	defer fake.Close()
	p, err := New(context.Background(), c, WithCredential(fake.Credential()))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.cfg.zones(p.cat, "eastus"); len(got) != 2 || got[0] != "eastus-1" {
		t.Errorf("zones %v", got)
	}
	if got := p.cfg.zones(p.cat, "westus2"); len(got) != 3 {
		t.Errorf("westus2 zones %v, want the catalog's three", got)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		field string
		bad   func(*Config)
	}{
		{"subscription_id", func(c *Config) { c.SubscriptionID = "my-sub" }},
		{"resource_group", func(c *Config) { c.ResourceGroup = "" }},
		{"regions", func(c *Config) { c.Regions = nil }},
		{"regions[1]", func(c *Config) { c.Regions = []string{"eastus", "us-east-1"} }},
		{"vm_sizes[0]", func(c *Config) { c.VMSizes = []string{"Standard_D4s_v5"} }},
		{"zones.eastus[0]", func(c *Config) { c.Zones = map[string][]string{"eastus": {"eastus-1"}} }},
		{"subnet_id", func(c *Config) { c.SubnetID = "subnet-123" }},
		{"subnet_id", func(c *Config) { c.SubnetID, c.Subnets = "", nil }},
		{"subnets.japaneast", func(c *Config) { c.Subnets["japaneast"] = c.SubnetID }},
		{"image", func(c *Config) { c.Image = Image{} }},
		{"image.id", func(c *Config) { c.Image = Image{ID: "ubuntu"} }},
		{"admin_username", func(c *Config) { c.AdminUsername = "root" }},
		{"ssh_public_key", func(c *Config) { c.SSHPublicKey = "hunter2" }},
		{"os_disk_type", func(c *Config) { c.OSDiskType = "Gold" }},
		{"spot_eviction_policy", func(c *Config) { c.SpotEvictionPolicy = "Stop" }},
		{"reservations[0].term", func(c *Config) { c.Reservations[0].Term = "2y" }},
		{"reservations[0].vm_size", func(c *Config) { c.Reservations[0].VMSize = "Standard_NC4as_T4_v3" }},
		{"reservations[1]", func(c *Config) { c.Reservations = append(c.Reservations, c.Reservations[0]) }},
		{"prices_refresh", func(c *Config) { c.PricesRefresh = "every day" }},
		{"poll_interval", func(c *Config) { c.PollInterval = Duration(time.Millisecond) }},
		{"endpoints.arm", func(c *Config) { c.Endpoints.ARM = "ftp://x" }},
		{"agent.nats_url", func(c *Config) { c.Agent.NATSURL = "" }},
		{"agent.nats_url", func(c *Config) { c.Agent.NATSURL = "nats://user:secret@nats:4222" }},
		{"agent.nats_creds_file", func(c *Config) { c.Agent.NATSCredsFile = "-----BEGIN NATS USER JWT-----\neyJ..." }},
		{"agent.binary", func(c *Config) { c.Agent.Binary = "spotwise" }},
		{"user_assigned_identity", func(c *Config) { c.UserAssignedIdentity = "spotwise" }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			c := testConfig("https://prices.azure.com/api/retail/prices")
			c.Subnets = map[string]string{"westus2": c.Subnets["westus2"]}
			tt.bad(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !IsConfigError(err) || !strings.Contains(err.Error(), "azure."+tt.field+":") {
				t.Fatalf("error %q does not name azure.%s", err, tt.field)
			}
			if strings.Contains(err.Error(), "secret@") || strings.Contains(err.Error(), "eyJ") {
				t.Fatalf("error echoes a secret: %v", err)
			}
		})
	}
	if err := testConfig("https://prices.azure.com/api/retail/prices").Validate(); err != nil {
		t.Fatalf("the test config is invalid: %v", err)
	}
}
