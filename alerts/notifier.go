package alerts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
)

// Durable is the name of the JetStream consumer every server's Notifier
// shares: each alert is delivered by one of them.
const Durable = "alerts-webhooks"

// Option changes how a Notifier works.
type Option func(*options)

type options struct {
	clock  clock.Clock
	client *http.Client
}

// WithClock sets the clock of de-duplication windows, rate limits, retry
// backoff and Alertmanager's startsAt and endsAt. The default is the wall
// clock, and it should stay so in production: webhooks count their limits
// in real time, and Alertmanager refuses alerts from its future, even when
// the simulated cloud runs faster.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithHTTPClient sets the client webhooks are called with (for a proxy or
// custom TLS). Each attempt is still bounded by the webhook's Timeout. The
// default client does not follow redirects.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// consumer is the part of the bus a Notifier uses.
type consumer interface {
	Consume(ctx context.Context, cc events.ConsumerConfig, h events.Handler) (stop func(), err error)
}

// Notifier delivers the alerts on the alert stream to webhooks.
type Notifier struct {
	bus      consumer
	logs     logReader // a failed job's last lines, for its alert
	log      *zap.Logger
	clock    clock.Clock
	sinks    []*sink
	received atomic.Int64
	ignored  atomic.Int64
}

// New checks cfg and prepares a Notifier; Run starts it.
func New(cfg Config, bus *events.Bus, log *zap.Logger, opts ...Option) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	o := options{clock: clock.Real{}}
	for _, opt := range opts {
		opt(&o)
	}
	if bus == nil {
		return nil, errors.New("alerts: no bus")
	}
	if o.client == nil {
		o.client = newHTTPClient()
	}
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	n := &Notifier{bus: bus, logs: bus, log: log, clock: o.clock}
	for _, w := range cfg.Webhooks {
		s, err := newSink(w, cfg, o.client, o.clock, log)
		if err != nil {
			return nil, err
		}
		n.sinks = append(n.sinks, s)
	}
	return n, nil
}

// Run consumes alerts and delivers them until ctx ends; call it once. An
// alert is acknowledged as soon as it is queued for each webhook it goes
// to, so nothing that publishes alerts ever waits on a webhook; alerts
// still queued when Run returns are not delivered. With no webhooks Run
// consumes nothing (leaving the alerts to servers that have some) and
// waits for ctx.
func (n *Notifier) Run(ctx context.Context) error {
	if len(n.sinks) == 0 {
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for _, s := range n.sinks {
			s.close()
		}
	}()
	for _, s := range n.sinks {
		wg.Go(func() { s.run(ctx) })
		s.log.Info("delivering alerts to webhook", zap.String("format", s.w.Format), zap.String("min_severity", s.w.MinSeverity))
	}
	stop, err := n.bus.Consume(ctx, events.ConsumerConfig{
		Stream:   events.StreamAlerts,
		Durable:  Durable,
		Subjects: []string{"spotwise.alerts.>"},
		// A first start begins with new alerts rather than replaying the
		// stream's 30 days; an existing durable carries on where it was.
		New: true,
	}, n.handle)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	defer stop()
	<-ctx.Done()
	return nil
}

// handle queues one alert for every webhook that wants it. It never waits
// on a webhook, and fails only when the Notifier is stopping, so that the
// alert is redelivered (to another server) rather than queued and lost.
func (n *Notifier) handle(ctx context.Context, m events.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a, ok := m.Payload.(*events.Alert)
	if !ok {
		// Poison: dropped (the bus logs and counts it, once) rather than
		// acknowledged as if it had been handled.
		n.ignored.Add(1)
		return events.Drop(fmt.Errorf("a %s event on %s, which carries alerts", m.Envelope.Type, m.Subject))
	}
	it := item{alert: *a, id: m.Envelope.ID, time: m.Envelope.Time, source: m.Envelope.Source, received: n.clock.Now(), logTail: n.logTail(ctx, a)}
	for _, s := range n.sinks {
		s.offer(it)
	}
	n.received.Add(1)
	return nil
}
