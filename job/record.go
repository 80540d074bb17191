package job

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spotwise/spotwise/money"
)

// maxHistory bounds how many ended attempts a record keeps in full; older
// ones stay in the job's event history and in its cost.
const maxHistory = 20

// Record is a job as stored in the job-state bucket: the spec as accepted
// and the status the scheduler maintains. Every write carries the revision
// it was based on.
type Record struct {
	ID     string `json:"id"`
	Spec   Spec   `json:"spec"`
	Status Status `json:"status"`
}

// Status is the part of a record that changes.
type Status struct {
	State State `json:"state"`
	// Message says why the job is in its state ("instance lost",
	// "command exited with code 2", "cancelled by user").
	Message     string    `json:"message,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	DeadlineAt  time.Time `json:"deadline_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// Attempt counts placements so far; attempt N launches with key
	// "<id>-a<N>".
	Attempt int `json:"attempt"`
	// Current is the attempt that runs the job or is acquiring capacity
	// for it.
	Current *Attempt `json:"current,omitempty"`
	// Previous is the attempt the job is leaving: under an interruption
	// notice while it checkpoints, or released and waiting for its
	// provider to confirm that its capacity is gone.
	Previous *Attempt `json:"previous,omitempty"`
	// Attempts are the ended attempts, oldest first (the last 20).
	Attempts []Attempt `json:"attempts,omitempty"`
	// EndedCost is what all ended attempts cost.
	EndedCost money.Micros `json:"ended_cost"`
	// BaselineCost is what the job's whole work would have cost on the
	// cheapest on-demand offer that met its needs (its purchase option
	// aside) when it was first placed: what its savings are counted
	// against. Zero when no such offer was known.
	BaselineCost money.Micros `json:"baseline_cost,omitempty"`
	// Progress is the fraction of the work done and kept (0..1).
	Progress float64 `json:"progress"`
	// ProgressAt is when an agent's progress report was last written
	// (see ProgressEvery).
	ProgressAt time.Time `json:"progress_at,omitzero"`
	// WorkLost is work done by attempts that ended without keeping it.
	WorkLost Duration `json:"work_lost,omitempty"`
	// Checkpoint is the job's last good checkpoint: where a new attempt
	// resumes from.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	// CheckpointSince is when the job's first checkpoint was stored: its
	// storage is billed from then to the job's end (StorageAt).
	CheckpointSince time.Time `json:"checkpoint_since,omitzero"`
	// CheckpointRoot is where the job's checkpoints live: a checkpoint
	// reported anywhere else is refused.
	CheckpointRoot string `json:"checkpoint_root,omitempty"`
	// Preemptions counts interruption notices the job received.
	Preemptions int `json:"preemptions,omitempty"`
	// Retries counts command failures that were run again.
	Retries int `json:"retries,omitempty"`
	// Excluded are offers (or scopes) the job must not be placed on: a
	// provider refused them for a reason retrying will not change.
	Excluded []Exclusion `json:"excluded,omitempty"`
	// DeadlineMissed is set when the deadline could no longer be met and
	// the spec said to run anyway.
	DeadlineMissed bool `json:"deadline_missed,omitempty"`
	// Term is the scheduler lease term of the last scheduler write: a
	// deposed scheduler (an older term) may not write the record again.
	Term           int64  `json:"term,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	SpecHash       string `json:"spec_hash"`
	// Sealed is set once the job's history has been sealed (moved off its
	// own subject, long after the job finished): where it went.
	Sealed *Sealed `json:"sealed,omitempty"`
}

// Sealed says where a finished job's history was moved when it was
// sealed, and what the ledger billed the job then.
type Sealed struct {
	// History are the stream sequences of the messages the job's events
	// were sealed into, oldest first; events stored after them are on
	// the job's own subject.
	History []uint64 `json:"history"`
	// Bill fingerprints the charges the ledger held for the job when it
	// was sealed (see ledger.BillPrint): a version of the record that
	// bills the same needs no look at the ledger.
	Bill uint64 `json:"bill,omitempty"`
}

// SealedHistory is where the job's sealed history is (nil: not sealed).
func (r *Record) SealedHistory() []uint64 {
	if r.Status.Sealed == nil {
		return nil
	}
	return r.Status.Sealed.History
}

// Exclusion keeps a job off an offer, or off a scope of offers (see
// MarkUnavailable's keys), for the reason a provider gave.
type Exclusion struct {
	Key    string `json:"key"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
}

