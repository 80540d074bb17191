package sim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Reasons recorded on ended instances.
const (
	ReasonTerminated = "terminated by spotwise"
	// ReasonFailed is FailInstance's reason when the caller gives none.
	ReasonFailed = "hardware failure"
)

// instance is one simulated machine: its persisted record and, while it
// runs, its runner's stop func.
type instance struct {
	rec   record
	stop  func()
	draws draws // its seeded processes, drawn as far as needed
	// planGen counts the plans made for it (see plan.go); gone is set
	// when the cloud forgets it.
	planGen uint64
	gone    bool
	// pricedTo is how far its price changes are known (see billing.go).
	pricedTo time.Time
	// unstored is set while the record its launch made is not stored yet;
	// undone once that write failed and the launch was undone (behind.go).
	unstored, undone bool
	// listed is set while it is among the ended instances a listing
	// returns (listing.go).
	listed bool
}

// instanceID derives an instance's ID from the cloud, the launch's
// idempotency key and the node, so a retried launch (even after a restart)
// names the same instances. The shape follows EC2's "i-" + 17 hex digits.
func instanceID(cloud, key string, node int) string {
	sum := sha256.Sum256([]byte(cloud + "\x00" + key + "\x00" + strconv.Itoa(node)))
	return "i-" + hex.EncodeToString(sum[:])[:17]
}

// Launch starts req.Count instances of req.Offer, pending until the offer's
// launch latency has passed. A launch retried with the same idempotency key
// returns the instances of the first one, whatever became of them, and buys
// nothing. It refuses with a *providers.InsufficientCapacityError when the
// offer has fewer than req.Count instances available, or when it is spot and
// its price is above req.MaxPrice (the on-demand price if zero). With
// Options.Faults, some calls fail as configured instead (faults.go).
func (c *Cloud) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	if c.faults != nil {
		return c.faults.launch(ctx, c, req)
	}
	return c.launch(ctx, req)
}

func (c *Cloud) launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	offerID := req.Offer.ID()
	switch {
	case req.IdempotencyKey == "":
		return nil, fmt.Errorf("launching %s: an idempotency key is required", offerID)
	case req.Count <= 0:
		return nil, fmt.Errorf("launching %s: count %d is not positive", offerID, req.Count)
	}
	var out []providers.Instance
	err := c.do(ctx, func(now time.Time) error {
		o, known := c.offers[offerID]
		if ids, ok := c.byKey[req.IdempotencyKey]; ok {
			if len(ids) < req.Count {
				// A crash between persisting the nodes of one launch left
				// only some of them: the retry completes the launch.
				if err := c.completeLocked(req, ids, now); err != nil {
					return err
				}
				ids = c.byKey[req.IdempotencyKey]
			}
			out = c.listLocked(ids, now)
			c.log.Info("launch retried, returning its instances",
				zap.String("offer", offerID), zap.String("job", req.JobID), zap.String("key", req.IdempotencyKey))
			return nil
		}
		if !known {
			return fmt.Errorf("launching %s: %w", offerID, providers.ErrUnknownOffer)
		}
		price := o.price(c.step)
		var res *reservation
		if o.static.Purchase == providers.Reserved {
			// The instances bill the hourly price of the reservation
			// whose slots they take.
			if res = o.pick(req.Count); res == nil {
				return &providers.InsufficientCapacityError{OfferID: offerID,
					Reason: fmt.Sprintf("no reservation in its term has %d instances free", req.Count)}
			}
			price = res.cfg.Price
		}
		if o.static.Purchase == providers.Spot {
			if limit := cmp.Or(req.MaxPrice, o.static.OnDemandPrice); price > limit {
				return &providers.InsufficientCapacityError{OfferID: offerID,
					Reason: fmt.Sprintf("spot price %s is above max price %s", price, limit)}
			}
		}
		if avail := o.available(); avail < req.Count {
			return &providers.InsufficientCapacityError{OfferID: offerID,
				Reason: fmt.Sprintf("%d available, %d requested", avail, req.Count)}
		}
		ins := make([]*instance, req.Count)
		for n := range ins {
			ins[n] = &instance{rec: c.newRecord(req, o, price, n, now)}
			if res != nil {
				ins[n].rec.Instance.Reservation = res.cfg.ID
			}
		}
		// Stored before the call returns (do waits for the writes): a
		// launch the caller saw succeed must survive a restart, or its
		// retry would buy twice; one that could not be stored is undone.
		for _, in := range ins {
			c.launchedLocked(in)
			c.rememberLocked(in)
			c.holdSlotsLocked(&in.rec.Instance, 1)
			out = append(out, in.rec.Instance)
		}
		o.live += req.Count
		c.counted[o.region] = true
		c.log.Info("instances launched", zap.String("offer", offerID), zap.String("job", req.JobID),
			zap.Int("attempt", req.Attempt), zap.Int("count", req.Count), zap.Stringer("price", price),
			zap.String("instance", out[0].ID), zap.Duration("latency", o.static.LaunchLatency))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := c.undone(out); err != nil {
		return nil, fmt.Errorf("launching %s: %w", offerID, err)
	}
	return out, nil
}

// undone reports an error if any of a launch's instances was undone for
// want of being stored.
func (c *Cloud) undone(out []providers.Instance) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range out {
		if in := c.insts[i.ID]; in == nil || in.undone {
			return fmt.Errorf("instance %s could not be stored", i.ID)
		}
	}
	return nil
}

