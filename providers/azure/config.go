package azure

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/robfig/cron/v3"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// Name is the provider's name in offers, instances and job specs.
const Name = "azure"

// Defaults.
const (
	DefaultPricesRefresh = "@every 12h"
	DefaultPollInterval  = 30 * time.Second
	DefaultCapacityTTL   = 5 * time.Minute
	DefaultLaunchLatency = 3 * time.Minute
	DefaultARMEndpoint   = "https://management.azure.com"
	DefaultRetailPrices  = "https://prices.azure.com/api/retail/prices"
	DefaultIMDSEndpoint  = "http://169.254.169.254"
	DefaultAgentBinary   = "/usr/local/bin/spotwise"
	DefaultAgentWorkDir  = "/var/lib/spotwise/work"
	DefaultOSDiskType    = "Premium_LRS"
)

// Spot eviction policies.
const (
	EvictDelete     = "Delete"
	EvictDeallocate = "Deallocate"
)

// Config is one Azure subscription and resource group spotwise buys GPU
// VMs in. It is read from the server's config file (YAML or JSON, snake
// case keys); credentials are not part of it: they come from
// azidentity's DefaultAzureCredential (environment, workload or managed
// identity, Azure CLI).
type Config struct {
	SubscriptionID string `json:"subscription_id"`
	// ResourceGroup holds every VM spotwise creates, in any region.
	ResourceGroup string `json:"resource_group"`
	// Regions are Azure region names as in the catalog (eastus,
	// westeurope, ...).
	Regions []string `json:"regions"`
	// VMSizes limits the sizes offered (default: every GPU size the
	// catalog has for Azure; a size must be in the catalog, which holds
	// its GPU facts).
	VMSizes []string `json:"vm_sizes,omitempty"`
	// Zones lists the availability zone numbers ("1", "2", "3") used per
	// region (default: the catalog's zones of the region).
	Zones map[string][]string `json:"zones,omitempty"`
	// SubnetID is the full resource ID of the subnet new VMs join.
	// Subnets are regional: with several regions, give Subnets per region
	// (SubnetID then serves the regions Subnets does not list).
	SubnetID string            `json:"subnet_id,omitempty"`
	Subnets  map[string]string `json:"subnets,omitempty"`
	Image    Image             `json:"image"`
	// AdminUsername and SSHPublicKey make the VM's login; passwords are
	// disabled.
	AdminUsername string `json:"admin_username"`
	SSHPublicKey  string `json:"ssh_public_key"`
	// OSDiskType is the managed disk SKU of the OS disk (default
	// Premium_LRS); OSDiskSizeGB its size (default: the image's).
	OSDiskType   string `json:"os_disk_type,omitempty"`
	OSDiskSizeGB int32  `json:"os_disk_size_gb,omitempty"`
	// UserAssignedIdentity is the resource ID of a managed identity given
	// to every VM, e.g. for the agent's checkpoint uploads to Blob storage.
	UserAssignedIdentity string `json:"user_assigned_identity,omitempty"`
	// SpotEvictionPolicy is Delete (default) or Deallocate.
	SpotEvictionPolicy string `json:"spot_eviction_policy,omitempty"`
	// Reservations are reserved VM instances the team holds; each becomes
	// a reserved offer in every zone of its region.
	Reservations []Reservation `json:"reservations,omitempty"`
	// PricesRefresh is when prices are read again, a cron schedule
	// (robfig/cron: five fields or a descriptor; default "@every 12h").
	PricesRefresh string `json:"prices_refresh,omitempty"`
	// PollInterval is how often Watch reads the VMs' state (default 30s).
	PollInterval Duration `json:"poll_interval,omitempty"`
	// CapacityTTL is how long the scope of a capacity shortage (the offer
	// for ZonalAllocationFailed, the size for AllocationFailed) shows no
	// capacity (default 5m). Quotas keep it out longer, SkuNotAvailable
	// longer still, a Spot price above the max price shorter
	// (providers.Lasting).
	CapacityTTL Duration `json:"capacity_ttl,omitempty"`
	// LaunchLatency is the offers' typical time from launch to running
	// (default 3m).
	LaunchLatency Duration       `json:"launch_latency,omitempty"`
	Endpoints     Endpoints      `json:"endpoints,omitempty"`
	Agent         AgentBootstrap `json:"agent"`
}

