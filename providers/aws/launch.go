package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Tags spotwise puts on every instance; Instances and the interruption
// feed read them back, so an instance can always be traced to its job.
const (
	TagJob       = "spotwise:job"
	TagAttempt   = "spotwise:attempt"
	TagLaunchKey = "spotwise:launch-key"
	TagName      = "spotwise:name"
	TagTeam      = "spotwise:team"
	TagOffer     = "spotwise:offer"
	TagPrice     = "spotwise:price"
	TagPurchase  = "spotwise:purchase"
	tagManaged   = "spotwise:managed"
)

// clientToken derives EC2's idempotency token (at most 64 ASCII
// characters) from a launch's key: the same key always sends the same
// token, so a retried CreateFleet or RunInstances returns the instances of
// the first call instead of buying again.
func clientToken(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "spotwise-" + hex.EncodeToString(sum[:])[:48]
}

// Launch starts req.Count instances of req.Offer, all or none. It is
// idempotent: instances already tagged with the key are returned without
// buying, and the EC2 call carries a client token derived from the key, so
// a retry after a lost answer returns the first call's instances. EC2's
// answer is read by launchCodes: a lack of capacity (or a spot price above
// the max price, a quota filled) returns a
// *providers.InsufficientCapacityError and shows its scope without
// capacity for its For; a refusal that retrying will not change returns a
// *providers.LaunchRefusedError; any other error is returned wrapped, and
// a retry with the same key is safe.
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	o := req.Offer
	offerID := o.ID()
	switch {
	case req.IdempotencyKey == "":
		return nil, fmt.Errorf("launching %s: an idempotency key is required", offerID)
	case req.Count <= 0:
		return nil, fmt.Errorf("launching %s: count %d is not positive", offerID, req.Count)
	}
	p.mu.Lock()
	known := p.offerKnownLocked(o)
	refreshed := p.regions[o.Region] != nil && p.regions[o.Region].refreshed
	p.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("launching %s: %w", offerID, providers.ErrUnknownOffer)
	}
	if o.Purchase == providers.Reserved && !refreshed {
		p.refreshDue(ctx) // the reservations are needed to launch into one
	}
	log := p.log.With(zap.String("offer", offerID), zap.String("job", req.JobID), zap.String("key", req.IdempotencyKey))

	found, err := p.findByKey(ctx, o.Region, req.IdempotencyKey)
	if err != nil {
		return nil, fmt.Errorf("launching %s: looking for an earlier launch: %w", offerID, err)
	}
	if len(found) >= req.Count {
		log.Info("launch retried, returning its instances", zap.Int("count", len(found)))
		return found, nil
	}
	r, _ := p.cfg.region(o.Region)
	ud, err := userData(p.cfg.Agent, p.cfg.Endpoints.IMDS, p.cat, o.GPU, req)
	if err != nil {
		return nil, fmt.Errorf("launching %s: %w", offerID, err)
	}
	spec := launchSpec{req: req, region: r, userData: ud, token: clientToken(req.IdempotencyKey)}
	var ids []string
	switch {
	case o.Purchase == providers.Reserved:
		p.mu.Lock()
		res, ok := p.pickReservationLocked(o, req.Count)
		price := p.reservationPriceLocked(o, res.ID)
		p.mu.Unlock()
		if !ok {
			oc := providers.Outcome{Scope: providers.ScopeOffer, For: p.cfg.UnavailableFor.D()}
			return nil, p.capacityLacking(o, oc.Err(offerID, "", fmt.Sprintf("no reservation has %d instances free", req.Count)))
		}
		// The offer is sold at zero (the term is paid whether used or
		// not); its instances bill the reservation's hourly price, so
		// the job pays for the hours it uses and the idle rest is the
		// reservation's own.
		o.Price, spec.req.Offer.Price = price, price
		spec.reservation = &res
		spec.tags = launchTags(spec.req)
		ids, err = p.runInstances(ctx, spec)
	case p.cfg.LaunchMethod == LaunchRunInstances:
		spec.tags = launchTags(req)
		ids, err = p.runInstances(ctx, spec)
	default:
		spec.tags = launchTags(req)
		ids, err = p.createFleet(ctx, spec)
	}
	if err != nil {
		return nil, p.launchError(o, req.Count, err)
	}
	now := p.clk.Now()
	slices.Sort(ids)
	out := make([]providers.Instance, len(ids))
	for i, id := range ids {
		out[i] = providers.Instance{ID: id, Provider: ProviderName, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
			Purchase: o.Purchase, Price: o.Price, State: providers.InstancePending, JobID: req.JobID, Attempt: req.Attempt,
			Node: i, IdempotencyKey: req.IdempotencyKey, LaunchedAt: now}
	}
	p.remember(true, out...)
	log.Info("instances launched", zap.Int("attempt", req.Attempt), zap.Int("count", len(out)),
		zap.Stringer("price", o.Price), zap.String("instance", out[0].ID), zap.String("method", spec.method(p.cfg)))
	return out, nil
}