// completeLocked creates the nodes of a launch that a crash left
// incomplete, on the offer and at the price of the nodes that exist.
func (c *Cloud) completeLocked(req providers.LaunchRequest, ids []string, now time.Time) error {
	first := c.insts[ids[0]]
	if first == nil {
		return nil
	}
	o, ok := c.offers[first.rec.Offer]
	if !ok {
		return nil
	}
	have := map[int]bool{}
	for _, id := range ids {
		if in := c.insts[id]; in != nil {
			have[in.rec.Instance.Node] = true
		}
	}
	for n := range req.Count {
		if have[n] {
			continue
		}
		in := &instance{rec: c.newRecord(req, o, first.rec.Instance.Price, n, now)}
		in.rec.Instance.Reservation = first.rec.Instance.Reservation
		c.launchedLocked(in)
		c.rememberLocked(in)
		o.live++
		c.holdSlotsLocked(&in.rec.Instance, 1)
		c.counted[o.region] = true
		c.log.Warn("completed a launch a crash left incomplete", zap.String("key", req.IdempotencyKey), zap.Int("node", n))
	}
	return nil
}

func (c *Cloud) newRecord(req providers.LaunchRequest, o *offer, price money.Micros, node int, now time.Time) record {
	return record{
		Version: recordVersion,
		Cloud:   c.name,
		Offer:   o.static.ID(),
		Instance: providers.Instance{
			ID:             instanceID(c.name, req.IdempotencyKey, node),
			Provider:       o.static.Provider,
			Region:         o.static.Region,
			Zone:           o.static.Zone,
			InstanceType:   o.static.InstanceType,
			Purchase:       o.static.Purchase,
			Price:          price,
			State:          providers.InstancePending,
			JobID:          req.JobID,
			Attempt:        req.Attempt,
			Node:           node,
			IdempotencyKey: req.IdempotencyKey,
			LaunchedAt:     now,
		},
		Count:    req.Count,
		Workload: cloneWorkload(req.Workload),
		Tags:     maps.Clone(req.Tags),
		DueAt:    now.Add(o.static.LaunchLatency),
	}
}

// Terminate ends an instance, pending or running: its runner stops, its
// capacity returns to the offer (a while after the deadline if it is under
// a spot interruption notice) and an EventInstanceTerminated follows.
// Terminating an instance that has ended already is not an error; an ID the
// cloud does not know is ErrUnknownInstance.
func (c *Cloud) Terminate(ctx context.Context, instanceID string) error {
	return c.do(ctx, func(now time.Time) error {
		in, ok := c.insts[instanceID]
		if !ok {
			return fmt.Errorf("terminating %s: %w", instanceID, ErrUnknownInstance)
		}
		if in.rec.Instance.State.Ended() {
			return nil
		}
		c.endLocked(in, now, providers.InstanceTerminated, ReasonTerminated, providers.EventInstanceTerminated)
		return nil
	})
}

// FailInstance makes an instance die unexpectedly (a demo and test
// control): it ends in state failed with the reason given (ReasonFailed if
// empty). A running instance is reported as EventInstanceTerminated with
// that reason, because to the scheduler it is a machine that went away
// under a job, like a reclaimed spot instance; a pending one is reported as
// EventInstanceFailed, because it never started. An instance that has ended
// already is left alone.
func (c *Cloud) FailInstance(id, reason string) error {
	reason = cmp.Or(reason, ReasonFailed)
	return c.do(context.Background(), func(now time.Time) error {
		in, ok := c.insts[id]
		if !ok {
			return fmt.Errorf("failing %s: %w", id, ErrUnknownInstance)
		}
		switch in.rec.Instance.State {
		case providers.InstanceRunning:
			c.endLocked(in, now, providers.InstanceFailed, reason, providers.EventInstanceTerminated)
		case providers.InstancePending:
			c.endLocked(in, now, providers.InstanceFailed, reason, providers.EventInstanceFailed)
		}
		return nil
	})
}

