// Package chaos runs the whole system through the failures it is built to
// survive and measures whether it did: a few hundred jobs on the simulated
// cloud, through kill -9s of the server (restarted on the same data
// directory), zone storms and launches the cloud refuses, fails for good or
// answers with a time-out (sim.faults), until every job has ended or the
// time runs out. Then it reports what a user or a bill would notice: jobs
// lost or gone backwards, jobs stuck and why, the most attempts of one job
// holding capacity at once, and spend the simulated cloud billed that no
// job record and no recorded overhead accounts for.
//
// It owns the run (run.go: submissions, kills and storms on schedule;
// proc.go: the server processes; inspect.go: what it asks the server and
// reads from its buckets), its options (options.go), the seeded plan of
// what it injects (plan.go), the view of every job record it saw over NATS
// (ledger.go) and the figures (report.go, pure, over the cloud's own
// instance records, the job records and the recorded overheads). The
// command is cmd/chaos (`make chaos`).
//
// It must not reach into the server: it starts the real server binary (or
// a test binary standing in for it), talks to it over its HTTP API and
// reads its NATS buckets as a client, never writes them.
package chaos
