package scheduler_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/providers/sim"
	"github.com/spotwise/spotwise/scheduler"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// rig is a scheduler on a real embedded NATS server and the simulated
// cloud (AWS us-east-1 only), with a fake clock.
type rig struct {
	bus   *events.Bus
	clk   *clock.Fake
	cloud *sim.Cloud
	s     *scheduler.Scheduler
	ctx   context.Context
	store checkpoint.Store
	dir   string // the checkpoint store's directory
	arb   scheduler.Arbitrage
	log   *zap.Logger
	// work is the simulated agent (nil without rigOpt.workload).
	work *agent.SimWorkload
	// running counts what the rig started (the scheduler, the feed).
	running sync.WaitGroup
	teams   map[string]scheduler.TeamLimits
	spend   func(team string, since time.Time) money.Micros
	// workers, provider and reconcile are rigOpt's.
	workers   int
	provider  func(*sim.Cloud) providers.Provider
	reconcile time.Duration
}

type rigOpt struct {
	noFeed, noScheduler bool
	// asyncFeed publishes the cloud's events as the server's feed does,
	// none waiting for the one before to be stored (benchmarks: a storm
	// of notices is not queued behind acknowledgements); settle may then
	// miss an event on its way.
	asyncFeed bool
	// reconcile is the wall time between the scheduler's reconciliations
	// (default 100ms, for the tests' sake; the server's default is 15s).
	reconcile time.Duration
	// workload runs jobs with the simulated agent (progress, checkpoints
	// into a local store, the scheduler's requests).
	workload bool
	// regions restricts the cloud (default: us-east-1 only).
	regions []string
	// arbitrage tunes moves of running jobs to cheaper capacity.
	arbitrage scheduler.Arbitrage
	// leaseTTL is the bus's lease TTL (default 1s).
	leaseTTL time.Duration
	// faults are launch errors the cloud injects (nil: none).
	faults *sim.Faults
	// log replaces the test logger of the bus and the scheduler (a fuzz
	// target's runs would pile warnings up in its log).
	log *zap.Logger
	// teams and spend are the scheduler's team limits and spend source.
	teams map[string]scheduler.TeamLimits
	spend func(team string, since time.Time) money.Micros
	// reservations are the cloud's reserved capacity.
	reservations []providers.Reservation
	// agentsElsewhere has the cloud run the simulated agents as a real
	// cloud would, on instances of their own: not in the server's
	// process (providers.AgentHost says no).
	agentsElsewhere bool
	// workers is the scheduler's Workers (default 32); provider wraps
	// the cloud the scheduler is given (nil: the cloud itself).
	workers  int
	provider func(*sim.Cloud) providers.Provider
}

// elsewhere runs the simulated agent without saying it runs in the
// server's process.
type elsewhere struct{ w *agent.SimWorkload }

func (e elsewhere) Start(inst providers.Instance, w providers.Workload) func() {
	return e.w.Start(inst, w)
}

func newRig(t testing.TB, o rigOpt) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewFake(t0)
	ttl := o.leaseTTL
	if ttl == 0 {
		ttl = time.Second
	}
	log := o.log
	if log == nil {
		log = eventstest.Logger(t)
	}
	bus, err := events.Open(ctx, events.Config{LeaseTTL: ttl, Embedded: events.EmbeddedOptions{DataDir: t.TempDir()}}, "test", clk, log)
	if err != nil {
		t.Fatalf("opening the bus: %v", err)
	}
	t.Cleanup(bus.Close)
	cat := catalog.Default()
	r := &rig{bus: bus, clk: clk, ctx: ctx, dir: t.TempDir(), arb: o.arbitrage, log: log, teams: o.teams, spend: o.spend,
		workers: o.workers, provider: o.provider, reconcile: cmp.Or(o.reconcile, 100*time.Millisecond)}
	var runner sim.Runner
	if o.workload {
		st, err := checkpoint.Open(ctx, "file://"+r.dir, checkpoint.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		r.store = st
		r.work = &agent.SimWorkload{Clock: clk, Reporter: bus, Throughput: cat, Checkpoints: st, Control: bus, Log: log,
			GPUOf: func(p, it string) (string, bool) { x, ok := cat.InstanceType(p, it); return x.GPU, ok }}
		runner = r.work
		if o.agentsElsewhere {
			runner = elsewhere{r.work}
		}
	}
	var cloud *sim.Cloud
	regions := o.regions
	if regions == nil {
		regions = []string{"us-east-1"}
	}
	cloud, err = sim.New(ctx, sim.Options{Catalog: cat, Clock: clk, Seed: 7, Store: bus.SimStore(), Providers: []string{"aws"}, Regions: regions,
		Interruptions: &sim.Interruptions{}, Runner: runner, Faults: o.faults, Reservations: o.reservations})
	if err != nil {
		t.Fatal(err)
	}
	r.cloud = cloud
	t.Cleanup(func() {
		cancel()
		// Everything the rig started has stopped before the cloud closes
		// and the test ends: nothing logs to a finished test.
		r.running.Wait()
		cloud.Close()
	})
	if !o.noFeed {
		r.running.Add(1)
		go func() {
			defer r.running.Done()
			if o.asyncFeed {
				_ = feedAsync(ctx, bus, cloud)
			} else {
				_ = feed(ctx, bus, cloud)
			}
		}()
	}
	if !o.noScheduler {
		r.start(t)
	}
	return r
}

