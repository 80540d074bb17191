package chaos

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// Targets a run must meet.
const (
	// MaxLiveAttemptsTarget: of one job, only the attempt it is leaving
	// (while its checkpointed move completes) may hold capacity beside the
	// current one.
	MaxLiveAttemptsTarget = 2
)

// Final is what a run found at its end: the inputs of the report.
type Final struct {
	// Acked maps every acknowledged submission's key to its job ID.
	Acked map[string]string
	// Records are the job records in the bucket, by job ID.
	Records map[string]*job.Record
	// Backwards are jobs whose record was seen going back (ledger.go).
	Backwards map[string]string
	// Why says, for jobs not ended, what the API says of them.
	Why map[string]string
	// Instances are the simulated cloud's own records of every instance
	// it started.
	Instances []providers.Instance
	// Overheads are the recorded spend on instances of no job.
	Overheads []scheduler.Overhead
	// Ledger is what the cost ledger holds per job, and for overhead
	// ("" key).
	Ledger map[string]money.Micros
	// Now is the simulated clock at the end: what still runs is billed to
	// it.
	Now time.Time
}

// Problem names a job and what is wrong with it.
type Problem struct {
	Job string
	Why string
}

// Report holds the figures of a run.
type Report struct {
	Jobs     int
	States   map[job.State]int
	Lost     []Problem
	Stuck    []Problem
	Attempts int // placements, over every job
	// Outcomes counts how the attempts the records keep ended (the last
	// 20 of each job); Preemptions the notices jobs got.
	Outcomes    map[job.Outcome]int
	Preemptions int

	// MaxLiveAttempts is the most distinct attempts of one job that held
	// live instances at one moment, by the cloud's records.
	MaxLiveAttempts    int
	MaxLiveAttemptsJob string
	MaxLiveAttemptsAt  time.Time

	// CloudBill is what the simulated cloud charges for every instance:
	// its price from its launch to its end (to Now while live).
	CloudBill money.Micros
	// Attributed is what the job records bill to their attempts.
	Attributed money.Micros
	// Overhead is the recorded spend on instances no job owned.
	Overhead money.Micros
	// Transfers are the jobs' charges for checkpoints carried between
	// regions (egress, which the simulated cloud does not bill): not in
	// Attributed.
	Transfers money.Micros
	// DataTransfers are the jobs' charges for reading their declared
	// input data into another region (egress, which the simulated cloud
	// does not bill either): not in Attributed.
	DataTransfers money.Micros
	// Storage is what keeping the jobs' checkpoints cost (object storage,
	// which the simulated cloud does not bill): not in Attributed.
	Storage money.Micros
	// Ledgered is what the cost ledger holds in all; LedgerOff are the
	// jobs whose entries do not add up to what their record bills.
	Ledgered  money.Micros
	LedgerOff []Problem
	// Unattributed is CloudBill - Attributed - Overhead: spend billed to
	// nobody (negative: billed to jobs but not charged).
	Unattributed money.Micros
	// Unbilled are the instances the figures disagree about most, for
	// whoever looks into a non-zero Unattributed.
	Unbilled []Problem

	Instances       int
	LiveAtEnd       int
	MaxInstances    int
	MaxInstancesJob string
	// Extra are instances the cloud started that no attempt of their job
	// asked for: more than the job's nodes under one launch key, or under
	// a key of an attempt the job never placed or whose launch it took
	// for refused, or of no known job.
	Extra []Problem
}

