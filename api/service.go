package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
)

// Service is the job API behind both HTTP and NATS.
type Service struct {
	bus   *events.Bus
	jobs  *events.JobStore
	vocab job.Vocabulary
	clock clock.Clock
	log   *zap.Logger
	ix    *index
	// archiveFrom is where the next Archive round looks from.
	archiveFrom archiveCursor
	hist        *histories
	// pages is the local copy of job pages (nil: none, see KeepPages);
	// pageDir where its file is made.
	pages   *pages
	pageDir string
	pageMax int64
	// pagesCopied is told when the copy of job pages has caught up.
	pagesCopied func()
	authn       *auth.Authenticator
	hub         *hub
	// market is the price feed's offers, for the dashboard.
	market *market
	// ledger is the cost ledger the cost reports read (nil: not open).
	ledger *ledger.View
	// budgets are the teams' monthly budgets (see Budgets).
	budgets []TeamBudget
	// follows counts the outputs streamed now, at most maxFollows
	// (MaxFollowers when zero).
	follows    atomic.Int64
	maxFollows int
}

// Changes counts the changes to the jobs' records this service has seen
// since it started (its listing index's view of the bucket, its first
// reading of it included): how busy the jobs are, for whoever tunes the
// process to it.
func (s *Service) Changes() uint64 { return s.ix.changes.Load() }

// FinishedAt is, as far as the service's view of the bucket has got, when
// a job finished: zero while it has not; known is false for a job the
// view does not hold (not seen yet, or removed).
func (s *Service) FinishedAt(id string) (finished time.Time, known bool) {
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	e, ok := s.ix.get(id)
	if !ok || e.deleted {
		return time.Time{}, false
	}
	return e.finishedAt(), true
}

// NewService returns the job API over a bus; vocab is what specs are
// validated against (the catalog).
func NewService(bus *events.Bus, vocab job.Vocabulary, clk clock.Clock, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Service{bus: bus, jobs: bus.Jobs(), vocab: vocab, clock: clk, log: log, ix: newIndex(), hist: newHistories(4096, 32<<10, 1024, 16<<10), pageMax: 8 << 30}
	s.ix.deleted = s.hist.forget
	// Finished records read lately, decoded (about 2.4 KB each): more
	// than the pages a thousand readers keep open; the copy of job pages
	// holds the rest, a read and a decode away.
	s.ix.recs = newRecords(4 << 10)
	s.market = newMarket()
	s.hub = newHub(s)
	s.ix.changed = s.hub.recordChanged
	return s
}

// KeepPages says where the local copy of job pages (see pages) makes its
// file: dir, rather than the system's temporary directory; and how large
// it may grow (past it the copy stops and every read asks the store): 0
// keeps no copy. Called before Start; without it, the copy is made in the
// temporary directory, up to 8 GiB.
func (s *Service) KeepPages(dir string, maxBytes int64) {
	s.pageDir, s.pageMax = dir, maxBytes
}

// OnPagesCopied sets fn to be called once, when the copy of job pages
// has caught up with the stores at start (the end of what a start
// reads); before Start.
func (s *Service) OnPagesCopied(fn func()) { s.pagesCopied = fn }

// PagesCopied says whether old jobs' pages are read from the local copy
// (see pages): it is kept, and has caught up with the store since start.
func (s *Service) PagesCopied() bool { return s.pages.ready() }

