package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Payload is the data of one event type. Each type names itself and checks
// its own fields; Decode refuses a payload whose Validate fails.
type Payload interface {
	EventType() string
	Validate() error
}

// Event types (the envelope's "type").
const (
	TypeJobSubmitted = "job.submitted"
	TypeJobEvent     = "job.event"
	TypeOffers       = "offers.updated"
	TypeInstance     = "instance.changed"
	TypeInterruption = "interruption.notice"
	TypeAgentReport  = "agent.report"
	TypeAgentControl = "agent.control"
	TypeAlert        = "alert"
	TypeAudit        = "audit.record"
)

// registry maps an event type to a constructor of its payload.
var registry = map[string]func() Payload{
	TypeJobSubmitted: func() Payload { return new(JobSubmitted) },
	TypeJobEvent:     func() Payload { return new(JobEvent) },
	TypeOffers:       func() Payload { return new(OffersUpdated) },
	TypeInstance:     func() Payload { return new(InstanceChanged) },
	TypeInterruption: func() Payload { return new(Interruption) },
	TypeAgentReport:  func() Payload { return new(AgentReport) },
	TypeAgentControl: func() Payload { return new(AgentControl) },
	TypeAlert:        func() Payload { return new(Alert) },
	TypeAudit:        func() Payload { return new(AuditRecord) },
	TypeLogBatch:     func() Payload { return new(LogBatch) },
}

// AuditRecord is one call that changes something (a submission, a
// cancellation, a token made or revoked, a simulated preemption), allowed
// or refused, on AuditSubject(TargetTeam, Action). The envelope's time is
// when it was made.
type AuditRecord struct {
	// Action is what was asked: job.submit, job.cancel, token.create,
	// token.revoke, sim.<action>.
	Action string `json:"action"`
	// Principal is who asked (auth.Principal.Subject; "anonymous" when no
	// credential held), with its name, team and role.
	Principal string `json:"principal"`
	Name      string `json:"name,omitempty"`
	Team      string `json:"team,omitempty"`
	Role      string `json:"role,omitempty"`
	// Target is what it was asked of (a job or token id), TargetTeam the
	// team it belongs to.
	Target     string `json:"target,omitempty"`
	TargetTeam string `json:"target_team,omitempty"`
	// Source is where the call came from: the client's address over HTTP,
	// "nats" over NATS.
	Source string `json:"source,omitempty"`
	// Outcome is "ok", or the refusal's code (forbidden, not_found,
	// invalid_spec, ...).
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
	// At is when, in wall time (the envelope's time is the server's
	// clock, which a simulation speeds up).
	At time.Time `json:"at"`
}

func (*AuditRecord) EventType() string { return TypeAudit }

func (e *AuditRecord) Validate() error {
	switch {
	case e.Action == "" || len(e.Action) > 64:
		return errors.New("an audit record needs an action (at most 64 characters)")
	case e.Principal == "":
		return errors.New("an audit record needs a principal")
	case e.Outcome == "":
		return errors.New("an audit record needs an outcome")
	}
	return nil
}

// JobSubmitted announces an accepted job, on SubjectJobSubmitted.
type JobSubmitted struct {
	JobID       string    `json:"job_id"`
	Name        string    `json:"name"`
	Team        string    `json:"team"`
	Priority    int       `json:"priority"`
	SubmittedAt time.Time `json:"submitted_at"`
	Via         string    `json:"via"` // http or nats
}

func (*JobSubmitted) EventType() string { return TypeJobSubmitted }

func (e *JobSubmitted) Validate() error {
	if !job.ValidID(e.JobID) {
		return fmt.Errorf("job_id %q is not a job ID", e.JobID)
	}
	if e.SubmittedAt.IsZero() {
		return errors.New("submitted_at is required")
	}
	return nil
}

// Job event kinds: one step of a job's life, recorded on its history
// subject (the lifecycle's, in package job).
const (
	KindQueued           = job.KindQueued
	KindPending          = job.KindPending
	KindPlacing          = job.KindPlacing
	KindLaunched         = job.KindLaunched
	KindLaunchFailed     = job.KindLaunchFailed
	KindRunning          = job.KindRunning
	KindProgress         = job.KindProgress
	KindInstanceLost     = job.KindInstanceLost
	KindRequeued         = job.KindRequeued
	KindSucceeded        = job.KindSucceeded
	KindFailed           = job.KindFailed
	KindCancelled        = job.KindCancelled
	KindExpired          = job.KindExpired
	KindTerminated       = job.KindTerminated
	KindNotice           = job.KindNotice
	KindCheckpoint       = job.KindCheckpoint
	KindCheckpointFailed = job.KindCheckpointFailed
	KindPreempted        = job.KindPreempted
	KindMigrating        = job.KindMigrating
	KindRebalance        = job.KindRebalance
	// KindMove is the scheduler moving a running job of its own accord
	// (back to spot from on-demand): checkpoint first, then relaunch.
	KindMove = job.KindMove
)

var jobKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range job.Kinds {
		m[k] = true
	}
	return m
}()

// JobEvent is one entry of a job's history, on JobEventsSubject(id).
type JobEvent struct {
	JobID   string    `json:"job_id"`
	Kind    string    `json:"kind"`
	State   job.State `json:"state"`
	Attempt int       `json:"attempt,omitempty"`
	Message string    `json:"message,omitempty"`
	// Placement is set when a placement is chosen or changes.
	Placement *job.Placement `json:"placement,omitempty"`
	// Reasons is set on "pending": why no offer was chosen.
	Reasons []job.PendingReason `json:"reasons,omitempty"`
	// Progress (0..1) and Cost so far, when known.
	Progress float64      `json:"progress,omitempty"`
	Cost     money.Micros `json:"cost,omitempty"`
}

func (*JobEvent) EventType() string { return TypeJobEvent }

func (e *JobEvent) Validate() error {
	switch {
	case !job.ValidID(e.JobID):
		return fmt.Errorf("job_id %q is not a job ID", e.JobID)
	case !jobKinds[e.Kind]:
		return fmt.Errorf("unknown job event kind %q", e.Kind)
	case !e.State.Valid():
		return fmt.Errorf("unknown state %q", e.State)
	case e.Progress < 0 || e.Progress > 1:
		return fmt.Errorf("progress %v is outside 0..1", e.Progress)
	}
	return nil
}

// OffersUpdated is the full current offer list of one provider region, on
// PricesSubject(provider, region). Consumers replace what they knew of that
// region with it.
type OffersUpdated struct {
	Provider string            `json:"provider"`
	Region   string            `json:"region"`
	Offers   []providers.Offer `json:"offers"`
	// Source says where the prices came from: "live", "catalog" (the
	// fallback) or "sim".
	Source string `json:"source"`
}

func (*OffersUpdated) EventType() string { return TypeOffers }

func (e *OffersUpdated) Validate() error {
	if err := validSubjectToken(e.Provider); err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	if err := validSubjectToken(e.Region); err != nil {
		return fmt.Errorf("region: %w", err)
	}
	for i, o := range e.Offers {
		if o.Provider != e.Provider || o.Region != e.Region {
			return fmt.Errorf("offers[%d] is for %s/%s, not %s/%s", i, o.Provider, o.Region, e.Provider, e.Region)
		}
		if err := o.Validate(); err != nil {
			return fmt.Errorf("offers[%d]: %w", i, err)
		}
	}
	return nil
}

// InstanceChanged reports an instance's new state, on InstancesSubject.
type InstanceChanged struct {
	Instance providers.Instance `json:"instance"`
	// Kind is the provider event kind (instance-running, ...).
	Kind   providers.EventKind `json:"kind"`
	Reason string              `json:"reason,omitempty"`
}

func (*InstanceChanged) EventType() string { return TypeInstance }

func (e *InstanceChanged) Validate() error {
	switch e.Kind {
	case providers.EventInstanceRunning, providers.EventInstanceTerminated, providers.EventInstanceFailed:
	default:
		return fmt.Errorf("unknown instance event kind %q", e.Kind)
	}
	return validateInstance(&e.Instance)
}

func validateInstance(in *providers.Instance) error {
	switch {
	case in.ID == "":
		return errors.New("instance.id is required")
	case in.Provider == "":
		return errors.New("instance.provider is required")
	case in.JobID != "" && !job.ValidID(in.JobID):
		return fmt.Errorf("instance.job_id %q is not a job ID", in.JobID)
	}
	return nil
}

