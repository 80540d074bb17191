package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/slab"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// Options configures a Scheduler.
type Options struct {
	Clock clock.Clock
	Log   *zap.Logger
	// Clouds maps an offer's provider name ("aws", "azure", "gcp") to the
	// Provider that sells it; the simulated cloud stands in for all three.
	Clouds map[string]providers.Provider
	// AgentCredentials issues the NATS credential (a creds file) of an
	// attempt's agent, passed to the instance with its workload; nil
	// passes none (the agent uses the image's). It is not asked for an
	// agent its cloud runs inside the server's process
	// (providers.AgentHost).
	AgentCredentials func(jobID string, attempt int) (string, error)
	// AttemptEnded is told of every attempt that ends (its agent's
	// credential is revoked), but those of agents given no credential
	// (providers.AgentHost); it must not block. At a term's start it is
	// also told of the attempts that ended within EndedWithin (scheduler
	// clock) before it: an earlier term may have stopped between ending
	// one and passing it on.
	AttemptEnded func(jobID string, attempt int)
	EndedWithin  time.Duration
	Throughput   bidding.ThroughputTable
	Geography    func(provider, region string) string
	// ReconcileInterval is the wall time between full reconciliations
	// against the clouds (default 15s).
	ReconcileInterval time.Duration
	// PolicyInterval is how often, in scheduler clock time, every queued
	// job is looked at again whatever else changed: the longest a deadline
	// policy's choice (wait for spot, say) holds unasked (default 1m).
	PolicyInterval time.Duration
	// UnavailableFor is how long an offer whose launch failed for lack of
	// capacity is skipped, in scheduler clock time (default 3m).
	UnavailableFor time.Duration
	// Debounce batches the triggers of a burst into one cycle (wall time,
	// default 2ms).
	Debounce time.Duration
	// Workers bounds concurrent launches, and apart from them concurrent
	// placements, releases and moves (default 32 each).
	Workers int
	// Policy decides spot, on-demand or waiting for jobs with a deadline
	// and purchase policy auto (default: bidding's "spotwise" policy).
	Policy bidding.Policy
	// Arbitrage tunes the moves of running jobs to cheaper capacity.
	Arbitrage Arbitrage
	// LaunchRetries is how often a launch that failed for a transient
	// reason is retried at once before the job waits for the next
	// reconciliation (default 3).
	LaunchRetries int
	// LaunchTries is how many launches of one attempt may end with an
	// unknown outcome before the attempt is given up (default 5).
	LaunchTries int
	// CheckpointRoot is where jobs' checkpoints are stored by default
	// (the server's store): a checkpoint reported outside a job's
	// location is refused.
	CheckpointRoot string
	// Term is the scheduler lease term this scheduler holds; every write
	// carries it, and a record written by a newer term is not written
	// again. LeaseValid says whether the lease is still held (nil:
	// always). Zero: no lease (a scheduler of its own).
	Term       int64
	LeaseValid func() bool
	// Metrics receives the counters; successive schedulers of one server
	// (one per lease term) share it. Nil makes a private one.
	Metrics *Metrics
	// Teams are the teams' quotas and budgets, by team name (see
	// quota.go); a team not named has neither.
	Teams map[string]TeamLimits
	// Spend is what a team was charged since a time (the start of the
	// month, UTC), from the cost ledger: every charge up to now, the
	// running attempts' time so far included. What the live attempts are
	// still expected to cost (committed) the scheduler adds itself. It is
	// asked every cycle, so it answers from memory. Nil: no spend is
	// known, and budgets count committed spend only.
	Spend func(team string, since time.Time) money.Micros
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.ReconcileInterval == 0 {
		o.ReconcileInterval = 15 * time.Second
	}
	if o.PolicyInterval <= 0 {
		o.PolicyInterval = time.Minute
	}
	if o.UnavailableFor == 0 {
		o.UnavailableFor = 3 * time.Minute
	}
	if o.Debounce == 0 {
		o.Debounce = 2 * time.Millisecond
	}
	if o.Workers == 0 {
		o.Workers = 32
	}
	if o.LaunchRetries == 0 {
		o.LaunchRetries = 3
	}
	if o.LaunchTries == 0 {
		o.LaunchTries = 5
	}
	if o.Metrics == nil {
		o.Metrics = &Metrics{}
	}
	if o.Policy == nil {
		o.Policy = bidding.Spotwise{}
	}
	if o.Arbitrage.Saving <= 0 || o.Arbitrage.Saving >= 1 {
		o.Arbitrage.Saving = DefaultArbitrageSaving
	}
	if o.Arbitrage.MinStay == 0 {
		o.Arbitrage.MinStay = DefaultArbitrageMinStay
	}
}