// launchSpec is one launch as the EC2 calls need it.
type launchSpec struct {
	req         providers.LaunchRequest
	region      RegionConfig
	userData    string // base64
	tags        []ec2types.Tag
	token       string
	reservation *reservation
}

func (s launchSpec) method(c Config) string {
	if s.reservation != nil {
		return LaunchRunInstances
	}
	return c.LaunchMethod
}

// maxPrice is the spot max price sent to EC2: the request's, else the
// on-demand price; nil (EC2's default, the on-demand price) when neither
// is known.
func (s launchSpec) maxPrice() *string {
	m := s.req.MaxPrice
	if m <= 0 {
		m = s.req.Offer.OnDemandPrice
	}
	if m <= 0 {
		return nil
	}
	return awssdk.String(m.Decimal())
}

// launchTags are the instance's tags: the request's (job, attempt, name,
// team), the key, and what the launch cost, so Instances can report the
// price after a restart.
func launchTags(req providers.LaunchRequest) []ec2types.Tag {
	o := req.Offer
	m := map[string]string{}
	for k, v := range req.Tags {
		m[k] = v
	}
	m[TagJob] = req.JobID
	m[TagAttempt] = strconv.Itoa(req.Attempt)
	m[TagLaunchKey] = req.IdempotencyKey
	m[TagOffer] = o.ID()
	m[TagPrice] = o.Price.Decimal()
	m[TagPurchase] = string(o.Purchase)
	name := cmpOr(req.Tags[TagName], req.JobID)
	m["Name"] = fmt.Sprintf("spotwise %s a%d", name, req.Attempt)
	var tags []ec2types.Tag
	for _, k := range sortedKeys(m) {
		if m[k] == "" {
			continue
		}
		tags = append(tags, ec2types.Tag{Key: awssdk.String(truncate(k, 128)), Value: awssdk.String(truncate(m[k], 256))})
	}
	return tags
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

func metadataOptions() *ec2types.InstanceMetadataOptionsRequest {
	return &ec2types.InstanceMetadataOptionsRequest{
		HttpEndpoint: ec2types.InstanceMetadataEndpointStateEnabled,
		HttpTokens:   ec2types.HttpTokensStateRequired, // IMDSv2 only
		// Two hops let a container on the instance reach IMDS.
		HttpPutResponseHopLimit: awssdk.Int32(2),
	}
}

func instanceProfile(v string) *ec2types.IamInstanceProfileSpecification {
	switch {
	case v == "":
		return nil
	case strings.HasPrefix(v, "arn:"):
		return &ec2types.IamInstanceProfileSpecification{Arn: awssdk.String(v)}
	}
	return &ec2types.IamInstanceProfileSpecification{Name: awssdk.String(v)}
}

// runInstances launches with everything inline. RunInstances with
// MinCount = MaxCount = Count starts all the instances or none.
func (p *Provider) runInstances(ctx context.Context, s launchSpec) ([]string, error) {
	o, n := s.req.Offer, int32(s.req.Count)
	in := &ec2.RunInstancesInput{
		ImageId: awssdk.String(s.region.AMI), InstanceType: ec2types.InstanceType(o.InstanceType),
		MinCount: awssdk.Int32(n), MaxCount: awssdk.Int32(n), ClientToken: awssdk.String(s.token),
		UserData: awssdk.String(s.userData), SecurityGroupIds: s.region.SecurityGroups,
		IamInstanceProfile: instanceProfile(s.region.InstanceProfile), MetadataOptions: metadataOptions(),
		InstanceInitiatedShutdownBehavior: ec2types.ShutdownBehaviorTerminate,
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: s.tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: s.tags},
		},
	}
	if s.region.KeyName != "" {
		in.KeyName = awssdk.String(s.region.KeyName)
	}
	if subnet := s.region.Subnets[o.Zone]; subnet != "" {
		in.SubnetId = awssdk.String(subnet)
	} else {
		in.Placement = &ec2types.Placement{AvailabilityZone: awssdk.String(o.Zone)}
	}
	switch {
	case s.reservation != nil:
		in.CapacityReservationSpecification = &ec2types.CapacityReservationSpecification{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: awssdk.String(s.reservation.ID)}}
		if s.reservation.CapacityBlock {
			in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		}
	case o.Purchase == providers.Spot:
		in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{
			MarketType: ec2types.MarketTypeSpot,
			SpotOptions: &ec2types.SpotMarketOptions{MaxPrice: s.maxPrice(), SpotInstanceType: ec2types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: ec2types.InstanceInterruptionBehaviorTerminate},
		}
	}
	out, err := p.ec2[o.Region].RunInstances(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("RunInstances: %w", err)
	}
	var ids []string
	for _, inst := range out.Instances {
		ids = append(ids, awssdk.ToString(inst.InstanceId))
	}
	if len(ids) < s.req.Count {
		return nil, fmt.Errorf("RunInstances started %d of %d instances", len(ids), s.req.Count)
	}
	return ids, nil
}

