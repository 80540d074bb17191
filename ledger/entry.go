// Package ledger is where spotwise's money lands: an append-only record,
// in JetStream, of every charge for capacity and data: one entry per
// instance and price segment billed to a job's attempt, transfer and
// storage charges, and overhead that belongs to no job (orphan instances,
// reserved hours left idle). Every cost figure spotwise reports (a job's
// cost, a team's spend against its budget, the costs reports and the FOCUS
// export) is read from it.
//
// An entry is never changed: a charge found wrong later (an instance's end
// corrected by its provider) is taken back by a reversal, which negates
// the entry it names, followed by the right charge.
package ledger

import (
	"fmt"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Kind says what an entry charges for.
type Kind string

// Entry kinds.
const (
	// Usage is an instance's time in one price segment, billed to the job
	// attempt that holds it.
	Usage Kind = "usage"
	// Transfer is data moved between regions: a checkpoint carried to a
	// job's new region, a dataset's egress.
	Transfer Kind = "transfer"
	// Storage is data kept: checkpoint GB-months.
	Storage Kind = "storage"
	// Overhead is spend that belongs to no job: see the Overhead* categories.
	Overhead Kind = "overhead"
)

// Overhead categories.
const (
	// OverheadOrphan: an instance no job owns (a launch whose job forgot
	// it, capacity bought twice by a crash) from its launch to its end.
	OverheadOrphan = "orphan"
	// OverheadReservedIdle: reserved capacity paid for and not used.
	OverheadReservedIdle = "reserved-idle"
	// OverheadTeardown: a job's instances billed after the job ended
	// (while they shut down): the job's, and overhead.
	OverheadTeardown = "teardown"
)

// Transfer and storage categories: whose data moved or is kept.
const (
	// CategoryCheckpoint: a job's checkpoint, carried to the region of an
	// attempt (transfer) or kept (storage).
	CategoryCheckpoint = "checkpoint"
	// CategoryDataset: a job's input data (its spec's data), read by an
	// attempt placed outside the data's region: that region's provider
	// bills the egress.
	CategoryDataset = "dataset"
)

// Entry is one charge. Money is exact: Cost is what the provider bills for
// the entry (PricePerHour over [Start, End), rounded once to the
// micro-dollar), ListCost what the same time would cost at the on-demand
// list price.
type Entry struct {
	// ID names the charge, unique in the ledger:
	// "<job>/a<attempt>/<instance>/<segment>" for usage (see Charges); a
	// later version of a charge has "~v2", "~v3"... after it, and a
	// reversal is the reversed entry's ID followed by "~r".
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Category refines the kind (Overhead*; CategoryCheckpoint for
	// transfer and storage of checkpoints, CategoryDataset for the egress
	// of a job's input data).
	Category string `json:"category,omitempty"`
	// Reverses is the ID of the entry this one takes back: its cost and
	// list cost are that entry's, negated.
	Reverses string `json:"reverses,omitempty"`

	// Start and End bound the charge in time (equal for a one-off charge).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// PricePerHour is the price in force for usage; zero for other kinds.
	PricePerHour money.Micros `json:"price_per_hour,omitempty"`
	// Quantity and Unit are how much was used ("Hours", "GB", "GB-Month").
	Quantity float64      `json:"quantity,omitempty"`
	Unit     string       `json:"unit,omitempty"`
	Cost     money.Micros `json:"cost"`
	ListCost money.Micros `json:"list_cost"`

	// Where the capacity was.
	Provider     string `json:"provider,omitempty"`
	Region       string `json:"region,omitempty"`
	Zone         string `json:"zone,omitempty"`
	InstanceType string `json:"instance_type,omitempty"`
	// Purchase is spot, on-demand or reserved.
	Purchase    string `json:"purchase_option,omitempty"`
	GPU         string `json:"gpu,omitempty"`
	GPUs        int    `json:"gpus,omitempty"`
	Instance    string `json:"instance,omitempty"`
	Reservation string `json:"reservation,omitempty"`

	// Whose it is: empty for overhead that belongs to no job.
	JobID   string            `json:"job_id,omitempty"`
	JobName string            `json:"job_name,omitempty"`
	Attempt int               `json:"attempt,omitempty"`
	Team    string            `json:"team,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Interrupted is set on usage of an attempt its provider took back
	// (a spot interruption or a loss).
	Interrupted bool `json:"interrupted,omitempty"`

	// RecordedAt is when the entry was appended.
	RecordedAt time.Time `json:"recorded_at"`
}

// maxPeriod bounds the period of one entry (a reservation's term is the
// longest thing billed).
const maxPeriod = 10 * 366 * 24 * time.Hour

// Check reports what is wrong with an entry read from the ledger, naming
// the field: a garbled entry is skipped, not summed.
func (e *Entry) Check() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("ledger entry: no id")
	case e.Kind != Usage && e.Kind != Transfer && e.Kind != Storage && e.Kind != Overhead:
		return fmt.Errorf("ledger entry %s: kind %q is not usage, transfer, storage or overhead", e.ID, e.Kind)
	case e.Start.IsZero() || e.End.Before(e.Start) || e.End.Sub(e.Start) > maxPeriod:
		return fmt.Errorf("ledger entry %s: period %s..%s is not a period of at most 10 years", e.ID, e.Start.Format(time.RFC3339), e.End.Format(time.RFC3339))
	case e.Kind == Overhead && e.JobID == "" && e.Category == "":
		return fmt.Errorf("ledger entry %s: overhead without a category", e.ID)
	case e.Reverses == "" && e.Cost < 0:
		return fmt.Errorf("ledger entry %s: negative cost %s", e.ID, e.Cost)
	}
	return nil
}

// Reversal is the entry that takes e back: "<e's ID>~r".
func (e Entry) Reversal(at time.Time) Entry {
	r := e
	r.ID = e.ID + "~r"
	r.Reverses = e.ID
	r.Cost, r.ListCost, r.Quantity = -e.Cost, -e.ListCost, -e.Quantity
	r.RecordedAt = at
	return r
}

// Hours is the entry's length in hours.
func (e *Entry) Hours() float64 { return e.End.Sub(e.Start).Hours() }