// Interruption is a notice that capacity will be taken back (or is at
// risk), on InterruptionsSubject.
type Interruption struct {
	Kind     providers.EventKind `json:"kind"`
	Instance providers.Instance  `json:"instance"`
	// Deadline is when the capacity goes; zero for a rebalance
	// recommendation, which has none.
	Deadline time.Time `json:"deadline,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

func (*Interruption) EventType() string { return TypeInterruption }

func (e *Interruption) Validate() error {
	switch e.Kind {
	case providers.EventSpotInterruption, providers.EventMaintenance:
		if e.Deadline.IsZero() {
			return fmt.Errorf("%s notice needs a deadline", e.Kind)
		}
	case providers.EventRebalance:
	default:
		return fmt.Errorf("unknown interruption kind %q", e.Kind)
	}
	return validateInstance(&e.Instance)
}

// Agent report kinds.
const (
	AgentStarted          = "started"
	AgentProgress         = "progress"
	AgentHeartbeat        = "heartbeat"
	AgentCheckpoint       = "checkpoint"
	AgentCheckpointFailed = "checkpoint-failed"
	AgentExited           = "exited"
)

var agentKinds = map[string]bool{AgentStarted: true, AgentProgress: true, AgentHeartbeat: true,
	AgentCheckpoint: true, AgentCheckpointFailed: true, AgentExited: true}

// AgentReport is what the agent beside a job's workload reports, on
// AgentSubject(job).
type AgentReport struct {
	JobID      string `json:"job_id"`
	Attempt    int    `json:"attempt"`
	InstanceID string `json:"instance_id"`
	Kind       string `json:"kind"`
	// Progress is the fraction of the job's work done (0..1).
	Progress float64 `json:"progress"`
	// ExitCode is set on "exited".
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message,omitempty"`
	// Checkpoint is set on "checkpoint": the checkpoint now stored.
	Checkpoint *job.CheckpointRef `json:"checkpoint,omitempty"`
}

func (*AgentReport) EventType() string { return TypeAgentReport }

func (e *AgentReport) Validate() error {
	switch {
	case !job.ValidID(e.JobID):
		return fmt.Errorf("job_id %q is not a job ID", e.JobID)
	case e.Attempt < 1:
		return errors.New("attempt must be at least 1")
	case !agentKinds[e.Kind]:
		return fmt.Errorf("unknown agent report kind %q", e.Kind)
	case e.Kind == AgentCheckpoint && (e.Checkpoint == nil || e.Checkpoint.Progress < 0 || e.Checkpoint.Progress > 1):
		return errors.New("a checkpoint report needs its checkpoint, with progress in 0..1")
	case e.Progress < 0 || e.Progress > 1:
		return fmt.Errorf("progress %v is outside 0..1", e.Progress)
	}
	return nil
}

// Control kinds: what the scheduler asks of a job's agent.
const (
	ControlCheckpoint = "checkpoint"
	ControlStop       = "stop"
	// ControlStart tells a replacement held for its predecessor's
	// checkpoint that the checkpoint is stored: start now.
	ControlStart = "start"
)

// AgentControl is a request to a job's agent, on AgentControlSubject(job)
// (core NATS request/reply: it must arrive fast, and a missed one is
// harmless because the capacity goes anyway).
type AgentControl struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"`
	// Deadline is when the capacity goes: the checkpoint must be stored
	// by then.
	Deadline time.Time `json:"deadline,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

func (*AgentControl) EventType() string { return TypeAgentControl }

func (e *AgentControl) Validate() error {
	switch {
	case !job.ValidID(e.JobID):
		return fmt.Errorf("job_id %q is not a job ID", e.JobID)
	case e.Attempt < 1:
		return errors.New("attempt must be at least 1")
	case e.Kind != ControlCheckpoint && e.Kind != ControlStop && e.Kind != ControlStart:
		return fmt.Errorf("unknown control kind %q", e.Kind)
	}
	return nil
}

// Alert severities.
const (
	SeverityInfo     = job.SeverityInfo
	SeverityWarning  = job.SeverityWarning
	SeverityCritical = job.SeverityCritical
)

// Alert is something an operator should know, on AlertsSubject(severity).
type Alert struct {
	Severity string `json:"severity"`
	// Kind is stable for routing: preemption, checkpoint-failed,
	// deadline-at-risk, repeated-failures, ...
	Kind    string            `json:"kind"`
	JobID   string            `json:"job_id,omitempty"`
	Summary string            `json:"summary"`
	Details map[string]string `json:"details,omitempty"`
	// Ongoing marks an alert about a condition that lasts (a job moving
	// off capacity under notice) rather than an event: the same alert
	// with Resolved set follows when the condition clears.
	Ongoing bool `json:"ongoing,omitempty"`
	// Resolved says that the condition an ongoing alert of the same kind
	// and job reported has cleared.
	Resolved bool `json:"resolved,omitempty"`
}

func (*Alert) EventType() string { return TypeAlert }

func (e *Alert) Validate() error {
	switch {
	case e.Severity != SeverityInfo && e.Severity != SeverityWarning && e.Severity != SeverityCritical:
		return fmt.Errorf("unknown severity %q", e.Severity)
	case e.Kind == "" || e.Summary == "":
		return errors.New("kind and summary are required")
	}
	return nil
}
