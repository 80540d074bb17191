package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Subject roots. Every subject spotwise uses is built here.
const (
	// SubjectJobSubmitted carries a JobSubmitted for every accepted job.
	SubjectJobSubmitted = "spotwise.jobs.submitted"
	// subjectJobs is the root of the jobs stream's subjects.
	subjectJobs = "spotwise.jobs"
	// subjectJobEvents is the root of per-job history subjects.
	subjectJobEvents = "spotwise.jobs.events"
	subjectPrices    = "spotwise.prices"
	subjectInstances = "spotwise.instances"
	subjectInterrupt = "spotwise.interruptions"
	subjectAgent     = "spotwise.agent"
	subjectControl   = "spotwise.control"
	subjectCreds     = "spotwise.credentials"
	subjectAlerts    = "spotwise.alerts"
	subjectAudit     = "spotwise.audit"

	// Request/reply subjects of the job API (no stream: plain NATS
	// requests, answered by any server in the "spotwise-api" queue group).
	SubjectSubmit = "spotwise.jobs.submit"
	SubjectList   = "spotwise.jobs.list"
	SubjectGet    = "spotwise.jobs.get"
	SubjectCancel = "spotwise.jobs.cancel"
	SubjectLogs   = "spotwise.jobs.logs"
	// SubjectPendingReasons asks the active scheduler why a queued job is
	// still pending (request {"id": ...}, reply {"reasons": [...]}). The
	// reasons are recomputed every cycle, so they live in the scheduler's
	// memory, not in a bucket.
	SubjectPendingReasons = "spotwise.scheduler.pending"
	// APIQueue is the queue group API responders join.
	APIQueue = "spotwise-api"
)

// JobEventsSubject is the history subject of one job.
func JobEventsSubject(jobID string) string { return subjectJobEvents + "." + jobID }

// AllJobEvents matches every job's history.
const AllJobEvents = subjectJobEvents + ".*"

// PricesSubject carries offer updates of one provider region.
func PricesSubject(provider, region string) string {
	return subjectPrices + "." + token(provider) + "." + token(region)
}

// InstancesSubject carries instance lifecycle events of one provider region.
func InstancesSubject(provider, region string) string {
	return subjectInstances + "." + token(provider) + "." + token(region)
}

// InterruptionsSubject carries interruption notices of one provider region.
func InterruptionsSubject(provider, region string) string {
	return subjectInterrupt + "." + token(provider) + "." + token(region)
}

// AgentSubject carries reports from the agent running one attempt of a
// job: spotwise.agent.<job>.<attempt>, the only subject of the agent
// stream that attempt's NATS user may publish on.
func AgentSubject(jobID string, attempt int) string {
	return subjectAgent + "." + jobID + "." + strconv.Itoa(attempt)
}

// AllAgentReports matches every agent's reports.
const AllAgentReports = subjectAgent + ".*.*"

// AgentControlSubject carries the scheduler's requests to one attempt's
// agent (core NATS request/reply, no stream).
func AgentControlSubject(jobID string, attempt int) string {
	return subjectControl + "." + jobID + "." + strconv.Itoa(attempt)
}

// AllAgentControls matches every attempt's control subject.
const AllAgentControls = subjectControl + ".*.*"

// CredentialsSubject is where an attempt's agent asks for its NATS
// credential to be renewed (core NATS request/reply, answered while the
// attempt lives).
func CredentialsSubject(jobID string, attempt int) string {
	return subjectCreds + "." + jobID + "." + strconv.Itoa(attempt)
}

// AllCredentials matches every attempt's renewal requests.
const AllCredentials = subjectCreds + ".*.*"

// AgentInterruptionsSubject carries the notices an attempt's agent heard
// from its own instance's metadata: under the region's interruptions
// subject (the same stream and consumer), with the job and attempt the
// agent's NATS user is limited to, so the scheduler can check that the
// notice is about that attempt's instance.
func AgentInterruptionsSubject(provider, region, jobID string, attempt int) string {
	p, r := provider, region
	if p != "*" {
		p = token(p)
	}
	if r != "*" {
		r = token(r)
	}
	return subjectInterrupt + "." + p + "." + r + "." + jobID + "." + strconv.Itoa(attempt)
}