// feed carries the simulated cloud's events to the bus until ctx ends, as
// the server's feed does, through the same mapping (events.FeedMessage).
// Each publish is waited for, so that an event the cloud emitted is
// pending in the cloud (Busy) until it is stored: settle sees it on its
// way. A failed publish is not reported: the test sees what did not arrive.
func feed(ctx context.Context, bus *events.Bus, cloud providers.Provider) error {
	return cloud.Watch(ctx, func(ev providers.Event) {
		if subject, p, id, ok := events.FeedMessage(ev, "sim"); ok {
			_ = bus.Publish(ctx, subject, p, events.WithID(id))
		}
	})
}

// feedAsync is feed as the server runs it (internal/server's runFeed):
// each event published without waiting for the one before to be stored.
func feedAsync(ctx context.Context, bus *events.Bus, cloud providers.Provider) error {
	return cloud.Watch(ctx, func(ev providers.Event) {
		if subject, p, id, ok := events.FeedMessage(ev, "sim"); ok {
			bus.PublishAsync(subject, p, func(error) {}, events.WithID(id))
		}
	})
}

func (r *rig) start(t testing.TB) {
	cat := catalog.Default()
	root := "file://" + r.dir
	if r.store != nil {
		root = r.store.URI()
	}
	var cloud providers.Provider = r.cloud
	if r.provider != nil {
		cloud = r.provider(r.cloud)
	}
	r.s = scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: r.log, Clouds: map[string]providers.Provider{"aws": cloud}, Workers: r.workers,
		Throughput: cat, Geography: cat.GeographyOf, ReconcileInterval: r.reconcile, PolicyInterval: 5 * time.Minute, Debounce: time.Millisecond,
		Arbitrage: r.arb, CheckpointRoot: root, Teams: r.teams, Spend: r.spend})
	r.running.Add(1)
	go func() {
		defer r.running.Done()
		if err := r.s.Run(r.ctx); err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
}

