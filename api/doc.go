// Package api is how users and other services talk to spotwise: job
// submission, listing, inspection and cancellation over HTTP (/v1/jobs) and
// over NATS request/reply (spotwise.jobs.submit, ...), with one service
// behind both so they behave the same, and the HTTP client the CLI uses.
//
// It validates and stores; it never schedules. A submitted job is written
// to the job-state bucket and announced on the bus, and the scheduler takes
// it from there.
package api
