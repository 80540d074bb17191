package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// reconcile compares what the job-state bucket says with what the clouds
// run and repairs the difference, so that a missed event or a crash at any
// point heals. Each live attempt gets what its provider lists for its
// launch key (job.Observed): instances the record missed are recorded,
// ends it missed are billed, a launch that never happened is asked again
// with the same key, a release, a checkpoint request or a replacement's
// start is repeated. An instance no live attempt owns is billed to the
// ended attempt it belongs to and terminated; one that belongs to no job
// at all is terminated and its cost recorded as overhead. Every queued
// job is looked at again.
func (s *Scheduler) reconcile(ctx context.Context) {
	if !s.recMu.TryLock() {
		return
	}
	defer s.recMu.Unlock()
	start := time.Now()
	listedAt := s.o.Clock.Now() // before the listing: nothing launched later is in it
	byKey, ok := s.listInstances(ctx)
	if !ok {
		s.book.bump()
		s.kick()
		return
	}
	s.lastListed = listedAt
	s.saveListed(ctx, listedAt)
	s.mu.Lock()
	var ids []string
	for id, e := range s.index {
		if !e.inflight && (e.state.Active() || e.open) {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	owned := map[string]bool{}
	var moves []*job.Record
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		rec := s.reconcileJob(ctx, id, byKey, listedAt, owned)
		if rec != nil && s.moveCandidate(rec, s.o.Clock.Now()) {
			moves = append(moves, rec)
		}
	}
	s.mu.Lock()
	s.moves = moves
	s.mu.Unlock()
	s.collectOrphans(ctx, byKey, listedAt, owned)
	s.forgetSettled(byKey)
	if teams := s.teamStates(s.o.Clock.Now()); teams != nil {
		// Spend grows between cycles: the soft budget alerts are looked
		// at here too.
		s.budgetAlerts(ctx, teams, nil)
	}
	s.exp.save(ctx, s.bus.Meta(), s.log)
	s.book.bump()
	s.kick()
	s.metrics.reconciles.Add(1)
	s.metrics.reconcileTime.Add(int64(time.Since(start)))
	s.log.Debug("reconciled", zap.Int("jobs", len(ids)), zap.Duration("took", time.Since(start)))
}

// ListedEnded is how long after its end an instance is still in the
// listings reconciliation works from, from a cloud that can list by age
// (providers.RecentLister): EC2 lists a terminated instance for about as
// long. Rounds come every few seconds; an attempt that still takes an
// instance for live when its end has left the listings learns the end
// from its launch key (vanished).
const ListedEnded = time.Hour

// listInstances lists every cloud's instances once (several provider
// names may share one cloud), grouped by launch key: the live ones and
// those ended in the last ListedEnded where the cloud can tell them.
func (s *Scheduler) listInstances(ctx context.Context) (map[string][]providers.Instance, bool) {
	seen := map[providers.Provider]bool{}
	byKey := map[string][]providers.Instance{}
	var all []providers.Instance
	for _, c := range s.o.Clouds {
		if seen[c] {
			continue
		}
		seen[c] = true
		var insts []providers.Instance
		var err error
		if rl, ok := c.(providers.RecentLister); ok {
			insts, err = rl.InstancesSince(ctx, s.listedSince())
		} else {
			insts, err = c.Instances(ctx)
		}
		if err != nil {
			s.log.Warn("listing instances; skipping reconciliation", zap.String("provider", c.Name()), zap.Error(err))
			return nil, false
		}
		for _, in := range insts {
			byKey[in.IdempotencyKey] = append(byKey[in.IdempotencyKey], in)
		}
		all = append(all, insts...)
	}
	s.metrics.listed(all)
	return byKey, true
}

// listedSince is when the ends a listing asks for begin: ListedEnded
// before now, or before the last listing that succeeded when that was
// longer ago, so that an instance that ended between two rounds is in the
// second however far apart they were (an orphan's end is what records its
// overhead; on the simulated cloud at 3600x an hour passes in a second).
// Called under recMu.
func (s *Scheduler) listedSince() time.Time {
	since := s.o.Clock.Now().Add(-ListedEnded)
	if !s.lastListed.IsZero() {
		since = minTime(since, s.lastListed.Add(-ListedEnded))
	}
	return since
}

// listedKey is where the time of the last listing of instances that
// succeeded is kept (meta bucket, RFC 3339 on the scheduler's clock): a
// new term's first listing asks for the ends since an hour before it, as
// the term before would have, so an orphan that ended while no scheduler
// listed (a crash, a lease that changed hands) more than an hour before
// the new term began is still billed.
const listedKey = "reconcile.listed"

// saveListed keeps the time of a listing that succeeded (listedKey).
func (s *Scheduler) saveListed(ctx context.Context, at time.Time) {
	if _, err := s.bus.Meta().Put(ctx, listedKey, []byte(at.UTC().Format(time.RFC3339Nano))); err != nil && ctx.Err() == nil {
		s.log.Warn("keeping the time of the last listing of instances", zap.Error(err))
	}
}

// loadListed reads the time of the last listing an earlier term made
// (zero when none was kept, or it cannot be read: the new term then asks
// for the last hour's ends only).
func (s *Scheduler) loadListed(ctx context.Context) time.Time {
	b, _, err := s.bus.Meta().Get(ctx, listedKey)
	if errors.Is(err, events.ErrNotFound) {
		return time.Time{}
	}
	var at time.Time
	if err == nil {
		at, err = time.Parse(time.RFC3339Nano, string(b))
	}
	if err != nil {
		s.log.Warn("reading the time of an earlier term's last listing of instances", zap.Error(err))
		return time.Time{}
	}
	return at
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// observed is what a listing taken at listedAt says of one launch key.
func observed(key string, insts []providers.Instance, listedAt time.Time) job.Observed {
	obs := job.Observed{Key: key, At: listedAt}
	for _, in := range insts {
		obs.Instances = append(obs.Instances, instanceOf(in))
	}
	return obs
}

// reconcileJob reconciles one job's live attempts and marks their keys
// owned; it returns the record as it was read.
func (s *Scheduler) reconcileJob(ctx context.Context, id string, byKey map[string][]providers.Instance, listedAt time.Time, owned map[string]bool) *job.Record {
	if !s.claim(id) {
		return nil
	}
	defer s.done(id)
	rec := s.heldRecord(id)
	if rec == nil {
		var err error
		if rec, _, err = s.jobs.Get(ctx, id); err != nil {
			if !errors.Is(err, events.ErrNotFound) {
				s.log.Warn("reconcile: reading job", zap.String("job", id), zap.Error(err))
			}
			return nil
		}
	}
	for _, a := range []*job.Attempt{rec.Status.Previous, rec.Status.Current} {
		if a == nil {
			continue
		}
		owned[a.LaunchKey] = true
		in := observed(a.LaunchKey, byKey[a.LaunchKey], listedAt)
		if vanished(a, byKey[a.LaunchKey], listedAt) {
			// A cloud lists an ended instance only for a while (EC2
			// about an hour): the launch's own instances, asked for by
			// its key, say when one the record takes for live ended,
			// rather than billing it to when it was last seen.
			if insts, ok := s.byLaunchKey(ctx, a.Placement.Provider, a.LaunchKey); ok {
				in = observed(a.LaunchKey, insts, listedAt)
			}
		}
		if res := job.Apply(rec.Clone(), in, s.o.Clock.Now()); res.Verdict == job.Duplicate && len(res.Effects) == 0 {
			// The record just read already says all this listing does
			// (most rounds, for most jobs): no second read to find so.
			s.metrics.verdict(in.Name(), string(res.Verdict))
			continue
		}
		if _, _, err := s.apply(ctx, id, in); err != nil {
			s.log.Warn("reconcile", zap.String("job", id), zap.Error(err))
		}
	}
	return rec
}

// heldRecord is a copy of the version of job id's record the watch
// brought last, while the job holds an attempt; nil otherwise.
//
// Reconciliation compares each listing with it rather than with a read of
// the store: a read per job holding an attempt, one after the other, was a
// fifth of each round's two seconds with 6,000 jobs running, and a read of
// a version written more than a few seconds before finds it in a part of
// the store NATS has let go of and loads again from disk, holding the
// stream's writes (every lifecycle change, every placement) up meanwhile
// (up to 107 ms in such a round). The watched version is
// at most the watch's delay behind the bucket, and it only says whether a
// listing has anything new for the record (job.Apply's verdict) and which
// launch keys are owned: a change goes through apply, which reads the
// bucket and checks the revision, and collectOrphans reads the bucket
// before it acts on an instance no attempt read here owns. A verdict that
// a newer version would not give is corrected a round later.
func (s *Scheduler) heldRecord(id string) *job.Record {
	if r, _ := s.held(id); r != nil {
		return r.Clone()
	}
	return nil
}

// held is the version of job id's record the watch brought last and its
// revision, while the job holds an attempt (shared: not to be changed);
// nil otherwise.
func (s *Scheduler) held(id string) (*job.Record, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.index[id]; e != nil && e.rec != nil {
		return e.rec, e.rev
	}
	return nil, 0
}

// claim marks a job in flight for a reconciliation step; false if some
// other action holds it.
func (s *Scheduler) claim(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index[id]
	if e == nil || e.inflight {
		return false
	}
	e.inflight = true
	return true
}

// collectOrphans deals with instances no live attempt owns. Those of an
// attempt that has ended (a launch that came back late, a release whose
// end was not seen) are billed to that attempt, and terminated if live,
// through its lifecycle; those of no job are terminated, and their cost
// recorded as overhead once they have ended. The bucket, not the possibly
// lagging index, decides.
func (s *Scheduler) collectOrphans(ctx context.Context, byKey map[string][]providers.Instance, listedAt time.Time, owned map[string]bool) {
	for key, insts := range byKey {
		if owned[key] || s.settledKey(key, insts) {
			continue
		}
		jobID := insts[0].JobID
		if job.ValidID(jobID) {
			rec, _, err := s.jobs.Get(ctx, jobID)
			if err != nil && !errors.Is(err, events.ErrNotFound) {
				continue // cannot tell: leave it for the next round
			}
			if err == nil && hasAttempt(rec, key) {
				if _, res, err := s.apply(ctx, jobID, observed(key, insts, listedAt)); err == nil && res.Verdict != job.Refused {
					s.settle(key, insts)
					continue
				}
			}
		}
		s.orphans(ctx, key, insts)
	}
}

// vanished reports whether a listing taken at listedAt lacks an instance
// an attempt takes for live and that was launched long enough before it
// to be in it.
func vanished(a *job.Attempt, insts []providers.Instance, listedAt time.Time) bool {
	for _, sp := range a.Spans {
		if !sp.To.IsZero() || listedAt.Before(sp.From.Add(job.ListingGrace)) {
			continue
		}
		if !slices.ContainsFunc(insts, func(in providers.Instance) bool { return in.ID == sp.Instance }) {
			return true
		}
	}
	return false
}

// byLaunchKey lists one launch's instances from a provider that can list
// them by key (providers.KeyLister); false when it cannot or did not
// answer.
func (s *Scheduler) byLaunchKey(ctx context.Context, provider, key string) ([]providers.Instance, bool) {
	kl, ok := s.o.Clouds[provider].(providers.KeyLister)
	if !ok {
		return nil, false
	}
	insts, err := kl.InstancesByKey(ctx, key)
	if err != nil {
		s.log.Warn("listing a launch's instances", zap.String("provider", provider), zap.String("key", key), zap.Error(err))
		return nil, false
	}
	return insts, true
}

// hasAttempt reports whether a record knows a launch key.
func hasAttempt(r *job.Record, key string) bool {
	for _, a := range []*job.Attempt{r.Status.Current, r.Status.Previous} {
		if a != nil && a.LaunchKey == key {
			return true
		}
	}
	for i := range r.Status.Attempts {
		if r.Status.Attempts[i].LaunchKey == key {
			return true
		}
	}
	return false
}

// orphans terminates the live instances of a key that belongs to no job
// and records the cost of those that ended as overhead, once each.
func (s *Scheduler) orphans(ctx context.Context, key string, insts []providers.Instance) {
	var live []string
	done := true
	for _, in := range insts {
		if !in.State.Ended() {
			live = append(live, in.ID)
			done = false
			continue
		}
		done = s.recordOverhead(ctx, in) && done
	}
	if len(live) > 0 {
		s.metrics.orphans.Add(int64(len(live)))
		s.log.Warn("terminating instances no job owns", zap.String("job", insts[0].JobID), zap.String("key", key), zap.Int("instances", len(live)))
		s.terminate(ctx, insts[0].JobID, job.Terminate{Key: key, Instances: live, Provider: insts[0].Provider, Why: "no job owns it"})
	}
	if done {
		s.settle(key, insts)
	}
}

// Overhead is spend on an instance that belongs to no job: billed to
// nobody, recorded so that it is not lost.
type Overhead struct {
	Instance string       `json:"instance"`
	Key      string       `json:"key"`
	JobID    string       `json:"job_id,omitempty"`
	Provider string       `json:"provider"`
	Region   string       `json:"region"`
	From     time.Time    `json:"from"`
	To       time.Time    `json:"to"`
	Cost     money.Micros `json:"cost"`
}

// overheadPrefix starts the meta-bucket key of a recorded overhead.
const overheadPrefix = "overhead."

// recordOverhead records an orphan's cost once: in the cost ledger (its
// own subject, appended only while empty) and in the meta bucket (the key
// de-duplicates). It reports false when the ledger did not answer: the
// key is not settled, and the next round tries again.
func (s *Scheduler) recordOverhead(ctx context.Context, in providers.Instance) bool {
	end := in.EndedAt
	if end.IsZero() || !end.After(in.LaunchedAt) {
		return true
	}
	if _, err := ledger.AppendOverhead(ctx, s.bus, ledger.Orphan(in, in.IdempotencyKey, s.o.Clock.Now())); err != nil {
		s.log.Warn("recording overhead in the ledger", zap.String("instance", in.ID), zap.Error(err))
		return false
	}
	o := Overhead{Instance: in.ID, Key: in.IdempotencyKey, JobID: in.JobID, Provider: in.Provider, Region: in.Region,
		From: in.LaunchedAt, To: end, Cost: in.Bill(end)}
	b, _ := json.Marshal(o)
	if _, err := s.bus.Meta().Create(ctx, overheadPrefix+in.ID, b); err != nil {
		if !errors.Is(err, events.ErrExists) {
			s.log.Warn("recording overhead", zap.String("instance", in.ID), zap.Error(err))
		}
		return true
	}
	s.metrics.overhead.Add(int64(o.Cost))
	s.log.Warn("spend on an instance no job owns", zap.String("instance", in.ID), zap.String("key", in.IdempotencyKey), zap.Stringer("cost", o.Cost))
	return true
}

// settledKey reports whether a key of ended instances was dealt with
// already (its listing has not changed since): old keys are not read
// again every round.
func (s *Scheduler) settledKey(key string, insts []providers.Instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.settled[key]
	return ok && n == len(insts) && allEnded(insts)
}

func (s *Scheduler) settle(key string, insts []providers.Instance) {
	if !allEnded(insts) {
		return
	}
	s.mu.Lock()
	s.settled[key] = len(insts)
	s.mu.Unlock()
}

// forgetSettled drops the settled keys a listing no longer has: the
// clouds list ended instances for a while only, and a key they do not
// list is not looked at again (kept, the map grew by every launch key of
// every job that ever finished).
func (s *Scheduler) forgetSettled(byKey map[string][]providers.Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.settled {
		if _, ok := byKey[key]; !ok {
			delete(s.settled, key)
		}
	}
}

func allEnded(insts []providers.Instance) bool {
	for _, in := range insts {
		if !in.State.Ended() {
			return false
		}
	}
	return true
}
