// Package scheduler places queued GPU jobs on offers and follows them to
// the end: one scheduling cycle over an in-memory snapshot (Decide, pure:
// filter, score, select), the inputs from NATS (instances, notices, agent
// reports) and from reconciliation against the clouds, each run through
// the job's lifecycle (package job) and written with a revision check and
// the lease term, and the effects the lifecycle asks for (launch,
// terminate, ask an agent to checkpoint or start, history, alerts) carried
// out through small interfaces.
//
// It owns the offer book, the queue and the in-memory index of jobs; it
// does not decide what an event means for a job (the lifecycle does), does
// not know a cloud's API (providers does), and does not price (bidding
// does). README.md draws the cycle and lists the files that tell a job's
// life.
package scheduler
