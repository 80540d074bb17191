package azure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Reasons recorded on ended instances.
const (
	// ReasonTerminated: spotwise deleted the VM (Terminate).
	ReasonTerminated = "terminated by spotwise"
	// ReasonEvicted: a Spot VM was deleted or deallocated by Azure.
	ReasonEvicted = "evicted"
	// ReasonDeleted: a VM spotwise did not terminate is gone.
	ReasonDeleted = "deleted"
	// ReasonDeallocated and ReasonStopped: a Regular VM was deallocated
	// or stopped by someone else; the job cannot run there.
	ReasonDeallocated = "deallocated"
	ReasonStopped     = "stopped"
)

// Tags spotwise puts on every VM. Azure tag names cannot hold ':', so the
// scheduler's "spotwise:job" is written "spotwise-job".
const (
	tagJob        = "spotwise-job"
	tagAttempt    = "spotwise-attempt"
	tagKey        = "spotwise-launch-key"
	tagNode       = "spotwise-node"
	tagPurchase   = "spotwise-purchase"
	tagPrice      = "spotwise-price"
	tagLaunchedAt = "spotwise-launched-at"
)

// maxInstanceViews bounds concurrent InstanceView calls in one sync.
const maxInstanceViews = 8

// vmRecord is what the provider knows of one of its VMs.
type vmRecord struct {
	inst providers.Instance
	spot bool
	// create is the creation's long-running operation until it ends.
	create *runtime.Poller[armcompute.VirtualMachinesClientCreateOrUpdateResponse]
	// del is the deletion spotwise started; terminating says it did.
	del         *runtime.Poller[armcompute.VirtualMachinesClientDeleteResponse]
	terminating bool
}

// observed is one VM as listed.
type observed struct {
	inst         providers.Instance
	spot         bool
	provisioning string
	power        string // "running", "deallocated", ... ("" unknown)
	failure      string // provisioning failure message
	failCode     string
}