// createFleet launches through an instant fleet with one override (the
// offer's type and zone) on the region's launch template, with the
// launch's user data and tags in the request. MinTargetCapacity makes it
// all or nothing; should a partial answer come anyway, what came is
// terminated. A fleet short of its target is a *fleetError, which
// launchError reads.
func (p *Provider) createFleet(ctx context.Context, s launchSpec) ([]string, error) {
	o, n := s.req.Offer, int32(s.req.Count)
	lt, err := p.launchTemplate(ctx, s.region)
	if err != nil {
		return nil, err
	}
	ov := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(o.InstanceType)}
	if subnet := s.region.Subnets[o.Zone]; subnet != "" {
		ov.SubnetId = awssdk.String(subnet)
	} else {
		ov.AvailabilityZone = awssdk.String(o.Zone)
	}
	in := &ec2.CreateFleetInput{
		Type:        ec2types.FleetTypeInstant,
		ClientToken: awssdk.String(s.token),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: awssdk.String(lt), Version: awssdk.String("$Latest"),
				LaunchTemplateSpecificationUserData: awssdk.String(s.userData),
			},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{ov},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: awssdk.Int32(n)},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: s.tags}},
	}
	if o.Purchase == providers.Spot {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeSpot
		in.TargetCapacitySpecification.SpotTargetCapacity = awssdk.Int32(n)
		in.LaunchTemplateConfigs[0].Overrides[0].MaxPrice = s.maxPrice()
		in.SpotOptions = &ec2types.SpotOptionsRequest{
			AllocationStrategy:           ec2types.SpotAllocationStrategyPriceCapacityOptimized,
			InstanceInterruptionBehavior: ec2types.SpotInstanceInterruptionBehaviorTerminate,
			MinTargetCapacity:            awssdk.Int32(n), SingleInstanceType: awssdk.Bool(true), SingleAvailabilityZone: awssdk.Bool(true),
		}
	} else {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeOnDemand
		in.TargetCapacitySpecification.OnDemandTargetCapacity = awssdk.Int32(n)
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{
			MinTargetCapacity: awssdk.Int32(n), SingleInstanceType: awssdk.Bool(true), SingleAvailabilityZone: awssdk.Bool(true),
		}
	}
	out, err := p.ec2[o.Region].CreateFleet(ctx, in)
	if IsNotFound(err) {
		// The template was deleted under us: make it again, once.
		p.forgetTemplate(s.region.Name)
		if lt, err = p.launchTemplate(ctx, s.region); err != nil {
			return nil, err
		}
		in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName = awssdk.String(lt)
		out, err = p.ec2[o.Region].CreateFleet(ctx, in)
	}
	if err != nil {
		return nil, fmt.Errorf("CreateFleet: %w", err)
	}
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	if len(ids) >= s.req.Count {
		return ids, nil
	}
	if len(ids) > 0 {
		p.log.Warn("instant fleet started fewer instances than asked; terminating them", zap.String("offer", o.ID()),
			zap.Int("started", len(ids)), zap.Int("asked", s.req.Count))
		if _, err := p.ec2[o.Region].TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
			p.log.Error("terminating a partial fleet", zap.Strings("instances", ids), zap.Error(err))
		}
	}
	return nil, &fleetError{errs: out.Errors, started: len(ids), asked: s.req.Count}
}

