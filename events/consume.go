package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Message is one decoded event delivered to a consumer.
type Message struct {
	Subject   string
	Envelope  Envelope
	Payload   Payload
	Delivered uint64
}

// Handler handles one event. Returning an error asks for redelivery after
// a delay (a transient failure: the store did not answer); an error made
// with Drop, a *DecodeError (what the handler read to act on the message,
// a job record, is garbled: it will be the next time too), a panic, or a
// payload of the wrong type ends the message for good: it is terminated,
// logged once with its subject and reason, and counted. Handlers must be
// idempotent, since JetStream delivers at least once.
type Handler func(ctx context.Context, m Message) error

// Drop marks a handler error that redelivery cannot fix (the message is
// wrong, not the moment): the consumer terminates the message.
func Drop(err error) error { return &dropError{err} }

type dropError struct{ err error }

func (e *dropError) Error() string { return e.err.Error() }
func (e *dropError) Unwrap() error { return e.err }

// IsDrop reports whether err was made with Drop.
func IsDrop(err error) bool {
	var d *dropError
	return errors.As(err, &d)
}

// Typed adapts a handler of one payload type. A message of any other type
// on its subjects (a well-formed event sent to the wrong place) is dropped,
// never handed over.
func Typed[T Payload](h func(ctx context.Context, m Message, p T) error) Handler {
	return func(ctx context.Context, m Message) error {
		p, ok := m.Payload.(T)
		if !ok {
			var want T
			return Drop(fmt.Errorf("a %s event on %s, which carries %s events", m.Envelope.Type, m.Subject, want.EventType()))
		}
		return h(ctx, m, p)
	}
}

// safely runs a handler, turning a panic into a dropped message.
func safely(ctx context.Context, h Handler, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Drop(fmt.Errorf("handler panicked: %v", r))
		}
	}()
	return h(ctx, m)
}

// ConsumerConfig names a durable consumer and what it reads.
type ConsumerConfig struct {
	Stream   string
	Durable  string
	Subjects []string
	// LastPerSubject starts a new consumer at the last message of each
	// subject (the current price book) instead of the beginning.
	LastPerSubject bool
	// New starts a new consumer at messages published after it exists.
	New        bool
	AckWait    time.Duration
	MaxDeliver int
	// Workers handles up to this many messages at once (default 1: in
	// order). Use it where messages are independent and latency matters,
	// such as interruption notices arriving in a storm.
	Workers int
	// Key, with Workers, keeps the messages of one key in order: each key
	// has one of Workers lanes, which handles its messages one at a time
	// in the order they came (a job's reports: started before exited),
	// while other keys' messages go on beside them.
	Key func(subject string, p Payload) string
}

