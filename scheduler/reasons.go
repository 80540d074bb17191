package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// reason is why an offer was rejected for a job; the order is the order
// of the filter stages.
type reason uint8

const (
	reasonNone reason = iota
	reasonGPUType
	reasonGPUMemory
	reasonGPUCount
	reasonVCPUs
	reasonMemory
	reasonRegion
	reasonPurchase
	reasonMaxPrice
	reasonShortNotice
	// The stages from here on differ between jobs of the same needs.
	reasonUnavailable
	reasonExcluded
	reasonQuota
	reasonCapacity
	reasonDeadline
	reasonMaxCost
	numReasons
)

var reasonCodes = [numReasons]string{
	reasonGPUType:     "gpu-type",
	reasonGPUMemory:   "gpu-memory",
	reasonGPUCount:    "gpu-count",
	reasonVCPUs:       "vcpus",
	reasonMemory:      "memory",
	reasonRegion:      "region",
	reasonPurchase:    "purchase",
	reasonMaxPrice:    "max-price",
	reasonShortNotice: "short-notice",
	reasonExcluded:    "excluded",
	reasonUnavailable: "unavailable",
	reasonQuota:       "quota",
	reasonCapacity:    "capacity",
	reasonDeadline:    "deadline",
	reasonMaxCost:     "max-cost",
}

// staticScan sorts every offer into rejected-by-a-static-filter (counted)
// or candidate, once per needs per cycle.
func (n *needs) staticScan(co *compiledOffers) {
	if n.scanned {
		return
	}
	n.scanned = true
	if f := n.filter; f != nil {
		// Needs with the same static filters scan alike: once for all.
		if f.scan == nil {
			f.scan = &needs{gpus: n.gpus, regions: n.regions, perNode: n.perNode, minMem: n.minMem, minVCPUs: n.minVCPUs,
				minRAM: n.minRAM, purchases: n.purchases, maxPrice: n.maxPrice, skipShort: n.skipShort, ckpt: n.ckpt}
			f.scan.scanAll(co)
		}
		n.static, n.cands, n.cheapestOver = f.scan.static, f.scan.cands, f.scan.cheapestOver
		return
	}
	n.scanAll(co)
}

// scanAll is staticScan's walk of every offer.
func (n *needs) scanAll(co *compiledOffers) {
	n.cheapestOver = -1
	n.cands = make([][]*compiledOffer, len(co.groups))
	for gi := range co.groups {
		g := &co.groups[gi]
		if !n.gpus[gi] {
			n.static[reasonGPUType] += len(g.offers)
			continue
		}
		for _, o := range g.offers {
			r := n.staticReason(o)
			if r == reasonNone {
				n.cands[gi] = append(n.cands[gi], o)
				continue
			}
			if r == reasonMaxPrice && (n.cheapestOver < 0 || o.price < n.cheapestOver) {
				n.cheapestOver = o.price
			}
			n.static[r]++
		}
	}
}

// fitsNowhere reports whether a scan has found that no offer passes the
// needs' static filters, with the reasons every job of these needs then
// waits for already written.
func (n *needs) fitsNowhere() bool {
	if !n.scanned || n.staticOnly == nil || n.err != "" {
		return false
	}
	for _, c := range n.cands {
		if len(c) > 0 {
			return false
		}
	}
	return true
}

// explain counts what rejected each offer for a job that could not be
// placed, keeping the nearest miss for the messages. The static part is
// shared by every job with the same needs; only the candidates are looked
// at per job. hopeless is set for a job with a deadline that no offer it
// may use would meet even with capacity.
func (co *compiledOffers) explain(cj *compiledJob, now time.Time) (reasons []job.PendingReason, hopeless bool) {
	if len(co.all) == 0 {
		return []job.PendingReason{{Code: "no-offers", Message: "no offers are known yet: waiting for price feeds"}}, false
	}
	cj.staticScan(co)
	counts := cj.static
	var earliest time.Time
	hopeful := cj.deadline.IsZero()
	for gi, cands := range cj.cands {
		for _, o := range cands {
			r := cj.dynamicReason(o)
			if r == reasonNone || (!hopeful && r != reasonExcluded) {
				est := cj.estimate(now, o, cj.runtime[gi])
				meets := bidding.MeetsDeadline(est, cj.deadline)
				hopeful = hopeful || meets
				switch {
				case r != reasonNone:
				case meets && cj.affordable(est):
					continue // feasible: placed by a later cycle once capacity frees up
				case meets:
					r = reasonMaxCost
					if cj.overCost == 0 || est.Cost < cj.overCost {
						cj.overCost = est.Cost
					}
				default:
					r = reasonDeadline
					if earliest.IsZero() || est.Finish.Before(earliest) {
						earliest = est.Finish
					}
				}
			}
			counts[r]++
		}
	}
	// Hopeless: the deadline has passed, or there are offers the job may
	// use and none of them would finish in time even with capacity (with
	// none at all, the offers it needs may not be known yet).
	candidates := 0
	for _, c := range cj.cands {
		candidates += len(c)
	}
	hopeless = !hopeful && cj.err == "" && (!now.Before(cj.deadline) || candidates > counts[reasonExcluded])
	return co.reasonList(cj, counts, earliest), hopeless
}

