package aws

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// Reasons recorded on ended instances.
const (
	ReasonTerminated   = "terminated by spotwise"
	ReasonSpotReclaim  = "spot capacity reclaimed"
	ReasonStopped      = "stopped outside spotwise"
	reasonUnknownEnded = "instance ended"
)

// tracked is what the provider knows of an instance it launched or saw.
type tracked struct {
	inst providers.Instance
	// reported is the last state reported through Watch (or the state at
	// launch): each transition is reported once, whichever of the SQS
	// feed and the poll sees it first.
	reported providers.InstanceState
	byUs     bool // Terminate was called
	reclaim  bool // a spot interruption warning came
	touched  time.Time
}

// knownRetention is how long an ended instance is remembered.
const knownRetention = 2 * time.Hour

// remember records instances; the state reported so far is kept. Launched
// instances were reported pending by Launch itself; others (listed or
// looked up) have had nothing reported yet, so their next transition is.
func (p *Provider) remember(launched bool, insts ...providers.Instance) {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range insts {
		t := p.known[in.ID]
		if t == nil {
			t = &tracked{}
			if launched {
				t.reported = in.State
			}
			p.known[in.ID] = t
		}
		t.inst, t.touched = in, now
	}
	for id, t := range p.known {
		if t.inst.State.Ended() && now.Sub(t.touched) > knownRetention {
			delete(p.known, id)
		}
	}
}

// Instances lists every instance tagged with a spotwise job in the
// configured regions, ended ones included for as long as EC2 lists them
// (about an hour).
func (p *Provider) Instances(ctx context.Context) ([]providers.Instance, error) {
	var out []providers.Instance
	for _, r := range p.cfg.Regions {
		insts, err := p.describe(ctx, r.Name, &ec2.DescribeInstancesInput{
			Filters: []ec2types.Filter{{Name: awssdk.String("tag-key"), Values: []string{TagJob}}},
		})
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		out = append(out, insts...)
	}
	p.remember(false, out...)
	return out, nil
}

// findByKey lists the instances a launch with this key started.
func (p *Provider) findByKey(ctx context.Context, region, key string) ([]providers.Instance, error) {
	insts, err := p.describe(ctx, region, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: awssdk.String("tag:" + TagLaunchKey), Values: []string{key}}},
	})
	if err != nil {
		return nil, err
	}
	p.remember(false, insts...)
	return insts, nil
}