// Placement is where an attempt runs.
type Placement struct {
	OfferID      string       `json:"offer_id"`
	Provider     string       `json:"provider"`
	Region       string       `json:"region"`
	Zone         string       `json:"zone"`
	InstanceType string       `json:"instance_type"`
	GPU          string       `json:"gpu"`
	GPUs         int          `json:"gpus"`
	Nodes        int          `json:"nodes"`
	Purchase     string       `json:"purchase_option"`
	PricePerHour money.Micros `json:"price_per_hour"`
	// OnDemandPrice is the on-demand price of the same instance type in
	// the same region: what the capacity lists at, the yardstick of its
	// savings.
	OnDemandPrice money.Micros `json:"on_demand_price_per_hour,omitempty"`
}

// HourlyCost is what the placement costs per hour for all its nodes.
func (p Placement) HourlyCost() money.Micros { return p.PricePerHour.MulInt(max(1, p.Nodes)) }

// Attempt is one placement of a job on capacity, from decision to end.
type Attempt struct {
	N         int       `json:"n"`
	LaunchKey string    `json:"launch_key"`
	Placement Placement `json:"placement"`
	Instances []string  `json:"instances,omitempty"`
	// Running lists the instances that have reached running; the attempt
	// runs when every node has.
	Running []string `json:"running,omitempty"`
	// Spans bill the instances: each from its launch to the end its
	// provider reported (open while it runs).
	Spans []Span `json:"spans,omitempty"`
	// MaxPrice is the spot max price the attempt launches with.
	MaxPrice money.Micros `json:"max_price,omitempty"`
	PlacedAt time.Time    `json:"placed_at"`
	// LaunchedAt is when the capacity was bought: billing starts here.
	LaunchedAt time.Time `json:"launched_at,omitzero"`
	RunningAt  time.Time `json:"running_at,omitzero"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	// LaunchTries counts launches whose outcome was not known (an error
	// that is neither a refusal nor a success).
	LaunchTries int `json:"launch_tries,omitempty"`
	// SeenAt is when the provider last listed the attempt's instances
	// alive, written at most every SeenEvery and not within SeenEvery of
	// its launch or start: with them, the end billed for one that vanished
	// without a trace (lastAlive).
	SeenAt time.Time `json:"seen_at,omitzero"`
	// EstimatedRuntime and EstimatedCost are what the scheduler expected
	// when it chose the placement.
	EstimatedRuntime Duration     `json:"estimated_runtime"`
	EstimatedCost    money.Micros `json:"estimated_cost"`
	// Transfer is what carrying the job's checkpoint from the region it
	// was written in to this attempt's costs (egress at the provider's
	// published rate): charged once the attempt's capacity is bought.
	Transfer money.Micros `json:"transfer_cost,omitempty"`
	// DataTransfer is what reading the job's input data (Spec.Data) from
	// its region into this attempt's costs (egress at the provider's
	// published rate; nothing in the data's own region): charged, like
	// Transfer, once the attempt's capacity is bought. Every attempt
	// placed away from the data pays it again.
	DataTransfer money.Micros `json:"data_transfer_cost,omitempty"`
	// Notice is set when the provider announced it takes the capacity
	// back, or when spotwise moves the job of its own accord (a notice
	// without a deadline).
	Notice *Notice `json:"notice,omitempty"`
	// StartAfter holds the workload of a replacement attempt until the
	// attempt it replaces has checkpointed: it starts when told (the
	// checkpoint is stored), at the latest at this time.
	StartAfter time.Time `json:"start_after,omitzero"`
	// StartProgress is where the attempt's work began (its checkpoint).
	StartProgress float64 `json:"start_progress,omitempty"`
	// ReleasedAt is when spotwise asked for the attempt's capacity to be
	// terminated; it closes (with Closing as its outcome) once every
	// instance is gone.
	ReleasedAt time.Time `json:"released_at,omitzero"`
	Closing    Outcome   `json:"closing,omitempty"`
	// Outcome is how the attempt ended.
	Outcome Outcome      `json:"outcome,omitempty"`
	Cost    money.Micros `json:"cost"`
}

// Span is the billed life of one instance.
type Span struct {
	Instance string    `json:"instance"`
	From     time.Time `json:"from"`
	// To is when the provider says the instance ended; zero while it runs.
	To time.Time `json:"to,omitzero"`
	// Price is what the provider charges for the instance per hour, which
	// may differ from the price the placement was decided at (a spot
	// price moves); zero: the placement's.
	Price money.Micros `json:"price_per_hour,omitempty"`
	// Prices are the changes of its price while it ran, as its provider
	// reported them: each price segment is billed at its own price.
	Prices []money.PriceChange `json:"prices,omitempty"`
}

// cost is what the span costs up to end (its own end if it has one), at
// its price (price if it has none), rounded once for the instance, as its
// provider bills it.
func (sp Span) cost(end time.Time, price money.Micros) money.Micros {
	var total money.Micros
	for _, seg := range sp.Segments(end, price) {
		total += seg.Cost()
	}
	return total
}

// Segments cuts the span, up to end if it has no end of its own, into the
// stretches billed at one price: its price (price if it has none), then
// each change its provider reported.
func (sp Span) Segments(end time.Time, price money.Micros) []money.Segment {
	to := sp.To
	if to.IsZero() {
		to = end
	}
	if sp.Price != 0 {
		price = sp.Price
	}
	return money.Segments(sp.From, to, price, sp.Prices)
}

// Outcome is how an attempt ended.
type Outcome string

// Attempt outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the command exited with an error.
	OutcomeFailed Outcome = "failed"
	// OutcomeLost: the capacity went without notice.
	OutcomeLost Outcome = "lost"
	// OutcomePreempted: the capacity was taken back after a notice.
	OutcomePreempted Outcome = "preempted"
	// OutcomeMoved: spotwise moved the job off it, checkpoint first.
	OutcomeMoved     Outcome = "moved"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeExpired   Outcome = "expired"
	// OutcomeLaunchFailed: the provider refused the launch; nothing was
	// bought.
	OutcomeLaunchFailed Outcome = "launch-failed"
	// OutcomeLaunchLost: the launch's outcome stayed unknown through every
	// try; whatever it bought is terminated.
	OutcomeLaunchLost Outcome = "launch-lost"
	// OutcomeSuperseded: a replacement the job did not need after all.
	OutcomeSuperseded Outcome = "superseded"
)

// Notice is a provider's announcement that an attempt's capacity goes.
type Notice struct {
	// Kind is spot-interruption, maintenance or rebalance.
	Kind     string    `json:"kind"`
	At       time.Time `json:"at"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Instance is the instance the notice named.
	Instance string `json:"instance"`
}