// reasonList turns the counts into reasons, cheapest filter first.
func (co *compiledOffers) reasonList(cj *compiledJob, counts [numReasons]int, earliest time.Time) []job.PendingReason {
	if counts == cj.static && cj.staticOnly != nil {
		// Only the shared static filters rejected offers: every job with
		// these needs has the same reasons, so they share one list.
		return cj.staticOnly
	}
	var out []job.PendingReason
	for r := reasonGPUType; r < numReasons; r++ {
		if counts[r] == 0 {
			continue
		}
		if r < reasonUnavailable {
			// Static reasons read the same for every job with these
			// needs: build each message once.
			if cj.staticMsgs[r] == "" {
				cj.staticMsgs[r] = cj.message(r, counts[r], cj.cheapestOver, earliest)
			}
			out = append(out, job.PendingReason{Code: reasonCodes[r], Offers: counts[r], Message: cj.staticMsgs[r]})
			continue
		}
		out = append(out, job.PendingReason{Code: reasonCodes[r], Offers: counts[r], Message: cj.message(r, counts[r], cj.cheapestOver, earliest)})
	}
	if cj.err != "" {
		out = append(out, job.PendingReason{Code: "throughput", Message: cj.err})
	}
	if len(out) == 0 {
		out = append(out, job.PendingReason{Code: "capacity", Message: "every matching offer was taken by higher-priority jobs in this cycle"})
	}
	if counts == cj.static {
		cj.staticOnly = out
	}
	return out
}

func (cj *compiledJob) message(r reason, n int, cheapestOver money.Micros, earliest time.Time) string {
	offers := plural(n, "offer")
	switch r {
	case reasonGPUType:
		if len(cj.accels) == 0 {
			return fmt.Sprintf("%s have GPU types with no throughput figure", offers)
		}
		return fmt.Sprintf("%s have a GPU type the job does not accept (wants %s)", offers, strings.Join(cj.accels, ", "))
	case reasonGPUMemory:
		return fmt.Sprintf("%s have GPUs with less than %d GB of memory", offers, cj.minMem)
	case reasonGPUCount:
		return fmt.Sprintf("%s have fewer than %d GPUs per node", offers, cj.perNode)
	case reasonVCPUs:
		return fmt.Sprintf("%s have fewer than %d vCPUs per node", offers, cj.minVCPUs)
	case reasonMemory:
		return fmt.Sprintf("%s have less than %g GiB of memory per node", offers, cj.minRAM)
	case reasonRegion:
		return fmt.Sprintf("%s are in providers or regions the job's placement rules exclude", offers)
	case reasonPurchase:
		return fmt.Sprintf("%s are not allowed by the job's purchase policy %q", offers, cj.purchase)
	case reasonMaxPrice:
		return fmt.Sprintf("%s cost more than the max price of %s/h (the cheapest of them costs %s/h)", offers, cj.maxPrice.Human(), cheapestOver.Human())
	case reasonShortNotice:
		return fmt.Sprintf("%s warn less than the %s the job's checkpoint takes before taking the capacity back (checkpoint.skip_short_notice)", offers, human(cj.ckpt.Time))
	case reasonExcluded:
		return fmt.Sprintf("%s were refused for this job by their provider (%s)", offers, cj.exclusionReasons())
	case reasonUnavailable:
		return fmt.Sprintf("%s are marked unavailable after a launch failed for lack of capacity, or a notice", offers)
	case reasonQuota:
		return fmt.Sprintf("%s would take team %s past its GPU quota: %s", offers, cj.q.Team, cj.team.quotaMessage(cj))
	case reasonCapacity:
		return fmt.Sprintf("%s have no capacity left for %s", offers, plural(cj.nodes, "instance"))
	case reasonMaxCost:
		return fmt.Sprintf("%s would take the job past its max_cost_usd of %s (%s spent so far; the cheapest of them is expected to cost %s to finish)",
			offers, cj.maxCost.Human(), cj.q.CostSoFar.Human(), cj.overCost.Human())
	case reasonDeadline:
		return fmt.Sprintf("%s cannot finish by the deadline %s (the earliest would finish %s, %s late)",
			offers, cj.deadline.UTC().Format(time.RFC3339), earliest.UTC().Format(time.RFC3339), human(earliest.Sub(cj.deadline)))
	}
	return offers
}

// exclusionReasons says why the job's exclusions are there.
func (cj *compiledJob) exclusionReasons() string {
	x := cj.q.Except
	if x == nil {
		return ""
	}
	if len(x.ExcludedWhy) == 0 {
		return strings.Join(x.Excluded, "; ")
	}
	return strings.Join(x.ExcludedWhy, "; ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// human writes a duration the way people do: "5h2m", "45s".
func human(d time.Duration) string {
	if d >= time.Minute {
		d = d.Round(time.Minute)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
