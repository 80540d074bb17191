package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/web"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/azure"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/providers/sim"
	"github.com/spotwise/spotwise/scheduler"
)

// Server is a running spotwise server.
type Server struct {
	cfg         Config
	log         *zap.Logger
	bus         *events.Bus
	clock       clock.Clock
	api         *api.Service
	uncount     func() // stops TuneGC counting this server's job changes
	checkpoints checkpoint.Store
	lease       *events.Lease
	metrics     *scheduler.Metrics
	term        atomic.Pointer[term]
	http        *http.Server
	httpAddr    net.Addr
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	stopNATS    func()
	dirLock     *dataDirLock
	closeOnce   sync.Once
	awsOpts     []aws.Option
	azureOpts   []azure.Option
	tokens      *auth.Tokens
	opToken     string
	wallClock   clock.Clock  // tokens' expiry; nil: the real clock
	node        string       // this server's name for the scheduler lease
	ledger      *ledger.View // this server's view of the cost ledger
	version     string       // of the binary, for spotwise_build_info

	// sealedJobs counts the jobs whose charges this server sealed;
	// unsealedJobs is how many its last sealing round left on their own
	// ledger subjects (-1: none ran yet).
	sealedJobs, unsealedJobs atomic.Int64
	// sealedHistories and unsealedHistories are the same for the jobs'
	// histories.
	sealedHistories, unsealedHistories atomic.Int64
	// archivedJobs counts the finished jobs whose records this server
	// archived (api.Service.Archive).
	archivedJobs atomic.Int64
	// ledgerWriter is the cost ledger's writer of this server's latest
	// term (nil before one).
	ledgerWriter atomic.Pointer[ledger.Writer]
}

// Start brings a server up and returns once it accepts requests.
func Start(ctx context.Context, cfg Config, log *zap.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	rctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: log, cancel: cancel}
	s.unsealedJobs.Store(-1)
	s.unsealedHistories.Store(-1)
	for _, o := range opts {
		o(s)
	}
	if err := s.start(ctx, rctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx, rctx context.Context) error {
	cfg := s.cfg
	if err := s.openBus(ctx); err != nil {
		return err
	}
	bus := s.bus
	if sc, ok := s.clock.(*clock.Scaled); ok {
		if err := followClock(rctx, bus, sc, s.log); err != nil {
			return err
		}
	}
	var err error
	cat := catalog.Default()
	if err := checkSimScope(cat, cfg.Sim); err != nil {
		return err
	}

	if s.checkpoints, err = openCheckpoints(ctx, cfg, s.clock); err != nil {
		return err
	}
	s.log.Info("checkpoint store", zap.String("uri", redactURI(s.checkpoints.URI())))

	authn, err := s.openAuth(ctx)
	if err != nil {
		return err
	}
	s.api = api.NewService(bus, cat, s.clock, s.log.Named("api")).WithAuth(authn).WithBudgets(teamBudgets(cfg.Teams))
	s.uncount = countActivity(s.api.Changes) // how busy the jobs are, for TuneGC
	// The local copy of job pages lives beside the embedded store when
	// there is one (with an external NATS and no data directory, in the
	// temporary directory).
	s.api.KeepPages(cmp.Or(cfg.PageCopy.Dir, cfg.DataDir), cfg.PageCopy.MaxBytes)
	// The copy's replay is the last of what a start reads: what it took
	// goes back to the system at once (when the collector is tuned).
	s.api.OnPagesCopied(TidySoon)
	if err := s.startIndex(ctx, rctx); err != nil {
		return err
	}
	if err := s.openLedger(ctx, rctx); err != nil {
		return err
	}
	if s.stopNATS, err = s.api.ServeNATS(bus); err != nil {
		return err
	}

	holder, err := nodeID(cfg)
	if err != nil {
		return err
	}
	s.node = holder
	s.log.Info("standing for the scheduler lease", zap.String("node", holder))
	s.lease = bus.Lease("scheduler", holder)
	s.metrics = &scheduler.Metrics{}
	s.goRun(rctx, "scheduler", func(ctx context.Context) error {
		return s.lease.RunElected(ctx, bus.LeaseTTL(), s.log, s.lead)
	})

	reg, err := s.registry()
	if err != nil {
		return err
	}
	if len(cfg.Alerts.Webhooks) > 0 {
		// Rate limits and Alertmanager's startsAt and endsAt are real
		// time, so the notifier keeps the wall clock (not the simulated
		// one); it runs on every server, sharing one durable.
		n, err := alerts.New(cfg.Alerts, bus, s.log.Named("alerts"), alerts.WithClock(s.wall()))
		if err != nil {
			return fmt.Errorf("alerts: %w", err)
		}
		if err := n.Register(reg); err != nil {
			return err
		}
		s.goRun(rctx, "alert delivery", n.Run)
	}
	handler := s.api.Handler(map[string]http.Handler{
		"GET /metrics":      s.api.Require(auth.Observe, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})),
		"GET /v1/status":    s.api.Require(auth.Observe, http.HandlerFunc(s.status)),
		"GET /v1/instances": s.api.Require(auth.Observe, http.HandlerFunc(s.instances)),
		"/v1/sim/":          s.api.Require(auth.Operate, http.HandlerFunc(s.simHTTP)),
		"POST /v1/quote":    http.HandlerFunc(s.quoteHTTP),
		"GET " + web.Prefix: web.Handler(),
		// Open, like /healthz: probes carry no token, and these say
		// nothing but whether the server works.
		"GET /livez":  http.HandlerFunc(s.livez),
		"GET /readyz": http.HandlerFunc(s.readyz),
		// Reservations are the platform's, not a team's: observers read them.
		"GET /v1/reservations": s.api.Require(auth.Observe, http.HandlerFunc(s.reservationsHTTP)),
	})
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP listener on %s: %w", cfg.HTTPAddr, err)
	}
	s.httpAddr = ln.Addr()
	s.http = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	// Event streams outlive WriteTimeout (each write sets its own
	// deadline) and would hold Shutdown up: end them first.
	s.http.RegisterOnShutdown(s.api.CloseStreams)
	tlsOn := cfg.HTTPTLS.CertFile != ""
	if !tlsOn && !isLoopback(s.httpAddr) {
		s.log.Warn("the API listens beyond loopback without TLS: tokens cross the network in the clear; give --tls-cert and --tls-key (or put a TLS proxy in front)",
			zap.String("http", s.httpAddr.String()))
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		serve := func() error { return s.http.Serve(ln) }
		if tlsOn {
			serve = func() error { return s.http.ServeTLS(ln, cfg.HTTPTLS.CertFile, cfg.HTTPTLS.KeyFile) }
		}
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP server stopped", zap.Error(err))
		}
	}()
	// On a server of its own, the first term starts at once: wait for it,
	// so that what Start returns is a server that schedules.
	deadline := time.Now().Add(2 * time.Second)
	for s.term.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.term.Load() == nil {
		s.log.Info("another server holds the scheduler lease: this one serves the API and stands by")
	}
	return nil
}

