package bidding

import (
	"cmp"
	"slices"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// JobRisk is what scoring a job's options with their risk needs from the
// job: shared by every offer it is scored on.
type JobRisk struct {
	Now        time.Time
	Nodes      int
	Checkpoint Checkpointing
	Deadline   time.Time // zero: none
}

// Option is a job on one offer, scored with its risk: what `spotwise
// quote` ranks.
type Option struct {
	Offer providers.Offer `json:"offer"`
	// Rate is the offer's interruption rate per instance-hour and
	// RateSource where it came from ("provider", "prior", "observed").
	Rate          float64      `json:"rate"`
	RateSource    string       `json:"rate_source"`
	Risk          RiskEstimate `json:"risk"`
	MeetsDeadline bool         `json:"meets_deadline"`
}

// Score is the job on offer o, whose risk-free estimate (the scheduler's)
// is base, at interruption rate rate; a restart is expected to land on
// restart (nil: the same region).
func (j JobRisk) Score(o providers.Offer, base Estimate, rate float64, source string, restart *providers.Offer) Option {
	in := RiskInput{
		Now: j.Now, PricePerHour: o.Price, Nodes: j.Nodes,
		Startup: base.Startup, Runtime: base.Runtime,
		// Whatever base charged beyond the hours (a checkpoint moved
		// here) is charged again.
		Extra:                base.Cost - o.Price.MulInt(max(1, j.Nodes)).ForDuration(addSat(base.Startup, base.Runtime)),
		InterruptionsPerHour: rate,
		Checkpoint:           j.Checkpoint,
		Changeover:           o.LaunchLatency,
		Provider:             o.Provider, Region: o.Region,
		NoticeWindow: o.Notice(),
	}
	if restart != nil {
		in.RestartProvider, in.RestartRegion = restart.Provider, restart.Region
	}
	est := ExpectedCost(in)
	return Option{Offer: o, Rate: rate, RateSource: source, Risk: est, MeetsDeadline: MeetsDeadline(est.Estimate, j.Deadline)}
}

// RankOptions orders options best first: those expected to meet the
// deadline, then the lowest expected cost, the earliest expected finish,
// the offer ID.
func RankOptions(opts []Option) {
	slices.SortStableFunc(opts, func(a, b Option) int {
		if a.MeetsDeadline != b.MeetsDeadline {
			if a.MeetsDeadline {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.Risk.Cost, b.Risk.Cost); c != 0 {
			return c
		}
		if c := a.Risk.Finish.Compare(b.Risk.Finish); c != 0 {
			return c
		}
		return cmp.Compare(a.Offer.ID(), b.Offer.ID())
	})
}

// RestartTarget is where a job interrupted on offers[i] is expected to
// resume: the first offer of the list (ranked best first) in another zone,
// since the interrupted zone's capacity is gone for a while. It is -1
// when there is none.
func RestartTarget(offers []providers.Offer, i int) int {
	for j := range offers {
		if j != i && (offers[j].Provider != offers[i].Provider || offers[j].Zone != offers[i].Zone) {
			return j
		}
	}
	return -1
}