// PageCopy is the state of the local copy of job pages: its file's size,
// and why it stopped (nil while it is kept; an error too when there is no
// copy).
func (s *Service) PageCopy() (bytes int64, stopped error) {
	p := s.pages
	if p == nil {
		return 0, errors.New("no copy of job pages is kept")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur.size, p.err
}

// Start begins keeping the listing index; it returns once the index holds
// every stored job.
func (s *Service) Start(ctx context.Context) error {
	s.hub.setLife(ctx)
	if s.pageMax > 0 && s.pages == nil {
		p, err := newPages(s.pageDir, s.pageMax, s.log)
		if err != nil {
			// Reads ask the store, as they would without the copy.
			s.log.Warn("keeping no local copy of job pages", zap.Error(err))
		} else {
			p.onLive = s.pagesCopied
			s.pages = p
			s.ix.pages = p
			go func() {
				<-ctx.Done()
				p.close()
			}()
		}
	}
	if err := s.ix.start(ctx, s.bus, s.jobs); err != nil {
		return err
	}
	if _, err := s.market.start(ctx, s.bus); err != nil {
		return err
	}
	select {
	case <-s.ix.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.pages != nil {
		s.pages.loaded.Store(true)
	}
	// Every job event is followed from the start (the history cache keeps
	// the jobs submitted from now on; event streams share the follower),
	// and the copy of job pages replays the ones before: once the index
	// has read every record, so that the two loads' garbage does not pile
	// up at once.
	return s.hub.ensureConsumer()
}

// SubmitResult is the outcome of a submission.
type SubmitResult struct {
	Job *JobView
	// Created is false when an idempotency key matched an existing job.
	Created bool
}

// Submit validates a spec (YAML or JSON) and stores it as a queued job.
// With an idempotency key, a retry of the same submission within a day
// (job.KeyPeriod) returns the job the first one created, and a different
// spec under the same key is refused; later, the key makes a new job.
// Nothing is stored unless the spec is valid.
func (s *Service) Submit(ctx context.Context, body []byte, idempotencyKey, via string) (*SubmitResult, error) {
	res, team, err := s.submit(ctx, body, idempotencyKey, via)
	if res == nil || res.Created || err != nil {
		id := ""
		if res != nil {
			id = res.Job.ID
		}
		s.Audit(ctx, "job.submit", id, team, err)
	}
	return res, err
}

func (s *Service) submit(ctx context.Context, body []byte, idempotencyKey, via string) (_ *SubmitResult, team string, _ error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, "", err
	}
	// A spec that names no team is the submitter's team's.
	spec, err := job.ParseFor(body, s.vocab, p.Team)
	if err != nil {
		if ve, ok := job.AsValidationError(err); ok {
			return nil, p.Team, errInvalidSpec(ve)
		}
		return nil, p.Team, errBadRequest("%v", err)
	}
	team = spec.Team
	if !p.Can(auth.SubmitJobs, spec.Team) {
		return nil, team, errForbidden(p, "submit jobs for team "+spec.Team)
	}
	if len(idempotencyKey) > 256 {
		return nil, team, errBadRequest("idempotency key is longer than 256 characters")
	}
	now := s.clock.Now()
	deadline := spec.Deadline.Resolve(now)
	if !deadline.IsZero() && !deadline.After(now) {
		return nil, team, errInvalidSpec(&job.ValidationError{Errors: []job.FieldError{{Field: "deadline", Message: fmt.Sprintf("%s is in the past", deadline.UTC().Format(time.RFC3339))}}})
	}
	id := job.NewID(now)
	if idempotencyKey != "" {
		prev, err := s.keyedJob(ctx, spec.Team, idempotencyKey, now)
		if err != nil {
			return nil, team, err
		}
		if prev != "" {
			res, err := s.replay(ctx, prev, spec.Hash())
			return res, team, err
		}
		id = job.IDForKeyIn(spec.Team, idempotencyKey, job.KeyPeriodOf(now))
	}
	rec := &job.Record{ID: id, Spec: spec, Status: job.Status{
		State: job.Queued, Message: "waiting for placement", SubmittedAt: now, UpdatedAt: now,
		DeadlineAt: deadline, IdempotencyKey: idempotencyKey, SpecHash: spec.Hash(),
	}}
	rev, err := s.jobs.Create(ctx, rec)
	if err != nil {
		if errors.Is(err, events.ErrExists) && idempotencyKey != "" {
			res, err := s.replay(ctx, id, rec.Status.SpecHash)
			return res, team, err
		}
		return nil, team, errUnavailable(err)
	}
	// The watch will bring the record to the index too; applying it now
	// means a listing right after the submission shows the job.
	s.ix.apply(events.JobChange{ID: id, Revision: rev, Record: rec})
	s.log.Info("job submitted", zap.String("job", id), zap.String("name", spec.Name), zap.String("team", spec.Team), zap.String("via", via), zap.String("by", p.Subject))
	msg := "queued via " + via + " by " + p.Subject
	if !deadline.IsZero() {
		msg += ", deadline " + deadline.UTC().Format(time.RFC3339)
	}
	// The announcement and the history's first entry are both stored
	// before the answer, in one round trip.
	errs := s.bus.PublishTogether(ctx,
		events.Outgoing{Subject: events.SubjectJobSubmitted, Payload: &events.JobSubmitted{JobID: id, Name: spec.Name, Team: spec.Team, Priority: spec.Prio(), SubmittedAt: now, Via: via}},
		events.Outgoing{Subject: events.JobEventsSubject(id), Payload: &events.JobEvent{JobID: id, Kind: events.KindQueued, State: job.Queued, Message: msg}})
	if errs[0] != nil {
		s.log.Warn("announcing submission (the scheduler still sees the job)", zap.String("job", id), zap.Error(errs[0]))
	}
	if errs[1] != nil {
		s.log.Warn("recording submission in history", zap.String("job", id), zap.Error(errs[1]))
	}
	v := viewOf(rec, now, nil, nil)
	v.Events = []EventView{{Time: now, Kind: events.KindQueued, State: job.Queued, Message: msg}}
	return &SubmitResult{Job: v, Created: true}, team, nil
}

// keyedJob is the job an idempotency key named in the last KeyPeriod, if
// any, other than the one it names now (which job.IDForKeyIn and the
// store's create find): the previous period's, or one stored before keys
// had periods. A key used again after that names a new job with an ID of
// its own: a job's ID is never used twice, even once retention removed
// the job, so its launches and charges are never taken for another's.
func (s *Service) keyedJob(ctx context.Context, team, key string, now time.Time) (string, error) {
	for _, id := range []string{job.IDForKeyIn(team, key, job.KeyPeriodOf(now)-1), job.IDForKey(team, key)} {
		r, _, err := s.jobs.Get(ctx, id)
		switch {
		case errors.Is(err, events.ErrNotFound):
		case err != nil:
			return "", storeError(err)
		case now.Sub(r.Status.SubmittedAt) < job.KeyPeriod:
			return id, nil
		}
	}
	return "", nil
}

// replay answers a retried submission with the job the first one made.
func (s *Service) replay(ctx context.Context, id, specHash string) (*SubmitResult, error) {
	existing, _, err := s.jobs.Get(ctx, id)
	if err != nil {
		return nil, storeError(err)
	}
	if existing.Status.SpecHash != specHash {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf("idempotency key already used for job %s with a different spec", id)}
	}
	v, err := s.view(ctx, existing)
	if err != nil {
		return nil, err
	}
	return &SubmitResult{Job: v}, nil
}