// launchTemplate returns the name of the region's launch template (image,
// network, profile, IMDSv2), creating it the first time. Its name is a hash
// of those settings, so a changed configuration gets a new template and
// CreateLaunchTemplate's client token makes a concurrent creation safe.
func (p *Provider) launchTemplate(ctx context.Context, r RegionConfig) (string, error) {
	settings, _ := json.Marshal(struct {
		AMI, Profile, Key string
		SGs               []string
	}{r.AMI, r.InstanceProfile, r.KeyName, r.SecurityGroups})
	sum := sha256.Sum256(settings)
	name := "spotwise-" + hex.EncodeToString(sum[:])[:20]
	p.mu.Lock()
	have := p.templates[r.Name]
	p.mu.Unlock()
	if have == name {
		return name, nil
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId: awssdk.String(r.AMI), SecurityGroupIds: r.SecurityGroups,
		InstanceInitiatedShutdownBehavior: ec2types.ShutdownBehaviorTerminate,
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpTokens:   ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: awssdk.Int32(2),
		},
	}
	if prof := instanceProfile(r.InstanceProfile); prof != nil {
		data.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: prof.Arn, Name: prof.Name}
	}
	if r.KeyName != "" {
		data.KeyName = awssdk.String(r.KeyName)
	}
	_, err := p.ec2[r.Name].CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: awssdk.String(name), ClientToken: awssdk.String(name), LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: []ec2types.Tag{{Key: awssdk.String(tagManaged), Value: awssdk.String("true")}}}},
	})
	if err != nil && !IsAlreadyExists(err) {
		return "", fmt.Errorf("creating launch template %s in %s: %w", name, r.Name, err)
	}
	p.mu.Lock()
	p.templates[r.Name] = name
	p.mu.Unlock()
	p.log.Info("launch template ready", zap.String("region", r.Name), zap.String("template", name))
	return name, nil
}

func (p *Provider) forgetTemplate(region string) {
	p.mu.Lock()
	delete(p.templates, region)
	p.mu.Unlock()
}

// priceTag reads the spotwise:price tag.
func priceTag(v string) money.Micros {
	m, err := money.Parse(v)
	if err != nil {
		return 0
	}
	return m
}
