package events

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
)

// Config says which NATS to use. With URL empty, an embedded server is
// started under Embedded.DataDir.
type Config struct {
	// URL is one or more comma-separated server URLs of an external
	// server or cluster.
	URL string
	// Credentials for an external server: a creds file (JWT + nkey), an
	// nkey seed file, user and password, or a token.
	CredsFile    string
	NKeyFile     string
	User         string
	Password     string
	Token        string
	TLSCAFile    string
	TLSCertFile  string
	TLSKeyFile   string
	TLSRequired  bool
	ConnName     string
	Embedded     EmbeddedOptions
	Replicas     int
	ConnectRetry time.Duration
	// LeaseTTL is how long a lease outlives its last renewal (default
	// DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Logs is how long and how much of jobs' output the log stream keeps
	// (zero: DefaultLogsMaxAge, DefaultLogsMaxBytes).
	Logs LogRetention
	// JobsMaxAge is how long (wall time) the jobs stream keeps
	// submissions and histories: zero is DefaultJobsMaxAge, under zero no
	// limit. Retention removes finished jobs' histories with their
	// records; this is the stream's own bound, past which a history goes
	// even if its record stays.
	JobsMaxAge time.Duration
	// Client binds to the streams and buckets a server created instead of
	// creating them.
	Client bool
	// Agent binds to nothing: an agent's NATS user may only publish its own
	// reports and answer its own control requests (Publish, Answer).
	Agent bool
	// AgentSimClock binds an agent to the metadata bucket, to keep the
	// simulated clock (the simulated cloud's agent processes).
	AgentSimClock bool
	// InboxPrefix replaces "_INBOX" (an agent's or a watcher's user may
	// read only its own inbox).
	InboxPrefix string
	// UserJWT, with UserSeed, authenticates with a JWT the caller can
	// replace (an agent renewing its credential): it is asked for at every
	// connect.
	UserJWT  func() (string, error)
	UserSeed string
	// IdentityDir holds the NATS identity (`spotwise nats init`) of an
	// external server or cluster: the service user connects with its
	// creds when no other credential is given, and agents' credentials
	// are issued and revoked with it.
	IdentityDir string
}

// Redacted describes the configuration for logs without any secret.
func (c Config) Redacted() string {
	if c.URL == "" {
		return "embedded (store " + c.Embedded.DataDir + ", listen " + orNone(c.Embedded.Listen) + ")"
	}
	auth := "none"
	switch {
	case c.CredsFile != "":
		auth = "creds file"
	case c.NKeyFile != "":
		auth = "nkey"
	case c.User != "":
		auth = "user " + c.User
	case c.Token != "":
		auth = "token"
	case c.IdentityDir != "":
		auth = "identity " + c.IdentityDir
	}
	return fmt.Sprintf("external %s (auth %s, tls %v)", redactURL(c.URL), auth, c.TLSCAFile != "" || c.TLSRequired)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// redactURL drops user information from server URLs.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			scheme, _, ok := strings.Cut(p, "://")
			if ok {
				parts[i] = scheme + "://[redacted]@" + p[at+1:]
			} else {
				parts[i] = "[redacted]@" + p[at+1:]
			}
		}
	}
	return strings.Join(parts, ",")
}

// redactErr keeps credentials out of a connection error: net/url quotes a
// URL it cannot parse back in full, password and all.
func redactErr(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	return err
}

