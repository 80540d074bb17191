package sim

import (
	"container/heap"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// An instance's life after launch is a sequence of actions, each due at a
// time that is a pure function of the seed, the instance's record and the
// traces: its boot, the notices it gets, the end they announce, a hardware
// failure. advanceLocked applies every action due by the clock's time in
// time order, each at its own time, so a cloud that catches up after a
// pause (or a restart) ends where one that never paused is.

// actionKind orders actions due at the same instant.
type actionKind int

const (
	actBoot        actionKind = iota
	actEnd                    // an announced deadline
	actFail                   // a hardware failure
	actNotice                 // a spot interruption notice
	actRebalance              // a rebalance recommendation
	actMaintenance            // a scheduled maintenance notice
)

type action struct {
	kind     actionKind
	at       time.Time
	deadline time.Time // maintenance
	cause    string
}

// notice is an announced end, kept in the instance's record so that a
// restarted cloud still ends the instance at the deadline.
type notice struct {
	SentAt   time.Time `json:"sent_at"`
	Deadline time.Time `json:"deadline"`
	Cause    string    `json:"cause,omitempty"`
}

// draws are an instance's seeded processes, drawn as far as needed.
type draws struct {
	storm, interruption, maintenance, failure scan
}

// announcedEnd is when the instance ends by the notices it got, if any.
func (r *record) announcedEnd() (time.Time, bool) {
	var end time.Time
	for _, n := range []*notice{r.Interruption, r.Maintenance} {
		if n != nil && (end.IsZero() || n.Deadline.Before(end)) {
			end = n.Deadline
		}
	}
	return end, !end.IsZero()
}

// announces reports whether a notice of one kind with this deadline would
// tell the instance anything: it is live, has no notice of that kind yet,
// and no end announced earlier comes first. Notices that do not are not
// sent, which de-duplicates them.
func (r *record) announces(maintenance bool, deadline time.Time) bool {
	switch {
	case r.Instance.State.Ended(), maintenance && r.Maintenance != nil, !maintenance && r.Interruption != nil:
		return false
	}
	end, ok := r.announcedEnd()
	return !ok || deadline.Before(end)
}

// horizon is how far ahead the seeded draws must be known when the clock
// reads now: past the next wake-up (a price step at the latest), plus the
// lead of a rebalance recommendation over its interruption.
func (c *Cloud) horizon(now time.Time) time.Time { return now.Add(c.interval + rebalanceLeadMax) }

// planLocked is the instance's next action, whether due or not; ok is
// false when it has none up to until.
func (c *Cloud) planLocked(in *instance, until time.Time) (action, bool) {
	r := &in.rec
	i := &r.Instance
	if i.State.Ended() {
		return action{}, false
	}
	var best action
	var ok bool
	consider := func(a action) {
		if !ok || a.at.Before(best.at) || (a.at.Equal(best.at) && a.kind < best.kind) {
			best, ok = a, true
		}
	}
	if i.State == providers.InstancePending {
		consider(action{kind: actBoot, at: r.DueAt})
	}
	if end, has := r.announcedEnd(); has {
		consider(action{kind: actEnd, at: end})
	}
	if a, has := c.reservationEnd(in); has {
		consider(a)
	}
	running := i.State == providers.InstanceRunning
	tr := c.traces[i.Zone]
	window := NoticeWindow(i.Provider)
	spotNotice := func(at time.Time, cause string) {
		if r.announces(false, at.Add(window)) {
			consider(action{kind: actNotice, at: at, cause: cause})
		}
	}
	if i.Purchase == providers.Spot && r.Interruption == nil {
		if tr != nil {
			// The zone's trace alone decides, from the launch on.
			if at, has := tr.firstOutage(i.LaunchedAt); has {
				spotNotice(at, CauseTrace)
			}
		} else {
			if at, has := c.stormLocked(in, until); has {
				spotNotice(at, CauseStorm)
			}
			if running {
				if at, has := c.interruptionLocked(in, until); has {
					spotNotice(at, CauseInterruption)
					if rb, has := c.rebalanceFor(in, at); has {
						consider(action{kind: actRebalance, at: rb, cause: CauseRebalance})
					}
				}
			}
		}
	}
	if running && tr == nil {
		d := &in.draws
		if !d.maintenance.begun {
			d.maintenance.begin(seeded(c.seed, "maintenance", i.ID), 0)
			d.failure.begin(seeded(c.seed, "failure", i.ID), 0)
		}
		if r.Maintenance == nil {
			if at, has := d.maintenance.first(c.intr.MaintenancePerHour, i.RunningAt, i.RunningAt, until); has {
				deadline := at.Add(seededDuration(seeded(c.seed, "maintenance-lead", i.ID), maintenanceMin, maintenanceMax))
				if r.announces(true, deadline) {
					consider(action{kind: actMaintenance, at: at, deadline: deadline, cause: CauseMaintenance})
				}
			}
		}
		if at, has := d.failure.first(c.intr.FailuresPerHour, i.RunningAt, i.RunningAt, until); has {
			consider(action{kind: actFail, at: at})
		}
	}
	return best, ok
}

// stormLocked is the first storm in the instance's zone since its launch.
func (c *Cloud) stormLocked(in *instance, until time.Time) (time.Time, bool) {
	s := &in.draws.storm
	i := &in.rec.Instance
	if !s.begun {
		s.begin(seeded(c.seed, "storm", i.Zone), stepAt(i.LaunchedAt, drawSlot))
	}
	return s.first(c.intr.StormsPerDay/24, epoch, i.LaunchedAt, until)
}

// interruptionLocked is the instance's first seeded spot interruption since
// it started running, at its offer's rate.
func (c *Cloud) interruptionLocked(in *instance, until time.Time) (time.Time, bool) {
	o, ok := c.offers[in.rec.Offer]
	if !ok {
		return time.Time{}, false
	}
	s := &in.draws.interruption
	i := &in.rec.Instance
	if !s.begun {
		s.begin(seeded(c.seed, "interruption", i.ID), 0)
	}
	return s.first(o.hazard*c.intr.RateScale, i.RunningAt, i.RunningAt, until)
}

// rebalanceFor is when the instance gets a rebalance recommendation ahead
// of its seeded interruption at at: drawn with probability RebalanceShare,
// a seeded 2 to 20 minutes ahead, and only while it runs.
func (c *Cloud) rebalanceFor(in *instance, at time.Time) (time.Time, bool) {
	r := &in.rec
	if !r.RebalanceAt.IsZero() || unit(seeded(c.seed, "rebalance", r.Instance.ID)) >= c.intr.RebalanceShare {
		return time.Time{}, false
	}
	rb := at.Add(-seededDuration(seeded(c.seed, "rebalance-lead", r.Instance.ID), rebalanceLeadMin, rebalanceLeadMax))
	if rb.Before(r.Instance.RunningAt) {
		return time.Time{}, false
	}
	return rb, true
}

// dueLocked takes the earliest action due by now over every instance;
// ties go by kind, then by instance, so the order never depends on map
// order. The instance is planned again before the next one is taken.
func (c *Cloud) dueLocked(now, until time.Time) (*instance, action, bool) {
	c.planAllLocked(now, until)
	if c.acts.Len() == 0 || c.acts.items[0].at.After(now) {
		return nil, action{}, false
	}
	p := heap.Pop(c.acts).(planned)
	c.changedLocked(p.in)
	return p.in, p.a, true
}

// applyLocked carries out an action at its own time.
func (c *Cloud) applyLocked(in *instance, a action) {
	switch a.kind {
	case actBoot:
		c.becomeRunningLocked(in)
	case actEnd:
		c.endLocked(in, a.at, providers.InstanceTerminated, c.endReason(in, a.at), providers.EventInstanceTerminated)
	case actFail:
		c.endLocked(in, a.at, providers.InstanceFailed, ReasonFailed, providers.EventInstanceTerminated)
	case actNotice:
		c.noticeLocked(in, a.at, a.cause)
	case actRebalance:
		c.rebalanceLocked(in, a.at, a.cause)
	case actMaintenance:
		c.maintenanceLocked(in, a.at, a.deadline, a.cause)
	}
}

// noticeLocked sends a spot interruption notice: the instance ends at
// at + the provider's notice window. It reports false, and sends nothing,
// when the notice would tell nothing new (see record.announces).
func (c *Cloud) noticeLocked(in *instance, at time.Time, cause string) bool {
	i := &in.rec.Instance
	deadline := at.Add(NoticeWindow(i.Provider))
	if !in.rec.announces(false, deadline) {
		c.log.Debug("spot interruption notice not sent", zap.String("instance", i.ID), zap.String("cause", cause))
		return false
	}
	in.rec.Interruption = &notice{SentAt: at, Deadline: deadline, Cause: cause}
	c.persistLocked(in)
	c.emitNoticeLocked(providers.EventSpotInterruption, in, at, deadline, cause)
	c.log.Info("spot interruption notice", zap.String("instance", i.ID), zap.String("offer", in.rec.Offer),
		zap.String("job", i.JobID), zap.String("zone", i.Zone), zap.Time("deadline", deadline), zap.String("cause", cause))
	return true
}

// maintenanceLocked announces scheduled maintenance ending the instance at
// deadline, unless that tells nothing new.
func (c *Cloud) maintenanceLocked(in *instance, at, deadline time.Time, cause string) bool {
	i := &in.rec.Instance
	if !in.rec.announces(true, deadline) {
		c.log.Debug("maintenance notice not sent", zap.String("instance", i.ID), zap.String("cause", cause))
		return false
	}
	in.rec.Maintenance = &notice{SentAt: at, Deadline: deadline, Cause: cause}
	c.persistLocked(in)
	c.emitNoticeLocked(providers.EventMaintenance, in, at, deadline, cause)
	c.log.Info("maintenance notice", zap.String("instance", i.ID), zap.String("offer", in.rec.Offer),
		zap.String("job", i.JobID), zap.Time("deadline", deadline), zap.String("cause", cause))
	return true
}

// rebalanceLocked sends a rebalance recommendation: at most one per
// instance, and none once it is under a spot interruption notice.
func (c *Cloud) rebalanceLocked(in *instance, at time.Time, cause string) bool {
	r := &in.rec
	if r.Instance.State.Ended() || r.Interruption != nil || !r.RebalanceAt.IsZero() {
		return false
	}
	r.RebalanceAt = at
	c.persistLocked(in)
	c.emitNoticeLocked(providers.EventRebalance, in, at, time.Time{}, cause)
	c.log.Info("rebalance recommendation", zap.String("instance", r.Instance.ID), zap.String("offer", r.Offer),
		zap.String("job", r.Instance.JobID), zap.String("cause", cause))
	return true
}

func (c *Cloud) emitNoticeLocked(kind providers.EventKind, in *instance, at, deadline time.Time, reason string) {
	c.repriceLocked(in, at)
	inst := in.rec.Instance
	c.emitLocked(providers.Event{Kind: kind, Provider: inst.Provider, Region: inst.Region, Time: at,
		Instance: &inst, Deadline: deadline, Reason: reason})
}

// hold is capacity an interruption took from an offer, until it returns.
type hold struct {
	o     *offer
	until time.Time
}

// holdLocked keeps one instance's capacity away from its offer until
// until: the spot pool shrank.
func (c *Cloud) holdLocked(o *offer, until time.Time) {
	o.reclaimed++
	c.holds = append(c.holds, hold{o: o, until: until})
	c.dirty[o.region] = true
}

// expireHoldsLocked gives back the capacity whose hold is over.
func (c *Cloud) expireHoldsLocked(now time.Time) {
	kept := c.holds[:0]
	for _, h := range c.holds {
		if h.until.After(now) {
			kept = append(kept, h)
			continue
		}
		h.o.reclaimed--
		c.dirty[h.o.region] = true
	}
	clear(c.holds[len(kept):])
	c.holds = kept
}

// holdFor is how long an interrupted instance's capacity stays away from
// its offer after the deadline: seeded per instance.
func (c *Cloud) holdFor(id string) time.Duration {
	return seededDuration(seeded(c.seed, "hold", id), holdMin, holdMax)
}

// nextWakeLocked is the earliest thing due after now: an instance's action,
// a trace's change, a hold's end. The price step is the caller's.
func (c *Cloud) nextWakeLocked(now, next time.Time) time.Time {
	c.planAllLocked(now, c.horizon(now))
	if c.acts.Len() > 0 && c.acts.items[0].at.Before(next) {
		next = c.acts.items[0].at
	}
	for _, tr := range c.traces {
		if t, ok := tr.nextChange(now); ok && t.Before(next) {
			next = t
		}
	}
	for _, h := range c.holds {
		if h.until.Before(next) {
			next = h.until
		}
	}
	next = c.nextReservationChange(now, next)
	for rk := range c.counted {
		if t := c.announced[rk].Add(c.countEvery); t.Before(next) {
			next = t
		}
	}
	return next
}