// Consume runs h for every message of a durable consumer until ctx ends or
// the returned stop function is called; stop returns once no handler runs. A message that cannot be decoded
// is logged, counted and terminated (never redelivered); a message whose
// handler fails is redelivered with backoff up to MaxDeliver times.
func (b *Bus) Consume(ctx context.Context, cc ConsumerConfig, h Handler) (stop func(), err error) {
	ackWait := cc.AckWait
	if ackWait == 0 {
		ackWait = 30 * time.Second
	}
	maxDeliver := cc.MaxDeliver
	if maxDeliver == 0 {
		maxDeliver = 20
	}
	conf := jetstream.ConsumerConfig{
		Durable:        cc.Durable,
		FilterSubjects: cc.Subjects,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     maxDeliver,
		MaxAckPending:  4096,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	switch {
	case cc.LastPerSubject:
		conf.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	case cc.New:
		conf.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	cons, err := b.js.CreateOrUpdateConsumer(ctx, cc.Stream, conf)
	if err != nil && errors.Is(err, jetstream.ErrConsumerExists) {
		cons, err = b.js.Consumer(ctx, cc.Stream, cc.Durable)
	}
	if err != nil {
		// An existing durable whose deliver policy differs cannot be
		// updated; the durable's position is what matters, so reuse it.
		if c2, err2 := b.js.Consumer(ctx, cc.Stream, cc.Durable); err2 == nil {
			cons, err = c2, nil
		} else {
			return nil, fmt.Errorf("consumer %s on %s: %w", cc.Durable, cc.Stream, err)
		}
	}
	log := b.log.With(zap.String("consumer", cc.Durable))
	cctx, cancel := context.WithCancel(ctx)
	// inflight tracks handlers under way, so that stop returns only once
	// none runs: a caller tearing down what handlers use (the scheduler's
	// worker pool, a test's cloud) must not race the last of them.
	var inflight gate
	var run func(msg jetstream.Msg, env Envelope, p Payload)
	handle := func(msg jetstream.Msg) {
		defer inflight.leave()
		env, p, err := Decode(msg.Data())
		if err != nil {
			b.drop(cc.Durable, "garbled")
			log.Warn("dropping garbled event", zap.String("subject", msg.Subject()), zap.Error(err))
			_ = msg.Term()
			return
		}
		run(msg, env, p)
	}
	run = func(msg jetstream.Msg, env Envelope, p Payload) {
		meta, _ := msg.Metadata()
		var delivered uint64
		if meta != nil {
			delivered = meta.NumDelivered
		}
		if err := safely(cctx, h, Message{Subject: msg.Subject(), Envelope: env, Payload: p, Delivered: delivered}); err != nil {
			switch {
			case IsDrop(err) || IsDecodeError(err):
				b.drop(cc.Durable, "refused")
				log.Warn("dropping event", zap.String("subject", msg.Subject()), zap.String("event", env.ID), zap.String("type", env.Type), zap.Error(err))
				_ = msg.Term()
				return
			case cctx.Err() != nil:
				_ = msg.Nak()
				return
			case int(delivered) >= maxDeliver:
				b.drop(cc.Durable, "gave-up")
				log.Error("giving up on event", zap.String("subject", msg.Subject()), zap.String("event", env.ID), zap.Uint64("delivered", delivered), zap.Error(err))
				_ = msg.Term()
				return
			}
			delay := min(time.Duration(1<<min(delivered, 6))*100*time.Millisecond, 10*time.Second)
			log.Warn("event handler failed; will retry", zap.String("subject", msg.Subject()), zap.String("event", env.ID), zap.Duration("retry_in", delay), zap.Error(err))
			_ = msg.NakWithDelay(delay)
			return
		}
		_ = msg.Ack()
	}
	deliver := func(msg jetstream.Msg) {
		if !inflight.enter() {
			return // stopping; not acked, so redelivered to whoever consumes next
		}
		handle(msg)
	}
	var lanesDone func()
	switch {
	case cc.Workers > 1 && cc.Key != nil:
		deliver, lanesDone = inLanes(cc.Workers, cc.Key, &inflight, func(msg jetstream.Msg) (Envelope, Payload, bool) {
			env, p, err := Decode(msg.Data())
			if err != nil {
				b.drop(cc.Durable, "garbled")
				log.Warn("dropping garbled event", zap.String("subject", msg.Subject()), zap.Error(err))
				_ = msg.Term()
				return env, nil, false
			}
			return env, p, true
		}, run)
	case cc.Workers > 1:
		sem := make(chan struct{}, cc.Workers)
		deliver = func(msg jetstream.Msg) {
			if !inflight.enter() {
				return
			}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				handle(msg)
			}()
		}
	}
	cc2, err := cons.Consume(deliver, jetstream.PullMaxMessages(256), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if cctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			log.Debug("consumer error", zap.Error(err))
		}
	}))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("consuming %s: %w", cc.Durable, err)
	}
	stopAll := func() {
		cc2.Stop()
	}
	halt := inflight.stopper(cctx, b.reading(Reading{Kind: "consume", Name: cc.Durable, Stream: cc.Stream, Subjects: cc.Subjects}, cancel), stopAll)
	if lanesDone == nil {
		return halt, nil
	}
	// The lanes end once nothing can enter them: after the gate closed.
	var once sync.Once
	end := func() { halt(); once.Do(lanesDone) }
	go func() {
		<-cctx.Done()
		end()
	}()
	return end, nil
}

// inLanes returns a deliver function that hands each message to the lane
// of its key (decoded first, to find the key; a message that does not
// decode is dealt with by decode and goes nowhere) and a function that
// ends the lanes, to be called once no message can enter (the gate is
// closed and empty). Each lane handles its messages one at a time, in
// order; a full lane holds the delivery back.
func inLanes(n int, key func(string, Payload) string, inflight *gate, decode func(jetstream.Msg) (Envelope, Payload, bool), run func(jetstream.Msg, Envelope, Payload)) (deliver func(jetstream.Msg), done func()) {
	type item struct {
		msg jetstream.Msg
		env Envelope
		p   Payload
	}
	lanes := make([]chan item, n)
	for i := range lanes {
		lanes[i] = make(chan item, 64)
		go func() {
			for it := range lanes[i] {
				func() {
					defer inflight.leave()
					run(it.msg, it.env, it.p)
				}()
			}
		}()
	}
	deliver = func(msg jetstream.Msg) {
		if !inflight.enter() {
			return
		}
		env, p, ok := decode(msg)
		if !ok {
			inflight.leave()
			return
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(key(msg.Subject(), p)))
		lanes[h.Sum32()%uint32(n)] <- item{msg, env, p}
	}
	done = func() {
		for _, l := range lanes {
			close(l)
		}
	}
	return deliver, done
}