// Bus is spotwise's connection to NATS: JetStream streams, KV buckets,
// publishing, durable consumers and request/reply.
type Bus struct {
	nc       *nats.Conn
	sysc     *nats.Conn // the system account's, for account updates
	identity *Identity
	pushMu   sync.Mutex
	unpushed atomic.Bool // a revocation the servers may not have
	js       jetstream.JetStream
	server   *server.Server
	log      *zap.Logger
	clock    clock.Clock
	source   string
	replicas int
	jobs     *JobStore
	// readers are more connections for the API's reads: a direct get is
	// answered in the reading connection's turn on the server, so one
	// connection's reads wait on each other (and on a message block
	// loaded from disk).
	readers  []*nats.Conn
	readNext atomic.Uint64
	meta     *KV
	sim      *KV
	tokens   *KV
	leases   jetstream.KeyValue
	leaseTTL time.Duration
	logs     LogRetention
	jobsAge  time.Duration
	garbled  atomic.Int64
	dropMu   sync.Mutex
	dropped  map[DropKey]int64
	readMu   sync.Mutex
	reads    map[int]Reading
	readSeq  int
	// closing ends the waits for asynchronous publishes' acknowledgements
	// (Close waits for them): nothing reports to a caller that has gone.
	asyncMu sync.Mutex
	closed  bool
	closing chan struct{}
	async   sync.WaitGroup
	unacked atomic.Int64
	// dial makes another connection like nc (Fork).
	dial func(name string) (*nats.Conn, error)
	// root is the bus a fork was made from: what the fork reads and
	// drops is listed and counted there.
	root *Bus
}

// DropKey names a count of dropped messages: by which consumer (or
// stream) and why (garbled, refused, gave-up).
type DropKey struct{ Consumer, Reason string }

// drop counts a message a consumer ended for good.
func (b *Bus) drop(consumer, reason string) {
	b = b.rootBus()
	if reason == "garbled" {
		b.garbled.Add(1)
	}
	b.dropMu.Lock()
	defer b.dropMu.Unlock()
	if b.dropped == nil {
		b.dropped = map[DropKey]int64{}
	}
	b.dropped[DropKey{consumer, reason}]++
}

// Dropped counts the messages consumers ended for good, by consumer and
// reason.
func (b *Bus) Dropped() map[DropKey]int64 {
	b.dropMu.Lock()
	defer b.dropMu.Unlock()
	out := make(map[DropKey]int64, len(b.dropped))
	for k, v := range b.dropped {
		out[k] = v
	}
	return out
}

// Open connects to NATS (starting the embedded server if no URL is
// given), and creates or updates every stream and bucket.
func Open(ctx context.Context, cfg Config, source string, clk clock.Clock, log *zap.Logger) (*Bus, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if clk == nil {
		clk = clock.Real{}
	}
	b := &Bus{log: log, clock: clk, source: source, replicas: max(1, cfg.Replicas), leaseTTL: cfg.LeaseTTL, logs: cfg.Logs, jobsAge: cfg.JobsMaxAge, closing: make(chan struct{})}
	if b.leaseTTL <= 0 {
		b.leaseTTL = DefaultLeaseTTL
	}
	opts := []nats.Option{
		nats.Name(orDefault(cfg.ConnName, "spotwise")),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS reconnected", zap.String("server", redactURL(c.ConnectedUrl()))) }),
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	url := cfg.URL
	var sysOpts []nats.Option
	if url == "" {
		if cfg.Embedded.Identity == nil && cfg.Embedded.DataDir != "" {
			id, err := LoadOrCreateIdentity(IdentityDir(cfg.Embedded.DataDir))
			if err != nil {
				return nil, err
			}
			cfg.Embedded.Identity = id
		}
		ns, err := StartEmbedded(cfg.Embedded, log)
		if err != nil {
			return nil, err
		}
		b.server = ns
		b.identity = cfg.Embedded.Identity
		creds, err := b.identity.ServiceCreds()
		if err != nil {
			b.shutdownServer()
			return nil, err
		}
		// In process there is no network to time out on: a handshake that
		// takes long is the server verifying credentials on a loaded
		// machine (seconds, under the race detector), and failing it
		// would fail the start.
		opts = append(opts, nats.InProcessServer(ns), credsOption(creds), nats.Timeout(embeddedHandshake))
		sysOpts = append(sysOpts, nats.InProcessServer(ns), nats.Timeout(embeddedHandshake))
		url = ns.ClientURL()
	} else {
		if cfg.IdentityDir != "" {
			// The cluster trusts the identity `spotwise nats init` made:
			// a new one made here would be refused, so none is.
			id, err := LoadIdentity(cfg.IdentityDir)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%w (create it with `spotwise nats init --dir %s` and load its operator.conf in every nats-server)", err, cfg.IdentityDir)
			}
			if err != nil {
				return nil, err
			}
			b.identity = id
			if cfg.CredsFile == "" && cfg.NKeyFile == "" && cfg.User == "" && cfg.Token == "" && cfg.UserJWT == nil {
				creds, err := id.ServiceCreds()
				if err != nil {
					return nil, err
				}
				opts = append(opts, credsOption(creds))
			}
		}
		var err error
		if opts, err = appendAuth(opts, cfg); err != nil {
			return nil, err
		}
		if sysOpts, err = appendAuth(sysOpts, Config{TLSCAFile: cfg.TLSCAFile, TLSCertFile: cfg.TLSCertFile, TLSKeyFile: cfg.TLSKeyFile}); err != nil {
			return nil, err
		}
		if cfg.ConnectRetry > 0 {
			opts = append(opts, nats.RetryOnFailedConnect(true), nats.ReconnectWait(cfg.ConnectRetry))
		}
	}
	embedded := b.server != nil
	b.dial = func(name string) (*nats.Conn, error) {
		return connect(url, embedded, append(slices.Clone(opts), nats.Name(name))...)
	}
	nc, err := connect(url, embedded, opts...)
	if err != nil {
		b.shutdownServer()
		return nil, fmt.Errorf("connecting to NATS %s: %w", redactURL(url), redactErr(err))
	}
	b.nc = nc
	if b.identity != nil && !cfg.Client && !cfg.Agent {
		creds, err := b.identity.SystemCreds()
		if err == nil {
			b.sysc, err = connect(url, embedded, append(sysOpts, nats.Name("spotwise-system"), credsOption(creds), nats.MaxReconnects(-1))...)
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("connecting to NATS as the system account: %w", redactErr(err))
		}
	}
	if b.js, err = jetstream.New(nc); err != nil {
		b.Close()
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	if !cfg.Client && !cfg.Agent {
		for range readConns {
			rc, err := connect(url, embedded, append(opts, nats.Name("spotwise-reader"))...)
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("connecting to NATS %s: %w", redactURL(url), redactErr(err))
			}
			b.readers = append(b.readers, rc)
		}
	}
	if cfg.Agent {
		if cfg.AgentSimClock { // the one bucket an agent may read
			kv, err := b.js.KeyValue(ctx, BucketMeta)
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("bucket %s: %w", BucketMeta, err)
			}
			b.meta = &KV{kv: kv}
		}
		return b, nil
	}
	if err := b.ensure(ctx, cfg.Client); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Fork is a bus on a connection of its own to the same NATS, named name,
