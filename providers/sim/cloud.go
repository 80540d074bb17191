package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// Options configure a simulated cloud.
type Options struct {
	Catalog *catalog.Catalog
	// Clock is required: the server passes a scaled clock, tests a
	// clock.Fake. All of the cloud's time (boot latency, price steps,
	// retention) is this clock's time.
	Clock clock.Clock
	// Seed fixes prices, capacity and latencies: two clouds with the same
	// seed and catalog sell the same offers at the same prices.
	Seed int64
	// Name is what Name() reports; default "sim". Offers and instances
	// carry the catalog provider ("aws", "azure", "gcp") instead, so job
	// specs' provider rules work against the simulated cloud.
	Name string
	// Providers and Regions restrict which catalog providers and regions
	// are mirrored; empty means all. Unknown names are an error.
	Providers []string
	Regions   []string
	// Store keeps instances across restarts; nil keeps them in memory only.
	Store Store
	// Runner runs the workload on running instances; nil runs nothing.
	Runner Runner
	// PriceInterval is the clock time between spot price moves; default 10m.
	PriceInterval time.Duration
	// CountEvery is how often at most a region's offers are announced
	// for what the cloud's own launches and ends did to their available
	// counts: the first change after a quiet spell is announced at once,
	// the rest of a burst together CountEvery after the last
	// announcement. Price moves, storms, trace changes, held capacity and
	// the controls are announced at once. Default 10s; a real cloud says
	// even less often what its pools hold.
	CountEvery time.Duration
	// Interruptions is the seeded interruption model; nil means
	// DefaultInterruptions(). A model given is taken as it is: a zero
	// field turns that kind of interruption off, so start from
	// DefaultInterruptions() to change one knob.
	Interruptions *Interruptions
	// Traces drive spot availability per zone (zone name -> series, see
	// LoadTraces) instead of the seeded model. Zones the cloud does not
	// sell in are ignored with a warning.
	Traces map[string]Trace
	// TraceEpoch is when sample 0 of every trace is; the zero time means
	// the Unix epoch. A trace starts over at its end.
	TraceEpoch time.Time
	// Faults injects launch errors (faults.go); nil injects none.
	Faults *Faults
	// Reservations are reserved capacity the cloud sells as reserved
	// offers during their terms (reserved.go); each must name an instance
	// type the cloud sells on demand in its region (and zone).
	Reservations []providers.Reservation

	Log *zap.Logger
}

// Store is a key-value bucket (the server passes a NATS KV bucket). Keys
// the cloud writes are "inst.<instance-id>".
type Store interface {
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Delete(ctx context.Context, key string) error
	Keys(ctx context.Context) ([]string, error)
}

// Runner starts the workload on a running instance (the in-process agent).
// Start is called once per instance when it reaches running, and again for
// running instances restored after a restart; it must not block for long.
// The returned stop func (nil if there is nothing to stop) is called when
// the instance ends or the cloud closes.
type Runner interface {
	Start(inst providers.Instance, w providers.Workload) (stop func())
}

// AgentInProcess reports whether the cloud's Runner runs a workload with
// this command in the server's own process, where its agent needs no NATS
// credential of its own (providers.AgentHost). A Runner that does not say
// (it has no InProcess(command []string) bool) is taken to run it
// elsewhere.
func (c *Cloud) AgentInProcess(command []string) bool {
	r, ok := c.runner.(interface{ InProcess(command []string) bool })
	return ok && r.InProcess(command)
}

// Errors of the simulated cloud.
var (
	// ErrUnknownInstance is returned for an instance ID the cloud never
	// started (or forgot, KeyRetention after it ended).
	ErrUnknownInstance = errors.New("unknown instance")
	// ErrClosed is returned by every method after Close, and by Watch
	// when the cloud closes under it.
	ErrClosed = errors.New("sim: cloud closed")
)