// term is what runs while this server holds the scheduler lease: the
// simulated cloud (it is "the cloud", so exactly one server runs it), its
// feeds and the scheduler.
type term struct {
	cloud     *sim.Cloud
	clouds    *cloudSet
	scheduler *scheduler.Scheduler
}

// lead runs one term until ctx ends. The simulated cloud reloads its
// instances from the bucket, so a new term (here or on another server)
// carries on with the jobs the last one left running.
func (s *Server) lead(ctx context.Context) error {
	cat := catalog.Default()
	cfg := s.cfg
	clouds, err := s.buildClouds(ctx, cat, false)
	if err != nil {
		return err
	}
	defer clouds.close()
	cloud := clouds.sim
	tctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for _, p := range clouds.distinct {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runFeed(tctx, s.bus, p, clouds.feedSource(p), s.log); err != nil && tctx.Err() == nil {
				s.log.Error("price and instance feed stopped", zap.String("provider", p.Name()), zap.Error(err))
			}
		}()
		if err := s.startRefresh(tctx, cfg.Feeds.Refresh, p, clouds.feedSource(p)); err != nil {
			return fmt.Errorf("feeds.refresh: %w", err)
		}
	}
	agents, err := s.agentIdentity(tctx, &wg)
	if err != nil {
		return err
	}
	var issue func(string, int) (string, error)
	var ended func(string, int)
	if agents != nil {
		issue, ended = agents.issue, agents.ended
	}
	sched := scheduler.New(s.bus, scheduler.Options{
		AgentCredentials: issue, AttemptEnded: ended, EndedWithin: agentCredentialWindow(s.clock),
		Clock: s.clock, Log: s.log.Named("scheduler"), Throughput: cat, Geography: cat.GeographyOf,
		ReconcileInterval: cfg.Scheduler.ReconcileInterval.D(), UnavailableFor: cfg.Scheduler.UnavailableFor.D(),
		Workers: cfg.Scheduler.Workers, Metrics: s.metrics, Clouds: clouds.byName,
		CheckpointRoot: s.checkpoints.URI(), Term: s.lease.Term(), LeaseValid: s.lease.Valid,
		Arbitrage: scheduler.Arbitrage{Off: !cfg.Scheduler.Arbitrage.Enabled, Saving: cfg.Scheduler.Arbitrage.MinSaving,
			MinStay: cfg.Scheduler.Arbitrage.MinStay.D()},
		// What each team was charged this month: the ledger, and what its
		// running jobs have run up since.
		Teams: teamLimits(cfg.Teams), Spend: s.api.TeamSpend,
	})
	if cloud != nil {
		stopControl, err := s.bus.Serve(SubjectSimControl, s.operatorOnly(s.simControl(cloud)))
		if err != nil {
			return err
		}
		defer stopControl()
	}
	s.writeLedger(tctx, &wg)
	if cloud != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.recordReservedIdle(tctx, cloud)
		}()
	}
	s.term.Store(&term{cloud: cloud, clouds: clouds, scheduler: sched})
	defer s.term.Store(nil)
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.prune(tctx)
	}()
	go func() {
		defer wg.Done()
		s.sealLedger(tctx)
	}()
	return sched.Run(tctx)
}