// Arbitrage tunes the moves of running jobs to clearly cheaper capacity
// (see move.go). A job the deadline policy bridged onto on-demand goes
// back to spot by the policy's word and Saving whatever Off says.
type Arbitrage struct {
	// Off stops moves for price alone.
	Off bool
	// Saving is the least share of the expected cost of finishing where
	// the job runs that a move, its own cost included, must save
	// (default DefaultArbitrageSaving).
	Saving float64
	// MinStay is how long a job runs on capacity before it is moved for
	// price, in scheduler clock time (default DefaultArbitrageMinStay).
	MinStay time.Duration
}

// Arbitrage defaults.
const (
	DefaultArbitrageSaving  = 0.2
	DefaultArbitrageMinStay = time.Hour
)

// Scheduler places queued jobs on offers and follows them to the end. It
// keeps an in-memory index of jobs fed by a watch on the job-state bucket
// (the truth), reacts to submissions, price feeds, instance changes and
// agent reports, and reconciles against the clouds on a timer so that a
// missed event heals.
type Scheduler struct {
	bus  *events.Bus
	jobs jobStore
	pub  publisher
	o    Options
	log  *zap.Logger
	book *book

	// lastListed is the clock's time at the start of the last listing
	// of instances that succeeded (under recMu; see listedSince).
	lastListed time.Time

	mu    sync.Mutex
	index map[string]*entry
	// entries holds the index's entries in chunks (see internal/slab).
	entries slab.Pool[entry]
	// loading is set while a term reads the bucket at its start.
	loading bool
	q       queue
	// fresh are the queued jobs that need a look though the book has not
	// changed since the last full look (at version lookedAt): new, changed
	// or back from an action. A cycle over an unchanged book looks at
	// these only, not at a backlog that fitted nowhere.
	fresh    []*QueuedJob
	lookedAt uint64
	// cycleJobs, cyclePending and cyclePlaced are the arrays the last
	// cycle listed its jobs and verdicts in, for the next; only the cycle
	// touches them.
	cycleJobs    []*QueuedJob
	cyclePending []Pending
	cyclePlaced  []Placement
	// nowhere are the needs of queued jobs that no offer passed the
	// static filters of, in a book of shape nowhereShape (see
	// stillNowhere); only the cycle touches them.
	nowhere      map[unique.Handle[Requirements]]bool
	nowhereShape uint64
	// moves are the running jobs the last reconciliation found for the
	// next cycle to look for cheaper capacity for (see move.go).
	moves []*job.Record
	// work runs the actions (placements, releases, moves, expiries);
	// calls runs launches, whose cloud calls may take seconds: a placement
	// is written without waiting behind the launches of earlier ones;
	// ends runs terminates, behind no launch, and holds up no input (an
	// agent's exit, a notice) while a cloud takes its time to answer.
	work, calls, ends *pool
	// depose ends Run with ErrDeposed.
	depose context.CancelCauseFunc
	// launching holds the launch keys being launched right now.
	launching map[string]bool
	// settled holds the keys of ended instances no live attempt owns
	// that reconciliation has dealt with (by how many it listed).
	settled map[string]int
	kickC   chan struct{}
	wg      sync.WaitGroup
	busy    atomic.Int64 // spawned goroutines running, and a cycle
	recMu   sync.Mutex
	metrics *Metrics
	zones   zoneWatch // only the cycle touches it
	exp     *experience
	// tp is the throughput table corrected by what running jobs measured.
	tp bidding.ThroughputTable
	// holds are, by limited team and job, what the jobs hold (budget.go);
	// teamOf the team of each job there. budgetRaised are the budget
	// alerts raised (or being raised) by this scheduler.
	holds        map[string]map[string]teamHolds
	teamOf       map[string]string
	budgetRaised map[string]bool
	// capped are the jobs with a max_cost_usd not done yet; capC asks for
	// a look at them (costlimit.go).
	capped map[string]*job.Record
	capC   chan struct{}
}