// CheckpointRef points at a stored checkpoint.
type CheckpointRef struct {
	Attempt  int       `json:"attempt"`
	Step     int64     `json:"step"`
	Progress float64   `json:"progress"`
	SHA256   string    `json:"sha256"`
	Size     int64     `json:"size"`
	Location string    `json:"location"`
	At       time.Time `json:"at"`
}

// NeedsPlacement reports whether the job waits for capacity: it is queued,
// or it is leaving its capacity and no replacement is chosen yet.
func (r *Record) NeedsPlacement() bool {
	switch r.Status.State {
	case Queued, Checkpointing, Migrating:
		return r.Status.Current == nil
	}
	return false
}

// LaunchKey is the idempotency key of a job's attempt n.
func LaunchKey(id string, n int) string { return fmt.Sprintf("%s-a%d", id, n) }

// CostAt is what the job has cost up to now: ended attempts plus what the
// live ones have run so far.
func (r *Record) CostAt(now time.Time) money.Micros {
	c := r.Status.EndedCost + r.StorageAt(now)
	for _, a := range []*Attempt{r.Status.Previous, r.Status.Current} {
		if a != nil {
			c += a.billed(now)
		}
	}
	return c
}

// CostAt is what the attempt has cost up to now.
func (a *Attempt) CostAt(now time.Time) money.Micros { return a.billed(now) }

