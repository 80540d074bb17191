package api

import (
	"fmt"
	"math"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// JobView is a job as clients see it.
type JobView struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Team     string    `json:"team"`
	Priority int       `json:"priority"`
	State    job.State `json:"state"`
	Message  string    `json:"message,omitempty"`
	// Placement is where the current (or, for a finished job, the last)
	// attempt runs.
	Placement *job.Placement `json:"placement"`
	CostUSD   money.Micros   `json:"cost_usd"`
	// StorageUSD is the part of CostUSD that keeping the job's checkpoint
	// has cost (the rest is its attempts').
	StorageUSD  money.Micros `json:"storage_usd,omitempty"`
	Progress    float64      `json:"progress"`
	Attempt     int          `json:"attempt"`
	SubmittedAt time.Time    `json:"submitted_at"`
	DeadlineAt  *time.Time   `json:"deadline_at,omitempty"`
	StartedAt   *time.Time   `json:"started_at,omitempty"`
	FinishedAt  *time.Time   `json:"finished_at,omitempty"`
	// Estimate is what the scheduler expected of the current attempt.
	Estimate       *Estimate           `json:"estimate,omitempty"`
	PendingReasons []job.PendingReason `json:"pending_reasons"`
	Events         []EventView         `json:"events"`
	Attempts       []job.Attempt       `json:"attempts,omitempty"`
	// Current is the attempt that runs the job (or acquires capacity for
	// it); Previous the one it is leaving (under notice, or released
	// until its provider confirms the capacity is gone).
	Current  *job.Attempt `json:"current,omitempty"`
	Previous *job.Attempt `json:"previous,omitempty"`
	// Warnings are things about the job a user should know: work a
	// preemption would lose, say.
	Warnings []string     `json:"warnings,omitempty"`
	WorkLost job.Duration `json:"work_lost,omitempty"`
	// Checkpoint is the last good checkpoint (where a move resumes from).
	Checkpoint  *job.CheckpointRef `json:"checkpoint,omitempty"`
	Preemptions int                `json:"preemptions"`
	// BaselineUSD is what the job's whole work would have cost on the
	// cheapest on-demand offer that met its needs when it was first
	// placed; SavingsUSD is that baseline for the work done so far
	// (progress x baseline) less what the job cost. Both are absent
	// before the job's first placement.
	BaselineUSD money.Micros  `json:"on_demand_baseline_usd,omitempty"`
	SavingsUSD  *money.Micros `json:"savings_usd,omitempty"`
	Spec        *job.Spec     `json:"spec,omitempty"`
	// LogTail is the last lines of a failed job's output (at most
	// LogTailLines; GET /v1/jobs/{id}/logs has all of it).
	LogTail []LogLineView `json:"log_tail,omitempty"`
}

// Estimate is the scheduler's expectation for an attempt.
type Estimate struct {
	Runtime job.Duration `json:"runtime"`
	CostUSD money.Micros `json:"cost_usd"`
}

// EventView is one entry of a job's history.
type EventView struct {
	Time      time.Time           `json:"time"`
	Kind      string              `json:"kind"`
	State     job.State           `json:"state"`
	Attempt   int                 `json:"attempt,omitempty"`
	Message   string              `json:"message,omitempty"`
	Placement *job.Placement      `json:"placement,omitempty"`
	Reasons   []job.PendingReason `json:"reasons,omitempty"`
	Progress  float64             `json:"progress,omitempty"`
	CostUSD   money.Micros        `json:"cost_usd,omitempty"`
}

// Summary is a job in a listing.
type Summary struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Team        string         `json:"team"`
	Priority    int            `json:"priority"`
	State       job.State      `json:"state"`
	Placement   *job.Placement `json:"placement"`
	CostUSD     money.Micros   `json:"cost_usd"`
	Progress    float64        `json:"progress"`
	SubmittedAt time.Time      `json:"submitted_at"`
}