// entry is what the scheduler remembers of one job between events.
type entry struct {
	rev    uint64
	state  job.State
	queued *QueuedJob
	// seen is the book version at which the job was last found
	// unplaceable; it is looked at again when the book changes.
	seen uint64
	// inflight marks a job with an action under way (a launch, a cleanup),
	// so cycles and reconciliation leave it alone.
	inflight bool
	// open is set while the job holds an attempt (current or being left).
	open bool
	// rec is, while the job holds an attempt, the version of its record
	// the watch brought last (shared with the store's other watchers: not
	// to be changed): what reconciliation compares the clouds' listings
	// with, rather than a read of the store per job and round.
	rec *job.Record
	// attempt is the record's attempt count: a placement decides attempt
	// attempt+1.
	attempt int
	// pending is why the job was not placed by the last cycle that looked
	// at it; codes hashes their kinds, to record a change in the history.
	pending []job.PendingReason
	codes   uint64
	// hopeless is when a cycle first found that the job can no longer
	// meet its deadline, in Unix nanoseconds (zero: it can).
	hopeless int64
	// progress and progressAt are the record's progress and when it was
	// written (Unix nanoseconds): an agent's progress report the lifecycle
	// would not write is dropped without reading the record.
	progress   float64
	progressAt int64
}

// inputLanes is how many jobs' instance events, and how many jobs' agent
// reports, are handled at once (see events.ConsumerConfig.Key).
const inputLanes = 16

// instanceLane and agentLane are the job a message is about (the instance,
// for an instance of no job), which keeps each job's inputs in order.
func instanceLane(subject string, p events.Payload) string {
	if c, ok := p.(*events.InstanceChanged); ok {
		return cmp.Or(c.Instance.JobID, c.Instance.ID)
	}
	return subject
}

func agentLane(subject string, p events.Payload) string {
	if r, ok := p.(*events.AgentReport); ok {
		return r.JobID
	}
	return subject
}

// New returns a scheduler over a bus.
func New(bus *events.Bus, o Options) *Scheduler {
	o.defaults()
	s := &Scheduler{
		bus: bus, jobs: bus.Jobs(), pub: bus, o: o, log: o.Log, book: newBook(),
		index: map[string]*entry{}, kickC: make(chan struct{}, 1), lookedAt: ^uint64(0),
		metrics: o.Metrics, launching: map[string]bool{}, settled: map[string]int{}, work: &pool{}, calls: &pool{}, ends: &pool{},
		budgetRaised: map[string]bool{}, capC: make(chan struct{}, 1),
		holds: map[string]map[string]teamHolds{}, teamOf: map[string]string{}, capped: map[string]*job.Record{},
	}
	s.exp = newExperience()
	s.tp = learned{base: o.Throughput, exp: s.exp}
	return s
}