// Compute works the figures out of what a run found.
func Compute(f Final) Report {
	r := Report{States: map[job.State]int{}, Outcomes: map[job.Outcome]int{}}
	ids := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(f.Acked)) {
		id := f.Acked[key]
		if ids[id] {
			continue
		}
		ids[id] = true
		rec, ok := f.Records[id]
		if !ok {
			r.Lost = append(r.Lost, Problem{id, "acknowledged (key " + key + ") but no record"})
			continue
		}
		r.Jobs++
		r.States[rec.Status.State]++
		r.Attempts += rec.Status.Attempt
		r.Preemptions += rec.Status.Preemptions
		for _, a := range rec.Status.Attempts {
			r.Outcomes[a.Outcome]++
		}
		if !rec.Status.State.Terminal() {
			why := cmp.Or(f.Why[id], fmt.Sprintf("%s: %s", rec.Status.State, rec.Status.Message))
			r.Stuck = append(r.Stuck, Problem{id, why})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.Backwards)) {
		r.Lost = append(r.Lost, Problem{id, "record went backwards: " + f.Backwards[id]})
	}
	r.MaxLiveAttempts, r.MaxLiveAttemptsJob, r.MaxLiveAttemptsAt = maxLiveAttempts(f.Instances, f.Now)
	r.money(f)
	r.instances(f)
	return r
}

// money compares the cloud's bill with what the records account for.
func (r *Report) money(f Final) {
	byInstance := map[string]money.Micros{}
	for _, in := range f.Instances {
		c := InstanceBill(in, f.Now)
		r.CloudBill += c
		byInstance[in.ID] = c
	}
	for _, rec := range f.Records {
		// The cloud bills instances; the checkpoints carried between
		// regions and the data read into other regions are spotwise's
		// charges for egress, which the simulated cloud does not bill.
		r.Attributed += rec.CostAt(f.Now)
		r.Storage += rec.StorageAt(f.Now)
		for _, a := range attemptsOf(rec) {
			if !a.LaunchedAt.IsZero() {
				r.Transfers += a.Transfer
				r.DataTransfers += a.DataTransfer
			}
		}
	}
	r.Attributed -= r.Transfers + r.DataTransfers + r.Storage
	for _, o := range f.Overheads {
		r.Overhead += o.Cost
	}
	r.Unattributed = r.CloudBill - r.Attributed - r.Overhead
	r.ledger(f)
	if r.Unattributed == 0 {
		return
	}
	// Where the difference comes from: instances no record bills and
	// no overhead covers, and attempts billed other than charged.
	billed := map[string]bool{}
	for _, rec := range f.Records {
		for _, a := range attemptsOf(rec) {
			var charged money.Micros
			for _, id := range a.Instances {
				billed[id] = true
				charged += byInstance[id]
			}
			if got := a.Cost - a.TransfersAt(a.EndedAt); a.Outcome != "" && got != charged && len(r.Unbilled) < 10 {
				r.Unbilled = append(r.Unbilled, Problem{rec.ID, fmt.Sprintf("attempt %d (%s) billed %s, the cloud charged %s for its instances %v",
					a.N, a.Outcome, got.Decimal(), charged.Decimal(), a.Instances)})
			}
		}
	}
	for _, o := range f.Overheads {
		billed[o.Instance] = true
	}
	for _, in := range f.Instances {
		if !billed[in.ID] && byInstance[in.ID] != 0 && len(r.Unbilled) < 20 {
			r.Unbilled = append(r.Unbilled, Problem{in.JobID, fmt.Sprintf("instance %s (key %s, %s) charged %s, billed to nobody",
				in.ID, in.IdempotencyKey, in.State, byInstance[in.ID].Decimal())})
		}
	}
}

// ledger compares the cost ledger with the records: a job that holds no
// attempt any more has all its charges in the ledger, and they add up to
// its bill; so does the overhead.
func (r *Report) ledger(f Final) {
	if f.Ledger == nil {
		return
	}
	for _, c := range f.Ledger {
		r.Ledgered += c
	}
	for _, id := range slices.Sorted(maps.Keys(f.Records)) {
		rec := f.Records[id]
		if rec.Status.Current != nil || rec.Status.Previous != nil {
			continue
		}
		if got, want := f.Ledger[id], rec.CostAt(f.Now); got != want {
			r.LedgerOff = append(r.LedgerOff, Problem{id, fmt.Sprintf("the ledger holds %s, the record bills %s", got.Decimal(), want.Decimal())})
		}
	}
	if f.Ledger[""] != r.Overhead {
		r.LedgerOff = append(r.LedgerOff, Problem{"(overhead)", fmt.Sprintf("the ledger holds %s, the orphans recorded cost %s", f.Ledger[""].Decimal(), r.Overhead.Decimal())})
	}
}