// for a part of the process that publishes and answers requests much (the
// simulated cloud's agents, which elsewhere run on machines of their own):
// nats.go writes a connection's buffer to the server under the
// connection's lock, so on one busy connection every publisher waits on
// every flush. A fork publishes (Publish, PublishAsync, PublishTogether)
// and answers (Answer, Serve) as b does, stamped with b's clock as it is
// now; the stores, buckets and consumers are b's. Close closes the fork's
// connection only.
func (b *Bus) Fork(name string) (*Bus, error) {
	if b.dial == nil {
		return nil, errors.New("forking a bus that is not open")
	}
	nc, err := b.dial(name)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", redactErr(err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	return &Bus{nc: nc, js: js, log: b.log, clock: b.clock, source: b.source, replicas: b.replicas, leaseTTL: b.leaseTTL,
		logs: b.logs, jobsAge: b.jobsAge, closing: make(chan struct{}), dial: b.dial, root: b.rootBus()}, nil
}

func (b *Bus) rootBus() *Bus {
	if b.root != nil {
		return b.root
	}
	return b
}

// connect is nats.Connect, made again (three tries in all) when a
// handshake with the embedded server fails: on a loaded machine the
// server may take longer to verify a credential than it waits before
// pinging a new client, and the client then reads that ping where it
// expects the answer to its own ("expected 'PONG', got 'PING'").
func connect(url string, embedded bool, opts ...nats.Option) (*nats.Conn, error) {
	for try := 1; ; try++ {
		nc, err := nats.Connect(url, opts...)
		if err == nil || !embedded || try == 3 {
			return nc, err
		}
	}
}

// embeddedHandshake bounds connecting to the embedded server.
const embeddedHandshake = 30 * time.Second