// settle waits until the system has done all it will do at the current
// simulated time: no timer callback or undelivered timer value, no
// scheduler action or cycle under way or asked for, no cloud event on its
// way to the bus, no agent doing anything but wait, no message waiting for
// a consumer, and nothing stored, for a few polls in a row. Each of these
// is counted where it happens, so how fast the machine runs does not
// matter.
func (r *rig) settle(t testing.TB) {
	t.Helper()
	const quietPolls = 3
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for quiet := 0; quiet < quietPolls; {
		if time.Now().After(deadline) {
			t.Fatalf("the system did not settle in 30s (last seen %s)", last)
		}
		a, err := r.bus.Activity(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		clkBusy, fired := r.clk.Busy()
		busy := clkBusy || a.Backlog > 0 || (r.s != nil && r.s.Busy()) || r.cloud.Busy() || (r.work != nil && r.work.Busy())
		now := fmt.Sprintf("stored %d backlog %d fired %d busy %v", a.Stored, a.Backlog, fired, busy)
		if !busy && now == last {
			quiet++
		} else {
			quiet = 0
		}
		last = now
		time.Sleep(2 * time.Millisecond)
	}
}

// advance moves the fake clock forward by d, one falling-due timer at a
// time, letting the system settle after each.
func (r *rig) advance(t testing.TB, d time.Duration) {
	t.Helper()
	target := r.clk.Now().Add(d)
	for range 1000 {
		next, ok := r.clk.Next()
		if !ok || next.After(target) {
			break
		}
		r.clk.Set(next)
		r.settle(t)
	}
	r.clk.Set(target)
	r.settle(t)
}

// goRun runs fn on a goroutine the rig waits for when the test ends.
func (r *rig) goRun(fn func()) {
	r.running.Add(1)
	go func() {
		defer r.running.Done()
		fn()
	}()
}

func (r *rig) submit(t testing.TB, yaml string) *job.Record {
	t.Helper()
	spec, err := job.Parse([]byte(yaml), catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	now := r.clk.Now()
	rec := &job.Record{ID: job.NewID(now), Spec: spec, Status: job.Status{State: job.Queued, SubmittedAt: now, UpdatedAt: now, DeadlineAt: spec.Deadline.Resolve(now), SpecHash: spec.Hash()}}
	if _, err := r.bus.Jobs().Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// lifecycle applies an input to a job's record, as a test's stand-in for
// what a component (the API, a scheduler before a crash) did; it must be
// accepted.
func (r *rig) lifecycle(t testing.TB, id string, in job.Input) *job.Record {
	t.Helper()
	var res job.Result
	rec, _, err := r.bus.Jobs().Modify(context.Background(), id, func(x *job.Record) error {
		res = job.Apply(x, in, r.clk.Now())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed() {
		t.Fatalf("%s: %s (%s)", in.Name(), res.Verdict, res.Why)
	}
	return rec
}

func (r *rig) get(t testing.TB, id string) *job.Record {
	t.Helper()
	rec, _, err := r.bus.Jobs().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (r *rig) waitState(t testing.TB, id string, want job.State) *job.Record {
	t.Helper()
	var rec *job.Record
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		rec = r.get(t, id)
		if rec.Status.State != want {
			return fmt.Errorf("job is %s (%s), want %s", rec.Status.State, rec.Status.Message, want)
		}
		return nil
	})
	return rec
}

func (r *rig) instancesFor(t testing.TB, id string) []providers.Instance {
	t.Helper()
	all, err := r.cloud.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(in providers.Instance) bool { return in.JobID != id })
}

// boot waits until the job's instances are launched (the job is recorded
// as placing before the cloud is called), then advances the fake clock
// past every launch latency.
func (r *rig) boot(t testing.TB, id string) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if len(r.instancesFor(t, id)) == 0 {
			return errors.New("not launched yet")
		}
		return nil
	})
	r.clk.Advance(10 * time.Minute)
}

const oneGPU = "name: t\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1h on T4\npurchase: on-demand\n"

// cheapestT4 is the cheapest on-demand single-T4 offer the cloud sells.
func cheapestT4(t *testing.T, cloud *sim.Cloud) providers.Offer {
	offers, err := cloud.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t4 := providers.Offers(offers).Filter(func(o providers.Offer) bool {
		return o.GPU == "T4" && o.GPUs == 1 && o.Purchase == providers.OnDemand
	})
	o, ok := t4.Cheapest()
	if !ok {
		t.Fatal("no T4 offers")
	}
	return o
}

func TestPlacesRunsAndReleases(t *testing.T) {
	r := newRig(t, rigOpt{})
	rec := r.submit(t, oneGPU)
	placing := r.waitState(t, rec.ID, job.Placing)
	a := placing.Status.Current
	if a == nil || a.N != 1 || a.LaunchKey != job.LaunchKey(rec.ID, 1) || a.Placement.GPU != "T4" {
		t.Fatalf("attempt = %+v", a)
	}
	r.boot(t, rec.ID)
	running := r.waitState(t, rec.ID, job.Running)
	if got := r.instancesFor(t, rec.ID); len(got) != 1 || got[0].State != providers.InstanceRunning {
		t.Fatalf("instances = %+v", got)
	}
	// The agent reports the exit: the job succeeds, is billed, and its
	// instance is terminated.
	r.clk.Advance(30 * time.Minute)
	if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, 1), &events.AgentReport{JobID: rec.ID, Attempt: 1, InstanceID: running.Status.Current.Instances[0], Kind: events.AgentExited}); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, rec.ID, job.Succeeded)
	// The attempt closes once its capacity is gone, teardown billed.
	var done *job.Record
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if done = r.get(t, rec.ID); done.Status.Current != nil {
			return errors.New("the attempt is still being released")
		}
		return nil
	})
	last := done.Status.Attempts[0]
	want := last.Placement.HourlyCost().ForDuration(last.EndedAt.Sub(last.LaunchedAt))
	if done.Status.EndedCost != want || want <= 0 {
		t.Fatalf("cost %s, want %s", done.Status.EndedCost, want)
	}
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		for _, in := range r.instancesFor(t, rec.ID) {
			if !in.State.Ended() {
				return fmt.Errorf("instance %s still %s", in.ID, in.State)
			}
		}
		return nil
	})
}