// Image is the OS image of new VMs: a marketplace image (publisher, offer,
// SKU, version) or an image resource ID (managed image, gallery image
// version, /CommunityGalleries/... or /SharedGalleries/...). It must have
// the GPU driver and the spotwise binary.
type Image struct {
	Publisher string `json:"publisher,omitempty"`
	Offer     string `json:"offer,omitempty"`
	SKU       string `json:"sku,omitempty"`
	Version   string `json:"version,omitempty"`
	ID        string `json:"id,omitempty"`
}

// Reservation is reserved capacity the team has bought: Count instances of
// VMSize in Region for a term ("1y" or "3y").
type Reservation struct {
	Region string `json:"region"`
	VMSize string `json:"vm_size"`
	Term   string `json:"term"`
	Count  int    `json:"count"`
}

// Endpoints are the base URLs the provider talks to; tests point them at
// local servers.
type Endpoints struct {
	ARM          string `json:"arm,omitempty"`
	RetailPrices string `json:"retail_prices,omitempty"`
	// IMDS is the instance metadata service the agent's Scheduled Events
	// poller reads (agent/notices' WithAzureEndpoint).
	IMDS string `json:"imds,omitempty"`
}

// AgentBootstrap is what the VM's custom data needs to start the agent.
// Custom data is readable by anything on the VM and is kept in the VM's
// model: it names files on the image, never secrets.
type AgentBootstrap struct {
	// Binary is the spotwise binary on the image (default
	// /usr/local/bin/spotwise).
	Binary  string `json:"binary,omitempty"`
	NATSURL string `json:"nats_url"`
	// NATSCredsFile is the path of a NATS credentials file on the image
	// (baked in, or written by an extension from Key Vault).
	NATSCredsFile string `json:"nats_creds_file,omitempty"`
	// Checkpoints is the checkpoint store URI for jobs that name none.
	Checkpoints string `json:"checkpoints,omitempty"`
	// WorkDir is where the agent keeps the checkpoint directory and the
	// progress file (default /var/lib/spotwise/work).
	WorkDir string `json:"work_dir,omitempty"`
}

// Duration is a time.Duration written as text in configuration ("30s",
// "5m", "12h"; a bare number is refused: seconds or hours?).
type Duration = job.Duration

// FieldError names one bad configuration field.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return "azure." + e.Field + ": " + e.Problem }

// IsConfigError reports whether err, or an error it wraps, is a
// *FieldError.
func IsConfigError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}

