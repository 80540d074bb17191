package aws

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/catalog"
)

// Launch methods.
const (
	// LaunchFleet buys through CreateFleet of type instant, one override per
	// request, from a launch template spotwise keeps per region settings.
	LaunchFleet = "fleet"
	// LaunchRunInstances buys through RunInstances with everything inline.
	LaunchRunInstances = "run-instances"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultSpotRefresh     = "@every 10m"
	DefaultOnDemandRefresh = "@every 12h"
	DefaultUnavailableFor  = 3 * time.Minute
	DefaultAgentBinary     = "/usr/local/bin/spotwise"
)

// Config configures the AWS provider. Credentials are not part of it: they
// come from the SDK's standard chain (environment, shared profiles, SSO,
// the instance or task role).
type Config struct {
	// Regions are where spotwise prices and buys, each with its launch
	// settings. Every region must be in the bundled catalog (it is the
	// vocabulary job specs' placement rules are checked against).
	Regions []RegionConfig `json:"regions"`
	// InstanceTypes and InstanceFamilies ("p4d", "g5") narrow the GPU
	// instance types offered; both empty means every AWS GPU type of the
	// catalog.
	InstanceTypes    []string `json:"instance_types,omitempty"`
	InstanceFamilies []string `json:"instance_families,omitempty"`
	// LaunchMethod is "fleet" (CreateFleet type instant, the default) or
	// "run-instances".
	LaunchMethod string `json:"launch_method,omitempty"`
	// SQSQueueURL is the queue EventBridge delivers EC2 spot interruption
	// warnings, rebalance recommendations, state changes and AWS Health
	// scheduled changes to. Empty: only the pending-instance poll and the
	// agents' own IMDS notices report changes.
	SQSQueueURL string `json:"sqs_queue_url,omitempty"`
	// SpotRefresh and OnDemandRefresh are cron schedules (robfig/cron:
	// five fields or "@every 10m"). Spot prices are read on the first,
	// instance types, on-demand prices and reservations on the second.
	SpotRefresh     string `json:"spot_refresh,omitempty"`
	OnDemandRefresh string `json:"on_demand_refresh,omitempty"`
	// UnavailableFor is how long the scope of a capacity shortage (the
	// offer, for InsufficientInstanceCapacity) reads as having none
	// (default 3m). A filled quota keeps it out longer, a spot price above
	// the max price shorter (providers.Lasting).
	UnavailableFor Duration `json:"unavailable_for,omitzero"`
	// Reservations are On-Demand Capacity Reservations and Capacity Blocks
	// for ML sold as reserved offers.
	Reservations ReservationsConfig `json:"reservations,omitzero"`
	// Endpoints replace the SDK's endpoints (LocalStack, tests).
	Endpoints Endpoints `json:"endpoints,omitzero"`
	// Agent is how instances start `spotwise agent` from their user data.
	Agent AgentConfig `json:"agent"`
}

// RegionConfig is one region and how instances are started there.
type RegionConfig struct {
	Name string `json:"name"`
	// AMI is the image instances boot (a GPU image with the spotwise
	// binary at Agent.Binary).
	AMI string `json:"ami"`
	// Subnets maps availability zone to subnet ID. When set, only these
	// zones are offered; when empty, instances start in the default VPC
	// of the offer's zone.
	Subnets        map[string]string `json:"subnets,omitempty"`
	SecurityGroups []string          `json:"security_groups,omitempty"`
	// InstanceProfile is an IAM instance profile name or ARN (the agent
	// needs it to reach the checkpoint store).
	InstanceProfile string `json:"instance_profile,omitempty"`
	KeyName         string `json:"key_name,omitempty"`
}

// ReservationsConfig names the capacity reservations to sell.
type ReservationsConfig struct {
	// IDs are capacity reservation IDs ("cr-...") in any configured region.
	IDs []string `json:"ids,omitempty"`
	// Discover also sells every active reservation of the configured
	// instance types that DescribeCapacityReservations finds.
	Discover bool `json:"discover,omitempty"`
	// Prices are what one instance-hour of a reservation costs, by ID (a
	// Capacity Block's fee over its hours). A reservation without one is
	// billed at its instance type's on-demand price, which is what AWS
	// charges for an On-Demand Capacity Reservation, used or not.
	Prices map[string]money.Micros `json:"prices,omitempty"`
}

