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
	// Current is the attempt that holds or is acquiring capacity.
	Current *Attempt `json:"current,omitempty"`
	// Attempts are the ended attempts, oldest first (the last 20).
	Attempts []Attempt `json:"attempts,omitempty"`
	// EndedCost is what all ended attempts cost.
	EndedCost money.Micros `json:"ended_cost"`
	// Progress is the fraction of the work done and kept (0..1).
	Progress float64 `json:"progress"`
	// WorkLost is work done by attempts that ended without keeping it.
	WorkLost Duration `json:"work_lost,omitempty"`
	// Previous is an attempt whose capacity is being taken back (it is
	// under an interruption notice) while Current replaces it.
	Previous *Attempt `json:"previous,omitempty"`
	// Checkpoint is the job's last good checkpoint: where a new attempt
	// resumes from.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	// Preemptions counts interruption notices the job received.
	Preemptions int `json:"preemptions,omitempty"`
	// Retries counts command failures that were run again.
	Retries        int    `json:"retries,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	SpecHash       string `json:"spec_hash"`
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
	// MaxPrice is the spot max price the attempt launches with.
	MaxPrice money.Micros `json:"max_price,omitempty"`
	PlacedAt time.Time    `json:"placed_at"`
	// LaunchedAt is when the capacity was bought: billing starts here.
	LaunchedAt time.Time `json:"launched_at,omitzero"`
	RunningAt  time.Time `json:"running_at,omitzero"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	// EstimatedRuntime and EstimatedCost are what the scheduler expected
	// when it chose the placement.
	EstimatedRuntime Duration     `json:"estimated_runtime"`
	EstimatedCost    money.Micros `json:"estimated_cost"`
	// Notice is set when the provider announced it takes the capacity
	// back.
	Notice *Notice `json:"notice,omitempty"`
	// StartAfter holds the workload of a replacement attempt until the
	// attempt it replaces has had its chance to checkpoint.
	StartAfter time.Time `json:"start_after,omitzero"`
	// StartProgress is where the attempt's work began (its checkpoint).
	StartProgress float64 `json:"start_progress,omitempty"`
	// Outcome is how the attempt ended: succeeded, failed, lost,
	// preempted, cancelled, launch-failed.
	Outcome string       `json:"outcome,omitempty"`
	Cost    money.Micros `json:"cost"`
}

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
// or its capacity is being taken back and no replacement is chosen yet.
func (r *Record) NeedsPlacement() bool {
	switch r.Status.State {
	case Queued:
		return true
	case Checkpointing, Migrating:
		return r.Status.Current == nil
	}
	return false
}

// LaunchKey is the idempotency key of a job's attempt n.
func LaunchKey(id string, n int) string { return fmt.Sprintf("%s-a%d", id, n) }

// CostAt is what the job has cost up to now: ended attempts plus the
// current one's billed time.
//
// A finished job whose attempt is still being closed (its instances are
// being terminated) is shown billed up to when it finished; closing the
// attempt bills the teardown too, so the cost shown never goes down.
func (r *Record) CostAt(now time.Time) money.Micros {
	c := r.Status.EndedCost
	if r.Status.State.Terminal() && !r.Status.FinishedAt.IsZero() && r.Status.FinishedAt.Before(now) {
		now = r.Status.FinishedAt
	}
	for _, a := range []*Attempt{r.Status.Previous, r.Status.Current} {
		if a != nil && !a.LaunchedAt.IsZero() && now.After(a.LaunchedAt) {
			c += a.Placement.HourlyCost().ForDuration(now.Sub(a.LaunchedAt))
		}
	}
	return c
}

// MoveTo changes the job's state, refusing transitions the state machine
// does not allow.
func (r *Record) MoveTo(next State, now time.Time, message string) error {
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

// EndAttempt closes the current attempt at now with an outcome, bills it
// and moves it to the history. It is a no-op without a current attempt.
func (r *Record) EndAttempt(now time.Time, outcome string) {
	r.endAttempt(&r.Status.Current, now, outcome)
}

// EndPrevious closes the attempt being replaced, like EndAttempt.
func (r *Record) EndPrevious(now time.Time, outcome string) {
	r.endAttempt(&r.Status.Previous, now, outcome)
}

// Replace makes the current attempt the previous one (it is under notice)
// so that a replacement can become current.
func (r *Record) Replace() {
	r.Status.Previous, r.Status.Current = r.Status.Current, nil
}

func (r *Record) endAttempt(slot **Attempt, now time.Time, outcome string) {
	a := *slot
	if a == nil {
		return
	}
	a.EndedAt = now
	a.Outcome = outcome
	if !a.LaunchedAt.IsZero() && now.After(a.LaunchedAt) {
		a.Cost = a.Placement.HourlyCost().ForDuration(now.Sub(a.LaunchedAt))
	}
	r.Status.EndedCost += a.Cost
	r.Status.Attempts = append(r.Status.Attempts, *a)
	if n := len(r.Status.Attempts); n > maxHistory {
		r.Status.Attempts = append([]Attempt(nil), r.Status.Attempts[n-maxHistory:]...)
	}
	*slot = nil
	r.Status.UpdatedAt = now
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
	return &c
}

func (a Attempt) clone() Attempt {
	a.Instances = slices.Clone(a.Instances)
	a.Running = slices.Clone(a.Running)
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
