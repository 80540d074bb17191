package bidding

import (
	"math"

	"github.com/spotwise/spotwise/providers"
)

// AdvisorBucket is one of AWS Spot Advisor's "frequency of interruption"
// bands: the share of a spot instance type's instances interrupted over a
// month, in percent. Azure publishes eviction rates in the same bands.
type AdvisorBucket struct {
	Label  string
	Lo, Hi float64 // percent per month
}

// AdvisorBuckets are the bands, lowest first. Spot Advisor gives the top
// band no upper end; 40% is where the simulated cloud draws it to.
var AdvisorBuckets = []AdvisorBucket{
	{"<5%", 0, 5},
	{"5-10%", 5, 10},
	{"10-15%", 10, 15},
	{"15-20%", 15, 20},
	{">20%", 20, 40},
}

// MonthlyToHourly turns a monthly share of instances interrupted (percent)
// into the constant hazard per instance-hour that gives it over a
// HoursPerMonth-hour month.
func MonthlyToHourly(pct float64) float64 {
	if pct <= 0 || math.IsNaN(pct) {
		return 0
	}
	if pct >= 100 {
		return math.Inf(1)
	}
	return -math.Log1p(-pct/100) / HoursPerMonth
}

// BucketRate is the interruption rate per instance-hour a Spot Advisor
// bucket stands for: the middle of its band. It is false for a label that
// is no bucket.
func BucketRate(label string) (float64, bool) {
	for _, b := range AdvisorBuckets {
		if b.Label == label {
			return MonthlyToHourly((b.Lo + b.Hi) / 2), true
		}
	}
	return 0, false
}

// OnDemandRate is how often capacity that is not spot still goes away
// under a job: scheduled maintenance and hardware failure, each about once
// per instance-year (the simulated cloud's figures too).
const OnDemandRate = 2.0 / (365 * 24)

// PriorRate is the interruption rate per instance-hour to assume for an
// offer before anything is known about it: OnDemandRate for every purchase
// option (machines fail and are maintained whatever was paid for them),
// plus for spot the provider's typical band (AWS and Azure: the middle
// band, 5-10% a month, as the scheduler's executor assumes; GCP publishes
// no bands and has quoted preemption rates of several percent a day, so
// the top band).
func PriorRate(provider string, p providers.PurchaseOption) float64 {
	if p != providers.Spot {
		return OnDemandRate
	}
	label := "5-10%"
	if provider == "gcp" {
		label = ">20%"
	}
	r, _ := BucketRate(label)
	return r + OnDemandRate
}

// DefaultPriorHours is how much a prior counts for against what has been
// observed, in instance-hours: after this many observed hours, the data
// weigh as much as the prior.
const DefaultPriorHours = 1000

// BlendRate is the interruption rate per instance-hour given a prior and
// what was observed: the posterior mean of a Gamma prior with rate prior
// and weight priorHours (that many pseudo-hours with prior x priorHours
// pseudo-interruptions), after interruptions in hours of observation:
//
//	(prior x priorHours + interruptions) / (priorHours + hours)
//
// With nothing observed it is the prior; with much more observed than the
// prior's weight it is the observed rate. Nonsense inputs (negative, NaN)
// count as nothing observed.
func BlendRate(prior, priorHours, interruptions, hours float64) float64 {
	if !(prior >= 0) || math.IsInf(prior, 0) {
		prior = 0
	}
	if !(priorHours >= 0) || math.IsInf(priorHours, 0) {
		priorHours = 0
	}
	if !(interruptions >= 0) || !(hours >= 0) || math.IsInf(hours, 0) || math.IsInf(interruptions, 0) {
		interruptions, hours = 0, 0
	}
	w := priorHours + hours
	if w == 0 {
		return prior
	}
	return (prior*priorHours + interruptions) / w
}
