package job

import (
	"encoding/json"
	"fmt"
	"slices"
)

// State is where a job is in its life. The values are the lower-case words
// clients see.
type State string

// Job states. Checkpointing and migrating are a job leaving its capacity:
// checkpointing until the checkpoint for a notice or a move is stored,
// migrating from then until a replacement runs.
const (
	Queued        State = "queued"
	Placing       State = "placing"
	Running       State = "running"
	Checkpointing State = "checkpointing"
	Migrating     State = "migrating"
	Succeeded     State = "succeeded"
	Failed        State = "failed"
	Cancelled     State = "cancelled"
	// Expired: the deadline could no longer be met before the job ran.
	Expired State = "expired"
)

// States lists every state in life order.
var States = []State{Queued, Placing, Running, Checkpointing, Migrating, Succeeded, Failed, Cancelled, Expired}

// transitions lists the states each state may move to (the lifecycle's
// table in README.md).
var transitions = map[State][]State{
	Queued:        {Placing, Cancelled, Expired, Failed},
	Placing:       {Running, Queued, Succeeded, Failed, Cancelled},
	Running:       {Checkpointing, Migrating, Queued, Succeeded, Failed, Cancelled},
	Checkpointing: {Migrating, Running, Queued, Succeeded, Failed, Cancelled, Expired},
	Migrating:     {Running, Queued, Succeeded, Failed, Cancelled, Expired},
}

// Terminal reports whether the job is done for good.
func (s State) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled || s == Expired
}

// Active reports whether the job holds or is acquiring capacity.
func (s State) Active() bool {
	return s == Placing || s == Running || s == Checkpointing || s == Migrating
}

// CanMoveTo reports whether a job in s may move to next.
func (s State) CanMoveTo(next State) bool { return slices.Contains(transitions[s], next) }

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// UnmarshalJSON refuses unknown states, so a garbled record is caught at
// the edge instead of confusing the scheduler.
func (s *State) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	// Use the constant, not the decoded copy: a large index holds one
	// state per job.
	i := slices.Index(States, State(v))
	if i < 0 {
		return fmt.Errorf("unknown job state %q", v)
	}
	*s = States[i]
	return nil
}