var (
	guidRE     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	rgRE       = regexp.MustCompile(`^[-\w._()]{1,90}$`)
	userRE     = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,63}$`)
	zoneRE     = regexp.MustCompile(`^[1-9]$`)
	reservedOS = []string{"admin", "administrator", "root", "user", "guest", "test", "sys", "adm", "support"}
)

// withDefaults returns the config with every default filled in.
func (c Config) withDefaults(cat *catalog.Catalog) Config {
	if len(c.VMSizes) == 0 {
		for _, it := range cat.InstanceTypes() {
			if it.Provider == Name {
				c.VMSizes = append(c.VMSizes, it.Name)
			}
		}
	}
	c.SpotEvictionPolicy = cmpOr(c.SpotEvictionPolicy, EvictDelete)
	c.PricesRefresh = cmpOr(c.PricesRefresh, DefaultPricesRefresh)
	c.OSDiskType = cmpOr(c.OSDiskType, DefaultOSDiskType)
	c.PollInterval = cmpOr(c.PollInterval, Duration(DefaultPollInterval))
	c.CapacityTTL = cmpOr(c.CapacityTTL, Duration(DefaultCapacityTTL))
	c.LaunchLatency = cmpOr(c.LaunchLatency, Duration(DefaultLaunchLatency))
	c.Endpoints.ARM = strings.TrimRight(cmpOr(c.Endpoints.ARM, DefaultARMEndpoint), "/")
	c.Endpoints.RetailPrices = cmpOr(c.Endpoints.RetailPrices, DefaultRetailPrices)
	c.Endpoints.IMDS = strings.TrimRight(cmpOr(c.Endpoints.IMDS, DefaultIMDSEndpoint), "/")
	c.Agent.Binary = cmpOr(c.Agent.Binary, DefaultAgentBinary)
	c.Agent.WorkDir = cmpOr(c.Agent.WorkDir, DefaultAgentWorkDir)
	return c
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Validate checks every field against the bundled catalog and reports every
// problem, each naming its field ("azure.regions[1]: ..."). Secrets are
// never echoed.
func (c Config) Validate() error { return c.validate(catalog.Default()) }

func (c Config) validate(cat *catalog.Catalog) error {
	c = c.withDefaults(cat)
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if !guidRE.MatchString(c.SubscriptionID) {
		bad("subscription_id", "must be a subscription GUID")
	}
	if !rgRE.MatchString(c.ResourceGroup) || strings.HasSuffix(c.ResourceGroup, ".") {
		bad("resource_group", "must be a resource group name (1-90 letters, digits, '-', '_', '.', '(', ')')")
	}
	if len(c.Regions) == 0 {
		bad("regions", "at least one region is required")
	}
	for i, r := range c.Regions {
		if _, ok := cat.Region(Name, r); !ok {
			bad(fmt.Sprintf("regions[%d]", i), "%q is not an Azure region in the catalog", r)
		} else if slices.Index(c.Regions, r) != i {
			bad(fmt.Sprintf("regions[%d]", i), "%q is listed twice", r)
		}
	}
	for i, s := range c.VMSizes {
		if _, ok := cat.InstanceType(Name, s); !ok {
			bad(fmt.Sprintf("vm_sizes[%d]", i), "%q is not an Azure GPU size in the catalog (names are case-sensitive, e.g. Standard_NC24ads_A100_v4)", s)
		}
	}
	for r, zs := range c.Zones {
		if !slices.Contains(c.Regions, r) {
			bad("zones."+r, "is not one of the regions")
		}
		if len(zs) == 0 {
			bad("zones."+r, "lists no zones")
		}
		for i, z := range zs {
			if !zoneRE.MatchString(z) {
				bad(fmt.Sprintf("zones.%s[%d]", r, i), "%q: want a zone number such as \"1\"", z)
			}
		}
	}
	c.validateNetwork(bad)
	c.validateImage(bad)
	if !userRE.MatchString(c.AdminUsername) || slices.Contains(reservedOS, c.AdminUsername) {
		bad("admin_username", "must be a Linux user name (lower case, at most 64 characters) and not a reserved one such as admin or root")
	}
	if !validSSHKey(c.SSHPublicKey) {
		bad("ssh_public_key", "must be an OpenSSH public key (ssh-rsa, ssh-ed25519 or ecdsa-sha2-*)")
	}
	if c.UserAssignedIdentity != "" {
		if id, err := arm.ParseResourceID(c.UserAssignedIdentity); err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.ManagedIdentity/userAssignedIdentities") {
			bad("user_assigned_identity", "must be the resource ID of a user-assigned managed identity")
		}
	}
	if !slices.Contains(armcompute.PossibleStorageAccountTypesValues(), armcompute.StorageAccountTypes(c.OSDiskType)) {
		bad("os_disk_type", "%q is not a managed disk type (Premium_LRS, StandardSSD_LRS, ...)", c.OSDiskType)
	}
	if c.OSDiskSizeGB < 0 || c.OSDiskSizeGB > 4095 {
		bad("os_disk_size_gb", "must be between 0 (the image's size) and 4095")
	}
	if c.SpotEvictionPolicy != EvictDelete && c.SpotEvictionPolicy != EvictDeallocate {
		bad("spot_eviction_policy", "%q: want Delete or Deallocate", c.SpotEvictionPolicy)
	}
	for i, r := range c.Reservations {
		f := fmt.Sprintf("reservations[%d]", i)
		if !slices.Contains(c.Regions, r.Region) {
			bad(f+".region", "%q is not one of the regions", r.Region)
		}
		if !slices.Contains(c.VMSizes, r.VMSize) {
			bad(f+".vm_size", "%q is not one of the VM sizes", r.VMSize)
		}
		if _, err := providers.ParseTerm(r.Term); err != nil {
			bad(f+".term", "%q: want 1y or 3y", r.Term)
		}
		if r.Count < 1 {
			bad(f+".count", "must be at least 1")
		}
		if slices.IndexFunc(c.Reservations[:i], func(o Reservation) bool { return o.Region == r.Region && o.VMSize == r.VMSize }) >= 0 {
			bad(f, "%s in %s is listed twice: give one entry with the total count", r.VMSize, r.Region)
		}
	}
	if _, err := cron.ParseStandard(c.PricesRefresh); err != nil {
		bad("prices_refresh", "%q is not a cron schedule: %v", c.PricesRefresh, err)
	}
	if c.PollInterval.D() < time.Second {
		bad("poll_interval", "must be at least 1s")
	}
	if c.CapacityTTL.D() < 0 {
		bad("capacity_ttl", "must not be negative")
	}
	if c.LaunchLatency.D() < 0 {
		bad("launch_latency", "must not be negative")
	}
	for f, u := range map[string]string{"endpoints.arm": c.Endpoints.ARM, "endpoints.retail_prices": c.Endpoints.RetailPrices, "endpoints.imds": c.Endpoints.IMDS} {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			bad(f, "%q is not an http(s) URL", u)
		}
	}
	c.validateAgent(bad)
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

func (c Config) validateNetwork(bad func(field, format string, args ...any)) {
	check := func(field, id string) {
		rid, err := arm.ParseResourceID(id)
		if err != nil || !strings.EqualFold(rid.ResourceType.String(), "Microsoft.Network/virtualNetworks/subnets") {
			bad(field, "must be a subnet's full resource ID (/subscriptions/.../resourceGroups/.../providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>)")
		}
	}
	if c.SubnetID != "" {
		check("subnet_id", c.SubnetID)
	}
	for r, id := range c.Subnets {
		if !slices.Contains(c.Regions, r) {
			bad("subnets."+r, "is not one of the regions")
		}
		check("subnets."+r, id)
	}
	for _, r := range c.Regions {
		if c.Subnets[r] == "" && c.SubnetID == "" {
			bad("subnet_id", "region %s has no subnet: set subnet_id, or subnets.%s", r, r)
		}
	}
}

func (c Config) validateImage(bad func(field, format string, args ...any)) {
	im := c.Image
	market := im.Publisher != "" || im.Offer != "" || im.SKU != "" || im.Version != ""
	switch {
	case im.ID != "" && market:
		bad("image", "give either id or publisher/offer/sku/version, not both")
	case im.ID != "":
		if !strings.HasPrefix(im.ID, "/subscriptions/") && !strings.HasPrefix(im.ID, "/CommunityGalleries/") && !strings.HasPrefix(im.ID, "/SharedGalleries/") {
			bad("image.id", "must be an image resource ID (/subscriptions/..., /CommunityGalleries/... or /SharedGalleries/...)")
		}
	case im.Publisher == "" || im.Offer == "" || im.SKU == "":
		bad("image", "publisher, offer and sku are required (version defaults to latest), or an id")
	}
}

func (c Config) validateAgent(bad func(field, format string, args ...any)) {
	a := c.Agent
	if !path.IsAbs(a.Binary) {
		bad("agent.binary", "must be an absolute path on the image")
	}
	if !path.IsAbs(a.WorkDir) {
		bad("agent.work_dir", "must be an absolute path on the image")
	}
	if u, err := url.Parse(a.NATSURL); err != nil || u.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme) {
		bad("agent.nats_url", "must be a NATS URL reachable from the VMs (nats://host:4222, tls://...)")
	} else if u.User != nil {
		bad("agent.nats_url", "must not carry credentials: custom data is not secret; use nats_creds_file")
	}
	if a.NATSCredsFile != "" {
		switch {
		case strings.Contains(a.NATSCredsFile, "-----BEGIN") || strings.ContainsAny(a.NATSCredsFile, "\n\r"):
			bad("agent.nats_creds_file", "must be the path of the credentials file on the image, not the credentials")
		case !path.IsAbs(a.NATSCredsFile):
			bad("agent.nats_creds_file", "must be an absolute path on the image")
		}
	}
	for f, s := range map[string]string{"agent.checkpoints": a.Checkpoints, "agent.binary": a.Binary, "agent.work_dir": a.WorkDir} {
		if strings.ContainsRune(s, 0) {
			bad(f, "must not contain NUL")
		}
	}
}

// validSSHKey reports whether s is an OpenSSH public key line of a type
// Azure accepts: "<type> <base64 blob> [comment]", the blob starting with
// its own type name.
func validSSHKey(s string) bool {
	f := strings.Fields(s)
	if len(f) < 2 || !slices.Contains([]string{"ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"}, f[0]) {
		return false
	}
	blob, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil || len(blob) < 4 {
		return false
	}
	n := binary.BigEndian.Uint32(blob)
	return uint64(n) <= uint64(len(blob)-4) && string(blob[4:4+n]) == f[0]
}

// zones returns the catalog-style zone names ("eastus-1") offered in a
// region.
func (c Config) zones(cat *catalog.Catalog, region string) []string {
	if zs, ok := c.Zones[region]; ok {
		out := make([]string, len(zs))
		for i, z := range zs {
			out[i] = region + "-" + z
		}
		return out
	}
	r, _ := cat.Region(Name, region)
	return r.Zones
}

// subnet returns the subnet for VMs in region.
func (c Config) subnet(region string) string { return cmpOr(c.Subnets[region], c.SubnetID) }