// ParseAttemptSubject reads the job and attempt a per-attempt subject
// (agent reports, agent interruptions, renewals) names; ok is false for a
// subject without them.
func ParseAttemptSubject(subject string) (jobID string, attempt int, ok bool) {
	parts := strings.Split(subject, ".")
	var j, a string
	switch {
	case len(parts) == 4 && (strings.HasPrefix(subject, subjectAgent+".") || strings.HasPrefix(subject, subjectCreds+".") || strings.HasPrefix(subject, subjectControl+".")):
		j, a = parts[2], parts[3]
	case len(parts) == 6 && strings.HasPrefix(subject, subjectInterrupt+"."):
		j, a = parts[4], parts[5]
	default:
		return "", 0, false
	}
	n, err := strconv.Atoi(a)
	if err != nil || n < 1 || j == "" {
		return "", 0, false
	}
	return j, n, true
}

// AlertsSubject carries alerts of one severity.
func AlertsSubject(severity string) string { return subjectAlerts + "." + token(severity) }

// AuditSubject carries the audit records of one team's things ("" is the
// platform's: tokens without a team, the simulated cloud) and one action:
// spotwise.audit.<team>.<action>. AllAudit matches every record;
// AuditSubject(team, "*") one team's.
func AuditSubject(team, action string) string {
	if team == "" {
		team = "_platform"
	}
	if action != "*" {
		action = token(action)
	}
	return subjectAudit + "." + token(team) + "." + action
}

// AllAudit matches every audit record.
const AllAudit = subjectAudit + ".>"

// EventTypeOn is the event type a subject carries: a consumer of the
// subject expects it and nothing else (anything else there is poison).
// Request subjects, which carry requests rather than events, have none
// except the agent's control subject.
func EventTypeOn(subject string) (string, bool) {
	under := func(root string) bool { return strings.HasPrefix(subject, root+".") }
	switch {
	case subject == SubjectJobSubmitted:
		return TypeJobSubmitted, true
	case under(subjectJobEvents):
		return TypeJobEvent, true
	case under(subjectPrices):
		return TypeOffers, true
	case under(subjectInstances):
		return TypeInstance, true
	case under(subjectInterrupt):
		return TypeInterruption, true
	case under(subjectControl):
		return TypeAgentControl, true
	case under(subjectAgent):
		return TypeAgentReport, true
	case under(subjectAlerts):
		return TypeAlert, true
	case under(subjectAudit):
		return TypeAudit, true
	case under(subjectLogs):
		return TypeLogBatch, true
	}
	return "", false
}

// token makes a value safe as a single subject token: NATS separates tokens
// with '.', and '*', '>' and white space are special.
func token(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, s)
}

// Stream names.
const (
	StreamJobs          = "SPOTWISE_JOBS"
	StreamPrices        = "SPOTWISE_PRICES"
	StreamInstances     = "SPOTWISE_INSTANCES"
	StreamInterruptions = "SPOTWISE_INTERRUPTIONS"
	StreamAgent         = "SPOTWISE_AGENT"
	StreamAlerts        = "SPOTWISE_ALERTS"
	StreamAudit         = "SPOTWISE_AUDIT"
	StreamLedger        = "SPOTWISE_LEDGER"
	StreamArchive       = "SPOTWISE_ARCHIVE"
)

// Bucket names.
const (
	BucketJobs   = "spotwise_jobs"
	BucketMeta   = "spotwise_meta"
	BucketSim    = "spotwise_sim"
	BucketLeases = "spotwise_leases"
	BucketTokens = "spotwise_tokens"
)

// DefaultJobsMaxAge is how long the jobs stream keeps submissions and
// histories unless told (Config.JobsMaxAge).
const DefaultJobsMaxAge = 30 * 24 * time.Hour