// describe runs DescribeInstances over every page and maps what spotwise
// launched. Nodes are numbered per launch key in instance ID order, the
// order Launch reported them in.
func (p *Provider) describe(ctx context.Context, region string, in *ec2.DescribeInstancesInput) ([]providers.Instance, error) {
	var out []providers.Instance
	pg := ec2.NewDescribeInstancesPaginator(p.ec2[region], in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances in %s: %w", region, err)
		}
		for _, res := range page.Reservations {
			for _, inst := range res.Instances {
				if m, ok := p.mapInstance(region, inst); ok {
					out = append(out, m)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b providers.Instance) int {
		return cmp.Or(cmp.Compare(a.IdempotencyKey, b.IdempotencyKey), cmp.Compare(a.ID, b.ID))
	})
	for i := range out {
		if i > 0 && out[i-1].IdempotencyKey == out[i].IdempotencyKey {
			out[i].Node = out[i-1].Node + 1
		}
	}
	return out, nil
}

// mapInstance reads an EC2 instance as a spotwise one; false when it does
// not carry a spotwise job tag.
func (p *Provider) mapInstance(region string, in ec2types.Instance) (providers.Instance, bool) {
	tags := map[string]string{}
	for _, t := range in.Tags {
		tags[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
	}
	if tags[TagJob] == "" {
		return providers.Instance{}, false
	}
	attempt, _ := strconv.Atoi(tags[TagAttempt])
	out := providers.Instance{
		ID: awssdk.ToString(in.InstanceId), Provider: ProviderName, Region: region, InstanceType: string(in.InstanceType),
		Purchase: providers.OnDemand, Price: priceTag(tags[TagPrice]), JobID: tags[TagJob], Attempt: attempt,
		IdempotencyKey: tags[TagLaunchKey], LaunchedAt: awssdk.ToTime(in.LaunchTime),
	}
	if in.Placement != nil {
		out.Zone = awssdk.ToString(in.Placement.AvailabilityZone)
	}
	switch {
	case in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot:
		out.Purchase = providers.Spot
	case in.CapacityReservationId != nil:
		out.Purchase, out.Reservation = providers.Reserved, awssdk.ToString(in.CapacityReservationId)
	case providers.PurchaseOption(tags[TagPurchase]).Valid():
		out.Purchase = providers.PurchaseOption(tags[TagPurchase])
	}
	var state ec2types.InstanceStateName
	if in.State != nil {
		state = in.State.Name
	}
	var code, msg string
	if in.StateReason != nil {
		code, msg = awssdk.ToString(in.StateReason.Code), awssdk.ToString(in.StateReason.Message)
	}
	p.mu.Lock()
	t := p.known[out.ID]
	p.mu.Unlock()
	out.State, out.Reason = stateOf(state, code, msg, t)
	if out.State.Ended() {
		out.EndedAt = transitionTime(awssdk.ToString(in.StateTransitionReason))
	}
	if out.Purchase == providers.Spot {
		out.PriceChanges = p.spotChanges(out.Zone, out.InstanceType, out.LaunchedAt, out.EndedAt)
	}
	return out, true
}

// stateOf maps an EC2 state (and, for an ended instance, why it ended) to
// spotwise's. Stopped instances count as ended: spotwise never stops
// instances, so the job on one is gone.
func stateOf(state ec2types.InstanceStateName, code, msg string, t *tracked) (providers.InstanceState, string) {
	switch state {
	case ec2types.InstanceStateNamePending:
		return providers.InstancePending, ""
	case ec2types.InstanceStateNameRunning:
		return providers.InstanceRunning, ""
	case ec2types.InstanceStateNameStopping, ec2types.InstanceStateNameStopped:
		return providers.InstanceTerminated, ReasonStopped
	}
	switch {
	case t != nil && t.byUs:
		return providers.InstanceTerminated, ReasonTerminated
	case code == "Server.SpotInstanceTermination" || code == "Server.SpotInstanceShutdown" || t != nil && t.reclaim:
		return providers.InstanceTerminated, ReasonSpotReclaim
	case code == "Server.InternalError" || code == "Server.InsufficientInstanceCapacity":
		return providers.InstanceFailed, cmpOr(msg, code)
	}
	return providers.InstanceTerminated, cmpOr(msg, reasonUnknownEnded)
}

var reTransition = regexp.MustCompile(`\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) GMT\)`)

// transitionTime reads the time in EC2's StateTransitionReason ("User
// initiated (2024-05-01 10:00:00 GMT)"); zero when there is none.
func transitionTime(reason string) time.Time {
	m := reTransition.FindStringSubmatch(reason)
	if m == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.DateTime, m[1])
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// Terminate terminates an instance. An instance that is gone already (or
// that no configured region knows) is not an error.
func (p *Provider) Terminate(ctx context.Context, instanceID string) error {
	p.mu.Lock()
	t := p.known[instanceID]
	region := ""
	if t != nil {
		t.byUs = true
		region = t.inst.Region
	}
	p.mu.Unlock()
	regions := make([]string, 0, len(p.cfg.Regions))
	if region != "" {
		regions = append(regions, region)
	}
	for _, r := range p.cfg.Regions {
		if !slices.Contains(regions, r.Name) {
			regions = append(regions, r.Name)
		}
	}
	for _, region := range regions {
		_, err := p.ec2[region].TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{instanceID}})
		switch {
		case err == nil:
			if t == nil {
				p.mu.Lock()
				p.known[instanceID] = &tracked{inst: providers.Instance{ID: instanceID, Provider: ProviderName, Region: region},
					byUs: true, touched: p.clk.Now()}
				p.mu.Unlock()
			}
			p.log.Info("instance terminated", zap.String("instance", instanceID), zap.String("region", region))
			return nil
		case IsNotFound(err):
			continue
		default:
			return fmt.Errorf("terminating %s in %s: %w", instanceID, region, err)
		}
	}
	p.log.Info("instance to terminate is gone already", zap.String("instance", instanceID))
	return nil
}

// lookup finds an instance spotwise launched by ID: from memory, else from
// EC2 in the region given. ok is false for instances that are not
// spotwise's (or do not exist).
func (p *Provider) lookup(ctx context.Context, region, id string, fresh bool) (providers.Instance, bool, error) {
	p.mu.Lock()
	t, known := p.known[id]
	var inst providers.Instance
	if known {
		inst = t.inst // remember rewrites it under the lock
	}
	p.mu.Unlock()
	if known && inst.JobID != "" && !fresh {
		return inst, true, nil
	}
	if known && region == "" {
		region = inst.Region
	}
	if p.ec2[region] == nil {
		if known && inst.JobID != "" {
			return inst, true, nil
		}
		return providers.Instance{}, false, nil
	}
	insts, err := p.describe(ctx, region, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	switch {
	case IsNotFound(err):
		if known && inst.JobID != "" {
			return inst, true, nil
		}
		return providers.Instance{}, false, nil
	case err != nil:
		return providers.Instance{}, false, err
	case len(insts) == 0:
		return providers.Instance{}, false, nil
	}
	in := insts[0]
	switch {
	case known && inst.IdempotencyKey == in.IdempotencyKey:
		in.Node = inst.Node // a describe of one instance cannot number the nodes
	case in.IdempotencyKey != "":
		// Seen for the first time (after a restart): its launch numbers it.
		if all, err := p.findByKey(ctx, region, in.IdempotencyKey); err == nil {
			for _, other := range all {
				if other.ID == in.ID {
					in.Node = other.Node
				}
			}
		}
	}
	p.remember(false, in)
	return in, true, nil
}
