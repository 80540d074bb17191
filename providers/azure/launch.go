package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// maxNodes bounds one launch; a bigger count is a bug upstream, not a job.
const maxNodes = 100

// Launch starts req.Count VMs of the offer, one per node, named from the
// idempotency key (vmName) so that a retry, even from a restarted process,
// finds them: a VM that exists with the key's tag is returned and nothing
// is bought. Creation is started (BeginCreateOrUpdate, create-only) and not
// awaited: the instances are pending, and Instances and Watch report them
// running, or failed, as Azure finishes. Azure's refusal is read by
// launchCodes: a lack of capacity or quota is a
// *providers.InsufficientCapacityError, and its scope shows no capacity
// for its For; a refusal that retrying will not change is a
// *providers.LaunchRefusedError; either way the VMs this call created for
// the other nodes are deleted. After any other error, a retry with the
// same key completes the launch. A creation that fails later is read the
// same way (its instance fails, a capacity error marks its scope).
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	offerID := req.Offer.ID()
	switch {
	case req.IdempotencyKey == "":
		return nil, fmt.Errorf("launching %s: an idempotency key is required", offerID)
	case req.Count <= 0 || req.Count > maxNodes:
		return nil, fmt.Errorf("launching %s: count %d is not between 1 and %d", offerID, req.Count, maxNodes)
	}
	if err := p.ensurePrices(ctx); err != nil {
		return nil, err
	}
	unlock := p.keys.lock(req.IdempotencyKey)
	defer unlock()
	now := p.clk.Now()

	p.mu.Lock()
	if names := p.byKey[req.IdempotencyKey]; len(names) >= req.Count {
		out := p.instancesLocked(names)
		p.mu.Unlock()
		p.log.Info("launch retried, returning its instances", zap.String("offer", offerID), zap.String("job", req.JobID), zap.String("key", req.IdempotencyKey))
		return out, nil
	}
	o, known := p.offerLocked(offerID)
	mark, marked := p.capacityMarkLocked(o, now)
	var free int
	if known && o.Purchase == providers.Reserved {
		res, _ := p.reservation(o.Region, o.InstanceType)
		free = res.Count - p.reservedInUseLocked(o.Region, o.InstanceType)
	}
	p.mu.Unlock()
	switch {
	case !known:
		return nil, fmt.Errorf("launching %s: %w", offerID, providers.ErrUnknownOffer)
	case marked:
		return nil, &providers.InsufficientCapacityError{OfferID: offerID, Code: mark.code, Scope: mark.scope, For: mark.until.Sub(now),
			Reason: "Azure refused it recently: " + mark.reason}
	case o.Purchase == providers.Reserved && free < req.Count:
		return nil, &providers.InsufficientCapacityError{OfferID: offerID, Scope: providers.ScopeOffer, For: p.cfg.CapacityTTL.D(),
			Reason: fmt.Sprintf("%d reserved instances free, %d requested", max(free, 0), req.Count)}
	}

	var out []providers.Instance
	var created []string
	for node := range req.Count {
		name := vmName(req.IdempotencyKey, node)
		inst, isNew, err := p.launchNode(ctx, req, o, name, node, now)
		if err != nil {
			// Capacity and refusals are final: the nodes already created
			// go. Any other error leaves them, so that the retry with the
			// same key the scheduler makes completes the launch.
			if _, refused := providers.AsLaunchRefused(err); refused || providers.IsInsufficientCapacity(err) {
				p.undo(ctx, created)
			}
			return nil, err
		}
		if isNew {
			created = append(created, name)
		}
		out = append(out, inst)
	}
	p.log.Info("instances launched", zap.String("offer", offerID), zap.String("job", req.JobID), zap.Int("attempt", req.Attempt),
		zap.Int("count", req.Count), zap.Int("created", len(created)), zap.Stringer("price", o.Price), zap.String("instance", out[0].ID))
	return out, nil
}