// gatedLaunches holds every launch until its gate opens: a cloud whose
// launch calls take long.
type gatedLaunches struct {
	*sim.Cloud
	gate    chan struct{}
	waiting atomic.Int32
}

func (g *gatedLaunches) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	g.waiting.Add(1)
	if err := through(ctx, g.gate); err != nil {
		return nil, err
	}
	return g.Cloud.Launch(ctx, req)
}

// through waits until gate is closed or ctx is done.
func through(ctx context.Context, gate <-chan struct{}) error {
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A launch stuck in the cloud does not hold up the next job's placement:
// with one worker of each kind, the second job is placed while the first
// one's launch still waits.
func TestPlacementIsNotHeldUpByLaunchesUnderWay(t *testing.T) {
	g := &gatedLaunches{gate: make(chan struct{})}
	r := newRig(t, rigOpt{workers: 1, provider: func(c *sim.Cloud) providers.Provider { g.Cloud = c; return g }})
	first := r.submit(t, oneGPU)
	r.waitState(t, first.ID, job.Placing)
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		if g.waiting.Load() == 0 {
			return errors.New("the first launch has not reached the cloud")
		}
		return nil
	})
	second := r.submit(t, oneGPU)
	r.waitState(t, second.ID, job.Placing)
	close(g.gate)
	for _, id := range []string{first.ID, second.ID} {
		testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
			if got := r.instancesFor(t, id); len(got) != 1 {
				return fmt.Errorf("job %s has %d instances, want 1", id, len(got))
			}
			return nil
		})
	}
}

// gatedTerminates holds every terminate call until its gate opens: a
// cloud slow to let capacity go.
type gatedTerminates struct {
	*sim.Cloud
	gate    chan struct{}
	waiting atomic.Int32
}

func (g *gatedTerminates) Terminate(ctx context.Context, instanceID string) error {
	g.waiting.Add(1)
	if err := through(ctx, g.gate); err != nil {
		return err
	}
	return g.Cloud.Terminate(ctx, instanceID)
}

// Nothing waits for a cloud slow to let capacity go: while the call
// terminating a succeeded job's instance is held, the job's history
// already has "succeeded" (it is told as soon as the record is written)
// and the job's next input is handled (its lane goes on); once the call
// goes through, the attempt closes.
func TestNothingWaitsForATerminate(t *testing.T) {
	g := &gatedTerminates{gate: make(chan struct{})}
	r := newRig(t, rigOpt{provider: func(c *sim.Cloud) providers.Provider { g.Cloud = c; return g }})
	rec := r.submit(t, oneGPU)
	r.waitState(t, rec.ID, job.Placing)
	r.boot(t, rec.ID)
	running := r.waitState(t, rec.ID, job.Running)
	r.clk.Advance(30 * time.Minute)
	exited := &events.AgentReport{JobID: rec.ID, Attempt: 1, InstanceID: running.Status.Current.Instances[0], Kind: events.AgentExited}
	if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, 1), exited); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, rec.ID, job.Succeeded)
	exits := func() (n int64) {
		for k, v := range r.s.Metrics().Verdicts() {
			if strings.HasPrefix(k, "exited/") {
				n += v
			}
		}
		return n
	}
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		if g.waiting.Load() == 0 {
			return errors.New("the terminate has not reached the cloud")
		}
		if kinds := r.history(t, rec.ID); !slices.Contains(kinds, events.KindSucceeded) {
			return fmt.Errorf("history %v, with the terminate held: no %q", kinds, events.KindSucceeded)
		}
		return nil
	})
	before := exits()
	// The agent says it again (a retry): the same job, the same lane.
	if err := r.bus.Publish(r.ctx, events.AgentSubject(rec.ID, 1), exited); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		if n := exits(); n <= before {
			return fmt.Errorf("%d exits handled, with the terminate held: the repeated one waits behind it", n)
		}
		return nil
	})
	close(g.gate)
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		if a := r.get(t, rec.ID).Status.Current; a != nil {
			return fmt.Errorf("attempt %d still being released", a.N)
		}
		return nil
	})
}