// Get returns a job with its history and, if queued, why it is pending.
func (s *Service) Get(ctx context.Context, id string) (*JobView, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if !job.ValidID(id) {
		return nil, errNotFound(id)
	}
	if rec, since, ok := s.ix.recs.get(id); ok {
		if !p.Can(auth.ReadJobs, rec.Spec.Team) {
			return nil, errNotFound(id)
		}
		return s.viewSettled(ctx, rec, time.Since(since) > settleAfter)
	}
	if rev, ok := s.ix.revOf(id); ok {
		if rec, h, ok := s.pages.finished(id, rev, historyLimit, s.settled); ok {
			s.ix.cache(rec, rev)
			if !p.Can(auth.ReadJobs, rec.Spec.Team) {
				return nil, errNotFound(id)
			}
			return s.viewOf(ctx, rec, h), nil
		}
	}
	// The record and the history are read from the store at once: for a
	// job not read lately each may be a load from disk of an old part of
	// the store, and one need not wait for the other.
	type read struct {
		history []events.HistoryEntry
		err     error
	}
	hc := make(chan read, 1)
	go func() {
		h, err := s.hist.read(ctx, s.bus, id, nil, false)
		hc <- read{h, err}
	}()
	rec, rev, err := s.readRecord(ctx, id)
	h := <-hc
	if errors.Is(err, events.ErrNotFound) {
		return nil, errNotFound(id)
	}
	if err != nil {
		return nil, storeError(err)
	}
	if sealed := rec.SealedHistory(); len(sealed) > 0 {
		// Sealed: most of the history is in the seals the record names,
		// which the read above did not know of (what it kept may be the
		// events stored after them only).
		s.hist.forget(id)
		h.history, h.err = s.hist.read(ctx, s.bus, id, sealed, false)
	}
	s.ix.cache(rec, rev)
	if !p.Can(auth.ReadJobs, rec.Spec.Team) {
		// Another team's job is not there, as far as the caller can tell.
		return nil, errNotFound(id)
	}
	if h.err != nil {
		s.log.Warn("reading job history", zap.String("job", rec.ID), zap.Error(h.err))
	}
	return s.viewOf(ctx, rec, h.history), nil
}

