package providers

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Provider is the seam between spotwise and one cloud (or the simulated one).
// Implementations wrap their SDK behind it and nothing else: no scheduling,
// no NATS. Every method is safe for concurrent use.
type Provider interface {
	// Name is the provider's short name as used in offers and job specs:
	// "aws", "azure", "gcp", or "sim" for a simulated cloud that stands in
	// for all three.
	Name() string
	// Offers returns every offer the provider can sell now, with prices and
	// capacity signals.
	Offers(ctx context.Context) ([]Offer, error)
	// Launch starts req.Count instances of req.Offer. It is idempotent: a
	// second call with the same IdempotencyKey returns the instances the
	// first call started and buys nothing. A launch that cannot be served
	// for lack of capacity returns an *InsufficientCapacityError, one the
	// provider refuses for good a *LaunchRefusedError; any other error is
	// an unknown outcome (see errors.go).
	Launch(ctx context.Context, req LaunchRequest) ([]Instance, error)
	// Terminate stops an instance. Terminating an instance that is gone
	// already is not an error.
	Terminate(ctx context.Context, instanceID string) error
	// Instances lists the instances this provider runs for spotwise,
	// including ones that ended recently.
	Instances(ctx context.Context) ([]Instance, error)
	// Watch reports price, capacity and instance events to sink until ctx
	// ends. It returns nil when ctx ends and an error when the feed breaks.
	Watch(ctx context.Context, sink func(Event)) error
}

// LaunchRequest is one decision to buy capacity.
type LaunchRequest struct {
	// IdempotencyKey names the decision ("<job>-a<attempt>"); a retry with
	// the same key never buys twice.
	IdempotencyKey string
	Offer          Offer
	// Count is how many identical instances (one per node) to start.
	Count int
	// MaxPrice caps a spot instance's hourly price; zero means the
	// on-demand price.
	MaxPrice money.Micros
	JobID    string
	Attempt  int
	// Tags are attached to every instance so that an instance can always be
	// traced back to its job, even after a crash.
	Tags     map[string]string
	Workload Workload
}

// Workload says what the instance runs. The scheduler treats it as opaque;
// the agent on the instance (or the simulated cloud) reads it.
type Workload struct {
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// ReferenceGPU and ReferenceSeconds size the work: how long it takes on
	// ReferenceGPU with the job's shape. Class is the throughput class
	// (train-mixed, train-fp32, inference).
	ReferenceGPU     string  `json:"reference_gpu"`
	ReferenceSeconds float64 `json:"reference_seconds"`
	Class            string  `json:"class"`
	// ResumeFrom is the fraction of the work already done (0..1) by earlier
	// attempts, restored from a checkpoint.
	ResumeFrom float64 `json:"resume_from,omitempty"`
	// StartAfter holds a replacement's workload until the attempt it
	// replaces has had its chance to checkpoint.
	StartAfter time.Time `json:"start_after,omitzero"`
	// Checkpoint says how the workload checkpoints: how long one takes,
	// how often to take one, how big it is, how to ask for one.
	Checkpoint CheckpointPlan `json:"checkpoint"`
	// AgentCredentials is the NATS creds file of this attempt's agent
	// (its own user: it may publish only this attempt's reports, and it is
	// revoked when the attempt ends). It is a secret: the user data writes
	// it to a file only root reads, never into the workload's file.
	AgentCredentials string `json:"agent_credentials,omitempty"`
}

// CheckpointPlan is a workload's checkpoint settings as the agent applies
// them.
type CheckpointPlan struct {
	Disabled bool          `json:"disabled,omitempty"`
	Duration time.Duration `json:"duration"`
	// Interval is the time between periodic checkpoints (zero: none).
	Interval time.Duration `json:"interval,omitempty"`
	SizeGB   float64       `json:"size_gb,omitempty"`
	Signal   string        `json:"signal,omitempty"`
	Command  []string      `json:"command,omitempty"`
	// URI is the checkpoint store (empty: the server's default).
	URI string `json:"uri,omitempty"`
}

// RiskReporter is implemented by providers that know how often an offer's
// capacity is taken back (the simulated cloud; AWS's Spot Advisor
// buckets): interruptions per instance-hour.
type RiskReporter interface {
	InterruptionRate(offerID string) (perHour float64, ok bool)
}

// AgentHost is implemented by a cloud that runs some workloads' agents
// inside the server's own process (the simulated cloud): such an agent
// reports over the server's own NATS connection, so it needs no NATS
// credential of its own, and none is issued for it or revoked when its
// attempt ends (at hundreds of launches a second, each revocation
// lengthens the account claims the NATS servers are sent for an hour).
type AgentHost interface {
	AgentInProcess(command []string) bool
}

// InstanceState is where an instance is in its life.
type InstanceState string

// Instance states.
const (
	InstancePending    InstanceState = "pending"
	InstanceRunning    InstanceState = "running"
	InstanceTerminated InstanceState = "terminated"
	InstanceFailed     InstanceState = "failed"
)