// A crash between recording "placing" and calling the cloud leaves a
// placing job with a launch key and no instance; reconciliation launches
// it with that key, once.
func TestPlacingJobFromACrashIsLaunchedOnce(t *testing.T) {
	for _, alreadyLaunched := range []bool{false, true} {
		t.Run(fmt.Sprintf("launched before the crash=%v", alreadyLaunched), func(t *testing.T) {
			r := newRig(t, rigOpt{noScheduler: true})
			rec := r.submit(t, oneGPU)
			o := cheapestT4(t, r.cloud)
			key := job.LaunchKey(rec.ID, 1)
			r.lifecycle(t, rec.ID, job.Place{Attempt: 1, Placement: job.Placement{OfferID: o.ID(), Provider: o.Provider, Region: o.Region,
				Zone: o.Zone, InstanceType: o.InstanceType, GPU: o.GPU, GPUs: o.GPUs, Nodes: 1, Purchase: string(o.Purchase), PricePerHour: o.Price}})
			if alreadyLaunched {
				if _, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: key, Offer: o, Count: 1, JobID: rec.ID, Attempt: 1}); err != nil {
					t.Fatal(err)
				}
			}
			r.start(t)
			r.boot(t, rec.ID)
			got := r.waitState(t, rec.ID, job.Running)
			if got.Status.Attempt != 1 {
				t.Fatalf("attempt %d: the scheduler placed the job again instead of finishing the first placement", got.Status.Attempt)
			}
			insts := r.instancesFor(t, rec.ID)
			if len(insts) != 1 || insts[0].IdempotencyKey != key {
				t.Fatalf("instances = %+v: capacity bought %d times", insts, len(insts))
			}
		})
	}
}