// settleAfter is how long a finished job's record must have stayed the
// same before its history is taken as complete: the last events of a job
// (its instances' ends) come within seconds of its end.
const settleAfter = time.Minute

// record reads a job's record for a view: a finished job's from the cache
// when it is there (since is when the cache first held it as it is), any
// other from the store (since is zero).
func (s *Service) record(ctx context.Context, id string) (_ *job.Record, since time.Time, _ error) {
	if r, at, ok := s.ix.recs.get(id); ok {
		return r, at, nil
	}
	r, rev, err := s.readRecord(ctx, id)
	if err != nil {
		return nil, time.Time{}, err
	}
	s.ix.cache(r, rev)
	return r, time.Time{}, nil
}

func (s *Service) view(ctx context.Context, rec *job.Record) (*JobView, error) {
	return s.viewSettled(ctx, rec, false)
}

// viewSettled is view; settled says the job has been finished, unchanged,
// long enough for its history to be complete.
func (s *Service) viewSettled(ctx context.Context, rec *job.Record, settled bool) (*JobView, error) {
	var history []events.HistoryEntry
	var err error
	if h, ok := s.pages.history(rec.ID, historyLimit, s.settled(rec)); ok {
		history = h
	} else {
		history, err = s.hist.read(ctx, s.bus, rec.ID, rec.SealedHistory(), settled)
	}
	if err != nil {
		s.log.Warn("reading job history", zap.String("job", rec.ID), zap.Error(err))
	}
	return s.viewOf(ctx, rec, history), nil
}

// settled says a job finished more than settleAfter ago, by the jobs'
// clock: its history is complete. (A record that does not say when is
// not taken as settled.)
func (s *Service) settled(r *job.Record) bool {
	if !r.Status.State.Terminal() {
		return false
	}
	at := r.Status.FinishedAt
	if at.IsZero() {
		at = r.Status.UpdatedAt
	}
	return !at.IsZero() && s.clock.Now().Sub(at) > settleAfter
}

// viewOf is a job's view from its record and history: why it is pending
// if it is queued, its output's tail if it failed.
func (s *Service) viewOf(ctx context.Context, rec *job.Record, history []events.HistoryEntry) *JobView {
	var reasons []job.PendingReason
	if rec.Status.State == job.Queued {
		reasons = s.pendingReasons(ctx, rec.ID, history)
	}
	v := viewOf(rec, s.clock.Now(), reasons, history)
	if rec.Status.State == job.Failed {
		v.LogTail = s.logTail(ctx, rec.ID)
	}
	return v
}

// pendingAnswer is how long a view waits for the scheduler to say why a
// job is pending before it shows the reasons its history last recorded.
const pendingAnswer = 100 * time.Millisecond

// pendingReasons asks the active scheduler why a queued job is pending,
// as of its last cycle. Without a prompt answer (no scheduler running, or
// one busy) they are the reasons the job's history last recorded (their
// kinds are current; their counts may be older); none is not an error.
func (s *Service) pendingReasons(ctx context.Context, id string, history []events.HistoryEntry) []job.PendingReason {
	req, _ := json.Marshal(map[string]string{"id": id})
	rctx, cancel := context.WithTimeout(ctx, pendingAnswer)
	defer cancel()
	b, err := s.bus.Request(rctx, events.SubjectPendingReasons, req)
	var reply struct {
		Reasons []job.PendingReason `json:"reasons"`
	}
	if err == nil && json.Unmarshal(b, &reply) == nil && len(reply.Reasons) > 0 {
		return reply.Reasons
	}
	for i := len(history) - 1; i >= 0; i-- {
		switch ev := history[i].Event; {
		case ev.Kind == events.KindPending:
			return ev.Reasons
		case ev.State != job.Queued:
			return nil // requeued since: nothing recorded for this wait yet
		}
	}
	return nil
}