// prune removes the finished jobs the retention no longer keeps, every
// retention interval while this server's term lasts (a store far over
// its limits is brought down a batch at a time, one batch after another).
func (s *Server) prune(ctx context.Context) {
	r := s.cfg.Retention
	policy := api.Retention{MaxAge: r.FinishedMaxAge.D(), MaxJobs: r.FinishedMaxJobs}
	if policy.MaxAge == 0 && policy.MaxJobs == 0 {
		return
	}
	every(ctx, r.Interval.D(), func() time.Duration {
		n, err := s.api.Prune(ctx, policy)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("retention", zap.Error(err))
		}
		if n > 0 && err == nil {
			return time.Second // more may be over the limits
		}
		return r.Interval.D()
	})
}

// every runs round once first has passed (wall time), then again after
// each wait round returns, until ctx ends.
func every(ctx context.Context, first time.Duration, round func() time.Duration) {
	for wait := first; ; {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = round()
	}
}

// checkSimScope refuses simulated providers or regions the catalog does
// not have, at start rather than at the first term.
func checkSimScope(cat *catalog.Catalog, c SimConfig) error {
	for _, p := range c.Providers {
		if !cat.KnownProvider(p) {
			return fmt.Errorf("sim.providers: unknown provider %q (known: %s)", p, strings.Join(cat.Providers(), ", "))
		}
	}
	for _, r := range c.Regions {
		if !cat.KnownRegion(r) {
			return fmt.Errorf("sim.regions: unknown region %q", r)
		}
	}
	return nil
}

// openBus connects to NATS (starting the embedded server if configured)
// and sets the server's clock.
func (s *Server) openBus(ctx context.Context) error {
	cfg := s.cfg
	if cfg.NATS.URL == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		lock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		s.dirLock = lock
	}
	natsCfg := events.Config{
		URL: cfg.NATS.URL, CredsFile: cfg.NATS.CredsFile, NKeyFile: cfg.NATS.NKeyFile,
		User: cfg.NATS.User, Password: cfg.NATS.Password, Token: cfg.NATS.Token,
		TLSCAFile: cfg.NATS.TLSCAFile, TLSCertFile: cfg.NATS.TLSCertFile, TLSKeyFile: cfg.NATS.TLSKeyFile,
		Replicas: cfg.NATS.Replicas, ConnName: "spotwise-server", IdentityDir: cfg.NATS.IdentityDir,
		Embedded:   events.EmbeddedOptions{DataDir: cfg.DataDir, Listen: cfg.NATS.Listen, ServerName: "spotwise"},
		Logs:       events.LogRetention{MaxAge: cfg.Retention.LogsMaxAge.D(), MaxBytes: cfg.Retention.LogsMaxBytes},
		JobsMaxAge: jobsStreamAge(cfg.Retention),
	}
	s.log.Info("connecting to NATS", zap.String("nats", natsCfg.Redacted()))
	bus, err := events.Open(ctx, natsCfg, "spotwise-server", clock.Real{}, s.log)
	if err != nil {
		return err
	}
	s.bus = bus
	if real := cfg.Providers.real(); len(real) > 0 {
		// Real clouds keep real time: no simulated clock, and none left
		// for agents to read.
		s.clock = clock.Real{}
		if err := bus.Meta().Delete(ctx, clockKey); err != nil && !errors.Is(err, events.ErrNotFound) {
			return fmt.Errorf("clearing the simulated clock: %w", err)
		}
	} else if s.clock, err = simClock(ctx, bus, cfg.Sim.Speed, s.log); err != nil {
		return err
	}
	bus.SetClock(s.clock)
	return nil
}