// Reading is one subscription the bus runs for a consumer: a durable
// consumer (Consume), an ordered consumer of a stream (Follow), or a
// request subject (Serve, Answer).
type Reading struct {
	// Kind is consume, follow, serve or answer.
	Kind string
	// Name is what the reading's drops are counted under
	// (DropKey.Consumer): the durable, the stream followed, or the
	// subject.
	Name   string
	Stream string
	// Subjects are its subjects, wildcards and all.
	Subjects []string
}

// Readings lists what the bus's consumers read now, in a stable order:
// for operators, and for tests that must reach every consumer.
func (b *Bus) Readings() []Reading {
	b.readMu.Lock()
	defer b.readMu.Unlock()
	out := make([]Reading, 0, len(b.reads))
	for _, r := range b.reads {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y Reading) int {
		return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name), cmp.Compare(strings.Join(x.Subjects, " "), strings.Join(y.Subjects, " ")))
	})
	return out
}

// reading records r until the returned function (stop, which it calls
// first) runs.
func (b *Bus) reading(r Reading, stop func()) func() {
	r.Subjects = slices.Clone(r.Subjects)
	b = b.rootBus()
	b.readMu.Lock()
	defer b.readMu.Unlock()
	if b.reads == nil {
		b.reads = map[int]Reading{}
	}
	b.readSeq++
	id := b.readSeq
	b.reads[id] = r
	return func() {
		stop()
		b.readMu.Lock()
		defer b.readMu.Unlock()
		delete(b.reads, id)
	}
}

// Responder answers one request; it returns the reply's bytes.
type Responder func(ctx context.Context, data []byte) []byte