// List returns a page of jobs, newest first.
func (s *Service) List(ctx context.Context, q Query) (*JobList, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Can(auth.ReadJobs, q.Team) {
		if q.Team != "" {
			// Another team's jobs: none the caller may see.
			return &JobList{Jobs: []Summary{}}, nil
		}
		// Only the caller's team is there to list.
		q.Team = p.Team
	}
	for _, st := range q.States {
		if !st.Valid() {
			return nil, errBadRequest("unknown state %q", st)
		}
	}
	if q.After != "" && !job.ValidID(q.After) {
		return nil, errBadRequest("after: %q is not a job ID", q.After)
	}
	l, ok := s.ix.list(q, s.clock.Now())
	if !ok {
		return nil, errBadRequest("after: no job %q to continue the listing from; list again without after", q.After)
	}
	return &l, nil
}

// Cancel cancels a job; the scheduler releases its capacity. Cancelling a
// cancelled job is not an error; cancelling a finished one is.
func (s *Service) Cancel(ctx context.Context, id, reason string) (*JobView, error) {
	var team string
	v, err := s.cancel(ctx, id, reason, &team)
	s.Audit(ctx, "job.cancel", id, team, err)
	return v, err
}

// cancel is Cancel; team is set to the job's team once it is known.
func (s *Service) cancel(ctx context.Context, id, reason string, team *string) (*JobView, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if !job.ValidID(id) {
		return nil, errNotFound(id)
	}
	now := s.clock.Now()
	var res job.Result
	rec, rev, err := s.jobs.Modify(ctx, id, func(r *job.Record) error {
		*team = r.Spec.Team
		switch team := r.Spec.Team; {
		case !p.Can(auth.ReadJobs, team):
			return errNotFound(id)
		case !p.Can(auth.CancelJobs, team):
			return errForbidden(p, "cancel jobs of team "+team)
		}
		res = job.Apply(r, job.Cancel{Message: reason, By: p.Subject}, now)
		switch {
		case res.Verdict == job.Duplicate:
			return events.ErrNoChange
		case !res.Changed():
			return &Error{Status: http.StatusConflict, Code: CodeAlreadyFinished, Message: fmt.Sprintf("job %s already %s", id, r.Status.State)}
		}
		return nil
	})
	var apiErr *Error
	switch {
	case errors.As(err, &apiErr):
		return nil, apiErr
	case errors.Is(err, events.ErrNotFound):
		// An archived job has finished long ago.
		if r, _, aerr := s.readRecord(ctx, id); aerr == nil && p.Can(auth.ReadJobs, r.Spec.Team) {
			*team = r.Spec.Team
			return nil, &Error{Status: http.StatusConflict, Code: CodeAlreadyFinished, Message: fmt.Sprintf("job %s already %s", id, r.Status.State)}
		}
		return nil, errNotFound(id)
	case err != nil:
		return nil, storeError(err)
	}
	s.ix.apply(events.JobChange{ID: id, Revision: rev, Record: rec})
	if res.Changed() {
		// The scheduler sees the cancelled job in the bucket and lets its
		// capacity go; the history entry is the API's to write.
		s.log.Info("job cancelled", zap.String("job", id), zap.String("by", p.Subject))
		for _, e := range res.Effects {
			h, ok := e.(job.History)
			if !ok {
				continue
			}
			ev := &events.JobEvent{JobID: id, Kind: h.Kind, State: rec.Status.State, Attempt: h.Attempt, Message: h.Message, Cost: rec.CostAt(now)}
			if err := s.bus.Publish(ctx, events.JobEventsSubject(id), ev, events.WithID(h.ID)); err != nil {
				s.log.Warn("recording cancellation in history", zap.String("job", id), zap.Error(err))
			}
		}
	}
	return s.view(ctx, rec)
}