// Endpoints are base URLs for the SDK clients; empty keeps AWS's.
type Endpoints struct {
	EC2     string `json:"ec2,omitempty"`
	Pricing string `json:"pricing,omitempty"`
	SQS     string `json:"sqs,omitempty"`
	IMDS    string `json:"imds,omitempty"`
}

// AgentConfig is what the user data needs to start the agent. It holds
// paths and addresses only: user data is readable by anyone allowed to
// describe the instance, so secrets stay in files on the image.
type AgentConfig struct {
	// Binary is the spotwise binary on the image (default
	// /usr/local/bin/spotwise).
	Binary string `json:"binary,omitempty"`
	// NATSURL is where the agent reaches the spotwise servers.
	NATSURL string `json:"nats_url"`
	// NATSCredsFile is a NATS credentials file on the image.
	NATSCredsFile string `json:"nats_creds_file,omitempty"`
	// Checkpoints is the default checkpoint store URI (s3://...).
	Checkpoints string `json:"checkpoints,omitempty"`
}

// Duration is a time.Duration written as text in configuration ("30s",
// "5m", "12h"; a bare number is refused: seconds or hours?).
type Duration = job.Duration

// WithDefaults returns the configuration with every unset optional field
// at its default.
func (c Config) WithDefaults() Config {
	if c.LaunchMethod == "" {
		c.LaunchMethod = LaunchFleet
	}
	if c.SpotRefresh == "" {
		c.SpotRefresh = DefaultSpotRefresh
	}
	if c.OnDemandRefresh == "" {
		c.OnDemandRefresh = DefaultOnDemandRefresh
	}
	if c.UnavailableFor == 0 {
		c.UnavailableFor = Duration(DefaultUnavailableFor)
	}
	if c.Agent.Binary == "" {
		c.Agent.Binary = DefaultAgentBinary
	}
	return c
}

var (
	reInstanceType = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)
	reFamily       = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	reZoneSuffix   = regexp.MustCompile(`^([a-z]|-[a-z]+-\d[a-z])$`)
	reResourceID   = regexp.MustCompile(`^[a-z]+-[0-9a-f]{8,17}$`)
)