// Ended reports whether the instance is gone for good.
func (s InstanceState) Ended() bool { return s == InstanceTerminated || s == InstanceFailed }

// Instance is one machine started for a job.
type Instance struct {
	ID           string         `json:"id"`
	Provider     string         `json:"provider"`
	Region       string         `json:"region"`
	Zone         string         `json:"zone"`
	InstanceType string         `json:"instance_type"`
	Purchase     PurchaseOption `json:"purchase"`
	Price        money.Micros   `json:"price_per_hour"`
	// PriceChanges are the changes of Price since the launch, in time
	// order (a spot price moves): each price segment is billed at its own.
	PriceChanges   []money.PriceChange `json:"price_changes,omitempty"`
	State          InstanceState       `json:"state"`
	JobID          string              `json:"job_id"`
	Attempt        int                 `json:"attempt"`
	Node           int                 `json:"node"`
	IdempotencyKey string              `json:"idempotency_key"`
	LaunchedAt     time.Time           `json:"launched_at"`
	RunningAt      time.Time           `json:"running_at,omitzero"`
	EndedAt        time.Time           `json:"ended_at,omitzero"`
	// Reason says why an ended instance ended ("terminated by spotwise",
	// "hardware failure", "spot capacity reclaimed").
	Reason string `json:"reason,omitempty"`
	// Reservation is the ID of the reservation a reserved instance runs
	// on (see Reservation).
	Reservation string `json:"reservation,omitempty"`
}

// Bill is what the instance costs from its launch (capacity is bought
// then, boot included) to its end, or to now while it lives: each price
// segment at its price, as its provider charges it.
func (in Instance) Bill(now time.Time) money.Micros {
	end := in.EndedAt
	if end.IsZero() {
		end = now
	}
	return money.Billed(in.LaunchedAt, end, in.Price, in.PriceChanges)
}

// EventKind names what a provider event reports.
type EventKind string

// Provider event kinds. Interruption kinds are reported by clouds ahead of
// taking capacity back; the preemption work builds on them.
const (
	EventOffers             EventKind = "offers"              // prices or capacity changed
	EventInstanceRunning    EventKind = "instance-running"    // booted and billable
	EventInstanceTerminated EventKind = "instance-terminated" // gone (by us or not)
	EventInstanceFailed     EventKind = "instance-failed"     // did not start or broke
	EventSpotInterruption   EventKind = "spot-interruption"   // capacity will be reclaimed at Deadline
	EventRebalance          EventKind = "rebalance"           // elevated risk of interruption
	EventMaintenance        EventKind = "maintenance"         // scheduled event at Deadline
)

// Event is one thing a provider reports.
type Event struct {
	Kind     EventKind `json:"kind"`
	Provider string    `json:"provider"`
	Region   string    `json:"region,omitempty"`
	Time     time.Time `json:"time"`
	// Offers carries the full current offer list of one region for
	// EventOffers.
	Offers []Offer `json:"offers,omitempty"`
	// Instance is set for instance and interruption events.
	Instance *Instance `json:"instance,omitempty"`
	// Deadline is when an announced interruption or maintenance happens.
	Deadline time.Time `json:"deadline,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

// KeyLister is a provider that can list the instances of one launch key
// without listing every instance: the scheduler checks one launch's
// instances often (an event that overtook the record of its launch), and a
// full listing would cost as much as the cloud is large.
type KeyLister interface {
	InstancesByKey(ctx context.Context, key string) ([]Instance, error)
}

// RecentLister is a provider that can list its live instances and only
// those ended since a time, as EC2 lists a terminated instance for about
// an hour: reconciliation asks for that, not for every instance a cloud
// that keeps ended ones for long (the simulated cloud keeps a week)
// still lists, most of them long settled.
type RecentLister interface {
	InstancesSince(ctx context.Context, since time.Time) ([]Instance, error)
}

// Markers of the heredoc a boot script writes an agent's NATS credential
// with (base64, so that nothing in it is ever read by the shell).
const (
	credsStart = "<<'SPOTWISE_CREDS'\n"
	credsEnd   = "\nSPOTWISE_CREDS\n"
)

// CredsScript is the boot script line that writes an attempt's NATS
// credential to path (mode 0600), for the clouds' user data.
func CredsScript(path, creds string) string {
	enc := base64.StdEncoding.EncodeToString([]byte(creds))
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	return "(umask 077; base64 -d > " + path + " " + credsStart + b.String() + credsEnd + ")"
}

// CredsFromScript reads back the credential CredsScript wrote into a boot
// script (the fake clouds boot an instance with it); nil when there is none.
func CredsFromScript(script string) ([]byte, error) {
	_, rest, ok := strings.Cut(script, credsStart)
	if !ok {
		return nil, nil
	}
	body, _, ok := strings.Cut(rest, credsEnd)
	if !ok {
		return nil, errors.New("the boot script's credential does not end")
	}
	return base64.StdEncoding.DecodeString(strings.ReplaceAll(body, "\n", ""))
}