// startIndex starts the API's job index on the server's lifetime context
// and waits, within the start context, until it holds every job.
func (s *Server) startIndex(ctx, rctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.api.Start(rctx) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("job index: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("job index: %w", ctx.Err())
	}
}

func (s *Server) goRun(ctx context.Context, what string, fn func(context.Context) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			s.log.Error(what+" stopped", zap.Error(err))
		}
	}()
}

// natsURLForAgents is where agent processes connect: the external NATS,
// or the embedded server's listener ("" if it does not listen).
func (s *Server) natsURLForAgents() string {
	if s.cfg.NATS.URL != "" {
		return s.cfg.NATS.URL
	}
	return s.bus.ClientURL()
}

// HTTPAddr is the address the HTTP API listens on.
func (s *Server) HTTPAddr() string { return s.httpAddr.String() }

// NATSURL is the embedded NATS server's client URL ("" when external or
// not listening).
func (s *Server) NATSURL() string { return s.bus.ClientURL() }

// Bus is the server's bus.
func (s *Server) Bus() *events.Bus { return s.bus }

// Clock is the server's clock (scaled when the simulated cloud runs fast).
func (s *Server) Clock() clock.Clock { return s.clock }

// Cloud is the simulated cloud while this server holds the scheduler
// lease, nil on standby.
func (s *Server) Cloud() *sim.Cloud {
	if t := s.term.Load(); t != nil {
		return t.cloud
	}
	return nil
}

// Scheduler is the scheduler while this server holds the lease, nil on
// standby.
func (s *Server) Scheduler() *scheduler.Scheduler {
	if t := s.term.Load(); t != nil {
		return t.scheduler
	}
	return nil
}

// Stats are the scheduler counters of every term this server held.
func (s *Server) Stats() scheduler.Stats { return s.metrics.Stats() }

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	role := "standby"
	if s.term.Load() != nil {
		role = "scheduling"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"role":      role,
		"terms":     s.lease.Terms(),
		"clock":     s.clock.Now(),
		"sim_speed": s.cfg.Sim.Speed,
		"clouds":    s.cloudStatus(),
		"nats":      s.bus.ClientURL(),
		"scheduler": s.metrics.Stats(),
	})
}

// instances lists every instance the clouds run for spotwise, for
// operators and end-to-end checks.
func (s *Server) instances(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	t := s.term.Load()
	if t == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "standby", "message": "this server is on standby; the server holding the scheduler lease runs the clouds"}})
		return
	}
	all := []providers.Instance{}
	for _, p := range t.clouds.distinct {
		insts, err := p.Instances(r.Context())
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unavailable", "message": p.Name() + ": " + err.Error()}})
			return
		}
		all = append(all, insts...)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"instances": all})
}

// Close stops the server: HTTP first, then the scheduler and feeds, then
// the cloud and the bus.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.http.Shutdown(ctx)
			cancel()
		}
		if s.stopNATS != nil {
			s.stopNATS()
		}
		s.cancel()
		s.wg.Wait()
		if s.tokens != nil {
			s.tokens.Close()
		}
		if s.bus != nil {
			s.bus.Close()
		}
		if s.uncount != nil {
			s.uncount()
		}
		s.dirLock.release()
	})
}

// nodeID is this server's identity for the scheduler lease: the configured
// node name, else one kept in the data directory (so a server restarted
// after a crash takes its own lease back at once), else host and a random
// suffix.
func nodeID(cfg Config) (string, error) {
	if cfg.NodeName != "" {
		return cfg.NodeName, nil
	}
	host, _ := os.Hostname()
	if cfg.NATS.URL != "" {
		return fmt.Sprintf("%s-%s", host, nuid.Next()[:8]), nil
	}
	path := filepath.Join(cfg.DataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return string(b), nil
	}
	id := fmt.Sprintf("%s-%s", host, nuid.Next()[:8])
	if err := os.WriteFile(path, []byte(id), 0o644); err != nil {
		return "", fmt.Errorf("storing the node ID: %w", err)
	}
	return id, nil
}