// attemptsOf lists a record's attempts, ended and live.
func attemptsOf(rec *job.Record) []job.Attempt {
	out := slices.Clone(rec.Status.Attempts)
	for _, a := range []*job.Attempt{rec.Status.Previous, rec.Status.Current} {
		if a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// instances counts instances per job and finds extra ones.
func (r *Report) instances(f Final) {
	perJob := map[string]int{}
	perKey := map[string]int{}
	first := map[string]providers.Instance{}
	for _, in := range f.Instances {
		r.Instances++
		perJob[in.JobID]++
		if perKey[in.IdempotencyKey]++; perKey[in.IdempotencyKey] == 1 {
			first[in.IdempotencyKey] = in
		}
		if !in.State.Ended() {
			r.LiveAtEnd++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(perJob)) {
		if n := perJob[id]; n > r.MaxInstances {
			r.MaxInstances, r.MaxInstancesJob = n, id
		}
	}
	for _, key := range slices.Sorted(maps.Keys(perKey)) {
		in := first[key]
		rec, ok := f.Records[in.JobID]
		switch {
		case !ok:
			r.Extra = append(r.Extra, Problem{in.JobID, fmt.Sprintf("%d instances of key %s, of no known job", perKey[key], key)})
		case key != job.LaunchKey(rec.ID, in.Attempt) || in.Attempt < 1 || in.Attempt > rec.Status.Attempt:
			r.Extra = append(r.Extra, Problem{rec.ID, fmt.Sprintf("%d instances of key %s, which is no attempt the job placed (it placed %d)", perKey[key], key, rec.Status.Attempt)})
		case perKey[key] > max(1, rec.Spec.Resources.Nodes):
			r.Extra = append(r.Extra, Problem{rec.ID, fmt.Sprintf("%d instances of key %s for a job of %d nodes", perKey[key], key, max(1, rec.Spec.Resources.Nodes))})
		case refusedKey(rec, key):
			r.Extra = append(r.Extra, Problem{rec.ID, fmt.Sprintf("%d instances of key %s, whose launch the record says was refused", perKey[key], key)})
		}
	}
}

// refusedKey reports whether the record says the launch of key was
// refused (nothing bought).
func refusedKey(rec *job.Record, key string) bool {
	for _, a := range rec.Status.Attempts {
		if a.LaunchKey == key {
			return a.Outcome == job.OutcomeLaunchFailed
		}
	}
	return false
}

// InstanceBill is what the simulated cloud charges for one instance: each
// of its price segments from its launch (capacity is bought then, boot
// included) to its end, or to now while it lives.
func InstanceBill(in providers.Instance, now time.Time) money.Micros { return in.Bill(now) }

// maxLiveAttempts sweeps every job's instance lives and returns the most
// distinct attempts of one job live at one moment, which job and when. An
// instance ending at the moment another starts does not overlap it.
func maxLiveAttempts(insts []providers.Instance, now time.Time) (int, string, time.Time) {
	type edge struct {
		at      time.Time
		attempt int
		delta   int
	}
	byJob := map[string][]edge{}
	for _, in := range insts {
		end := in.EndedAt
		if end.IsZero() {
			end = now
		}
		if !end.After(in.LaunchedAt) {
			continue
		}
		byJob[in.JobID] = append(byJob[in.JobID], edge{in.LaunchedAt, in.Attempt, 1}, edge{end, in.Attempt, -1})
	}
	best, bestJob, bestAt := 0, "", time.Time{}
	for _, id := range slices.Sorted(maps.Keys(byJob)) {
		edges := byJob[id]
		slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.delta, b.delta)) })
		live := map[int]int{}
		for _, e := range edges {
			live[e.attempt] += e.delta
			if live[e.attempt] == 0 {
				delete(live, e.attempt)
			}
			if len(live) > best {
				best, bestJob, bestAt = len(live), id, e.at
			}
		}
	}
	return best, bestJob, bestAt
}

