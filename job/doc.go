// Package job is the GPU job model shared by the API, the scheduler, the
// event bus and the cost model: the spec a user submits (parsed from YAML or
// JSON and validated field by field), the record kept in the job-state
// bucket, and the job's lifecycle: the one pure function, Apply, through
// which every change to a record goes, with its states, inputs, typed
// outcomes and effects (README.md has the table).
//
// It knows nothing about NATS, clouds or scheduling decisions: the
// lifecycle decides what an event means for a job, never where to place it,
// and does no I/O (its effects are carried out by the scheduler). It earns
// its own package because every other package speaks it and the events
// package must encode it without importing the scheduler.
package job