func appendAuth(opts []nats.Option, cfg Config) ([]nats.Option, error) {
	switch {
	case cfg.UserJWT != nil:
		kp, err := nkeys.FromSeed([]byte(cfg.UserSeed))
		if err != nil {
			return nil, fmt.Errorf("NATS user seed: %w", err)
		}
		opts = append(opts, nats.UserJWT(cfg.UserJWT, kp.Sign))
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("NATS nkey file: %w", err)
		}
		opts = append(opts, o)
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
			return nil, errors.New("NATS TLS: give both a certificate and a key file")
		}
		opts = append(opts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}
	if cfg.TLSRequired {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// jetStreamSettle bounds how long ensure waits for a cluster that does not
// answer JetStream requests yet (a cluster just formed elects its meta
// leader, then places each new replicated stream).
const jetStreamSettle = time.Minute

// untilJetStreamAnswers runs an idempotent JetStream call, again while it
// times out or JetStream is not available yet, for up to jetStreamSettle
// (and never past ctx). Any other error is returned at once.
func (b *Bus) untilJetStreamAnswers(ctx context.Context, what string, call func(context.Context) error) error {
	deadline := time.Now().Add(jetStreamSettle)
	for warned := false; ; warned = true {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := call(cctx)
		cancel()
		retry := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
		if err == nil || !retry || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if !warned {
			b.log.Warn("JetStream is not answering yet (is it enabled on the NATS servers?); trying for a minute",
				zap.String("creating", what), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// ensure creates or updates every stream and bucket (a client only binds
// to the buckets).
func (b *Bus) ensure(ctx context.Context, client bool) error {
	kvs := map[string]jetstream.KeyValue{}
	if client {
		for _, kc := range bucketConfigs(b.replicas, b.leaseTTL) {
			kv, err := b.js.KeyValue(ctx, kc.Bucket)
			if err != nil {
				return fmt.Errorf("bucket %s (is a spotwise server running on this NATS?): %w", kc.Bucket, err)
			}
			kvs[kc.Bucket] = kv
		}
	} else {
		for _, sc := range streamConfigs(b.replicas, b.logs, b.jobsAge) {
			if err := b.untilJetStreamAnswers(ctx, "stream "+sc.Name, func(ctx context.Context) error {
				_, err := b.js.CreateOrUpdateStream(ctx, sc)
				return err
			}); err != nil {
				return fmt.Errorf("creating stream %s: %w", sc.Name, err)
			}
		}
		for _, kc := range bucketConfigs(b.replicas, b.leaseTTL) {
			var kv jetstream.KeyValue
			if err := b.untilJetStreamAnswers(ctx, "bucket "+kc.Bucket, func(ctx context.Context) (err error) {
				kv, err = b.js.CreateOrUpdateKeyValue(ctx, kc)
				return err
			}); err != nil {
				return fmt.Errorf("creating bucket %s: %w", kc.Bucket, err)
			}
			kvs[kc.Bucket] = kv
		}
	}
	b.jobs = &JobStore{kv: kvs[BucketJobs], log: b.log}
	for _, rc := range b.readers {
		js, err := jetstream.New(rc)
		if err == nil {
			var kv jetstream.KeyValue
			if kv, err = js.KeyValue(ctx, BucketJobs); err == nil {
				b.jobs.reads = append(b.jobs.reads, kv)
			}
		}
		if err != nil {
			return fmt.Errorf("bucket %s: %w", BucketJobs, err)
		}
	}
	b.meta = &KV{kv: kvs[BucketMeta]}
	b.sim = &KV{kv: kvs[BucketSim]}
	b.tokens = &KV{kv: kvs[BucketTokens]}
	b.leases = kvs[BucketLeases]
	return nil
}

// readConns is how many connections the API's reads share.
const readConns = 4

// readConn is the next of the read connections (the main one when there
// are none).
func (b *Bus) readConn() *nats.Conn {
	if len(b.readers) == 0 {
		return b.nc
	}
	return b.readers[b.readNext.Add(1)%uint64(len(b.readers))]
}

// Close drains the connection and stops the embedded server, if any.
func (b *Bus) Close() {
	if b.sysc != nil {
		b.sysc.Close()
	}
	for _, rc := range b.readers {
		rc.Close()
	}
	if b.nc != nil {
		_ = b.nc.Drain()
		deadline := time.Now().Add(5 * time.Second)
		for !b.nc.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		b.nc.Close()
	}
	// Acknowledgements that came before the connection closed have been
	// handled; the others will never come.
	b.asyncMu.Lock()
	if !b.closed {
		b.closed = true
		close(b.closing)
	}
	b.asyncMu.Unlock()
	b.async.Wait()
	if n := b.unacked.Load(); n > 0 {
		b.log.Warn("bus closed with publishes not acknowledged: they may not be stored", zap.Int64("publishes", n))
	}
	b.shutdownServer()
}

func (b *Bus) shutdownServer() {
	if b.server != nil {
		b.server.Shutdown()
		b.server.WaitForShutdown()
	}
}

// SetClock replaces the clock events are stamped with; the server calls it
// once at start, when the simulated clock's anchor has been read from the
// bus, before anything else publishes.
func (b *Bus) SetClock(c clock.Clock) { b.clock = c }

// Jobs is the job-state bucket.
func (b *Bus) Jobs() *JobStore { return b.jobs }

// Meta is the bucket of server metadata.
func (b *Bus) Meta() *KV { return b.meta }

// SimStore is the bucket where the simulated cloud keeps its instances.
func (b *Bus) SimStore() *KV { return b.sim }

// TokenStore is the bucket of API tokens (auth.Tokens reads and writes it).
func (b *Bus) TokenStore() *KV { return b.tokens }

// Conn is the underlying NATS connection, for tests and tools.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// ClientURL is the URL other processes use to reach the embedded server,
// or "" when it does not listen or the server is external.
func (b *Bus) ClientURL() string {
	if b.server == nil || b.server.Addr() == nil {
		return ""
	}
	return b.server.ClientURL()
}

// Garbled counts messages consumers dropped because they could not be
// decoded.
func (b *Bus) Garbled() int64 { return b.garbled.Load() }

// PublishOption changes how one event is published.
type PublishOption func(*publishOptions)

type publishOptions struct{ id string }

// WithID gives the event a deterministic ID, so a retried publish of the
// same step is de-duplicated by JetStream.
func WithID(id string) PublishOption { return func(o *publishOptions) { o.id = id } }

// Publish wraps p in an envelope and publishes it to subject, waiting for
// JetStream to store it.
func (b *Bus) Publish(ctx context.Context, subject string, p Payload, opts ...PublishOption) error {
	var po publishOptions
	for _, o := range opts {
		o(&po)
	}
	data, err := Encode(p, po.id, b.source, b.clock.Now())
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	var jopts []jetstream.PublishOpt
	if po.id != "" {
		jopts = append(jopts, jetstream.WithMsgID(po.id))
	}
	if _, err := b.js.PublishMsg(ctx, msg, jopts...); err != nil {
		return fmt.Errorf("publishing %s to %s: %w", p.EventType(), subject, err)
	}
	return nil
}

// Outgoing is one event of PublishTogether.
type Outgoing struct {
	Subject string
	Payload Payload
	Opts    []PublishOption
}

// PublishTogether publishes events at once and waits until JetStream has
// stored each, so that several events of one step cost one round trip
// rather than one each. It returns an error per event (nil for each one
// stored), in order.
func (b *Bus) PublishTogether(ctx context.Context, out ...Outgoing) []error {
	errs := make([]error, len(out))
	futs := make([]jetstream.PubAckFuture, len(out))
	for i, o := range out {
		var po publishOptions
		for _, opt := range o.Opts {
			opt(&po)
		}
		data, err := Encode(o.Payload, po.id, b.source, b.clock.Now())
		if err != nil {
			errs[i] = err
			continue
		}
		var jopts []jetstream.PublishOpt
		if po.id != "" {
			jopts = append(jopts, jetstream.WithMsgID(po.id))
		}
		if futs[i], err = b.js.PublishMsgAsync(&nats.Msg{Subject: o.Subject, Data: data}, jopts...); err != nil {
			errs[i] = fmt.Errorf("publishing %s to %s: %w", o.Payload.EventType(), o.Subject, err)
		}
	}
	for i, fut := range futs {
		if fut == nil {
			continue
		}
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			errs[i] = fmt.Errorf("publishing %s to %s: %w", out[i].Payload.EventType(), out[i].Subject, err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("publishing %s to %s: %w", out[i].Payload.EventType(), out[i].Subject, ctx.Err())
		}
	}
	return errs
}

// PublishAsync publishes without waiting for JetStream's acknowledgement,
// so a burst (a storm of notices from a feed) goes out at wire speed; a
// failure is reported to onErr, unless the bus closes first (Close then
// logs how many publishes went unacknowledged): the caller may be gone by
// then. Order on the connection is kept.
func (b *Bus) PublishAsync(subject string, p Payload, onErr func(error), opts ...PublishOption) {
	var po publishOptions
	for _, o := range opts {
		o(&po)
	}
	data, err := Encode(p, po.id, b.source, b.clock.Now())
	if err != nil {
		onErr(err)
		return
	}
	var jopts []jetstream.PublishOpt
	if po.id != "" {
		jopts = append(jopts, jetstream.WithMsgID(po.id))
	}
	fut, err := b.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data}, jopts...)
	if err != nil {
		onErr(fmt.Errorf("publishing %s to %s: %w", p.EventType(), subject, err))
		return
	}
	b.asyncMu.Lock()
	defer b.asyncMu.Unlock()
	if b.closed {
		b.unacked.Add(1)
		return
	}
	b.async.Add(1)
	go func() {
		defer b.async.Done()
		t := time.NewTimer(30 * time.Second)
		defer t.Stop()
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			onErr(fmt.Errorf("publishing %s to %s: %w", p.EventType(), subject, err))
		case <-t.C:
			onErr(fmt.Errorf("publishing %s to %s: no acknowledgement in 30s", p.EventType(), subject))
		case <-b.closing:
			select { // an acknowledgement handled before the close counts
			case <-fut.Ok():
			default:
				b.unacked.Add(1)
			}
		}
	}()
}

// PublishRaw publishes bytes as they are; tests and tools use it to put
// foreign or garbled messages on a subject.
func (b *Bus) PublishRaw(ctx context.Context, subject string, data []byte) error {
	_, err := b.js.Publish(ctx, subject, data)
	return err
}

// Activity is a picture of how busy the bus is: Stored sums the last
// sequence of every stream (buckets included), so it moves whenever
// anything is written; Backlog counts messages consumers have not yet been
// given or not yet acknowledged. Operators read the backlog as consumer
// lag; tests wait for both to stand still before moving time on.
type Activity struct {
	Stored  uint64 `json:"stored"`
	Backlog uint64 `json:"backlog"`
}

// Activity reads the bus's activity now.
func (b *Bus) Activity(ctx context.Context) (Activity, error) {
	var a Activity
	if b.server != nil {
		// The embedded server answers in-process, without a round trip
		// per stream.
		info, err := b.server.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true, DirectConsumer: true})
		if err != nil {
			return a, fmt.Errorf("JetStream state: %w", err)
		}
		for _, acc := range info.AccountDetails {
			for _, st := range acc.Streams {
				a.Stored += st.State.LastSeq
				for _, ci := range append(st.Consumer, st.DirectConsumer...) {
					a.Backlog += ci.NumPending + uint64(ci.NumAckPending)
				}
			}
		}
		return a, nil
	}
	names := b.js.StreamNames(ctx)
	for name := range names.Name() {
		st, err := b.js.Stream(ctx, name)
		if err != nil {
			return a, fmt.Errorf("stream %s: %w", name, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return a, fmt.Errorf("stream %s: %w", name, err)
		}
		a.Stored += info.State.LastSeq
		cons := st.ListConsumers(ctx)
		for ci := range cons.Info() {
			a.Backlog += ci.NumPending + uint64(ci.NumAckPending)
		}
		if err := cons.Err(); err != nil {
			return a, fmt.Errorf("consumers of %s: %w", name, err)
		}
	}
	if err := names.Err(); err != nil {
		return a, fmt.Errorf("listing streams: %w", err)
	}
	return a, nil
}