// Instances lists spotwise's VMs in the resource group with their state,
// read now from Azure, and the ones that ended in the last hour (kept in
// memory: a VM deleted by Azure cannot be listed).
func (p *Provider) Instances(ctx context.Context) ([]providers.Instance, error) {
	if err := p.syncInstances(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]providers.Instance, 0, len(p.records))
	for _, r := range p.records {
		out = append(out, r.inst)
	}
	slices.SortFunc(out, func(a, b providers.Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Terminate deletes a VM with its inline NIC and OS disk (both created
// with DeleteOption Delete). It starts the deletion and returns; the
// instance reads terminated at once. A VM that is gone already is not an
// error; a VM without spotwise's tags is never deleted (ErrNotManaged).
func (p *Provider) Terminate(ctx context.Context, instanceID string) error {
	p.mu.Lock()
	rec := p.records[instanceID]
	p.mu.Unlock()
	if rec == nil {
		got, err := p.vms.Get(ctx, p.cfg.ResourceGroup, instanceID, nil)
		if IsNotFound(err) {
			return nil
		}
		if err != nil {
			return wrap("terminating "+instanceID, err)
		}
		inst, spot, ok := p.instanceFromVM(&got.VirtualMachine)
		if !ok {
			return fmt.Errorf("terminating %s: %w", instanceID, ErrNotManaged)
		}
		rec = p.adopt(inst, spot)
	}
	p.mu.Lock()
	asked := rec.terminating
	p.mu.Unlock()
	if asked {
		return nil // the deletion is under way; syncs see it through
	}
	poller, err := p.vms.BeginDelete(ctx, p.cfg.ResourceGroup, instanceID, nil)
	if err != nil && !IsNotFound(err) {
		return wrap("terminating "+instanceID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rec.terminating, rec.del = true, poller
	p.transitionLocked(rec, providers.InstanceTerminated, ReasonTerminated, p.clk.Now())
	p.log.Info("terminating instance", zap.String("instance", instanceID), zap.String("job", rec.inst.JobID))
	return nil
}

// adopt records a VM found in Azure that this process did not launch (a
// restart), or returns the record it has.
func (p *Provider) adopt(inst providers.Instance, spot bool) *vmRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.records[inst.ID]; r != nil {
		return r
	}
	r := &vmRecord{inst: inst, spot: spot}
	p.records[inst.ID] = r
	p.byKey[inst.IdempotencyKey] = append(p.byKey[inst.IdempotencyKey], inst.ID)
	return r
}

// syncInstances brings every record up to date with Azure: the creations
// still running, the VMs listed in the resource group with their power
// state, and the VMs no longer there. Every transition is sent to the
// watchers as it is found.
func (p *Provider) syncInstances(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.advanceCreations(ctx)
	p.advanceDeletions(ctx)
	listed, err := p.listOurs(ctx)
	if err != nil {
		return err
	}
	p.readPowerStates(ctx, listed)
	now := p.clk.Now()
	var redelete []string
	p.mu.Lock()
	seen := map[string]bool{}
	for _, ob := range listed {
		seen[ob.inst.ID] = true
		rec := p.records[ob.inst.ID]
		if rec == nil {
			rec = &vmRecord{inst: ob.inst, spot: ob.spot}
			p.records[ob.inst.ID] = rec
			p.byKey[ob.inst.IdempotencyKey] = append(p.byKey[ob.inst.IdempotencyKey], ob.inst.ID)
		}
		if rec.terminating && rec.del == nil && ob.provisioning != "Deleting" {
			redelete = append(redelete, ob.inst.ID)
		}
		state, reason := decideState(ob, rec)
		if state == "" {
			continue
		}
		if state == providers.InstanceFailed && !rec.inst.State.Ended() {
			p.failedLocked(rec, ob.failCode, ob.failure, now)
			redelete = append(redelete, ob.inst.ID)
			continue
		}
		ended := rec.inst.State.Ended()
		p.transitionLocked(rec, state, reason, now)
		if state == providers.InstanceTerminated && !ended && !rec.terminating && ob.provisioning != "Deleting" {
			// Deallocated or stopped (a Spot eviction with the Deallocate
			// policy, or someone else): nothing restarts it, so its
			// remains are deleted rather than left to cost money.
			rec.terminating = true
			redelete = append(redelete, ob.inst.ID)
		}
	}
	for name, rec := range p.records {
		if seen[name] || rec.inst.State.Ended() {
			continue
		}
		// A VM just launched may not be listed yet.
		if rec.inst.State == providers.InstancePending && now.Sub(rec.inst.LaunchedAt) < p.o.creationGrace {
			continue
		}
		p.transitionLocked(rec, providers.InstanceTerminated, goneReason(rec), now)
	}
	for name, rec := range p.records {
		if rec.inst.State.Ended() && !seen[name] && now.Sub(rec.inst.EndedAt) > p.o.keepEnded {
			delete(p.records, name)
			key := rec.inst.IdempotencyKey
			p.byKey[key] = slices.DeleteFunc(p.byKey[key], func(n string) bool { return n == name })
			if len(p.byKey[key]) == 0 {
				delete(p.byKey, key)
			}
		}
	}
	p.mu.Unlock()
	for _, name := range redelete {
		p.deleteQuietly(ctx, name)
	}
	return nil
}

// goneReason says why a VM that is no longer listed ended.
func goneReason(rec *vmRecord) string {
	switch {
	case rec.terminating:
		return ReasonTerminated
	case rec.spot:
		return ReasonEvicted
	}
	return ReasonDeleted
}

// decideState maps a VM's provisioning and power state to an instance
// state; "" means no change.
func decideState(ob observed, rec *vmRecord) (providers.InstanceState, string) {
	spotEvicted := func(regular string) string {
		if rec.spot && !rec.terminating {
			return ReasonEvicted
		}
		if rec.terminating {
			return ReasonTerminated
		}
		return regular
	}
	switch ob.provisioning {
	case "Deleting":
		return providers.InstanceTerminated, goneReason(rec)
	case "Creating":
		return providers.InstancePending, ""
	case "Failed":
		if ob.power == "running" {
			return providers.InstanceRunning, "" // e.g. an extension failed; the VM runs
		}
		return providers.InstanceFailed, ""
	}
	switch ob.power {
	case "running":
		return providers.InstanceRunning, ""
	case "starting":
		return providers.InstancePending, ""
	case "deallocating", "deallocated":
		return providers.InstanceTerminated, spotEvicted(ReasonDeallocated)
	case "stopping", "stopped":
		return providers.InstanceTerminated, spotEvicted(ReasonStopped)
	}
	return "", ""
}

// transitionLocked moves a record to a new state and tells the watchers;
// an ended record never changes again. Called with mu held.
func (p *Provider) transitionLocked(rec *vmRecord, state providers.InstanceState, reason string, now time.Time) {
	in := &rec.inst
	// Pending is only where records start: a running VM that restarts
	// (a Reboot or Redeploy event) stays running.
	if in.State == state || in.State.Ended() || state == providers.InstancePending {
		return
	}
	in.State = state
	var kind providers.EventKind
	switch state {
	case providers.InstanceRunning:
		in.RunningAt, kind = now, providers.EventInstanceRunning
	case providers.InstanceTerminated:
		in.EndedAt, in.Reason, kind = now, reason, providers.EventInstanceTerminated
	case providers.InstanceFailed:
		in.EndedAt, in.Reason, kind = now, reason, providers.EventInstanceFailed
	}
	p.log.Info("instance "+string(state), zap.String("instance", in.ID), zap.String("job", in.JobID),
		zap.String("offer", providers.OfferID(Name, in.Region, in.Zone, in.InstanceType, in.Purchase)), zap.String("reason", in.Reason))
	inst := *in
	p.emitLocked(providers.Event{Kind: kind, Provider: Name, Region: in.Region, Time: now, Instance: &inst, Reason: in.Reason})
	if state.Ended() && in.Purchase == providers.Reserved {
		p.emitOffersLocked(in.Region, now) // a reserved instance is free again
	}
}

// failedLocked ends a VM whose creation failed with Azure's code and
// message; a capacity error marks its scope, and the instance's reason is
// the outcome's. Called with mu held.
func (p *Provider) failedLocked(rec *vmRecord, code, msg string, now time.Time) {
	in := rec.inst
	reason := providers.Outcome{}.Reason(code, msg)
	if o, known := p.offerLocked(providers.OfferID(Name, in.Region, in.Zone, in.InstanceType, in.Purchase)); known {
		if oc, ok := p.launchOutcome(o, code, msg); ok {
			p.noteOutcomeLocked(o, oc.Err(o.ID(), code, msg), now)
			reason = oc.Reason(code, msg)
		}
	}
	if reason == "" {
		reason = "provisioning failed"
	}
	rec.terminating = true // its remains are deleted
	p.transitionLocked(rec, providers.InstanceFailed, reason, now)
}

// advanceCreations polls each creation still running once; a failed one
// ends its instance.
func (p *Provider) advanceCreations(ctx context.Context) {
	p.mu.Lock()
	var recs []*vmRecord
	for _, r := range p.records {
		if r.create != nil && !r.inst.State.Ended() {
			recs = append(recs, r)
		}
	}
	p.mu.Unlock()
	for _, r := range recs {
		err := pollOnce(ctx, r.create)
		done := r.create.Done()
		if err == nil && !done {
			continue
		}
		if err == nil {
			_, err = r.create.Result(ctx)
		} else if !definitive(err) {
			p.log.Debug("polling a VM creation", zap.String("instance", r.inst.ID), zap.Error(err))
			continue
		}
		p.mu.Lock()
		r.create = nil
		if err != nil {
			code, msg := errorCode(err), err.Error()
			var re *azcore.ResponseError
			if errors.As(err, &re) {
				msg = responseMessage(re)
			}
			p.log.Warn("VM creation failed", zap.String("instance", r.inst.ID), zap.String("job", r.inst.JobID), zap.String("code", code))
			p.failedLocked(r, code, msg, p.clk.Now())
		}
		p.mu.Unlock()
		if err != nil {
			p.deleteQuietly(ctx, r.inst.ID)
		}
	}
}

// advanceDeletions polls each deletion spotwise started once. One that
// ended is dropped; if it failed and the VM is still there, the sync
// deletes it again.
func (p *Provider) advanceDeletions(ctx context.Context) {
	type op struct {
		rec *vmRecord
		pl  *runtime.Poller[armcompute.VirtualMachinesClientDeleteResponse]
	}
	var ops []op
	p.mu.Lock()
	for _, r := range p.records {
		if r.del != nil {
			ops = append(ops, op{r, r.del})
		}
	}
	p.mu.Unlock()
	for _, o := range ops {
		err := pollOnce(ctx, o.pl)
		switch {
		case err == nil && o.pl.Done():
			_, err = o.pl.Result(ctx)
		case err == nil || !definitive(err):
			continue
		}
		if err != nil && !IsNotFound(err) {
			p.log.Warn("deleting a VM failed; trying again", zap.String("instance", o.rec.inst.ID), zap.Error(err))
		}
		p.mu.Lock()
		if o.rec.del == o.pl {
			o.rec.del = nil
		}
		p.mu.Unlock()
	}
}

func pollOnce[T any](ctx context.Context, pl *runtime.Poller[T]) error {
	if pl.Done() {
		return nil
	}
	_, err := pl.Poll(ctx)
	return err
}

// definitive reports whether a polling error is the operation's final
// answer (a 4xx other than throttling or timeout) rather than a failure to
// ask.
func definitive(err error) bool {
	s := statusOf(err)
	return s >= 400 && s < 500 && s != 408 && s != 429
}

// listOurs lists the resource group's VMs that carry spotwise's launch tag.
func (p *Provider) listOurs(ctx context.Context) ([]observed, error) {
	var out []observed
	pager := p.vms.NewListPager(p.cfg.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, wrap("listing VMs in "+p.cfg.ResourceGroup, err)
		}
		for _, vm := range page.Value {
			inst, spot, ok := p.instanceFromVM(vm)
			if !ok {
				continue
			}
			ob := observed{inst: inst, spot: spot}
			if vm.Properties != nil {
				ob.provisioning = str(vm.Properties.ProvisioningState)
				if vm.Properties.InstanceView != nil {
					ob.power, ob.failCode, ob.failure = readStatuses(vm.Properties.InstanceView.Statuses)
				}
			}
			out = append(out, ob)
		}
	}
	return out, nil
}

// readPowerStates fills in the power state of listed VMs that need it
// (provisioned, not known to have ended), a bounded number at a time. The
// resource group listing cannot expand instance views.
func (p *Provider) readPowerStates(ctx context.Context, listed []observed) {
	sem := make(chan struct{}, maxInstanceViews)
	var wg sync.WaitGroup
	for i := range listed {
		ob := &listed[i]
		p.mu.Lock()
		rec := p.records[ob.inst.ID]
		ended := rec != nil && rec.inst.State.Ended()
		p.mu.Unlock()
		if ended || ob.power != "" || ob.provisioning == "Creating" || ob.provisioning == "Deleting" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			view, err := p.vms.InstanceView(ctx, p.cfg.ResourceGroup, ob.inst.ID, nil)
			if err != nil {
				if IsNotFound(err) {
					ob.provisioning = "Deleting"
				} else {
					p.log.Debug("reading a VM's instance view", zap.String("instance", ob.inst.ID), zap.Error(err))
				}
				return
			}
			power, code, msg := readStatuses(view.Statuses)
			ob.power = power
			if code != "" {
				ob.failCode, ob.failure = code, msg
			}
		}()
	}
	wg.Wait()
}

// readStatuses reads an instance view's statuses: the power state
// ("PowerState/running" -> "running") and a provisioning failure
// ("ProvisioningState/failed/ZonalAllocationFailed" -> its code, and the
// status's message).
func readStatuses(sts []*armcompute.InstanceViewStatus) (power, failCode, failure string) {
	for _, s := range sts {
		if s == nil || s.Code == nil {
			continue
		}
		code := *s.Code
		switch {
		case strings.HasPrefix(code, "PowerState/"):
			power = strings.TrimPrefix(code, "PowerState/")
		case strings.HasPrefix(code, "ProvisioningState/failed"):
			failCode = strings.TrimPrefix(strings.TrimPrefix(code, "ProvisioningState/failed"), "/")
			failure = str(s.Message)
		}
	}
	return power, failCode, failure
}

// deleteQuietly starts deleting a VM spotwise is done with, logging a
// failure (the next sync tries again).
func (p *Provider) deleteQuietly(ctx context.Context, name string) {
	poller, err := p.vms.BeginDelete(ctx, p.cfg.ResourceGroup, name, nil)
	if err != nil && !IsNotFound(err) {
		p.log.Warn("deleting a VM", zap.String("instance", name), zap.Error(err))
		return
	}
	p.mu.Lock()
	if rec := p.records[name]; rec != nil {
		rec.terminating, rec.del = true, poller
	}
	p.mu.Unlock()
}

// instanceFromVM reads an instance from a VM's tags and model; ok is false
// for a VM spotwise did not launch.
func (p *Provider) instanceFromVM(vm *armcompute.VirtualMachine) (inst providers.Instance, spot, ok bool) {
	if vm == nil || vm.Name == nil {
		return providers.Instance{}, false, false
	}
	tag := func(k string) string { return str(vm.Tags[k]) }
	key := tag(tagKey)
	if key == "" {
		return providers.Instance{}, false, false
	}
	inst = providers.Instance{ID: *vm.Name, Provider: Name, Region: str(vm.Location),
		JobID: tag(tagJob), IdempotencyKey: key, State: providers.InstancePending}
	if len(vm.Zones) > 0 && vm.Zones[0] != nil {
		inst.Zone = inst.Region + "-" + *vm.Zones[0]
	}
	inst.Attempt, _ = strconv.Atoi(tag(tagAttempt))
	inst.Node, _ = strconv.Atoi(tag(tagNode))
	if props := vm.Properties; props != nil {
		if props.HardwareProfile != nil && props.HardwareProfile.VMSize != nil {
			inst.InstanceType = string(*props.HardwareProfile.VMSize)
		}
		spot = props.Priority != nil && *props.Priority == armcompute.VirtualMachinePriorityTypesSpot
		if props.TimeCreated != nil {
			inst.LaunchedAt = *props.TimeCreated
		}
	}
	inst.Purchase = providers.PurchaseOption(tag(tagPurchase))
	if !inst.Purchase.Valid() {
		inst.Purchase = providers.OnDemand
		if spot {
			inst.Purchase = providers.Spot
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, tag(tagLaunchedAt)); err == nil {
		inst.LaunchedAt = t
	}
	if m, err := money.Parse(tag(tagPrice)); err == nil {
		inst.Price = m
	} else {
		p.mu.Lock()
		o, known := p.offerLocked(providers.OfferID(Name, inst.Region, inst.Zone, inst.InstanceType, inst.Purchase))
		p.mu.Unlock()
		if known {
			inst.Price = o.Price
		}
	}
	return inst, spot, true
}

// str reads an optional string from the SDK.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
