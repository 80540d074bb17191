package bidding

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

// A Policy decides, over a job's life, what the job runs on next: spot in
// one of the zones it may use, on-demand, or nothing while it waits for
// spot. `spotwise simulate` asks it once per trace step; the scheduler asks
// it at each scheduling cycle for the job and again at once after an
// interruption. Both pass what they know now (PolicyState) and nothing
// about the future; a policy keeps no state between calls, so a restarted
// scheduler decides the same way, and Decide is safe for concurrent use.
//
// The model (the one of "Can't Be Late", NSDI '24): every entry into spot
// or on-demand from anything else (idle, the other option, another zone)
// costs Changeover of billed time with no progress; spot capacity can
// vanish at any moment, which preempts the job (work done so far is kept,
// the job is idle) and the policy is asked again at once. On-demand never
// vanishes.
type Policy interface {
	// Name is the policy's name as `spotwise simulate --policy` takes it.
	Name() string
	// Decide returns what the job should run on until it is asked again
	// (PolicyState.Step later, or at once after a preemption). A Spot
	// choice names an available zone. Every policy here ends with
	// PolicyState.Guard, so none misses a deadline that on-demand alone
	// could meet from the start.
	Decide(s PolicyState) Choice
}

// RunKind is a kind of capacity a job runs on.
type RunKind uint8

// The kinds of capacity.
const (
	RunIdle RunKind = iota
	RunOnDemand
	RunSpot
)

func (k RunKind) String() string {
	switch k {
	case RunIdle:
		return "idle"
	case RunOnDemand:
		return "on-demand"
	case RunSpot:
		return "spot"
	}
	return fmt.Sprintf("RunKind(%d)", uint8(k))
}

// Choice is what a job runs on: nothing, on-demand (in one zone, or
// wherever is cheapest), or spot in one zone.
type Choice struct {
	Kind RunKind
	// Zone is the index into PolicyState.Zones of a Spot choice, and of
	// an OnDemand choice in a given zone; AnyZone for on-demand means
	// "stay on the on-demand the job runs on, or else the cheapest to
	// finish on" (PolicyState.CheapestOnDemand).
	Zone int
}

// AnyZone is the Zone of an on-demand choice that names no zone.
const AnyZone = -1

// The choices without a zone.
var (
	ChooseIdle     = Choice{Kind: RunIdle}
	ChooseOnDemand = Choice{Kind: RunOnDemand, Zone: AnyZone}
)

// ChooseSpot is spot capacity in zone z (an index into PolicyState.Zones).
func ChooseSpot(z int) Choice { return Choice{Kind: RunSpot, Zone: z} }

// OnDemandIn is on-demand capacity in zone z, at that zone's on-demand
// price (an index into PolicyState.Zones).
func OnDemandIn(z int) Choice { return Choice{Kind: RunOnDemand, Zone: z} }

func (c Choice) String() string {
	switch {
	case c.Kind == RunSpot:
		return fmt.Sprintf("spot[%d]", c.Zone)
	case c.Kind == RunOnDemand && c.Zone >= 0:
		return fmt.Sprintf("on-demand[%d]", c.Zone)
	}
	return c.Kind.String()
}

// PolicyState is everything a policy may know when it decides: the job's
// progress, the deadline, what the job runs on, which zones have spot
// capacity now and what has been observed of them so far.
type PolicyState struct {
	// Elapsed is the time since the job was submitted; Elapsed + TimeLeft
	// is the job's whole window.
	Elapsed time.Duration
	// TimeLeft is the time until the deadline.
	TimeLeft time.Duration
	// Work is the job's whole compute time; WorkLeft what remains of it.
	Work, WorkLeft time.Duration
	// Changeover is the billed time without progress on every entry into
	// spot or on-demand (launch, restore from the checkpoint, warm-up).
	Changeover time.Duration
	// Step is how long a choice holds until the policy is asked again
	// (the simulator's trace step, the scheduler's cycle).
	Step time.Duration
	// Current is what the job runs on now: Idle before the first launch
	// and after a preemption.
	Current Choice
	// ChangeoverLeft is what remains of the changeover on Current; 0 once
	// the job makes progress there.
	ChangeoverLeft time.Duration
	// OnDemandPrice is the on-demand price per node-hour in the zones
	// that do not state their own (SpotZone.OnDemandPrice).
	OnDemandPrice money.Micros
	// Zones are the zones the job may use: spot in each, and on-demand in
	// each at the zone's on-demand price.
	Zones []SpotZone
	// Nodes is how many instances the job runs at once (prices are per
	// node, MoveCost is for the whole job); 0 means 1.
	Nodes int
	// MoveCost is what carrying the job's checkpoint from one region to
	// another costs (egress), billed at the move, for the whole job.
	MoveCost money.Micros
	// Checkpoint is the region holding the job's checkpoint while it is
	// idle; "" when no region is known (a move then pays no MoveCost).
	// While the job runs, its checkpoint is where it runs.
	Checkpoint string
	// Union is what has been observed of capacity in any of the zones
	// (available when at least one is), fed like each zone's Seen. With
	// one zone it is not needed. Left empty, Spotwise has no outage
	// history and keeps to Uniform Progress's line.
	Union ZoneStats
}