// StorageAt is what keeping the job's checkpoint has cost up to now: its
// size (the last one stored) at the object-storage list price, from the
// first checkpoint stored to the job's end (or now while it runs).
func (r *Record) StorageAt(now time.Time) money.Micros {
	s := &r.Status
	if s.CheckpointSince.IsZero() || s.Checkpoint == nil {
		return 0
	}
	end := now
	if s.State.Terminal() && !s.FinishedAt.IsZero() && s.FinishedAt.Before(end) {
		end = s.FinishedAt
	}
	return money.StorageCost(money.ObjectStoragePerGBMonth, float64(s.Checkpoint.Size)/1e9, end.Sub(s.CheckpointSince))
}

// Released reports whether spotwise has let the attempt's capacity go.
func (a *Attempt) Released() bool { return !a.ReleasedAt.IsZero() }

// billed is what an attempt has cost up to end: every instance from its
// launch to its end (the provider's, else end) at the price its provider
// charges, and the transfers of its checkpoint and its data once its
// capacity is bought. An attempt whose instances are not known yet bills
// its nodes from its launch at the placement's price.
func (a *Attempt) billed(end time.Time) money.Micros {
	return a.TransfersAt(end) + a.instancesBilled(end)
}

// TransfersAt is what the attempt's data transfers (its checkpoint
// carried in, its input data read in) have cost up to end: nothing before
// its capacity was bought, both once from then on.
func (a *Attempt) TransfersAt(end time.Time) money.Micros {
	if a.LaunchedAt.IsZero() || end.Before(a.LaunchedAt) {
		return 0
	}
	return a.Transfer + a.DataTransfer
}

// instancesBilled is what an attempt's instances have cost up to end.
func (a *Attempt) instancesBilled(end time.Time) money.Micros {
	if a.Released() && a.ReleasedAt.Before(end) {
		// Its instances are being terminated: until their provider says
		// when each ended, bill them to the release, so that the cost
		// shown only ever grows (their real ends come after it).
		end = a.ReleasedAt
	}
	if len(a.Spans) == 0 {
		if a.LaunchedAt.IsZero() || !end.After(a.LaunchedAt) {
			return 0
		}
		return a.Placement.HourlyCost().ForDuration(end.Sub(a.LaunchedAt))
	}
	var total money.Micros
	for _, sp := range a.Spans {
		total += sp.cost(end, a.Placement.PricePerHour)
	}
	return total
}

// moveTo changes the job's state, refusing transitions the state machine
// does not allow. Only the lifecycle calls it.
func (r *Record) moveTo(next State, now time.Time, message string) error {
	if !r.Status.State.CanMoveTo(next) {
		return fmt.Errorf("job %s: cannot move from %s to %s", r.ID, r.Status.State, next)
	}
	r.Status.State = next
	r.Status.Message = message
	r.Status.UpdatedAt = now
	if next == Running && r.Status.StartedAt.IsZero() {
		r.Status.StartedAt = now
	}
	if next.Terminal() {
		r.Status.FinishedAt = now
	}
	return nil
}