// launchNode finds or creates one node's VM; isNew says this call created
// it.
func (p *Provider) launchNode(ctx context.Context, req providers.LaunchRequest, o providers.Offer, name string, node int, now time.Time) (providers.Instance, bool, error) {
	p.mu.Lock()
	rec := p.records[name]
	p.mu.Unlock()
	if rec != nil {
		return rec.inst, false, nil
	}
	if inst, found, err := p.existing(ctx, req, o, name); err != nil || found {
		return inst, false, err
	}
	vm, err := p.vmSpec(req, o, name, node, now)
	if err != nil {
		return providers.Instance{}, false, fmt.Errorf("launching %s: %w", o.ID(), err)
	}
	poller, err := p.vms.BeginCreateOrUpdate(ctx, p.cfg.ResourceGroup, name, vm,
		&armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{IfNoneMatch: to.Ptr("*")})
	if err != nil {
		if statusOf(err) == http.StatusPreconditionFailed {
			// Created meanwhile (another process with the same key).
			inst, _, gerr := p.existing(ctx, req, o, name)
			return inst, false, gerr
		}
		return providers.Instance{}, false, p.launchError(o, err)
	}
	inst := providers.Instance{
		ID: name, Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		Purchase: o.Purchase, Price: o.Price, State: providers.InstancePending, JobID: req.JobID,
		Attempt: req.Attempt, Node: node, IdempotencyKey: req.IdempotencyKey, LaunchedAt: now,
	}
	p.mu.Lock()
	p.records[name] = &vmRecord{inst: inst, spot: o.Purchase == providers.Spot, create: poller}
	p.byKey[req.IdempotencyKey] = append(p.byKey[req.IdempotencyKey], name)
	if o.Purchase == providers.Reserved {
		p.emitOffersLocked(o.Region, now)
	}
	p.mu.Unlock()
	return inst, true, nil
}

// existing looks for a node's VM in Azure; one with the launch's key is
// adopted, one without is a name clash.
func (p *Provider) existing(ctx context.Context, req providers.LaunchRequest, o providers.Offer, name string) (providers.Instance, bool, error) {
	got, err := p.vms.Get(ctx, p.cfg.ResourceGroup, name, nil)
	if IsNotFound(err) {
		return providers.Instance{}, false, nil
	}
	if err != nil {
		return providers.Instance{}, false, wrap("launching "+o.ID(), err)
	}
	inst, spot, ok := p.instanceFromVM(&got.VirtualMachine)
	if !ok || inst.IdempotencyKey != req.IdempotencyKey {
		return providers.Instance{}, false, fmt.Errorf("launching %s: VM name %s is taken by a VM not launched with key %q", o.ID(), name, req.IdempotencyKey)
	}
	p.log.Info("VM exists, adopting it", zap.String("instance", name), zap.String("key", req.IdempotencyKey))
	return p.adopt(inst, spot).inst, true, nil
}

// undo deletes the VMs a refused launch created: nothing of it runs. Their
// records stay, terminated, until they age out like any ended instance.
func (p *Provider) undo(ctx context.Context, names []string) {
	for _, name := range names {
		p.deleteQuietly(ctx, name)
		p.mu.Lock()
		if rec := p.records[name]; rec != nil {
			rec.terminating = true
			p.transitionLocked(rec, providers.InstanceTerminated, ReasonTerminated, p.clk.Now())
		}
		p.mu.Unlock()
	}
}

// instancesLocked returns the records of names; called with mu held.
func (p *Provider) instancesLocked(names []string) []providers.Instance {
	out := make([]providers.Instance, 0, len(names))
	for _, n := range names {
		if r := p.records[n]; r != nil {
			out = append(out, r.inst)
		}
	}
	return out
}

// vmName derives a node's VM name from the launch's idempotency key: "sw-",
// the key made safe (lower case letters, digits and '-', at most 40),
// eight hex digits of the key's SHA-256 (so keys that read alike stay
// apart), and the node ("-n0"). At most 59 characters: Azure allows 64 for
// a Linux VM and its computer name.
func vmName(key string, node int) string {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(key) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	slug := strings.Trim(b.String(), "-")
	name := "sw-"
	if slug != "" {
		name += slug + "-"
	}
	return name + hex.EncodeToString(sum[:4]) + "-n" + strconv.Itoa(node)
}