// Run schedules until ctx ends: it loads the job index, subscribes to the
// price, instance, agent and submission streams, reconciles once, then
// runs cycles whenever something changes and reconciles on a timer.
func (s *Scheduler) Run(ctx context.Context) (err error) {
	// A write refused for the lease term ends the run: another scheduler
	// holds the cluster now.
	ctx, s.depose = context.WithCancelCause(ctx)
	defer func() {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrDeposed):
			s.log.Warn("a newer scheduler holds the cluster: stepping down")
			err = ErrDeposed
		case cause != nil:
			err = nil // stopped while starting: nothing went wrong
		}
	}()
	// A new term starts from the bucket, not from what an earlier term
	// remembered.
	s.mu.Lock()
	s.index, s.entries, s.q, s.book = map[string]*entry{}, slab.Pool[entry]{}, queue{}, newBook()
	s.holds, s.teamOf, s.capped = map[string]map[string]teamHolds{}, map[string]string{}, map[string]*job.Record{}
	s.metrics.startView()
	s.fresh, s.lookedAt = nil, ^uint64(0) // the first cycle looks at all
	s.book.rateOf = s.rateOf
	s.book.geography = s.o.Geography
	if err := s.exp.load(ctx, s.bus.Meta()); err != nil {
		s.log.Warn("reading what earlier terms learnt", zap.Error(err))
	}
	s.mu.Unlock()
	listed := s.loadListed(ctx)
	s.recMu.Lock()
	s.lastListed = listed
	s.recMu.Unlock()
	// On the way out, every source of work is stopped (each stop waits for
	// its handler to return) before the actions they started are waited
	// for: nothing may start an action once Run is waiting for them.
	s.work.start(ctx, s.o.Workers)
	s.calls.start(ctx, s.o.Workers)
	s.ends.start(ctx, s.o.Workers)
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		s.work.stop() // its placements queue launches: stopped first
		s.calls.stop()
		s.ends.stop() // actions and launches may queue terminates
		s.wg.Wait()
		s.metrics.endView()
	}()
	ready := make(chan struct{})
	var once sync.Once
	s.mu.Lock()
	s.loading = true
	s.mu.Unlock()
	stopWatch, err := s.jobs.Watch(ctx, s.onJobChange, func() {
		once.Do(func() {
			s.mu.Lock()
			s.loading = false
			s.mu.Unlock()
			close(ready)
		})
	})
	if err != nil {
		return err
	}
	stops = append(stops, stopWatch)
	select {
	case <-ready:
	case <-ctx.Done():
		return nil
	}
	s.mu.Lock()
	s.log.Info("job index loaded", zap.Int("jobs", len(s.index)), zap.Int("queued", s.q.len()))
	s.mu.Unlock()
	stopPrices, err := s.bus.Follow(ctx, events.StreamPrices, []string{"spotwise.prices.>"}, true, offersHandler(s))
	if err != nil {
		return err
	}
	stops = append(stops, stopPrices)
	subs := []struct {
		cc events.ConsumerConfig
		h  events.Handler
	}{
		// A job's instance events and its agent's reports are taken in
		// order, each job's in its lane, while other jobs' go on beside
		// them: one at a time, each a read and a conditional write of the
		// record, would hold every job to a few hundred inputs a second.
		{events.ConsumerConfig{Stream: events.StreamInstances, Durable: "scheduler-instances", Subjects: []string{"spotwise.instances.>"}, Workers: inputLanes, Key: instanceLane}, instanceHandler(s)},
		{events.ConsumerConfig{Stream: events.StreamAgent, Durable: "scheduler-agent", Subjects: []string{events.AllAgentReports}, Workers: inputLanes, Key: agentLane}, agentHandler(s)},
		{events.ConsumerConfig{Stream: events.StreamInterruptions, Durable: "scheduler-interruptions", Subjects: []string{"spotwise.interruptions.>"}, AckWait: 10 * time.Second, Workers: 64}, noticeHandler(s)},
		{events.ConsumerConfig{Stream: events.StreamJobs, Durable: "scheduler-submissions", Subjects: []string{events.SubjectJobSubmitted}, New: true}, submissionHandler(s)},
	}
	for _, sub := range subs {
		stop, err := s.bus.Consume(ctx, sub.cc, sub.h)
		if err != nil {
			return err
		}
		stops = append(stops, stop)
	}
	stopPending, err := s.bus.Serve(events.SubjectPendingReasons, s.servePending)
	if err != nil {
		return err
	}
	stops = append(stops, stopPending)
	s.reconcile(ctx)
	ticker := time.NewTicker(s.o.ReconcileInterval)
	defer ticker.Stop()
	// The policy's clock runs on the scheduler's clock, not the wall's:
	// how often a waiting job is asked about again is simulated time,
	// whatever speed the simulation runs at.
	policy := s.o.Clock.NewTimer(s.o.PolicyInterval)
	defer policy.Stop()
	// Caps on jobs' costs are watched on the scheduler's clock too.
	caps := s.o.Clock.NewTimer(time.Hour)
	caps.Stop()
	defer caps.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.capC:
			s.checkCaps(ctx, caps)
		case <-caps.C():
			s.checkCaps(ctx, caps)
		case <-policy.C():
			policy.Reset(s.o.PolicyInterval)
			s.book.bump()
			s.kick()
		case <-ticker.C:
			s.spawn(func() {
				s.reconcile(ctx)
			})
		case <-s.kickC:
			s.busy.Add(1)
			time.Sleep(s.o.Debounce)
			s.cycle(ctx)
			s.busy.Add(-1)
		}
	}
}

