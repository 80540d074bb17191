package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// Defaults of the event streams (WithStreams changes them).
const (
	// DefaultMaxStreams is how many event streams a server keeps open at
	// once; one more is answered 429.
	DefaultMaxStreams = 1000
	// DefaultStreamBuffer is how many events may wait for one slow client
	// before it is dropped.
	DefaultStreamBuffer = 256
	// DefaultKeepalive is how often an idle stream sends a comment, so
	// that proxies and clients see it alive.
	DefaultKeepalive = 15 * time.Second
)

// StreamOptions tunes the event streams.
type StreamOptions struct {
	// Max is the number of streams open at once (0: DefaultMaxStreams).
	Max int
	// Buffer is the events queued per client (0: DefaultStreamBuffer).
	Buffer int
	// Keepalive is the interval of keepalive comments (0:
	// DefaultKeepalive).
	Keepalive time.Duration
	// WriteTimeout bounds one write to a client (0: 10 s): a client that
	// does not read is let go.
	WriteTimeout time.Duration
	// EndGrace is how long a job's stream waits, once the job's record is
	// finished, for the history event that says so (0: 2 s).
	EndGrace time.Duration
	// ResumeLimit is how many missed events a resumed GET /v1/events
	// sends, the newest (0: 1000); a "gap" event says how many more it
	// missed.
	ResumeLimit int
}

// WithStreams sets the event streams' limits.
func (s *Service) WithStreams(o StreamOptions) *Service {
	s.hub.opts = o.withDefaults()
	return s
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Max <= 0 {
		o.Max = DefaultMaxStreams
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultStreamBuffer
	}
	if o.Keepalive <= 0 {
		o.Keepalive = DefaultKeepalive
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.EndGrace <= 0 {
		o.EndGrace = 2 * time.Second
	}
	if o.ResumeLimit <= 0 {
		o.ResumeLimit = 1000
	}
	return o
}

// hub fans the job events of one shared consumer out to every stream open
// on this server (and to the history cache): a dashboard with many tabs
// costs one consumer, not one per tab. It never waits for a client: each has a bounded queue, and a
// client whose queue is full is dropped (told why, by its own goroutine).
type hub struct {
	svc  *Service
	opts StreamOptions

	startMu sync.Mutex // held while the shared consumer starts
	mu      sync.Mutex
	life    context.Context // the service's; set by Start
	stop    func()          // the consumer's; nil until Start or the first stream
	subs    map[*watcher]struct{}
	open    int
	closing bool
}

// watcher is one open stream.
type watcher struct {
	jobID string // "" for every job the filter lets through
	// teams, when set, are the only teams whose jobs the stream shows
	// (known here from the index; a job the index does not know yet is
	// passed on for the stream to look up).
	teams map[string]bool
	ch    chan watchItem
	gone  chan struct{} // closed when the hub lets the stream go
	why   string        // endSlow or endShutdown, set before gone closes
}

// watchItem is a job event, or (rec set, or deleted) a change to the
// record of the job a stream follows.
type watchItem struct {
	entry   events.HistoryEntry
	team    string // the job's team when the index knew it
	rec     *job.Record
	deleted bool
}

// Why a stream ended (StreamEnd.Reason).
const (
	EndFinished = "finished"
	EndDeleted  = "deleted"
	EndSlow     = "slow"
	EndShutdown = "shutdown"
)

var (
	errTooManyStreams = errors.New("too many event streams open on this server")
	errHubClosed      = errors.New("the server is shutting down")
)

func newHub(s *Service) *hub {
	return &hub{svc: s, opts: StreamOptions{}.withDefaults(), subs: map[*watcher]struct{}{}}
}

// setLife ties the shared consumer to the service's lifetime.
func (h *hub) setLife(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.life = ctx
	go func() {
		<-ctx.Done()
		h.Close()
	}()
}

// add registers a stream; the shared consumer is running when it returns,
// so every event stored from then on reaches the stream.
func (h *hub) add(w *watcher) error {
	if err := h.ensureConsumer(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closing:
		return errHubClosed
	case h.open >= h.opts.Max:
		return errTooManyStreams
	}
	w.ch = make(chan watchItem, h.opts.Buffer)
	w.gone = make(chan struct{})
	h.subs[w] = struct{}{}
	h.open++
	return nil
}

// ensureConsumer starts the shared consumer if it does not run. It is
// created without h.mu held: the index waits on h.mu (recordChanged)
// with its own lock held, and must not wait on NATS.
func (h *hub) ensureConsumer() error {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	h.mu.Lock()
	running, closing, life := h.stop != nil, h.closing, h.life
	h.mu.Unlock()
	switch {
	case closing:
		return errHubClosed
	case running:
		return nil
	}
	if life == nil {
		life = context.Background()
	}
	var stop func()
	var err error
	if p := h.svc.pages; p != nil {
		// From the first event stored, for the local copy of job pages;
		// the cache and the streams get what is stored from now on.
		stop, err = h.svc.bus.ReplayJobEvents(life, func(e events.HistoryEntry, old bool) {
			p.observe(e)
			if !old {
				h.deliver(e)
			}
		}, p.caughtUp)
	} else {
		stop, err = h.svc.bus.FollowJobEvents(life, h.deliver)
	}
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		// Closed meanwhile: Close found no consumer to stop.
		go stop()
		return errHubClosed
	}
	h.stop = stop
	return nil
}