// Validate checks the configuration, with defaults for what is unset, and
// names every bad field: "regions[0].ami: must be an AMI ID (ami-...)".
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	cat := catalog.Default()
	if len(c.Regions) == 0 {
		bad("regions", "at least one region is required")
	}
	seen := map[string]bool{}
	for i, r := range c.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		switch {
		case r.Name == "":
			bad(f+".name", "required")
		case seen[r.Name]:
			bad(f+".name", "%q is listed twice", r.Name)
		case !cat.KnownRegion(r.Name) || cat.GeographyOf("aws", r.Name) == "":
			bad(f+".name", "%q is not an AWS region of the catalog", r.Name)
		}
		seen[r.Name] = true
		if !validID(r.AMI, "ami") {
			bad(f+".ami", "must be an AMI ID (ami-...), got %q", r.AMI)
		}
		for _, zone := range sortedKeys(r.Subnets) {
			zf := fmt.Sprintf("%s.subnets[%s]", f, zone)
			if !zoneOf(zone, r.Name) {
				bad(zf, "%q is not an availability zone of %s", zone, r.Name)
			}
			if !validID(r.Subnets[zone], "subnet") {
				bad(zf, "must be a subnet ID (subnet-...), got %q", r.Subnets[zone])
			}
		}
		for j, sg := range r.SecurityGroups {
			if !validID(sg, "sg") {
				bad(fmt.Sprintf("%s.security_groups[%d]", f, j), "must be a security group ID (sg-...), got %q", sg)
			}
		}
		if p := r.InstanceProfile; p != "" && strings.HasPrefix(p, "arn:") && !strings.Contains(p, ":instance-profile/") {
			bad(f+".instance_profile", "an ARN must name an instance profile (arn:aws:iam::<account>:instance-profile/<name>)")
		}
	}
	for i, t := range c.InstanceTypes {
		if !reInstanceType.MatchString(t) {
			bad(fmt.Sprintf("instance_types[%d]", i), "%q is not an instance type (family.size)", t)
		}
	}
	for i, fam := range c.InstanceFamilies {
		if !reFamily.MatchString(fam) {
			bad(fmt.Sprintf("instance_families[%d]", i), "%q is not an instance family (p4d, g5)", fam)
		}
	}
	if c.LaunchMethod != LaunchFleet && c.LaunchMethod != LaunchRunInstances {
		bad("launch_method", "must be %q or %q, got %q", LaunchFleet, LaunchRunInstances, c.LaunchMethod)
	}
	if c.SQSQueueURL != "" {
		if err := checkURL(c.SQSQueueURL); err != nil {
			bad("sqs_queue_url", "%v", err)
		}
	}
	for field, spec := range map[string]string{"spot_refresh": c.SpotRefresh, "on_demand_refresh": c.OnDemandRefresh} {
		if _, err := cron.ParseStandard(spec); err != nil {
			bad(field, "not a cron schedule (\"@every 10m\", \"*/10 * * * *\"): %v", err)
		}
	}
	if c.UnavailableFor.D() <= 0 {
		bad("unavailable_for", "must be positive")
	}
	for i, id := range c.Reservations.IDs {
		if !validID(id, "cr") {
			bad(fmt.Sprintf("reservations.ids[%d]", i), "must be a capacity reservation ID (cr-...), got %q", id)
		}
	}
	for field, u := range map[string]string{"endpoints.ec2": c.Endpoints.EC2, "endpoints.pricing": c.Endpoints.Pricing,
		"endpoints.sqs": c.Endpoints.SQS, "endpoints.imds": c.Endpoints.IMDS} {
		if u == "" {
			continue
		}
		if err := checkURL(u); err != nil {
			bad(field, "%v", err)
		}
	}
	if !path.IsAbs(c.Agent.Binary) {
		bad("agent.binary", "must be an absolute path on the image, got %q", c.Agent.Binary)
	}
	if c.Agent.NATSURL == "" {
		bad("agent.nats_url", "required: the agent reports to the servers over NATS")
	} else if u, err := url.Parse(strings.Split(c.Agent.NATSURL, ",")[0]); err != nil || u.Host == "" || u.User != nil {
		bad("agent.nats_url", "must be a NATS URL (nats://host:4222) without credentials")
	}
	if f := c.Agent.NATSCredsFile; f != "" && !path.IsAbs(f) {
		bad("agent.nats_creds_file", "must be an absolute path on the image, got %q", f)
	}
	if s := c.Agent.Checkpoints; s != "" {
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			bad("agent.checkpoints", "must be a store URI (s3://bucket/prefix), got %q", s)
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// zoneOf reports whether zone is an availability zone (us-east-1a) or a
// Local Zone (us-east-1-bos-1a) of region.
func zoneOf(zone, region string) bool {
	rest, ok := strings.CutPrefix(zone, region)
	return ok && reZoneSuffix.MatchString(rest)
}

func validID(id, prefix string) bool {
	return strings.HasPrefix(id, prefix+"-") && reResourceID.MatchString(id)
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

// typeFilter reports whether an instance type is one the configuration
// wants; with no filter, every catalog GPU type is wanted.
func (c Config) typeFilter(cat *catalog.Catalog) func(string) bool {
	if len(c.InstanceTypes) == 0 && len(c.InstanceFamilies) == 0 {
		return func(t string) bool {
			_, ok := cat.InstanceType("aws", t)
			return ok
		}
	}
	return func(t string) bool {
		fam, _, _ := strings.Cut(t, ".")
		return slices.Contains(c.InstanceTypes, t) || slices.Contains(c.InstanceFamilies, fam)
	}
}

// typePatterns are the instance-type filter values for EC2 describe calls
// (exact names and "family.*" wildcards).
func (c Config) typePatterns(cat *catalog.Catalog) []string {
	if len(c.InstanceTypes) == 0 && len(c.InstanceFamilies) == 0 {
		var out []string
		for _, it := range cat.InstanceTypes() {
			if it.Provider == "aws" {
				out = append(out, it.Name)
			}
		}
		return out
	}
	out := slices.Clone(c.InstanceTypes)
	for _, f := range c.InstanceFamilies {
		out = append(out, f+".*")
	}
	return out
}

func (c Config) region(name string) (RegionConfig, bool) {
	for _, r := range c.Regions {
		if r.Name == name {
			return r, true
		}
	}
	return RegionConfig{}, false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
