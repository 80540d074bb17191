package sim

import (
	"cmp"
	"container/heap"
	"time"
)

// The cloud keeps every live instance's next action in a queue instead of
// asking each instance for it at every step: an instance is planned again
// only when its record changes (every change goes through putLocked) or
// when the horizon of the seeded draws passes the one it was planned to,
// so one step costs the actions it applies, not the instances that exist.
//
// A plan is a pure function of the record and the horizon, and an action
// planned at or before the horizon stays the instance's next one however
// far the horizon then moves (later draws only add later times): the
// queue yields exactly what asking every instance would, in the same
// order (time, kind, instance).

// planned is a queued action of an instance, or (recheck) the time the
// instance must be planned again to a further horizon. gen is the
// instance's plan generation when it was queued: an older one is stale.
type planned struct {
	at  time.Time
	a   action
	in  *instance
	gen uint64
}

// queue is a heap of planned entries in the order less gives.
type queue struct {
	items []planned
	less  func(a, b *planned) bool
}

func (q *queue) Len() int           { return len(q.items) }
func (q *queue) Less(i, j int) bool { return q.less(&q.items[i], &q.items[j]) }
func (q *queue) Swap(i, j int)      { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *queue) Push(x any)         { q.items = append(q.items, x.(planned)) }
func (q *queue) Pop() any {
	n := len(q.items) - 1
	x := q.items[n]
	q.items[n] = planned{}
	q.items = q.items[:n]
	return x
}

// byAction orders actions as dueLocked must apply them; byTime rechecks.
func byAction(a, b *planned) bool {
	return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.a.kind, b.a.kind), compareInstances(a.in.rec.Instance, b.in.rec.Instance)) < 0
}
func byTime(a, b *planned) bool { return a.at.Before(b.at) }

// changedLocked marks an instance to be planned again.
func (c *Cloud) changedLocked(in *instance) { c.stale[in] = struct{}{} }

// current reports whether a queued entry is still its instance's plan.
func (c *Cloud) current(p planned) bool { return p.gen == p.in.planGen && !p.in.gone }

// planAhead is how far past the horizon an instance is planned, so that an
// instance with nothing to do is planned again once per planAhead of the
// clock, not at every step.
const planAhead = 2 * time.Hour

// replanLocked queues an instance's next action up to until (and
// planAhead past it), or the time to plan it again when it has none by
// then.
func (c *Cloud) replanLocked(in *instance, until time.Time) {
	in.planGen++
	if in.gone || c.insts[in.rec.Instance.ID] != in {
		return
	}
	until = until.Add(planAhead)
	a, ok := c.planLocked(in, until)
	switch {
	case ok && !a.at.After(until): // final while the record stays as it is
		heap.Push(c.acts, planned{at: a.at, a: a, in: in, gen: in.planGen})
	case in.rec.Instance.State.Ended():
	default:
		// Once the clock passes this, the horizon passes until.
		heap.Push(c.rechecks, planned{at: until.Add(-(c.interval + rebalanceLeadMax) + time.Nanosecond), in: in, gen: in.planGen})
	}
}

// planAllLocked brings the queue up to now: the changed instances, and those
// whose horizon the clock has passed, are planned to until.
func (c *Cloud) planAllLocked(now, until time.Time) {
	for in := range c.stale {
		c.replanLocked(in, until)
	}
	clear(c.stale)
	for c.rechecks.Len() > 0 && !c.rechecks.items[0].at.After(now) {
		p := heap.Pop(c.rechecks).(planned)
		if c.current(p) {
			c.replanLocked(p.in, until)
		}
	}
	for c.acts.Len() > 0 && !c.current(c.acts.items[0]) {
		heap.Pop(c.acts)
	}
}
