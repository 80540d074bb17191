package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// Reserved capacity. Each configured reservation (Options.Reservations)
// is sold, during its term, as a reserved offer of its zone and instance
// type: one offer per zone and type, whatever the number of reservations
// behind it, as AWS sells its capacity reservations. The offer's price is
// zero, because the term is paid whether used or not; its Available is the
// free slots of the reservations in their term; a launch takes slots of
// one reservation and its instances bill the reservation's hourly price.
// Reserved instances get no spot interruptions. When a term ends, the
// instances on it get a maintenance notice ReservationNotice ahead and end
// with it; the offer is no longer sold from the notice on.

// ReservationNotice is how long before a reservation's term ends the
// instances on it are told (AWS ends a Capacity Block's instances at its
// end and warns 40 minutes ahead; the scheduler checkpoints and moves the
// job in between).
const ReservationNotice = 30 * time.Minute

// The cause of the notice a reservation's end sends, and the reason its
// instances end with.
const (
	CauseReservationEnd    = "reservation term ends"
	ReasonReservationEnded = "reservation term ended"
)

// reservation is one configured reservation and how many of its slots
// live instances hold.
type reservation struct {
	cfg   providers.Reservation
	offer *offer
	live  int
	// sold: the term has started and its end is more than the notice
	// away (set by refreshReservationsLocked).
	sold bool
}

// free is how many of its slots no live instance holds.
func (r *reservation) free() int { return max(r.cfg.Count-r.live, 0) }

// soldAt reports whether the reservation's slots are sold at t.
func (r *reservation) soldAt(t time.Time) bool {
	return r.cfg.Active(t) && t.Before(r.cfg.End.Add(-ReservationNotice))
}

// addReservations makes the reserved offers of the configured
// reservations, each beside the on-demand offer of its zone and instance
// type (the region's first zone when it names none).
func (c *Cloud) addReservations(rs []providers.Reservation) error {
	c.resByID = map[string]*reservation{}
	for i, cfg := range rs {
		where := fmt.Sprintf("sim: reservations[%d] (%s)", i, cfg.ID)
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if _, dup := c.resByID[cfg.ID]; dup {
			return fmt.Errorf("%s: the id is used twice", where)
		}
		k := slices.IndexFunc(c.offerList, func(o *offer) bool {
			s := o.static
			return s.Provider == cfg.Provider && s.Region == cfg.Region && s.InstanceType == cfg.InstanceType &&
				s.Purchase == providers.OnDemand && (cfg.Zone == "" || s.Zone == cfg.Zone)
		})
		if k < 0 {
			return fmt.Errorf("%s: the cloud sells no %s %s in %s %s", where, cfg.Provider, cfg.InstanceType, cfg.Region, cfg.Zone)
		}
		od := c.offerList[k]
		cfg.Zone = od.static.Zone
		id := providers.OfferID(cfg.Provider, cfg.Region, cfg.Zone, cfg.InstanceType, providers.Reserved)
		o, ok := c.offers[id]
		if !ok {
			o = &offer{static: od.static, region: od.region}
			o.static.Purchase = providers.Reserved
			c.offers[id] = o
			c.offerList = append(c.offerList, o)
			c.byRegion[o.region] = append(c.byRegion[o.region], o)
			c.byZone[cfg.Zone] = append(c.byZone[cfg.Zone], o)
		}
		r := &reservation{cfg: cfg, offer: o}
		o.res = append(o.res, r)
		c.resByID[cfg.ID] = r
		c.resList = append(c.resList, r)
	}
	slices.SortFunc(c.offerList, func(a, b *offer) int { return cmp.Compare(a.static.ID(), b.static.ID()) })
	return nil
}

// sold reports whether an offer is for sale now: always, but for a
// reserved offer with no reservation in its term.
func (o *offer) sold() bool {
	if o.static.Purchase != providers.Reserved {
		return true
	}
	return slices.ContainsFunc(o.res, func(r *reservation) bool { return r.sold })
}

// reservedAvailable is how many slots a reserved offer has free.
func (o *offer) reservedAvailable() int {
	n := 0
	for _, r := range o.res {
		if r.sold {
			n += r.free()
		}
	}
	return n
}

// until is when the reservation a launch on the offer would take ends:
// the latest end of those with free slots (of those sold if none has).
func (o *offer) until() time.Time {
	var end time.Time
	for _, pass := range []bool{true, false} {
		for _, r := range o.res {
			if r.sold && (!pass || r.free() > 0) && r.cfg.End.After(end) {
				end = r.cfg.End
			}
		}
		if !end.IsZero() {
			break
		}
	}
	return end
}

// pick is the reservation a launch of n instances takes: of those sold
// with n slots free, the one that lasts longest (then the most room, then
// the ID), so that a job is not moved off sooner than it must.
func (o *offer) pick(n int) *reservation {
	var best *reservation
	for _, r := range o.res {
		if !r.sold || r.free() < n {
			continue
		}
		if best == nil || cmp.Or(r.cfg.End.Compare(best.cfg.End), cmp.Compare(r.free(), best.free()), cmp.Compare(best.cfg.ID, r.cfg.ID)) > 0 {
			best = r
		}
	}
	return best
}

