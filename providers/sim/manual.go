package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// ErrUnknownZone is returned by PreemptZone for a zone the cloud does not
// sell in.
var ErrUnknownZone = errors.New("unknown zone")

// Manual interruptions, for demos and tests. Each sends a real notice at the
// clock's current time through the path the seeded model uses: the same
// events, the same de-duplication, the same end at the deadline. A notice
// an instance would not learn anything from (it has ended, or is under such
// a notice already, or ends sooner anyway) is not sent, and that is not an
// error.

// Preempt sends a spot interruption notice to a live instance, spot or
// not: it ends NoticeWindow(provider) later and its capacity is held back
// from the offer for a while.
func (c *Cloud) Preempt(instanceID string) error {
	return c.do(context.Background(), func(now time.Time) error {
		in, ok := c.insts[instanceID]
		if !ok {
			return fmt.Errorf("preempting %s: %w", instanceID, ErrUnknownInstance)
		}
		c.noticeLocked(in, now, CauseManual)
		return nil
	})
}

// PreemptJob sends a spot interruption notice to every live instance of a
// job, spot or not, and returns their IDs (those under notice already
// included), in node order. A job the cloud has no instance of is an error
// wrapping ErrUnknownInstance; one whose instances have all ended returns
// none.
func (c *Cloud) PreemptJob(jobID string) ([]string, error) {
	var out []string
	err := c.do(context.Background(), func(now time.Time) error {
		var live []*instance
		known := false
		for _, in := range c.insts {
			if in.rec.Instance.JobID != jobID {
				continue
			}
			known = true
			if !in.rec.Instance.State.Ended() {
				live = append(live, in)
			}
		}
		if !known {
			return fmt.Errorf("preempting job %s: no instance of it: %w", jobID, ErrUnknownInstance)
		}
		out = c.noticeAllLocked(live, now, CauseManual)
		return nil
	})
	return out, err
}

// PreemptZone is a storm: every live spot instance of the zone gets a spot
// interruption notice at once. On-demand instances are left alone, as a
// cloud reclaiming its spot pool would. It returns the IDs of the spot
// instances (those under notice already included); a zone the cloud does
// not sell in is an error wrapping ErrUnknownZone.
func (c *Cloud) PreemptZone(zone string) ([]string, error) {
	var out []string
	err := c.do(context.Background(), func(now time.Time) error {
		if _, ok := c.byZone[zone]; !ok {
			return fmt.Errorf("preempting zone %s: %w", zone, ErrUnknownZone)
		}
		var live []*instance
		for _, in := range c.insts {
			i := in.rec.Instance
			if i.Zone == zone && i.Purchase == providers.Spot && !i.State.Ended() {
				live = append(live, in)
			}
		}
		out = c.noticeAllLocked(live, now, CauseManualStorm)
		return nil
	})
	return out, err
}

// noticeAllLocked sends notices to instances in a stable order.
func (c *Cloud) noticeAllLocked(ins []*instance, now time.Time, cause string) []string {
	slices.SortFunc(ins, func(a, b *instance) int { return compareInstances(a.rec.Instance, b.rec.Instance) })
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		c.noticeLocked(in, now, cause)
		out = append(out, in.rec.Instance.ID)
	}
	return out
}

// Rebalance sends a rebalance recommendation to a live instance, spot or
// not: at most one per instance, none once it is under a spot interruption
// notice. It announces no deadline and ends nothing.
func (c *Cloud) Rebalance(instanceID string) error {
	return c.do(context.Background(), func(now time.Time) error {
		in, ok := c.insts[instanceID]
		if !ok {
			return fmt.Errorf("rebalancing %s: %w", instanceID, ErrUnknownInstance)
		}
		c.rebalanceLocked(in, now, CauseManual)
		return nil
	})
}

// Maintenance announces scheduled maintenance of a live instance, of any
// purchase option, in d: the instance ends then, its capacity returned.
func (c *Cloud) Maintenance(instanceID string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("maintenance of %s: %s is not in the future", instanceID, d)
	}
	return c.do(context.Background(), func(now time.Time) error {
		in, ok := c.insts[instanceID]
		if !ok {
			return fmt.Errorf("maintenance of %s: %w", instanceID, ErrUnknownInstance)
		}
		c.maintenanceLocked(in, now, now.Add(d), CauseManual)
		return nil
	})
}