// Retention of ended instances, in clock time.
const (
	// Retention is how long an ended instance is still listed by
	// Instances(); after that its record is slimmed (the workload dropped)
	// and kept only to answer retried launches.
	Retention = 7 * 24 * time.Hour
	// KeyRetention is how long after an instance ended a launch retried
	// with its idempotency key still returns it rather than buying again;
	// after it the record is deleted. Real clouds also honour client
	// tokens for a bounded time.
	KeyRetention = 30 * 24 * time.Hour

	defaultName          = "sim"
	defaultPriceInterval = 10 * time.Minute
	defaultCountEvery    = 10 * time.Second
	pruneEvery           = time.Hour
	storeTimeout         = 10 * time.Second
)

// Cloud is a simulated cloud. It implements providers.Provider; its methods
// are safe for concurrent use.
type Cloud struct {
	name     string
	seed     int64
	clk      clock.Clock
	store    Store
	runner   Runner
	interval time.Duration
	intr     Interruptions
	faults   *injector // nil: no injected launch faults
	log      *zap.Logger

	// The offer set is fixed at New; offers' mutable fields are under mu.
	offerList []*offer
	offers    map[string]*offer
	regions   []regionKey // sorted
	byRegion  map[regionKey][]*offer
	byZone    map[string][]*offer
	traces    map[string]*traceIndex // zones sold here only; fixed at New
	// The reservations, fixed at New; their counts change under mu.
	resList []*reservation
	resByID map[string]*reservation

	ctx    context.Context // ends at Close; parent of Store calls
	cancel context.CancelFunc
	done   chan struct{} // closed by Close

	mu         sync.Mutex
	closed     bool
	running    sync.WaitGroup // calls running their effects (runEffects)
	insts      map[string]*instance
	byKey      map[string][]string // idempotency key -> instance IDs by node
	list       listing             // live and ended instances (listing.go)
	watchers   providers.Watchers
	step       int64              // the current price step
	dirty      map[regionKey]bool // regions whose offers changed in this call
	counted    map[regionKey]bool // regions whose counts changed since their last announcement
	announced  map[regionKey]time.Time
	countEvery time.Duration
	unsaved    map[string]*instance // records whose last Store write failed
	bh         behind               // record writes queued (behind.go)
	fx         effects              // side effects to run once mu is released
	holds      []hold               // capacity interruptions took, until it returns
	zoneOut    map[string]bool      // traced zones without capacity, as last announced
	timer      clock.Timer
	timerGen   uint64
	wakeAt     time.Time
	nextPrune  time.Time
	// The instances' next actions (plan.go).
	acts     *queue // byAction
	rechecks *queue // byTime
	stale    map[*instance]struct{}
}

// effects are calls the cloud makes outside its lock: runners to start and
// stop.
type effects struct {
	starts []*instance
	stops  []func()
}