// Missed lists the targets the run missed; none means it passed.
func (r Report) Missed() []string {
	var out []string
	if n := len(r.Lost); n > 0 {
		out = append(out, fmt.Sprintf("%d jobs lost (target 0)", n))
	}
	if n := len(r.Stuck); n > 0 {
		out = append(out, fmt.Sprintf("%d jobs stuck (target 0)", n))
	}
	if r.MaxLiveAttempts > MaxLiveAttemptsTarget {
		out = append(out, fmt.Sprintf("%d live attempts of one job at once (target <= %d)", r.MaxLiveAttempts, MaxLiveAttemptsTarget))
	}
	if r.Unattributed != 0 {
		out = append(out, fmt.Sprintf("%s of spend billed to no job (target 0)", r.Unattributed.Decimal()))
	}
	if n := len(r.Extra); n > 0 {
		out = append(out, fmt.Sprintf("%d launch keys with extra instances (target 0)", n))
	}
	if n := len(r.LedgerOff); n > 0 {
		out = append(out, fmt.Sprintf("%d bills the cost ledger disagrees with (target 0)", n))
	}
	return out
}

// Print writes the figures.
func (r Report) Print(w io.Writer) {
	var states []string
	for _, s := range slices.Sorted(maps.Keys(r.States)) {
		states = append(states, fmt.Sprintf("%s %d", s, r.States[s]))
	}
	var outcomes []string
	for _, o := range slices.Sorted(maps.Keys(r.Outcomes)) {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", o, r.Outcomes[o]))
	}
	fmt.Fprintf(w, "jobs                  %d (%s)\n", r.Jobs, strings.Join(states, ", "))
	fmt.Fprintf(w, "attempts              %d (%s), %d notices\n", r.Attempts, strings.Join(outcomes, ", "), r.Preemptions)
	fmt.Fprintf(w, "jobs lost             %d\n", len(r.Lost))
	printProblems(w, r.Lost, 20)
	fmt.Fprintf(w, "jobs stuck            %d\n", len(r.Stuck))
	printProblems(w, r.Stuck, 20)
	fmt.Fprintf(w, "max live attempts     %d", r.MaxLiveAttempts)
	if r.MaxLiveAttemptsJob != "" {
		fmt.Fprintf(w, " (job %s at %s)", r.MaxLiveAttemptsJob, r.MaxLiveAttemptsAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, ", target <= %d\n", MaxLiveAttemptsTarget)
	fmt.Fprintf(w, "cloud bill            %s (every instance, launch to end, at its price)\n", r.CloudBill.Decimal())
	fmt.Fprintf(w, "billed to jobs        %s for instances, %s for checkpoints carried between regions, %s for storing them, %s for data read in other regions\n",
		r.Attributed.Decimal(), r.Transfers.Decimal(), r.Storage.Decimal(), r.DataTransfers.Decimal())
	fmt.Fprintf(w, "overhead (orphans)    %s\n", r.Overhead.Decimal())
	fmt.Fprintf(w, "billed to no job      %s micro-dollars: %d\n", r.Unattributed.Decimal(), int64(r.Unattributed))
	printProblems(w, r.Unbilled, 20)
	fmt.Fprintf(w, "in the cost ledger    %s, %d bills it disagrees with\n", r.Ledgered.Decimal(), len(r.LedgerOff))
	printProblems(w, r.LedgerOff, 20)
	fmt.Fprintf(w, "instances             %d (%d live at the end), max %d for one job", r.Instances, r.LiveAtEnd, r.MaxInstances)
	if r.MaxInstancesJob != "" {
		fmt.Fprintf(w, " (%s)", r.MaxInstancesJob)
	}
	fmt.Fprintf(w, "\nextra instances       %d launch keys\n", len(r.Extra))
	printProblems(w, r.Extra, 20)
}

func printProblems(w io.Writer, ps []Problem, n int) {
	for i, p := range ps {
		if i == n {
			fmt.Fprintf(w, "    ... and %d more\n", len(ps)-n)
			return
		}
		fmt.Fprintf(w, "    %s: %s\n", p.Job, p.Why)
	}
}