// A launch refused for lack of capacity puts the job on the next offer and
// keeps the refused offer out of the next cycles.
func TestInsufficientCapacityFallsThroughToTheNextOffer(t *testing.T) {
	r := newRig(t, rigOpt{noFeed: true})
	o := cheapestT4(t, r.cloud)
	if err := r.cloud.SetAvailable(o.ID(), 0); err != nil {
		t.Fatal(err)
	}
	// The book still believes in the offer: the feed is not running, and
	// a hand-made book says capacity is unknown.
	offers, _ := r.cloud.Offers(r.ctx)
	var region []providers.Offer
	for _, x := range offers {
		if x.Region == o.Region {
			if x.ID() == o.ID() {
				// Believed plentiful and cheapest: the scheduler picks it.
				x.Available, x.Capacity, x.Price = -1, providers.CapacityHigh, x.Price/2
			}
			region = append(region, x)
		}
	}
	if err := r.bus.Publish(r.ctx, events.PricesSubject(o.Provider, o.Region), &events.OffersUpdated{Provider: o.Provider, Region: o.Region, Offers: region, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	rec := r.submit(t, oneGPU)
	var got *job.Record
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		got = r.get(t, rec.ID)
		if got.Status.State != job.Placing || got.Status.Attempt != 2 {
			return fmt.Errorf("job %s attempt %d (%s)", got.Status.State, got.Status.Attempt, got.Status.Message)
		}
		return nil
	})
	if got.Status.Attempts[0].Outcome != "launch-failed" || got.Status.Attempts[0].Placement.OfferID != o.ID() {
		t.Fatalf("first attempt = %+v", got.Status.Attempts[0])
	}
	if got.Status.Current.Placement.OfferID == o.ID() {
		t.Fatalf("second attempt went back to the refused offer")
	}
	h, err := r.bus.JobHistory(r.ctx, rec.ID, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(h, func(e events.HistoryEntry) bool { return e.Event.Kind == events.KindLaunchFailed }) {
		t.Fatalf("history lacks launch-failed")
	}
}

// An instance that dies under a running job sends the job back to the
// queue; it is placed again with a new attempt and the work it lost is
// recorded.
func TestLostInstanceRequeuesTheJob(t *testing.T) {
	r := newRig(t, rigOpt{})
	rec := r.submit(t, oneGPU)
	r.waitState(t, rec.ID, job.Placing)
	r.boot(t, rec.ID)
	running := r.waitState(t, rec.ID, job.Running)
	if _, _, err := r.bus.Jobs().Modify(r.ctx, rec.ID, func(x *job.Record) error { x.Status.Progress = 0.5; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := r.cloud.FailInstance(running.Status.Current.Instances[0], "hardware failure"); err != nil {
		t.Fatal(err)
	}
	var got *job.Record
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		got = r.get(t, rec.ID)
		if got.Status.Attempt != 2 || !got.Status.State.Active() {
			return fmt.Errorf("job %s attempt %d (%s)", got.Status.State, got.Status.Attempt, got.Status.Message)
		}
		return nil
	})
	if got.Status.Attempts[0].Outcome != "lost" || got.Status.WorkLost.D() != 30*time.Minute || got.Status.Progress != 0 {
		t.Fatalf("after the loss: attempts %+v, work lost %s, progress %v", got.Status.Attempts, got.Status.WorkLost.D(), got.Status.Progress)
	}
}

// Reconciliation lists the instances that ended in the last hour only
// (scheduler.ListedEnded; EC2 lists a terminated one for about as long).
// An instance whose end the scheduler missed (it was down when the
// instance ended, longer ago than that) is billed to its real end, asked
// for by its launch key, not to when it was last seen.
func TestInstanceEndedLongAgoIsBilledToItsEnd(t *testing.T) {
	r := newRig(t, rigOpt{noScheduler: true, noFeed: true})
	rec := r.submit(t, oneGPU)
	o := cheapestT4(t, r.cloud)
	key := job.LaunchKey(rec.ID, 1)
	r.lifecycle(t, rec.ID, job.Place{Attempt: 1, Placement: job.Placement{OfferID: o.ID(), Provider: o.Provider, Region: o.Region,
		Zone: o.Zone, InstanceType: o.InstanceType, GPU: o.GPU, GPUs: o.GPUs, Nodes: 1, Purchase: string(o.Purchase), PricePerHour: o.Price}})
	insts, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: key, Offer: o, Count: 1, JobID: rec.ID, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.advance(t, 10*time.Minute)
	// The last the record heard of it: running, seen now.
	r.lifecycle(t, rec.ID, job.Observed{Key: key, At: r.clk.Now(), Instances: []job.Instance{
		{ID: insts[0].ID, LaunchedAt: insts[0].LaunchedAt, RunningAt: insts[0].LaunchedAt, Price: insts[0].Price}}})
	r.advance(t, 20*time.Minute)
	if err := r.cloud.FailInstance(insts[0].ID, "hardware failure"); err != nil {
		t.Fatal(err)
	}
	byKey, err := r.cloud.InstancesByKey(r.ctx, key)
	if err != nil || len(byKey) != 1 || byKey[0].EndedAt.IsZero() {
		t.Fatalf("the launch's instances: %+v (%v)", byKey, err)
	}
	end := byKey[0].EndedAt
	r.advance(t, scheduler.ListedEnded+time.Minute)
	if all, _ := r.cloud.InstancesSince(r.ctx, r.clk.Now().Add(-scheduler.ListedEnded)); len(all) != 0 {
		t.Fatalf("the cloud lists %d instances ended in the last %s", len(all), scheduler.ListedEnded)
	}
	r.start(t)
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
		got := r.get(t, rec.ID)
		for _, a := range append(slices.Clone(got.Status.Attempts), derefAttempts(got.Status.Previous, got.Status.Current)...) {
			for _, sp := range a.Spans {
				if sp.Instance != insts[0].ID {
					continue
				}
				if sp.To.IsZero() {
					return fmt.Errorf("instance %s not ended yet", sp.Instance)
				}
				if !sp.To.Equal(end) {
					t.Fatalf("instance billed to %s, it ended at %s (last seen %s)", sp.To, end, end.Add(-20*time.Minute))
				}
				return nil
			}
		}
		return fmt.Errorf("no attempt has instance %s", insts[0].ID)
	})
}