// JobList is one page of a listing; Next is the cursor for the next page.
type JobList struct {
	Jobs []Summary `json:"jobs"`
	Next string    `json:"next,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// lastPlacement is the current attempt's placement or the last ended one.
func lastPlacement(r *job.Record) *job.Placement {
	if a := r.Status.Current; a != nil {
		p := a.Placement
		return &p
	}
	if n := len(r.Status.Attempts); n > 0 {
		p := r.Status.Attempts[n-1].Placement
		return &p
	}
	return nil
}

// Withheld is what the API shows in place of a secret_env value.
const Withheld = "(secret)"

// withheld is the spec as the API shows it: secret_env's names, not its
// values.
func withheld(s job.Spec) *job.Spec {
	if len(s.SecretEnv) > 0 {
		names := make(map[string]string, len(s.SecretEnv))
		for k := range s.SecretEnv {
			names[k] = Withheld
		}
		s.SecretEnv = names
	}
	return &s
}

func viewOf(r *job.Record, now time.Time, reasons []job.PendingReason, history []events.HistoryEntry) *JobView {
	v := &JobView{
		ID: r.ID, Name: r.Spec.Name, Team: r.Spec.Team, Priority: r.Spec.Prio(), State: r.Status.State,
		Message: r.Status.Message, Placement: lastPlacement(r), CostUSD: r.CostAt(now), StorageUSD: r.StorageAt(now),
		Progress: r.Status.Progress, Attempt: r.Status.Attempt, SubmittedAt: r.Status.SubmittedAt, DeadlineAt: timePtr(r.Status.DeadlineAt),
		StartedAt: timePtr(r.Status.StartedAt), FinishedAt: timePtr(r.Status.FinishedAt),
		PendingReasons: reasons, Events: make([]EventView, 0, len(history)), Attempts: r.Status.Attempts,
		WorkLost: r.Status.WorkLost, Spec: withheld(r.Spec), Checkpoint: r.Status.Checkpoint, Preemptions: r.Status.Preemptions,
	}
	if v.PendingReasons == nil {
		v.PendingReasons = []job.PendingReason{}
	}
	if a := r.Status.Current; a != nil {
		v.Estimate = &Estimate{Runtime: a.EstimatedRuntime, CostUSD: a.EstimatedCost}
	}
	v.Current, v.Previous = r.Status.Current, r.Status.Previous
	if b := r.Status.BaselineCost; b > 0 {
		sv := savings(b, r.Status.Progress, v.CostUSD)
		v.BaselineUSD, v.SavingsUSD = b, &sv
	}
	v.Warnings = warnings(r)
	for _, h := range history {
		e := h.Event
		v.Events = append(v.Events, EventView{Time: h.Envelope.Time, Kind: e.Kind, State: e.State, Attempt: e.Attempt,
			Message: e.Message, Placement: e.Placement, Reasons: e.Reasons, Progress: e.Progress, CostUSD: e.Cost})
	}
	return v
}

// warnings says what a user should know about where a job runs: a spot
// offer whose notice is shorter than the job's checkpoint takes loses, at
// an interruption, the work since the last periodic checkpoint.
func warnings(r *job.Record) []string {
	a := r.Status.Current
	ck := r.Spec.Checkpoint
	if a == nil || ck.Disabled || r.Status.State.Terminal() {
		return nil
	}
	p := a.Placement
	notice := providers.Offer{Provider: p.Provider, Purchase: providers.PurchaseOption(p.Purchase)}.Notice()
	need := ck.Time()
	if notice >= need {
		return nil
	}
	return []string{fmt.Sprintf("%s %s warns %s before taking the capacity back, less than the job's checkpoint takes (%s): an interruption loses the work since the last periodic checkpoint (checkpoint.skip_short_notice: true avoids such offers)",
		p.Provider, p.Purchase, notice, need)}
}

// savings is the on-demand baseline for the work done (progress of the
// whole) less what it cost.
func savings(baseline money.Micros, progress float64, cost money.Micros) money.Micros {
	done := int64(math.Round(min(max(progress, 0), 1) * 1e6))
	return baseline.Scale(done, 1e6) - cost
}
