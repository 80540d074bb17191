package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// Interruptions configure the seeded interruption model: what takes
// instances away without spotwise asking. Rates are per instance-hour (per
// zone-day for storms). The model is a pure function of the seed, the
// instance (or zone) and the time slot, so two clouds with the same seed and
// the same launches see the same interruptions, and a restarted cloud makes
// the same decisions for the instances it reloads. Zones with an
// availability trace (Options.Traces) are driven by the trace instead: none
// of these draws applies there.
type Interruptions struct {
	// RateScale multiplies every spot offer's interruption rate, drawn per
	// offer from Spot Advisor-like buckets (see AdvisorBucket). 1 is what
	// the buckets say: at most a few interruptions per thousand
	// instance-hours. 0 turns seeded spot interruptions (and so rebalance
	// recommendations) off.
	RateScale float64
	// StormsPerDay is, per zone, how often a storm reclaims every spot
	// instance of the zone at once.
	StormsPerDay float64
	// RebalanceShare is the probability that a seeded spot interruption is
	// preceded, 2 to 20 minutes ahead, by a rebalance recommendation
	// (AWS-like). Storms come without one.
	RebalanceShare float64
	// MaintenancePerHour is the rate of scheduled maintenance, announced
	// 2 to 24 hours ahead, on running instances of any purchase option.
	MaintenancePerHour float64
	// FailuresPerHour is the rate of hardware failures, which end running
	// instances of any purchase option without notice.
	FailuresPerHour float64
}

// DefaultInterruptions is the model a cloud uses when Options.Interruptions
// is nil: realistic spot rates, a storm per zone every 50 days or so,
// maintenance and hardware failures about once per instance-year each.
func DefaultInterruptions() Interruptions {
	return Interruptions{
		RateScale:          1,
		StormsPerDay:       0.02,
		RebalanceShare:     0.5,
		MaintenancePerHour: 1.0 / (365 * 24),
		FailuresPerHour:    1.0 / (365 * 24),
	}
}

func (m Interruptions) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"RateScale", m.RateScale}, {"StormsPerDay", m.StormsPerDay}, {"RebalanceShare", m.RebalanceShare},
		{"MaintenancePerHour", m.MaintenancePerHour}, {"FailuresPerHour", m.FailuresPerHour}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("sim: interruptions: %s %v is not a finite non-negative number", f.name, f.v)
		}
	}
	if m.RebalanceShare > 1 {
		return fmt.Errorf("sim: interruptions: RebalanceShare %v is above 1", m.RebalanceShare)
	}
	return nil
}

// Reasons and causes of interruptions. A notice event's Reason is its
// cause; an ended instance's Reason says how it ended.
const (
	// ReasonReclaimed ends an instance at its spot interruption deadline.
	ReasonReclaimed = "spot capacity reclaimed"
	// ReasonMaintenance ends an instance at its maintenance deadline.
	ReasonMaintenance = "scheduled maintenance"

	CauseInterruption = "spot interruption"  // the offer's seeded rate
	CauseStorm        = "zone storm"         // every spot instance of the zone
	CauseTrace        = "availability trace" // the zone's trace has no capacity
	CauseManual       = "manual"             // Preempt, PreemptJob, Rebalance, Maintenance
	CauseManualStorm  = "manual zone storm"  // PreemptZone
	CauseRebalance    = "elevated risk of interruption"
	CauseMaintenance  = "scheduled maintenance"
)

// Notice timing.
const (
	rebalanceLeadMin = 2 * time.Minute
	rebalanceLeadMax = 20 * time.Minute
	maintenanceMin   = 2 * time.Hour
	maintenanceMax   = 24 * time.Hour
	holdMin          = 30 * time.Minute
	holdMax          = 3 * time.Hour
	// drawSlot is the time slot of the seeded draws.
	drawSlot = time.Hour
	// maxPerSlot bounds the events drawn in one slot of one process.
	maxPerSlot    = 16
	hoursPerMonth = 730
)

// NoticeWindow is how long before a spot interruption the provider warns:
// 2 minutes on AWS, 30 seconds on Azure and GCP (and any other provider).
func NoticeWindow(provider string) time.Duration {
	if provider == "aws" {
		return 2 * time.Minute // the EC2 spot instance interruption notice
	}
	return 30 * time.Second // Azure Scheduled Events Preempt, GCP preemption
}

// advisorBuckets are AWS Spot Advisor's "frequency of interruption" bands:
// the share of instances interrupted over a month, in percent, with how
// often the simulated cloud gives an offer each band.
var advisorBuckets = []struct {
	label  string
	lo, hi float64 // percent per month
	weight int64   // percent of spot offers
}{
	{"<5%", 0.5, 5, 25},
	{"5-10%", 5, 10, 20},
	{"10-15%", 10, 15, 15},
	{"15-20%", 15, 20, 15},
	{">20%", 20, 40, 25},
}

// advisorDraw gives a spot offer its bucket and its hazard rate per
// instance-hour (before RateScale), uniform within the bucket.
func advisorDraw(seed int64, id string) (string, float64) {
	pick := uniform(seeded(seed, "advisor", id), 0, 99)
	b := advisorBuckets[len(advisorBuckets)-1]
	for _, c := range advisorBuckets {
		if pick < c.weight {
			b = c
			break
		}
		pick -= c.weight
	}
	pct := b.lo + (b.hi-b.lo)*unit(seeded(seed, "advisor-rate", id))
	return b.label, monthlyToHourly(pct)
}

