package sim

import (
	"slices"
	"sort"
	"time"
)

// The listing's index. Reconciliation lists the cloud's instances every
// round (InstancesSince): the live ones and those that ended since a time.
// Walking every instance the cloud remembers (a week of ended ones, see
// Retention) under the cloud's one lock held launches and terminates up
// for as long as the walk took, and that grew with the history. So the
// cloud keeps its live instances apart, and its ended ones (until they are
// pruned) in the order they ended.
//
// An ended instance's providers.Instance does not change any more
// (endLocked is its last change), so a listing copies the ended ones after
// the lock is released, from a slice taken under it. For that, no element
// below the length of a slice once taken is ever written again: the slice
// grows by appending, loses its oldest by reslicing, and is copied whole
// for any other change.
type listing struct {
	live  map[string]*instance // not ended
	ended []*instance          // ended and not pruned, by EndedAt
}

// rememberLocked adds an instance the cloud launched or loaded.
func (c *Cloud) rememberLocked(in *instance) {
	i := &in.rec.Instance
	c.insts[i.ID] = in
	c.byKey[i.IdempotencyKey] = append(c.byKey[i.IdempotencyKey], i.ID)
	switch {
	case !i.State.Ended():
		c.list.live[i.ID] = in
	case !in.rec.Pruned:
		c.addEndedLocked(in)
	}
}

// endedLocked moves an instance that just ended to the ended ones.
func (c *Cloud) endedLocked(in *instance) {
	delete(c.list.live, in.rec.Instance.ID)
	c.addEndedLocked(in)
}

func (c *Cloud) addEndedLocked(in *instance) {
	e := c.list.ended
	at := in.rec.Instance.EndedAt
	if n := len(e); n == 0 || !at.Before(e[n-1].rec.Instance.EndedAt) {
		c.list.ended = append(e, in)
	} else {
		// Ended before the last one (a notice's deadline applied late, or
		// the records loaded at start): a new slice, see listing.
		k := sort.Search(n, func(k int) bool { return at.Before(e[k].rec.Instance.EndedAt) })
		c.list.ended = slices.Insert(slices.Clip(e), k, in)
	}
	in.listed = true
}

// unlistLocked drops an instance the cloud forgets from the index.
func (c *Cloud) unlistLocked(in *instance) {
	delete(c.list.live, in.rec.Instance.ID)
	if in.listed {
		in.listed = false
		c.list.ended = slices.DeleteFunc(slices.Clone(c.list.ended), func(x *instance) bool { return x == in })
	}
}

// prunedLocked drops the ended instances pruneLocked slims: those that
// ended at least Retention before now, the oldest of the ended.
func (c *Cloud) prunedLocked(now time.Time) {
	e := c.list.ended
	k := sort.Search(len(e), func(k int) bool { return now.Sub(e[k].rec.Instance.EndedAt) < Retention })
	for _, in := range e[:k] {
		in.listed = false
	}
	c.list.ended = e[k:]
}

// endedSinceLocked returns the ended instances listed that ended at or
// after since, to be read after the lock is released.
func (c *Cloud) endedSinceLocked(since time.Time) []*instance {
	e := c.list.ended
	k := sort.Search(len(e), func(k int) bool { return !e[k].rec.Instance.EndedAt.Before(since) })
	return slices.Clip(e[k:])
}