// spawn runs fn on a goroutine Run waits for before it returns.
func (s *Scheduler) spawn(fn func()) {
	s.wg.Add(1)
	s.busy.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.busy.Add(-1)
		fn()
	}()
}

// Busy reports whether the scheduler has work under way or asked for: an
// action running or waiting for a worker, or a cycle to run. Tests use it
// to let the system settle before they move simulated time on.
func (s *Scheduler) Busy() bool {
	return s.busy.Load() > 0 || len(s.kickC) > 0 || s.work.busy() || s.calls.busy() || s.ends.busy()
}

// kick asks for a scheduling cycle soon.
func (s *Scheduler) kick() {
	select {
	case s.kickC <- struct{}{}:
	default:
	}
}

// goAction queues an action on the worker pool (dropped once Run is on its
// way out).
func (s *Scheduler) goAction(ctx context.Context, fn func(ctx context.Context)) {
	s.work.submit(fn)
}

// goLaunch queues a launch on the launch workers (dropped once Run is on
// its way out).
func (s *Scheduler) goLaunch(fn func(ctx context.Context)) {
	s.calls.submit(fn)
}

// onJobChange keeps the index and the queue in step with the bucket.
func (s *Scheduler) onJobChange(c events.JobChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index[c.ID]
	if c.Record == nil {
		if s.trackTeam(c.ID, nil) {
			s.book.bump()
			s.kick()
		}
		s.trackCap(c.ID, nil)
		if e != nil {
			s.dequeue(c.ID, e)
			s.forget(c.ID, e)
		}
		return
	}
	if e == nil {
		e = s.entries.New()
		s.index[c.ID] = e
	}
	if c.Revision <= e.rev {
		return
	}
	r := c.Record
	if s.trackTeam(c.ID, r) {
		// Quota freed: every queued job is looked at again.
		s.book.bump()
		s.kick()
	}
	s.trackCap(c.ID, r)
	if s.loading && s.o.AttemptEnded != nil && s.o.EndedWithin > 0 {
		since := s.o.Clock.Now().Add(-s.o.EndedWithin)
		for _, a := range r.Status.Attempts {
			if a.EndedAt.After(since) {
				s.attemptEnded(r, a.N)
			}
		}
	}
	s.metrics.jobMoved(e.state, r.Status.State)
	e.rev, e.state, e.attempt = c.Revision, r.Status.State, r.Status.Attempt
	e.progress, e.progressAt = r.Status.Progress, 0
	if at := r.Status.ProgressAt; !at.IsZero() {
		e.progressAt = at.UnixNano()
	}
	e.open = r.Status.Current != nil || r.Status.Previous != nil
	e.rec = nil
	if e.open {
		e.rec = r
	}
	switch {
	case r.NeedsPlacement():
		if e.queued != nil {
			s.q.remove(c.ID, e.queued)
		}
		e.queued = queuedJob(r)
		e.queued.e, e.queued.attempt = e, r.Status.Attempt
		e.seen = 0
		s.q.add(e.queued)
		s.fresh = append(s.fresh, e.queued)
		s.metrics.queued.Store(int64(s.q.len()))
		s.kick()
	default:
		s.dequeue(c.ID, e)
	}
	if r.Status.State.Terminal() {
		if e.open && !e.inflight {
			// Cancelled (or finished) with capacity still held: let it go
			// now rather than at the next reconciliation.
			e.inflight = true
			id := r.ID
			s.goAction(context.Background(), func(ctx context.Context) {
				defer s.done(id)
				s.release(ctx, id)
			})
		} else if !e.open && !e.inflight {
			// Finished for good: nothing more to remember in memory.
			s.forget(c.ID, e)
		}
	}
}

// forget drops a job's entry; called with mu held, once the job is out of
// the queue. A QueuedJob built for it may still point at the entry, which
// may by then be another job's: whoever follows the pointer checks that
// the entry still queues that very QueuedJob.
func (s *Scheduler) forget(id string, e *entry) {
	delete(s.index, id)
	s.metrics.jobMoved(e.state, "")
	s.entries.Free(e)
}