// monthlyToHourly turns a monthly share of instances interrupted (percent)
// into a constant hazard per instance-hour.
func monthlyToHourly(pct float64) float64 { return -math.Log(1-pct/100) / hoursPerMonth }

// bucketOf is the advisor bucket of a hazard rate per instance-hour.
func bucketOf(perHour float64) string {
	pct := (1 - math.Exp(-perHour*hoursPerMonth)) * 100
	for _, b := range advisorBuckets[:len(advisorBuckets)-1] {
		if pct < b.hi {
			return b.label
		}
	}
	return advisorBuckets[len(advisorBuckets)-1].label
}

// InterruptionRate is the expected rate, per instance-hour, at which an
// instance of the offer is taken away involuntarily, whatever the cause:
// for spot offers the offer's rate times RateScale plus its zone's storms,
// and for every offer scheduled maintenance and hardware failures. In a
// zone driven by a trace it is the trace's rate of outages (spot) or 0
// (on-demand). ok is false for an offer the cloud does not sell. The
// scheduler can use it for risk and checkpoint intervals (Young/Daly).
func (c *Cloud) InterruptionRate(offerID string) (perHour float64, ok bool) {
	o, ok := c.offers[offerID] // fixed at New, like everything read here
	if !ok {
		return 0, false
	}
	spot := o.static.Purchase == providers.Spot
	if tr := c.traces[o.static.Zone]; tr != nil {
		if spot {
			return tr.perHour, true
		}
		return 0, true
	}
	r := c.intr.MaintenancePerHour + c.intr.FailuresPerHour
	if spot {
		r += o.hazard*c.intr.RateScale + c.intr.StormsPerDay/24
	}
	return r, true
}

// AdvisorBucket is the Spot Advisor-like interruption bucket of a spot
// offer ("<5%", "5-10%", "10-15%", "15-20%", ">20%" of instances per
// month), before RateScale; in a zone driven by a trace, the bucket of the
// trace's rate of outages. It is "" for on-demand and unknown offers.
func (c *Cloud) AdvisorBucket(offerID string) string {
	o, ok := c.offers[offerID]
	if !ok || o.static.Purchase != providers.Spot {
		return ""
	}
	if tr := c.traces[o.static.Zone]; tr != nil {
		return bucketOf(tr.perHour)
	}
	return o.bucket
}

// unit maps h onto the open interval (0, 1).
func unit(h uint64) float64 { return (float64(h>>11) + 0.5) / (1 << 53) }

// seededDuration is a seeded duration in [lo, hi], whole seconds.
func seededDuration(h uint64, lo, hi time.Duration) time.Duration {
	return time.Duration(uniform(h, int64(lo/time.Second), int64(hi/time.Second))) * time.Second
}

// firstInSlot is the first event at or after offset from of a Poisson
// process with rate perHour in one slot of drawSlot: inter-arrival times
// are exponential draws seeded by (base, slot, n), so the events of a slot
// are a pure function of them. Offsets are whole seconds. (Unlike the
// integer price walk this is float64 arithmetic: math.Log may differ in
// its last bit between architectures, which moves a draw only when it
// falls within about 1e-12 of a whole second or of the slot's end.)
func firstInSlot(base uint64, slot int64, perHour float64, from time.Duration) (time.Duration, bool) {
	h := splitmix(base ^ splitmix(uint64(slot)))
	hours := 0.0
	for n := range uint64(maxPerSlot) {
		hours += -math.Log(unit(splitmix(h+n))) / perHour
		if hours >= 1 {
			return 0, false
		}
		if off := time.Duration(hours*3600) * time.Second; off >= from {
			return off, true
		}
	}
	return 0, false
}

// scan finds the first event at or after a start time of one seeded
// process, drawing its slots in order and never past the horizon it is
// given, so that each slot is drawn once however often it is asked.
type scan struct {
	begun bool
	base  uint64
	next  int64 // the next slot to draw
	at    time.Time
	found bool
}

// begin starts a scan whose draws are seeded by base at slot start.
func (s *scan) begin(base uint64, start int64) { s.begun, s.base, s.next = true, base, start }

// first returns the process's first event at or after from. Slot k spans
// [origin + k*drawSlot, origin + (k+1)*drawSlot); drawing stops at the
// first slot that begins after until. The scan must have begun.
func (s *scan) first(perHour float64, origin, from, until time.Time) (time.Time, bool) {
	if s.found {
		return s.at, true
	}
	if perHour <= 0 {
		return time.Time{}, false
	}
	for ; ; s.next++ {
		begin := origin.Add(time.Duration(s.next) * drawSlot)
		if begin.After(until) {
			return time.Time{}, false
		}
		skip := max(from.Sub(begin), 0)
		if off, ok := firstInSlot(s.base, s.next, perHour, skip); ok {
			s.at, s.found = begin.Add(off), true
			return s.at, true
		}
	}
}

// epoch anchors the zone-wide draws (storms): slots count from it.
var epoch = time.Unix(0, 0)
