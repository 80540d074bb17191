// Package job is the GPU job model shared by the API, the scheduler, the
// event bus and the cost model: the spec a user submits (parsed from YAML or
// JSON and validated field by field), the record kept in the job-state
// bucket, and the states a job moves through.
//
// It knows nothing about NATS, clouds or scheduling decisions. It earns its
// own package because every other package speaks it and the events package
// must encode it without importing the scheduler.
package job