// vmSpec is the VM to create for one node.
func (p *Provider) vmSpec(req providers.LaunchRequest, o providers.Offer, name string, node int, now time.Time) (armcompute.VirtualMachine, error) {
	data, err := p.customData(req, o, name, node)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	c := p.cfg
	osDisk := &armcompute.OSDisk{
		Name:         to.Ptr(name + "-osdisk"),
		CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
		DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
		Caching:      to.Ptr(armcompute.CachingTypesReadWrite),
		ManagedDisk:  &armcompute.ManagedDiskParameters{StorageAccountType: to.Ptr(armcompute.StorageAccountTypes(c.OSDiskType))},
	}
	if c.OSDiskSizeGB > 0 {
		osDisk.DiskSizeGB = to.Ptr(c.OSDiskSizeGB)
	}
	props := &armcompute.VirtualMachineProperties{
		HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(o.InstanceType))},
		StorageProfile:  &armcompute.StorageProfile{ImageReference: c.Image.reference(), OSDisk: osDisk},
		OSProfile: &armcompute.OSProfile{
			ComputerName:  to.Ptr(name),
			AdminUsername: to.Ptr(c.AdminUsername),
			CustomData:    to.Ptr(data),
			LinuxConfiguration: &armcompute.LinuxConfiguration{
				DisablePasswordAuthentication: to.Ptr(true),
				SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
					Path:    to.Ptr("/home/" + c.AdminUsername + "/.ssh/authorized_keys"),
					KeyData: to.Ptr(strings.TrimSpace(c.SSHPublicKey)),
				}}},
			},
		},
		// The NIC is created with the VM (no network SDK needed) and
		// deleted with it, like the OS disk.
		NetworkProfile: &armcompute.NetworkProfile{
			NetworkAPIVersion: to.Ptr(armcompute.NetworkAPIVersionTwoThousandTwentyTwo1101),
			NetworkInterfaceConfigurations: []*armcompute.VirtualMachineNetworkInterfaceConfiguration{{
				Name: to.Ptr(name + "-nic"),
				Properties: &armcompute.VirtualMachineNetworkInterfaceConfigurationProperties{
					Primary:      to.Ptr(true),
					DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete),
					IPConfigurations: []*armcompute.VirtualMachineNetworkInterfaceIPConfiguration{{
						Name: to.Ptr(name + "-ip"),
						Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{
							Primary: to.Ptr(true),
							Subnet:  &armcompute.SubResource{ID: to.Ptr(c.subnet(o.Region))},
						},
					}},
				},
			}},
		},
		Priority: to.Ptr(armcompute.VirtualMachinePriorityTypesRegular),
	}
	if o.Purchase == providers.Spot {
		props.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
		props.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypes(c.SpotEvictionPolicy))
		props.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(maxPriceDollars(req.MaxPrice))}
	}
	vm := armcompute.VirtualMachine{
		Location:   to.Ptr(o.Region),
		Tags:       p.tags(req, o, node, now),
		Properties: props,
	}
	if zone := strings.TrimPrefix(o.Zone, o.Region+"-"); zone != o.Zone && zone != "" {
		vm.Zones = []*string{to.Ptr(zone)}
	}
	if c.UserAssignedIdentity != "" {
		vm.Identity = &armcompute.VirtualMachineIdentity{
			Type:                   to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{c.UserAssignedIdentity: {}},
		}
	}
	return vm, nil
}

// maxPriceDollars is a Spot VM's BillingProfile.MaxPrice: the cap in
// dollars per hour rounded up to Azure's 5 decimals, or -1 (Azure: up to
// the on-demand price, never evicted for price) when the request sets
// none. This is the one place a price
// becomes a float, because the SDK takes one: a micro-dollar amount below
// 2^53 converts exactly, and the division by 10^6 is correctly rounded, so
// the JSON the SDK writes reads back as the same decimal ("3.06").
func maxPriceDollars(m money.Micros) float64 {
	if m <= 0 {
		return -1
	}
	// Azure takes 5 decimals: round up to them, so that the cap never
	// falls below the price the scheduler decided to pay.
	const step = 10 // micro-dollars
	return ((m + step - 1) / step * step).Dollars()
}

// tags are the VM's tags: the scheduler's (':' becomes '-'; Azure tag
// names cannot hold it), and spotwise's own, which win.
func (p *Provider) tags(req providers.LaunchRequest, o providers.Offer, node int, now time.Time) map[string]*string {
	own := map[string]string{
		tagJob:        req.JobID,
		tagAttempt:    strconv.Itoa(req.Attempt),
		tagKey:        req.IdempotencyKey,
		tagNode:       strconv.Itoa(node),
		tagPurchase:   string(o.Purchase),
		tagPrice:      o.Price.Decimal(),
		tagLaunchedAt: now.UTC().Format(time.RFC3339Nano),
	}
	all := map[string]string{}
	for k, v := range req.Tags {
		k = strings.NewReplacer(":", "-", "<", "-", ">", "-", "%", "-", "&", "-", `\`, "-", "?", "-", "/", "-").Replace(k)
		if k != "" && len(k) <= 512 {
			all[k] = v
		}
	}
	maps.Copy(all, own)
	out := make(map[string]*string, len(all))
	for k, v := range all {
		if len(v) > 256 {
			v = v[:256]
		}
		out[k] = to.Ptr(v)
	}
	return out
}

// reference is the image as the SDK wants it.
func (im Image) reference() *armcompute.ImageReference {
	switch {
	case strings.HasPrefix(im.ID, "/CommunityGalleries/"):
		return &armcompute.ImageReference{CommunityGalleryImageID: to.Ptr(im.ID)}
	case strings.HasPrefix(im.ID, "/SharedGalleries/"):
		return &armcompute.ImageReference{SharedGalleryImageID: to.Ptr(im.ID)}
	case im.ID != "":
		return &armcompute.ImageReference{ID: to.Ptr(im.ID)}
	}
	return &armcompute.ImageReference{Publisher: to.Ptr(im.Publisher), Offer: to.Ptr(im.Offer),
		SKU: to.Ptr(im.SKU), Version: to.Ptr(cmpOr(im.Version, "latest"))}
}