// Instances lists every instance the cloud started, ended ones included
// for Retention after they ended, oldest launch first.
func (c *Cloud) Instances(ctx context.Context) ([]providers.Instance, error) {
	return c.InstancesSince(ctx, time.Time{})
}

// InstancesSince lists the instances that are live or ended at or after
// since, as Instances does (providers.RecentLister).
func (c *Cloud) InstancesSince(ctx context.Context, since time.Time) ([]providers.Instance, error) {
	var out []providers.Instance
	var ended []*instance
	err := c.do(ctx, func(now time.Time) error {
		ended = c.endedSinceLocked(since)
		out = make([]providers.Instance, 0, len(c.list.live)+len(ended))
		for _, in := range c.list.live {
			c.repriceLocked(in, now)
			out = append(out, in.rec.Instance)
		}
		return nil
	})
	for _, in := range ended {
		out = append(out, in.rec.Instance) // no longer changes: see listing
	}
	slices.SortFunc(out, compareInstances)
	return out, err
}

// InstancesByKey lists the instances one launch started, ended ones
// included (as long as the cloud remembers them).
func (c *Cloud) InstancesByKey(ctx context.Context, key string) ([]providers.Instance, error) {
	var out []providers.Instance
	err := c.do(ctx, func(now time.Time) error {
		out = c.listLocked(c.byKey[key], now)
		return nil
	})
	return out, err
}

// listLocked returns the instances with the given IDs that are still
// known, their price changes up to now.
func (c *Cloud) listLocked(ids []string, now time.Time) []providers.Instance {
	out := make([]providers.Instance, 0, len(ids))
	for _, id := range ids {
		if in, ok := c.insts[id]; ok {
			c.repriceLocked(in, now)
			out = append(out, in.rec.Instance)
		}
	}
	return out
}

// becomeRunningLocked finishes an instance's boot: it is billable from the
// moment its latency was over, even if the cloud notices later.
func (c *Cloud) becomeRunningLocked(in *instance) {
	i := &in.rec.Instance
	i.State = providers.InstanceRunning
	i.RunningAt = in.rec.DueAt
	c.persistLocked(in)
	c.emitInstanceLocked(providers.EventInstanceRunning, in, i.RunningAt)
	c.fx.starts = append(c.fx.starts, in)
	c.log.Info("instance running", zap.String("instance", i.ID), zap.String("offer", in.rec.Offer),
		zap.String("job", i.JobID))
}

// endLocked ends a live instance: state, capacity, runner, record, event.
// An instance under a spot interruption notice, however it ends, does not
// give its capacity back until a while after the notice's deadline: the
// spot pool shrank.
func (c *Cloud) endLocked(in *instance, now time.Time, state providers.InstanceState, reason string, kind providers.EventKind) {
	c.repriceLocked(in, now)
	i := &in.rec.Instance
	i.State, i.EndedAt, i.Reason = state, now, reason
	c.endedLocked(in)
	c.holdSlotsLocked(i, -1)
	if o, ok := c.offers[in.rec.Offer]; ok {
		o.live--
		c.counted[o.region] = true
		if n := in.rec.Interruption; n != nil {
			in.rec.HeldUntil = n.Deadline.Add(c.holdFor(i.ID))
			c.holdLocked(o, in.rec.HeldUntil)
		}
	}
	if in.stop != nil {
		c.fx.stops = append(c.fx.stops, in.stop)
		in.stop = nil
	}
	// No runner starts again on an ended instance, and its attempt's NATS
	// user is revoked: its credential is kept neither here nor in the
	// store (2 KB per launch, for the retention period).
	in.rec.Workload.AgentCredentials = ""
	c.persistLocked(in)
	c.emitInstanceLocked(kind, in, now)
	c.log.Info("instance ended", zap.String("instance", i.ID), zap.String("offer", in.rec.Offer),
		zap.String("job", i.JobID), zap.String("state", string(state)), zap.String("reason", reason))
}

func compareInstances(a, b providers.Instance) int {
	return cmp.Or(a.LaunchedAt.Compare(b.LaunchedAt), cmp.Compare(a.IdempotencyKey, b.IdempotencyKey),
		cmp.Compare(a.Node, b.Node), cmp.Compare(a.ID, b.ID))
}

// cloneWorkload copies a workload so that neither the caller nor a runner
// can change the cloud's record through shared slices or maps.
func cloneWorkload(w providers.Workload) providers.Workload {
	w.Command = slices.Clone(w.Command)
	w.Env = maps.Clone(w.Env)
	return w
}