// LiveAttempts are the numbers of the attempts that have not ended: the
// current one and the one the job is leaving.
func LiveAttempts(r *Record) []int {
	var out []int
	for _, a := range []*Attempt{r.Status.Current, r.Status.Previous} {
		if a != nil {
			out = append(out, a.N)
		}
	}
	return out
}

// closeAttempt ends an attempt at now with an outcome, bills it (its
// instances still running are billed to now; their real end, when it
// comes, corrects the bill) and moves it to the history.
func (r *Record) closeAttempt(slot **Attempt, now time.Time, outcome Outcome) *Attempt {
	a := *slot
	if a == nil {
		return nil
	}
	a.EndedAt = now
	a.Outcome = outcome
	a.Closing = ""
	a.Cost = a.billed(now)
	r.Status.EndedCost += a.Cost
	r.Status.Attempts = append(r.Status.Attempts, *a)
	if n := len(r.Status.Attempts); n > maxHistory {
		r.Status.Attempts = append([]Attempt(nil), r.Status.Attempts[n-maxHistory:]...)
	}
	*slot = nil
	return &r.Status.Attempts[len(r.Status.Attempts)-1]
}

// rebill recomputes an ended attempt's cost after one of its instances'
// ends became known, keeping the job's total in step.
func (r *Record) rebill(a *Attempt) {
	c := a.billed(a.EndedAt)
	r.Status.EndedCost += c - a.Cost
	a.Cost = c
}

// Clone returns a deep copy, so a writer can change a record without
// touching one a reader holds.
func (r *Record) Clone() *Record {
	c := *r
	c.Spec = r.Spec.clone()
	if r.Status.Current != nil {
		cur := r.Status.Current.clone()
		c.Status.Current = &cur
	}
	if r.Status.Previous != nil {
		prev := r.Status.Previous.clone()
		c.Status.Previous = &prev
	}
	if r.Status.Checkpoint != nil {
		ck := *r.Status.Checkpoint
		c.Status.Checkpoint = &ck
	}
	if r.Status.Attempts != nil {
		c.Status.Attempts = make([]Attempt, len(r.Status.Attempts))
		for i, a := range r.Status.Attempts {
			c.Status.Attempts[i] = a.clone()
		}
	}
	c.Status.Excluded = slices.Clone(r.Status.Excluded)
	if r.Status.Sealed != nil {
		sd := *r.Status.Sealed
		sd.History = slices.Clone(sd.History)
		c.Status.Sealed = &sd
	}
	return &c
}

func (a Attempt) clone() Attempt {
	a.Instances = slices.Clone(a.Instances)
	a.Running = slices.Clone(a.Running)
	a.Spans = slices.Clone(a.Spans)
	for i := range a.Spans {
		a.Spans[i].Prices = slices.Clone(a.Spans[i].Prices)
	}
	if a.Notice != nil {
		n := *a.Notice
		a.Notice = &n
	}
	return a
}

// clone copies every map, slice and pointer a spec holds.
func (s Spec) clone() Spec {
	if s.Priority != nil {
		p := *s.Priority
		s.Priority = &p
	}
	s.Labels = maps.Clone(s.Labels)
	s.Env = maps.Clone(s.Env)
	s.SecretEnv = maps.Clone(s.SecretEnv)
	s.Command = slices.Clone(s.Command)
	s.Resources.Accelerators = slices.Clone(s.Resources.Accelerators)
	pl := &s.Placement
	pl.Providers = slices.Clone(pl.Providers)
	pl.DenyProviders = slices.Clone(pl.DenyProviders)
	pl.Regions = slices.Clone(pl.Regions)
	pl.DenyRegions = slices.Clone(pl.DenyRegions)
	pl.Geographies = slices.Clone(pl.Geographies)
	s.Checkpoint.Command = slices.Clone(s.Checkpoint.Command)
	return s
}