// New builds the cloud's offers from the catalog, loads the instances kept
// in Store and resumes them: pending ones boot when their latency is over
// (at once if it is past), running ones get their Runner started again.
// ctx bounds the loading only.
func New(ctx context.Context, o Options) (*Cloud, error) {
	switch {
	case o.Catalog == nil:
		return nil, errors.New("sim: a catalog is required")
	case o.Clock == nil:
		return nil, errors.New("sim: a clock is required")
	case o.PriceInterval < 0:
		return nil, fmt.Errorf("sim: negative price interval %s", o.PriceInterval)
	case o.CountEvery < 0:
		return nil, fmt.Errorf("sim: negative count interval %s", o.CountEvery)
	}
	intr := DefaultInterruptions()
	if o.Interruptions != nil {
		intr = *o.Interruptions
	}
	if err := intr.validate(); err != nil {
		return nil, err
	}
	offers, err := buildOffers(o.Catalog, o.Seed, o.Providers, o.Regions)
	if err != nil {
		return nil, err
	}
	c := &Cloud{
		name: cmp.Or(o.Name, defaultName), seed: o.Seed, clk: o.Clock,
		store: o.Store, runner: o.Runner,
		interval: o.PriceInterval, intr: intr, log: o.Log,
		offerList: offers, offers: make(map[string]*offer, len(offers)),
		byRegion: map[regionKey][]*offer{}, byZone: map[string][]*offer{}, traces: map[string]*traceIndex{},
		done:  make(chan struct{}),
		insts: map[string]*instance{}, byKey: map[string][]string{}, list: listing{live: map[string]*instance{}},
		dirty: map[regionKey]bool{}, unsaved: map[string]*instance{}, stale: map[*instance]struct{}{},
		acts: &queue{less: byAction}, rechecks: &queue{less: byTime},
		counted: map[regionKey]bool{}, announced: map[regionKey]time.Time{}, countEvery: cmp.Or(o.CountEvery, defaultCountEvery),
		zoneOut: map[string]bool{},
	}
	if c.interval == 0 {
		c.interval = defaultPriceInterval
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.log = c.log.With(zap.String("provider", c.name))
	if c.faults, err = newInjector(o.Faults, o.Seed, c.log); err != nil {
		return nil, err
	}
	for _, of := range offers {
		c.offers[of.static.ID()] = of
		if _, seen := c.byRegion[of.region]; !seen {
			c.regions = append(c.regions, of.region)
		}
		c.byRegion[of.region] = append(c.byRegion[of.region], of)
		c.byZone[of.static.Zone] = append(c.byZone[of.static.Zone], of)
	}
	slices.SortFunc(c.regions, regionKey.compare)
	if err := c.addReservations(o.Reservations); err != nil {
		return nil, err
	}
	if err := c.indexTraces(o.Traces, o.TraceEpoch); err != nil {
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.store != nil {
		c.startWriter()
		if err := c.load(ctx); err != nil {
			c.stopWriter()
			c.cancel()
			return nil, err
		}
	}
	now := c.clk.Now()
	c.mu.Lock()
	c.step = stepAt(now, c.interval)
	c.nextPrune = now
	c.mu.Unlock()
	// Bring restored instances up to date and arm the timer.
	err = c.do(ctx, func(time.Time) error {
		c.log.Info("simulated cloud up", zap.Int("offers", len(offers)), zap.Int("regions", len(c.regions)),
			zap.Int("instances", len(c.insts)), zap.Int64("seed", c.seed))
		return nil
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Name is the name the cloud was given ("sim" by default).
func (c *Cloud) Name() string { return c.name }

// Close stops the cloud's timer, stops every runner it started and ends
// every Watch. Instances stay as they are in the Store, for the next New.
func (c *Cloud) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	var stops []func()
	for _, in := range c.insts {
		if in.stop != nil {
			stops = append(stops, in.stop)
			in.stop = nil
		}
	}
	stops = append(stops, c.fx.stops...)
	c.fx = effects{}
	c.mu.Unlock()
	close(c.done)
	c.stopWriter() // what is queued is stored, and calls waiting for it return
	c.cancel()
	for _, stop := range stops {
		stop()
	}
	// A call that took its effects before the close may still be starting
	// or stopping runners: once Close returns, none runs.
	c.running.Wait()
}

// do runs fn with the cloud locked and brought up to the clock's time, then
// announces the offers that changed, re-arms the timer, waits for the
// records written so far to be stored (unlocked while it waits) and, once
// unlocked, starts and stops runners.
func (c *Cloud) do(ctx context.Context, fn func(now time.Time) error) error {
	return c.call(ctx, fn, true)
}

// call is do; stored says whether to wait for the writes (the timer does
// not: no caller is told anything).
func (c *Cloud) call(ctx context.Context, fn func(now time.Time) error, stored bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	now := c.clk.Now()
	c.advanceLocked(now)
	err := fn(now)
	c.flushLocked(now)
	c.running.Add(1) // under mu, while not closed: Close waits for it
	if stored {
		c.awaitLocked(c.bh.seq)
	}
	fx := c.fx
	c.fx = effects{}
	c.mu.Unlock()
	defer c.running.Done()
	c.runEffects(fx)
	return err
}

// advanceLocked brings the cloud to now: every instance action due by now
// (boots, notices, announced ends, failures; see notice.go) is applied at
// its own time, in time order; the price step moves on, held capacity
// returns, traced zones lose or regain capacity, old ended instances are
// pruned.
func (c *Cloud) advanceLocked(now time.Time) {
	until := c.horizon(now)
	for {
		in, a, ok := c.dueLocked(now, until)
		if !ok {
			break
		}
		c.applyLocked(in, a)
	}
	if s := stepAt(now, c.interval); s != c.step {
		c.step = s
		for _, rk := range c.regions {
			c.dirty[rk] = true
		}
		// The instances' price changes are worked out when one is listed,
		// reported or ends (billing.go), not here: a step costs the
		// regions it announces, not the instances that run.
	}
	c.expireHoldsLocked(now)
	c.refreshTracesLocked(now)
	c.refreshReservationsLocked(now)
	if !now.Before(c.nextPrune) {
		c.pruneLocked(now)
		c.nextPrune = now.Add(pruneEvery)
	}
	c.retryUnsavedLocked()
}

// flushLocked announces the regions whose offers changed and arms the timer
// for the next thing due: the next price step, or sooner an instance's
// action, a trace's change or held capacity's return.
func (c *Cloud) flushLocked(now time.Time) {
	for _, rk := range c.regions {
		byCount := !c.dirty[rk] && c.counted[rk] && !now.Before(c.announced[rk].Add(c.countEvery))
		if !byCount && !c.dirty[rk] {
			continue
		}
		delete(c.counted, rk)
		if byCount {
			// Only announcements for counts start a spell: a control
			// or price move just before a launch does not delay it.
			c.announced[rk] = now
		}
		if c.watchers.Len() > 0 {
			c.emitLocked(providers.Event{
				Kind: providers.EventOffers, Provider: rk.provider, Region: rk.region, Time: now,
				Offers: c.regionOffersLocked(rk, now),
			})
		}
	}
	clear(c.dirty)
	next := c.nextWakeLocked(now, stepStart(c.step+1, c.interval))
	if c.timer != nil {
		if c.wakeAt.Equal(next) {
			return
		}
		c.timer.Stop()
	}
	c.timerGen++
	gen := c.timerGen
	c.wakeAt = next
	c.timer = c.clk.AfterFunc(max(next.Sub(now), 0), func() { c.wake(gen) })
}

// wake is the timer's callback. A timer that fired early (a scaled clock
// rounds) simply finds nothing due and is armed again.
func (c *Cloud) wake(gen uint64) {
	_ = c.call(c.ctx, func(time.Time) error {
		if gen == c.timerGen {
			c.timer = nil // fired: flushLocked arms a new one
		}
		return nil
	}, false)
}

// runEffects starts and stops runners; called without the lock.
func (c *Cloud) runEffects(fx effects) {
	for _, stop := range fx.stops {
		stop()
	}
	if c.runner == nil {
		return
	}
	for _, in := range fx.starts {
		c.mu.Lock()
		if c.closed || in.gone || in.rec.Instance.State != providers.InstanceRunning {
			c.mu.Unlock()
			continue
		}
		inst, w := in.rec.Instance, cloneWorkload(in.rec.Workload)
		c.mu.Unlock()
		stop := c.runner.Start(inst, w)
		c.mu.Lock()
		if c.closed || in.rec.Instance.State.Ended() {
			// It ended (or the cloud closed) while the runner started.
			c.mu.Unlock()
			if stop != nil {
				stop()
			}
			continue
		}
		in.stop = stop
		c.mu.Unlock()
	}
}