// streamConfigs is the retention of every stream, written down once. Limits
// keep the store bounded on a laptop; a cluster raises replicas.
func streamConfigs(replicas int, logs LogRetention, jobsAge time.Duration) []jetstream.StreamConfig {
	logs = logs.withDefaults()
	day := 24 * time.Hour
	switch {
	case jobsAge == 0:
		jobsAge = DefaultJobsMaxAge
	case jobsAge < 0:
		jobsAge = 0 // no limit
	}
	mk := func(name, desc string, subjects []string, age time.Duration, bytes int64, perSubject int64) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:              name,
			Description:       desc,
			Subjects:          subjects,
			Retention:         jetstream.LimitsPolicy,
			Discard:           jetstream.DiscardOld,
			MaxAge:            age,
			MaxBytes:          bytes,
			MaxMsgsPerSubject: perSubject,
			MaxMsgSize:        1 << 20,
			Storage:           jetstream.FileStorage,
			Replicas:          replicas,
			Duplicates:        2 * time.Minute,
			// Direct gets: a job's history is read in one request.
			AllowDirect: true,
		}
	}
	return []jetstream.StreamConfig{
		// No size limit: retention (finished_max_jobs, finished_max_age)
		// removes finished jobs' histories with their records. A limit
		// under what retention keeps (a million finished jobs' sealed
		// histories are about 6 GB) would drop the oldest kept jobs'
		// events, and NATS reserves a stream's limit on every node.
		mk(StreamJobs, "job submissions and every job's lifecycle history",
			[]string{SubjectJobSubmitted, AllJobEvents, subjectJobsSealed}, jobsAge, -1, 0),
		// Kept as long as the histories: an archived record goes with its
		// job (retention) or when its history's seals age out.
		mk(StreamArchive, "finished jobs' records, archived off the job bucket (one subject in all)",
			[]string{subjectArchive}, jobsAge, -1, 0),
		mk(StreamPrices, "offer prices and capacity per provider region",
			[]string{subjectPrices + ".>"}, 7*day, 1<<30, 2016),
		mk(StreamInstances, "instance lifecycle per provider region",
			[]string{subjectInstances + ".>"}, 7*day, 1<<30, 0),
		mk(StreamInterruptions, "interruption notices, rebalance and maintenance events",
			[]string{subjectInterrupt + ".>"}, 30*day, 1<<30, 0),
		mk(StreamAgent, "progress, heartbeats and exits reported by job agents",
			[]string{AllAgentReports}, 7*day, 2<<30, 0),
		mk(StreamAlerts, "operator alerts",
			[]string{subjectAlerts + ".>"}, 30*day, 256<<20, 0),
		mk(StreamAudit, "who did what: every call that changes something, allowed or refused",
			[]string{AllAudit}, 400*day, 1<<30, 0),
		mk(StreamLogs, "jobs' output (stdout, stderr), one subject per attempt",
			[]string{AllLogs}, logs.MaxAge, logs.MaxBytes, LogMessagesPerAttempt),
		// Money is kept: no age or size limit drops a charge.
		mk(StreamLedger, "the cost ledger: every charge, append-only, a subject per job until its bill is sealed",
			[]string{subjectLedger + ".>"}, 0, -1, 0),
	}
}

// bucketConfigs is the configuration of every KV bucket.
func bucketConfigs(replicas int, leaseTTL time.Duration) []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: BucketJobs, Description: "job records (spec and status), updated with revision checks", History: 3, MaxValueSize: 1 << 20, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketMeta, Description: "server metadata: the simulated clock", History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketSim, Description: "the simulated cloud's instances", History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketLeases, Description: "leases: which server schedules", History: 1, TTL: leaseTTL, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketTokens, Description: "API tokens (hashed): who they stand for, expiry, revocation", History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
	}
}

// validSubjectToken reports whether s can be used as one subject token.
func validSubjectToken(s string) error {
	if s == "" || strings.ContainsAny(s, ".*> \t\r\n") {
		return fmt.Errorf("%q is not a valid subject token", s)
	}
	return nil
}