// derefAttempts lists the attempts that are set.
func derefAttempts(as ...*job.Attempt) []job.Attempt {
	var out []job.Attempt
	for _, a := range as {
		if a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// Reconciliation terminates an instance no active job owns, for example
// one left running when a server died after the job finished.
func TestOrphanedInstanceIsTerminated(t *testing.T) {
	r := newRig(t, rigOpt{noScheduler: true})
	rec := r.submit(t, oneGPU)
	r.lifecycle(t, rec.ID, job.Cancel{})
	o := cheapestT4(t, r.cloud)
	insts, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: job.LaunchKey(rec.ID, 1), Offer: o, Count: 1, JobID: rec.ID, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	stray, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: "no-such-job", Offer: o, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(30 * time.Minute)
	r.start(t)
	r.waitEnded(t, insts[0].ID, stray[0].ID)
	// Their half hour is overhead in the cost ledger, once each, as the
	// cloud bills it, however many rounds see them.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		for _, id := range []string{insts[0].ID, stray[0].ID} {
			msgs, err := r.bus.LedgerSubject(r.ctx, events.LedgerOverheadSubject("overhead/"+id))
			if err != nil || len(msgs) != 1 {
				return fmt.Errorf("overhead of %s: %d entries (%v)", id, len(msgs), err)
			}
			var e ledger.Entry
			if err := json.Unmarshal(msgs[0].Data, &e); err != nil {
				return err
			}
			all, _ := r.cloud.Instances(r.ctx)
			for _, in := range all {
				if in.ID == id && (e.Cost != in.Bill(in.EndedAt) || e.Cost <= 0 || e.Kind != ledger.Overhead || e.Category != ledger.OverheadOrphan) {
					t.Fatalf("overhead of %s: %+v, the cloud bills %s", id, e, in.Bill(in.EndedAt))
				}
			}
		}
		return nil
	})
	r.advance(t, time.Hour)
	msgs, _ := r.bus.LedgerSubject(r.ctx, events.LedgerOverheadSubject("overhead/"+stray[0].ID))
	if len(msgs) != 1 {
		t.Fatalf("the orphan's overhead recorded %d times", len(msgs))
	}
}

// A job cancelled while it runs has its instance terminated and its cost
// closed.
func TestCancelledRunningJobIsReleased(t *testing.T) {
	r := newRig(t, rigOpt{})
	rec := r.submit(t, oneGPU)
	r.waitState(t, rec.ID, job.Placing)
	r.boot(t, rec.ID)
	r.waitState(t, rec.ID, job.Running)
	r.clk.Advance(time.Hour)
	r.lifecycle(t, rec.ID, job.Cancel{})
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		got := r.get(t, rec.ID)
		if got.Status.Current != nil {
			return errors.New("attempt still open")
		}
		for _, in := range r.instancesFor(t, rec.ID) {
			if !in.State.Ended() {
				return fmt.Errorf("instance %s still %s", in.ID, in.State)
			}
		}
		if got.Status.EndedCost <= 0 || got.Status.Attempts[0].Outcome != "cancelled" {
			return fmt.Errorf("attempt %+v", got.Status.Attempts)
		}
		return nil
	})
}

// What running jobs measure corrects the throughput table: a job that
// finishes in half the time the table predicts shortens the next estimate
// on that GPU.
func TestMeasuredSpeedCorrectsEstimates(t *testing.T) {
	r := newRig(t, rigOpt{})
	// Sized on V100, run on T4: the table converts between the two.
	const spec = "name: t\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 1h on V100\npurchase: on-demand\n"
	first := r.submit(t, spec)
	r.waitState(t, first.ID, job.Placing)
	r.boot(t, first.ID)
	running := r.waitState(t, first.ID, job.Running)
	before := running.Status.Current.EstimatedRuntime.D()
	r.clk.Advance(before / 2)
	if err := r.bus.Publish(r.ctx, events.AgentSubject(first.ID, 1), &events.AgentReport{JobID: first.ID, Attempt: 1,
		InstanceID: running.Status.Current.Instances[0], Kind: events.AgentExited, Progress: 1}); err != nil {
		t.Fatal(err)
	}
	r.waitState(t, first.ID, job.Succeeded)
	second := r.submit(t, spec)
	placed := r.waitState(t, second.ID, job.Placing)
	after := placed.Status.Current.EstimatedRuntime.D()
	// One measurement moves the average a fifth of the way: 2 x faster
	// gives a factor of 1.2.
	if want := time.Duration(float64(before) / 1.2); after > want+time.Minute || after < want-time.Minute {
		t.Fatalf("estimate %s after a run at twice the speed, want about %s (was %s)", after, want, before)
	}
}