// SpotZone is one spot zone as a policy sees it.
type SpotZone struct {
	Name string
	// Available reports whether spot capacity for the job is there now.
	Available bool
	// Region is the zone's region: moving between zones of different
	// regions pays PolicyState.MoveCost. "" is a region like any other.
	Region string
	// Price is the spot price per node-hour now.
	Price money.Micros
	// OnDemandPrice is the zone's on-demand price per node-hour; 0 means
	// PolicyState.OnDemandPrice.
	OnDemandPrice money.Micros
	// Seen is what has been observed of the zone's capacity so far.
	Seen ZoneStats
}

// slack is the time left beyond the remaining work: what the job can
// still spend idle or changing over.
func (s PolicyState) slack() time.Duration { return s.TimeLeft - s.WorkLeft }

// onSpot reports whether the job runs on spot in an available zone.
func (s PolicyState) onSpot() bool {
	return s.Current.Kind == RunSpot && s.Current.Zone >= 0 && s.Current.Zone < len(s.Zones) && s.Zones[s.Current.Zone].Available
}

// anyAvailable reports whether some zone has spot capacity now.
func (s PolicyState) anyAvailable() bool {
	return slices.ContainsFunc(s.Zones, func(z SpotZone) bool { return z.Available })
}

// Safe reports whether choosing c now keeps the deadline reachable
// whatever spot capacity does afterwards: in the worst case spot vanishes
// at the worst moment and the job finishes on on-demand, paying one more
// changeover. A policy that only makes safe choices, starting from a state
// where on-demand alone finishes in time (Work + Changeover <= window),
// never misses its deadline.
func (s PolicyState) Safe(c Choice) bool {
	d := s.Changeover
	switch c.Kind {
	case RunOnDemand:
		if s.Current.Kind == RunOnDemand && (c.Zone == AnyZone || c.Zone == s.Current.Zone) {
			return s.WorkLeft+s.ChangeoverLeft <= s.TimeLeft
		}
		return s.WorkLeft+d <= s.TimeLeft
	case RunIdle:
		return s.WorkLeft+d+s.Step <= s.TimeLeft
	case RunSpot:
		if c.Zone < 0 || c.Zone >= len(s.Zones) || !s.Zones[c.Zone].Available {
			return false
		}
		if c == s.Current {
			// Spot may vanish the moment the changeover ends, before
			// any progress.
			return s.WorkLeft+s.ChangeoverLeft+d <= s.TimeLeft
		}
		return s.WorkLeft+2*d <= s.TimeLeft
	}
	return false
}

// Guard returns c when it is safe and on-demand otherwise: the safety net
// every policy ends with.
func (s PolicyState) Guard(c Choice) Choice {
	if s.Safe(c) {
		return c
	}
	if s.Current.Kind == RunSpot && s.onSpot() && !s.Safe(ChooseOnDemand) {
		// Too late for on-demand to finish in time: staying on spot is
		// the only chance left.
		return s.Current
	}
	if s.Current.Kind == RunOnDemand {
		return s.Current // a move between on-demand zones that is not safe
	}
	return ChooseOnDemand
}

// Policies returns the named online policies, in the order given; names
// are those of PolicyNames.
func Policies(names ...string) ([]Policy, error) {
	out := make([]Policy, 0, len(names))
	for _, n := range names {
		p, err := NewPolicy(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// PolicyNames are the online policies by name.
var PolicyNames = []string{PolicyOnDemandOnly, PolicyGreedy, PolicyUniformProgress, PolicySpotwise}

// Names of the online policies.
const (
	PolicyOnDemandOnly    = "on-demand"
	PolicyGreedy          = "greedy"
	PolicyUniformProgress = "uniform-progress"
	PolicySpotwise        = "spotwise"
)

// NewPolicy returns the online policy with that name.
func NewPolicy(name string) (Policy, error) {
	switch name {
	case PolicyOnDemandOnly:
		return OnDemandOnly{}, nil
	case PolicyGreedy:
		return Greedy{}, nil
	case PolicyUniformProgress:
		return UniformProgress{}, nil
	case PolicySpotwise:
		return Spotwise{}, nil
	}
	return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(PolicyNames, ", "))
}
