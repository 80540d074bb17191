// Package agent is what runs beside a job's workload on each instance: it
// starts the work, reports progress, heartbeats and the exit over NATS, and
// (with the preemption work) checkpoints on request.
//
// SimWorkload is the agent's stand-in on the simulated cloud: it "runs" a
// job at the speed its GPU type would and reports exactly what a real agent
// reports, through the same subjects, so the scheduler cannot tell the
// difference.
package agent