// gatedLister holds the scheduler's listings of instances, after the
// first, until the test lets the next one through.
type gatedLister struct {
	*sim.Cloud
	calls atomic.Int32
	gate  chan struct{}
}

func (g *gatedLister) InstancesSince(ctx context.Context, since time.Time) ([]providers.Instance, error) {
	if g.calls.Add(1) > 1 {
		if err := through(ctx, g.gate); err != nil {
			return nil, err
		}
	}
	return g.Cloud.InstancesSince(ctx, since)
}

// An orphan that ends between two rounds of reconciliation is billed as
// overhead by the second, however long after the first it comes: the
// listing asks for the ends since an hour before the last one, not only
// for the last hour (on the simulated cloud at 3600x an hour passes in a
// second, and CI's rounds can be seconds apart).
func TestOrphanEndedBetweenDistantRoundsIsStillOverhead(t *testing.T) {
	g := &gatedLister{gate: make(chan struct{})}
	r := newRig(t, rigOpt{noScheduler: true, provider: func(c *sim.Cloud) providers.Provider {
		g.Cloud = c
		return g
	}})
	stray, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: "no-such-job", Offer: cheapestT4(t, r.cloud), Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(30 * time.Minute)
	r.start(t)
	// The first round finds it live and terminates it.
	r.waitEnded(t, stray[0].ID)
	// Two hours pass before the next round lists.
	r.clk.Advance(2 * scheduler.ListedEnded)
	close(g.gate)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		msgs, err := r.bus.LedgerSubject(r.ctx, events.LedgerOverheadSubject("overhead/"+stray[0].ID))
		if err != nil || len(msgs) != 1 {
			return fmt.Errorf("overhead of %s: %d entries (%v)", stray[0].ID, len(msgs), err)
		}
		return nil
	})
}

// An orphan whose end no listing saw before its scheduler's term ended
// is billed as overhead by the next term, however long after it starts:
// the time of the last listing is kept in the meta bucket, and the new
// term's first listing asks for the ends since an hour before it.
func TestOrphanEndedBetweenTermsIsStillOverhead(t *testing.T) {
	g := &gatedLister{gate: make(chan struct{})}
	r := newRig(t, rigOpt{noScheduler: true})
	g.Cloud = r.cloud
	stray, err := r.cloud.Launch(r.ctx, providers.LaunchRequest{IdempotencyKey: "no-such-job", Offer: cheapestT4(t, r.cloud), Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(30 * time.Minute)
	term := func(cloud providers.Provider) (stop func()) {
		s := scheduler.New(r.bus, scheduler.Options{Clock: r.clk, Log: r.log, Clouds: map[string]providers.Provider{"aws": cloud},
			Throughput: catalog.Default(), ReconcileInterval: 100 * time.Millisecond, PolicyInterval: time.Hour, Debounce: time.Millisecond,
			CheckpointRoot: "file://" + r.dir})
		ctx, cancel := context.WithCancel(r.ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	// The first term's first round finds the stray live and terminates
	// it; its next listing is held until the term ends.
	stop := term(g)
	r.waitEnded(t, stray[0].ID)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if g.calls.Load() < 2 {
			return errors.New("the second listing has not begun")
		}
		return nil
	})
	stop()
	// Two hours pass before the next term.
	r.clk.Advance(2 * scheduler.ListedEnded)
	defer term(r.cloud)()
	testutil.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		msgs, err := r.bus.LedgerSubject(r.ctx, events.LedgerOverheadSubject("overhead/"+stray[0].ID))
		if err != nil || len(msgs) != 1 {
			return fmt.Errorf("overhead of %s: %d entries (%v)", stray[0].ID, len(msgs), err)
		}
		return nil
	})
}

// waitEnded waits until the cloud says each of the instances ended.
func (r *rig) waitEnded(t testing.TB, ids ...string) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		all, _ := r.cloud.Instances(r.ctx)
		for _, in := range all {
			if slices.Contains(ids, in.ID) && !in.State.Ended() {
				return fmt.Errorf("instance %s still %s", in.ID, in.State)
			}
		}
		return nil
	})
}