// SimClockFromBus returns the clock the servers on a bus run on (scaled
// when the simulated cloud runs fast), for processes such as the agent
// that must keep the same time; the real clock if none is anchored. A
// scaled clock follows the shared anchor (pauses included) until ctx ends.
func SimClockFromBus(ctx context.Context, bus *events.Bus) (clock.Clock, error) {
	b, _, err := bus.Meta().Get(ctx, clockKey)
	if errors.Is(err, events.ErrNotFound) {
		return clock.Real{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the simulated clock: %w", err)
	}
	a, err := decodeAnchor(b)
	if err != nil {
		return nil, err
	}
	c := clock.NewScaledAt(a)
	if err := followClock(ctx, bus, c, nil); err != nil {
		return nil, err
	}
	return c, nil
}

const clockKey = "sim-clock"

func decodeAnchor(b []byte) (clock.Anchor, error) {
	var a clock.Anchor
	if err := json.Unmarshal(b, &a); err != nil || a.Speed <= 0 {
		return a, errors.New("the simulated clock's anchor is garbled")
	}
	return a, nil
}

// followClock keeps a scaled clock on the anchor every process of the
// system shares, so that a pause or resume reaches the servers and agents
// alike, until ctx ends.
func followClock(ctx context.Context, bus *events.Bus, c *clock.Scaled, log *zap.Logger) error {
	_, err := bus.Meta().WatchKey(ctx, clockKey, func(b []byte) {
		if b == nil {
			return
		}
		a, err := decodeAnchor(b)
		if err != nil {
			if log != nil {
				log.Warn("ignoring a garbled simulated clock anchor", zap.Error(err))
			}
			return
		}
		if cur := c.Current(); cur != a {
			c.SetAnchor(a)
		}
	})
	return err
}

// simClock returns the server clock: real time at speed 1 with no history,
// otherwise a scaled clock continuing from the stored anchor, paused if it
// was.
func simClock(ctx context.Context, bus *events.Bus, speed float64, log *zap.Logger) (clock.Clock, error) {
	now := time.Now()
	anchor := clock.Anchor{Wall: now, Sim: now, Speed: speed}
	b, _, err := bus.Meta().Get(ctx, clockKey)
	switch {
	case err == nil:
		if old, err := decodeAnchor(b); err == nil {
			anchor = old
			if old.Speed != speed {
				simNow := old.At(now)
				anchor = clock.Anchor{Wall: now, Sim: simNow, Speed: speed, Paused: old.Paused}
			}
		}
	case !errors.Is(err, events.ErrNotFound):
		return nil, fmt.Errorf("reading the simulated clock: %w", err)
	}
	if speed == 1 && anchor.Sim.Equal(anchor.Wall) && !anchor.Paused {
		return clock.Real{}, nil
	}
	if err := putAnchor(ctx, bus, anchor); err != nil {
		return nil, err
	}
	c := clock.NewScaledAt(anchor)
	log.Info("simulated clock", zap.Float64("speed", speed), zap.Time("now", c.Now()), zap.Bool("paused", anchor.Paused))
	return c, nil
}

func putAnchor(ctx context.Context, bus *events.Bus, a clock.Anchor) error {
	nb, _ := json.Marshal(a)
	if _, err := bus.Meta().Put(ctx, clockKey, nb); err != nil {
		return fmt.Errorf("storing the simulated clock: %w", err)
	}
	return nil
}

// openAuth opens the token store, makes sure an operator token exists
// (writing it where the configuration says) and returns the
// authenticator of the API.
func (s *Server) openAuth(ctx context.Context) (*auth.Authenticator, error) {
	wall := s.wall()
	tokens, err := auth.OpenTokens(ctx, s.bus.TokenStore(), wall)
	if err != nil {
		return nil, err
	}
	s.tokens = tokens
	path := s.OperatorTokenFile()
	tok, created, err := auth.Bootstrap(ctx, tokens, path)
	if err != nil {
		return nil, err
	}
	s.opToken = tok
	if created {
		s.log.Info("operator token written (it can do everything: keep it safe)", zap.String("file", path))
	}
	return auth.NewAuthenticator(tokens, s.cfg.Auth.OIDC, wall)
}

// OperatorTokenFile is where the operator token made at first start is.
func (s *Server) OperatorTokenFile() string {
	if p := s.cfg.Auth.OperatorTokenFile; p != "" {
		return p
	}
	return filepath.Join(cmp.Or(s.cfg.DataDir, "."), auth.OperatorTokenFile)
}

// OperatorToken is a token of the operator role (the one in
// OperatorTokenFile).
func (s *Server) OperatorToken() string { return s.opToken }

// isLoopback reports whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// jobsStreamAge is how long the jobs stream keeps histories: a day longer
// than retention keeps finished jobs (finished_max_age, on the scheduler's
// clock, which runs at least as fast as the wall's), and never under the
// stream's default; none when retention keeps jobs of any age.
func jobsStreamAge(r RetentionConfig) time.Duration {
	if r.FinishedMaxAge <= 0 {
		return -1
	}
	return max(events.DefaultJobsMaxAge, r.FinishedMaxAge.D()+24*time.Hour)
}