// holdSlotsLocked counts n more (or fewer, n < 0) live instances on the
// reservation an instance runs on.
func (c *Cloud) holdSlotsLocked(i *providers.Instance, n int) {
	if r := c.resByID[i.Reservation]; r != nil && i.Reservation != "" {
		r.live += n
		c.counted[r.offer.region] = true
	}
}

// recountReservationsLocked counts the live instances on each reservation
// (after loading the stored instances).
func (c *Cloud) recountReservationsLocked() {
	for _, r := range c.resList {
		r.live = 0
	}
	for _, in := range c.insts {
		if !in.rec.Instance.State.Ended() {
			c.holdSlotsLocked(&in.rec.Instance, 1)
		}
	}
}

// refreshReservationsLocked starts and stops selling the reservations
// whose term starts, or whose end comes within the notice, by now.
func (c *Cloud) refreshReservationsLocked(now time.Time) {
	for _, r := range c.resList {
		if s := r.soldAt(now); s != r.sold {
			r.sold = s
			c.dirty[r.offer.region] = true
			c.log.Info("reservation "+map[bool]string{true: "sold", false: "no longer sold"}[s],
				zap.String("reservation", r.cfg.ID), zap.String("offer", r.offer.static.ID()), zap.Time("end", r.cfg.End))
		}
	}
}

// nextReservationChange is the next time after now a reservation starts
// or stops being sold, if any is before next.
func (c *Cloud) nextReservationChange(now, next time.Time) time.Time {
	for _, r := range c.resList {
		for _, t := range []time.Time{r.cfg.Start, r.cfg.End.Add(-ReservationNotice)} {
			if t.After(now) && t.Before(next) {
				next = t
			}
		}
	}
	return next
}

// reservationEnd is the action that ends a live instance on a
// reservation with its term: a maintenance notice ReservationNotice
// ahead (at once if it started later than that), then the end.
func (c *Cloud) reservationEnd(in *instance) (action, bool) {
	i := &in.rec.Instance
	r := c.resByID[i.Reservation]
	if r == nil || i.Reservation == "" || i.State.Ended() {
		return action{}, false
	}
	end := r.cfg.End
	if in.rec.announces(true, end) {
		at := end.Add(-ReservationNotice)
		if at.Before(i.LaunchedAt) {
			at = i.LaunchedAt
		}
		return action{kind: actMaintenance, at: at, deadline: end, cause: CauseReservationEnd}, true
	}
	// A notice sent earlier announced a later end: the term still ends
	// it.
	if e, ok := in.rec.announcedEnd(); !ok || e.After(end) {
		return action{kind: actEnd, at: end}, true
	}
	return action{}, false
}

// endReason is why an instance ends at an announced end at t.
func (c *Cloud) endReason(in *instance, t time.Time) string {
	if n := in.rec.Interruption; n != nil && !n.Deadline.After(t) {
		return ReasonReclaimed
	}
	if r := c.resByID[in.rec.Instance.Reservation]; r != nil && in.rec.Instance.Reservation != "" && !r.cfg.End.After(t) {
		return ReasonReservationEnded
	}
	return ReasonMaintenance
}

// ReservationStatus is a reservation as the cloud holds it now, with the
// lifetimes of the instances that used it (those the cloud still
// remembers: see KeyRetention).
type ReservationStatus struct {
	Reservation providers.Reservation
	// OfferID is the reserved offer its slots are sold as.
	OfferID string
	// InUse is how many live instances hold its slots.
	InUse int
	Uses  []providers.ReservationUse
}

// Reservations lists the configured reservations, in the order of
// providers.CompareReservations, with their use.
func (c *Cloud) Reservations(ctx context.Context) ([]ReservationStatus, error) {
	var out []ReservationStatus
	err := c.do(ctx, func(time.Time) error {
		byRes := map[string][]providers.ReservationUse{}
		for _, in := range c.insts {
			i := in.rec.Instance
			if i.Reservation == "" {
				continue
			}
			byRes[i.Reservation] = append(byRes[i.Reservation], providers.ReservationUse{Instance: i.ID, From: i.LaunchedAt, To: i.EndedAt})
		}
		for _, r := range c.resList {
			uses := byRes[r.cfg.ID]
			slices.SortFunc(uses, func(a, b providers.ReservationUse) int {
				return cmp.Or(a.From.Compare(b.From), cmp.Compare(a.Instance, b.Instance))
			})
			out = append(out, ReservationStatus{Reservation: r.cfg, OfferID: r.offer.static.ID(), InUse: r.live, Uses: uses})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b ReservationStatus) int { return providers.CompareReservations(a.Reservation, b.Reservation) })
	return out, err
}