// queuedJob is what a cycle needs of a job waiting for capacity.
func queuedJob(r *job.Record) *QueuedJob {
	// Teams repeat across many jobs: one copy of each name.
	q := &QueuedJob{ID: r.ID, Priority: r.Spec.Prio(), SubmittedAt: r.Status.SubmittedAt, Team: unique.Make(r.Spec.Team).Value(),
		DeadlineAt: r.Status.DeadlineAt, Progress: r.Status.Progress, Req: RequirementsOf(r),
		Moving: r.Status.State != job.Queued}
	if r.Spec.MaxCost > 0 {
		q.CostSoFar = r.CostAt(r.Status.UpdatedAt)
	}
	if r.Status.DeadlineMissed {
		q.DeadlineAt = time.Time{} // it runs anyway, as soon as it can
	}
	except := func() *Exceptions {
		if q.Except == nil {
			q.Except = &Exceptions{}
		}
		return q.Except
	}
	for _, x := range r.Status.Excluded {
		ex := except()
		ex.Excluded = append(ex.Excluded, x.Key)
		ex.ExcludedWhy = append(ex.ExcludedWhy, x.Reason)
	}
	if p := r.Status.Previous; p != nil && (p.Notice != nil || p.Closing == job.OutcomeMoved) {
		// A replacement does not go back where the job is leaving: that
		// capacity is going (and, after a notice, often its zone with it).
		off := providers.Offer{Provider: p.Placement.Provider, Region: p.Placement.Region, Zone: p.Placement.Zone,
			InstanceType: p.Placement.InstanceType, Purchase: providers.PurchaseOption(p.Placement.Purchase)}
		ex := except()
		ex.Avoid = append(ex.Avoid, p.Placement.OfferID)
		if p.Notice != nil && p.Notice.Deadline.After(time.Time{}) {
			ex.Avoid = append(ex.Avoid, providers.ScopeKey(providers.ScopeZone, off))
		}
	}
	return q
}

// dequeue takes a job out of the queue; called with mu held.
func (s *Scheduler) dequeue(id string, e *entry) {
	if e.queued == nil {
		return
	}
	s.q.remove(id, e.queued)
	e.queued = nil
	s.metrics.queued.Store(int64(s.q.len()))
	e.pending, e.codes = nil, 0
}

// PendingReasons says why a queued job has not been placed yet, as of the
// last cycle that looked at it.
func (s *Scheduler) PendingReasons(id string) ([]job.PendingReason, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index[id]
	if e == nil || e.queued == nil || e.pending == nil {
		return nil, false
	}
	return e.pending, true
}

// PendingRequest and PendingReply are the request and reply on
// events.SubjectPendingReasons.
type (
	PendingRequest struct {
		ID string `json:"id"`
	}
	PendingReply struct {
		Reasons []job.PendingReason `json:"reasons"`
	}
)

func (s *Scheduler) servePending(_ context.Context, data []byte) []byte {
	var req PendingRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return []byte(`{"reasons":[]}`)
	}
	reasons, _ := s.PendingReasons(req.ID)
	if reasons == nil {
		reasons = []job.PendingReason{}
	}
	b, _ := json.Marshal(PendingReply{Reasons: reasons})
	return b
}

// done clears a job's in-flight mark and asks for a cycle.
func (s *Scheduler) done(id string) {
	s.mu.Lock()
	if e := s.index[id]; e != nil {
		e.inflight = false
		if e.queued != nil {
			s.fresh = append(s.fresh, e.queued)
		}
	}
	if _, ok := s.capped[id]; ok {
		// A look at its cap may have waited for the action to end.
		select {
		case s.capC <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	s.kick()
}

// rateOf is how often an offer's capacity is taken back per
// instance-hour: what its provider says (or the prior for its provider
// and purchase option), blended with what the scheduler has seen there.
func (s *Scheduler) rateOf(o providers.Offer) (float64, bool) {
	prior := bidding.PriorRate(o.Provider, o.Purchase)
	if rr, ok := s.o.Clouds[o.Provider].(providers.RiskReporter); ok {
		if r, ok := rr.InterruptionRate(o.ID()); ok {
			prior = r
		}
	}
	return s.exp.rate(o.ID(), prior), true
}
