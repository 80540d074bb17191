package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// keyPrefix starts the Store key of every instance record: "inst.<id>".
// Instance IDs are "i-" and hex digits, valid in NATS KV keys.
const keyPrefix = "inst."

const recordVersion = 1

// record is what the Store keeps of an instance: enough to list it, to
// answer a retried launch and to resume it after a restart.
type record struct {
	Version  int                `json:"version"`
	Cloud    string             `json:"cloud"` // Options.Name of the cloud that owns it
	Offer    string             `json:"offer"`
	Instance providers.Instance `json:"instance"`
	// Count is how many nodes the launch that made it bought: a launch
	// the cloud accepted is whole, so a restart completes one that a crash
	// left with only some of its nodes stored.
	Count    int                `json:"count,omitempty"`
	Workload providers.Workload `json:"workload,omitzero"`
	Tags     map[string]string  `json:"tags,omitempty"`
	// DueAt is when a pending instance becomes running; it is stored
	// rather than recomputed so a restart with another seed or catalog
	// keeps the promise.
	DueAt time.Time `json:"due_at"`
	// Pruned records ended more than Retention ago: no longer listed,
	// kept without their workload to answer retried launches.
	Pruned bool `json:"pruned,omitempty"`
	// Interruption and Maintenance are the notices the instance got; it
	// ends at the earlier deadline, restart or not.
	Interruption *notice `json:"interruption,omitempty"`
	Maintenance  *notice `json:"maintenance,omitempty"`
	// RebalanceAt is when it got a rebalance recommendation (one at most).
	RebalanceAt time.Time `json:"rebalance_at,omitzero"`
	// HeldUntil is when the capacity of an instance that ended under a
	// spot interruption notice returns to its offer.
	HeldUntil time.Time `json:"held_until,omitzero"`
}

func storeKey(id string) string { return keyPrefix + id }

// storeCtx bounds one Store call; Close cancels it.
func (c *Cloud) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, storeTimeout)
}

// persistLocked queues the write of an instance's record after a change
// (see behind.go). A failed write is logged and made again on the cloud's
// next call; the in-memory state stays the truth.
func (c *Cloud) persistLocked(in *instance) {
	c.changedLocked(in) // every change to a record is written: plan it again
	if c.store == nil {
		return
	}
	b, err := json.Marshal(in.rec)
	if err != nil {
		c.log.Error("instance record not encoded", zap.String("instance", in.rec.Instance.ID), zap.Error(err))
		return
	}
	c.queueLocked(in.rec.Instance.ID, in, b)
}

// launchedLocked queues the write of a record a launch made: until it is
// stored, the launch is undone if the write fails (see wroteLocked).
func (c *Cloud) launchedLocked(in *instance) {
	in.unstored = c.store != nil
	c.persistLocked(in)
}

// retryUnsavedLocked writes the records whose last write failed.
func (c *Cloud) retryUnsavedLocked() {
	for id, in := range c.unsaved {
		delete(c.unsaved, id)
		if c.insts[id] == in {
			c.persistLocked(in)
		}
	}
}

// pruneLocked slims the records of instances that ended more than
// Retention ago and forgets those that ended more than KeyRetention ago.
func (c *Cloud) pruneLocked(now time.Time) {
	c.prunedLocked(now)
	for id, in := range c.insts {
		i := in.rec.Instance
		if !i.State.Ended() {
			continue
		}
		switch age := now.Sub(i.EndedAt); {
		case age >= KeyRetention:
			c.forgetLocked(in)
			if c.store != nil {
				c.queueLocked(id, nil, nil)
			}
		case age >= Retention && !in.rec.Pruned:
			in.rec.Pruned = true
			in.rec.Workload = providers.Workload{}
			in.rec.Tags = nil
			c.persistLocked(in)
		}
	}
}

// load reads the instance records of this cloud from the Store and rebuilds
// the capacity accounting from the live ones and the held capacity of
// interrupted ones. Running instances are queued for their Runner to start
// again; pending ones boot when due, notices end them at their deadlines.
func (c *Cloud) load(ctx context.Context) error {
	keys, err := c.store.Keys(ctx)
	if err != nil {
		return fmt.Errorf("sim: listing stored instances: %w", err)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // a KV key listing may repeat keys
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range keys {
		if !strings.HasPrefix(key, keyPrefix) {
			continue
		}
		b, _, err := c.store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("sim: reading %s: %w", key, err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil || storeKey(rec.Instance.ID) != key {
			c.log.Warn("unreadable instance record skipped", zap.String("key", key), zap.Error(err))
			continue
		}
		if rec.Cloud != c.name {
			continue // another simulated cloud shares the bucket
		}
		in := &instance{rec: rec}
		c.rememberLocked(in)
		c.changedLocked(in)
		if rec.Instance.State.Ended() {
			if o, ok := c.offers[rec.Offer]; ok && !rec.HeldUntil.IsZero() {
				c.holdLocked(o, rec.HeldUntil) // the first advance drops it if it is over
			}
			continue
		}
		if o, ok := c.offers[rec.Offer]; ok {
			o.live++
		}
		if rec.Instance.State == providers.InstanceRunning {
			c.fx.starts = append(c.fx.starts, in)
		}
	}
	for key, ids := range c.byKey {
		slices.SortFunc(ids, func(a, b string) int { return c.insts[a].rec.Instance.Node - c.insts[b].rec.Instance.Node })
		c.byKey[key] = ids
		if err := c.completeStoredLocked(key); err != nil {
			return err
		}
	}
	c.recountReservationsLocked()
	return nil
}

// completeStoredLocked restores the nodes of a launch that a crash left
// partly stored (its nodes are written one by one): the cloud accepted the
// launch, so every node exists, booting with the ones that were stored.
func (c *Cloud) completeStoredLocked(key string) error {
	ids := c.byKey[key]
	first := c.insts[ids[0]]
	count := first.rec.Count
	if len(ids) >= count {
		return nil
	}
	have := map[int]bool{}
	for _, id := range ids {
		have[c.insts[id].rec.Instance.Node] = true
	}
	for n := range count {
		if have[n] {
			continue
		}
		rec := first.rec
		rec.Instance.ID = instanceID(c.name, key, n)
		rec.Instance.Node = n
		rec.Workload = cloneWorkload(first.rec.Workload)
		rec.Tags = maps.Clone(first.rec.Tags)
		in := &instance{rec: rec}
		c.persistLocked(in)
		c.rememberLocked(in)
		if !rec.Instance.State.Ended() {
			if o, ok := c.offers[rec.Offer]; ok {
				o.live++
			}
			if rec.Instance.State == providers.InstanceRunning {
				c.fx.starts = append(c.fx.starts, in)
			}
		}
		c.log.Warn("restored a node of a launch a crash left partly stored", zap.String("key", key), zap.Int("node", n))
	}
	slices.SortFunc(c.byKey[key], func(a, b string) int { return c.insts[a].rec.Instance.Node - c.insts[b].rec.Instance.Node })
	return nil
}