// Serve answers requests on subject in the API queue group until the
// returned stop function is called. A responder that panics (a request
// nobody foresaw) answers ErrorReply, and the request is counted as
// dropped under its subject: one hostile request must not take the
// process down.
func (b *Bus) Serve(subject string, r Responder) (stop func(), err error) {
	sub, err := b.nc.QueueSubscribe(subject, APIQueue, func(m *nats.Msg) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx = context.WithValue(ctx, subjectKey{}, subject)
		if len(m.Header) > 0 {
			ctx = context.WithValue(ctx, headerKey{}, m.Header)
		}
		reply, ok := b.recovered(subject, func() []byte { return r(ctx, m.Data) })
		if !ok {
			reply = ErrorReply
		}
		if m.Reply != "" {
			if err := m.Respond(reply); err != nil {
				b.log.Warn("answering request", zap.String("subject", subject), zap.Error(err))
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("serving %s: %w", subject, err)
	}
	return b.reading(Reading{Kind: "serve", Name: subject, Subjects: []string{subject}}, func() { _ = sub.Unsubscribe() }), nil
}

type headerKey struct{}

type subjectKey struct{}

// RequestSubject is the subject of the request a Responder answers.
func RequestSubject(ctx context.Context) string {
	s, _ := ctx.Value(subjectKey{}).(string)
	return s
}

// RequestHeader is a header of the request a Responder answers ("" when
// it has none).
func RequestHeader(ctx context.Context, name string) string {
	h, _ := ctx.Value(headerKey{}).(nats.Header)
	return h.Get(name)
}

// RequestWithHeader sends a request with headers (an Authorization
// token) and waits for the reply.
func (b *Bus) RequestWithHeader(ctx context.Context, subject string, data []byte, header map[string]string) ([]byte, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range header {
		msg.Header.Set(k, v)
	}
	m, err := b.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	return m.Data, nil
}

// ErrNoResponders: nobody listens on a request's subject (yet).
var ErrNoResponders = nats.ErrNoResponders

// Request sends a request and waits for the reply.
func (b *Bus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	m, err := b.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	return m.Data, nil
}

// Follow delivers the messages of a stream's subjects to h from an
// ephemeral ordered consumer until ctx ends or stop is called (it returns
// once h no longer runs): with lastPerSubject, starting at the newest
// message of each subject, which is how the current price book is rebuilt
// at start. Handler errors are logged (there is no redelivery). A message
// that is garbled or that the handler drops is counted and deleted from
// the stream: an ordered consumer acknowledges nothing, so otherwise every
// later follower starting from the last message of its subject would meet
// the poison again.
func (b *Bus) Follow(ctx context.Context, stream string, subjects []string, lastPerSubject bool, h Handler) (stop func(), err error) {
	return b.follow(ctx, stream, subjects, lastPerSubject, true, h)
}

// Read is Follow for a reader beside the stream's owner (the dashboard's
// view of the prices the scheduler follows): a message it cannot use is
// skipped, neither counted nor deleted, which is the owner's to do.
func (b *Bus) Read(ctx context.Context, stream string, subjects []string, lastPerSubject bool, h Handler) (stop func(), err error) {
	return b.follow(ctx, stream, subjects, lastPerSubject, false, h)
}

func (b *Bus) follow(ctx context.Context, stream string, subjects []string, lastPerSubject, owner bool, h Handler) (stop func(), err error) {
	conf := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverNewPolicy}
	if lastPerSubject {
		conf.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	}
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("following %s: %w", stream, err)
	}
	cons, err := st.OrderedConsumer(ctx, conf)
	if err != nil {
		return nil, fmt.Errorf("following %s: %w", stream, err)
	}
	log := b.log.With(zap.String("stream", stream))
	cctx, cancel := context.WithCancel(ctx)
	var inflight gate
	remove := func(msg jetstream.Msg) {
		// Not cut short by stop (which waits for it): a deletion cancelled
		// in flight may land after the next follower chose where to start,
		// at the message deleted, and that follower would get nothing.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(cctx), 5*time.Second)
		defer dcancel()
		meta, err := msg.Metadata()
		if err == nil {
			err = st.DeleteMsg(dctx, meta.Sequence.Stream)
		}
		if err != nil {
			log.Warn("deleting a dropped event from the stream", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if !inflight.enter() {
			return
		}
		defer inflight.leave()
		env, p, err := Decode(msg.Data())
		if err != nil && !owner {
			return
		}
		if err != nil {
			b.drop(stream, "garbled")
			log.Warn("dropping garbled event", zap.String("subject", msg.Subject()), zap.Error(err))
			remove(msg)
			return
		}
		if err := safely(cctx, h, Message{Subject: msg.Subject(), Envelope: env, Payload: p, Delivered: 1}); err != nil {
			if !owner {
				return
			}
			if IsDrop(err) || IsDecodeError(err) {
				b.drop(stream, "refused")
				log.Warn("dropping event", zap.String("subject", msg.Subject()), zap.String("event", env.ID), zap.String("type", env.Type), zap.Error(err))
				remove(msg)
				return
			}
			log.Warn("event handler failed", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("following %s: %w", stream, err)
	}
	stopReading := cancel
	if owner {
		// Readings lists the owners: what drops a stream's poison.
		stopReading = b.reading(Reading{Kind: "follow", Name: stream, Stream: stream, Subjects: subjects}, cancel)
	}
	return inflight.stopper(cctx, stopReading, cc.Stop), nil
}

// ErrorReply is what Serve answers when its responder panics: an API
// error (the shape of the job API's replies), saying nothing of the cause.
var ErrorReply = []byte(`{"error":{"code":"internal","message":"the request could not be handled"}}`)

// recovered runs fn, turning a panic into a drop of the request on
// subject (logged, counted); ok is false if it panicked.
func (b *Bus) recovered(subject string, fn func() []byte) (reply []byte, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			b.drop(subject, "refused")
			b.log.Error("request handler panicked; dropping the request", zap.String("subject", subject), zap.Any("panic", r))
			reply, ok = nil, false
		}
	}()
	return fn(), true
}

// Answer replies to requests on subject (no queue group: every subscriber
// sees every request) until stop is called. fn returns the reply and
// whether to send one; a subscriber that returns false stays silent, so
// the requester hears from the one it addressed (the agent of a given
// attempt, say). An fn that panics stays silent too, and the request is
// counted as dropped. A request sent once Answer has returned reaches
// fn, whatever connection it comes on.
func (b *Bus) Answer(subject string, fn func(data []byte) ([]byte, bool)) (stop func(), err error) {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) {
		var ok bool
		reply, done := b.recovered(subject, func() []byte {
			var r []byte
			r, ok = fn(m.Data)
			return r
		})
		if done && ok && m.Reply != "" {
			if err := m.Respond(reply); err != nil {
				b.log.Warn("answering request", zap.String("subject", subject), zap.Error(err))
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	// Once Answer returns, the server knows the subscription: a request
	// sent then, on any connection, reaches it.
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	return b.reading(Reading{Kind: "answer", Name: subject, Subjects: []string{subject}}, func() { _ = sub.Unsubscribe() }), nil
}

// RequestEvent sends an event as a core NATS request (not stored) and
// waits for the reply.
func (b *Bus) RequestEvent(ctx context.Context, subject string, p Payload) ([]byte, error) {
	data, err := Encode(p, "", b.source, b.clock.Now())
	if err != nil {
		return nil, err
	}
	return b.Request(ctx, subject, data)
}

// gate counts the handlers under way and, once closed, admits no more;
// close waits for those under way to leave.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n      int
	closed bool
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.cond != nil {
		g.cond.Broadcast()
	}
}

// stopper returns the stop function of a consumption: it ends it
// (cancel, then stop) and waits for the handlers under way; ctx ending
// does the same.
func (g *gate) stopper(ctx context.Context, cancel, stop func()) func() {
	var once sync.Once
	halt := func() {
		once.Do(func() {
			cancel()
			stop()
			g.close()
		})
	}
	go func() {
		<-ctx.Done()
		halt()
	}()
	return halt
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.cond.Wait()
	}
}