// remove unregisters a stream (it ended, or its client left).
func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[w]; ok {
		delete(h.subs, w)
		h.open--
	}
}

// deliver hands one stored event to the history cache and to the streams
// that want it. It runs on the consumer's goroutine and never blocks.
func (h *hub) deliver(e events.HistoryEntry) {
	h.svc.hist.observe(e)
	h.mu.Lock()
	none := len(h.subs) == 0
	h.mu.Unlock()
	if none {
		return
	}
	// The team is looked up before the hub's lock is taken: the index
	// calls into the hub with its own lock held.
	team, known := h.svc.ix.teamOf(e.Event.JobID)
	it := watchItem{entry: e, team: team}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs {
		if w.jobID != "" && w.jobID != e.Event.JobID {
			continue
		}
		if w.teams != nil && known && !w.teams[team] {
			continue
		}
		h.send(w, it)
	}
}

// recordChanged tells the streams following a job that its record
// changed (nil: it was deleted). It runs with the index's lock held.
func (h *hub) recordChanged(id string, r *job.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs {
		if w.jobID == id {
			h.send(w, watchItem{rec: r, deleted: r == nil})
		}
	}
}

// send queues an item for a stream, or lets the stream go if its queue is
// full. h.mu is held.
func (h *hub) send(w *watcher, it watchItem) {
	select {
	case w.ch <- it:
	default:
		h.svc.log.Info("dropping a slow event stream", zap.String("job", w.jobID))
		h.letGo(w, EndSlow)
	}
}

// letGo ends a stream from the hub's side. h.mu is held.
func (h *hub) letGo(w *watcher, why string) {
	if _, ok := h.subs[w]; !ok {
		return
	}
	delete(h.subs, w)
	h.open--
	w.why = why
	close(w.gone)
}

// Close ends every stream (each tells its client the server is shutting
// down) and the shared consumer; new streams are refused.
func (h *hub) Close() {
	h.mu.Lock()
	h.closing = true
	for w := range h.subs {
		h.letGo(w, EndShutdown)
	}
	stop := h.stop
	h.stop = nil
	h.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// CloseStreams ends the event streams open on this server, telling each
// client the server is shutting down: http.Server.Shutdown waits for
// requests to finish, and a stream would not on its own. Mount it with
// http.Server.RegisterOnShutdown.
func (s *Service) CloseStreams() { s.hub.Close() }

// OpenStreams is how many event streams are open on this server.
func (s *Service) OpenStreams() int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.hub.open
}
