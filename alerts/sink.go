package alerts

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
)

// KindSuppressed is the kind of the alert that says how many alerts a
// webhook's rate limit dropped.
const KindSuppressed = "alerts-suppressed"

// sink is one webhook: its filter, de-duplication and rate limit (applied
// on the consumer's path, in memory, never waiting), its bounded queue,
// and the worker that empties the queue over HTTP.
type sink struct {
	w       Webhook // with defaults
	minRank int
	render  renderer
	headers http.Header
	client  *http.Client
	clock   clock.Clock
	log     *zap.Logger
	retry   Retry
	ratePer time.Duration
	redact  func(string) string
	wake    chan struct{}

	mu          sync.Mutex
	queue       ring
	overflowing bool // a drop was logged since the queue was last empty
	dedupe      *dedupe
	bucket      *bucket
	supp        suppressed
	summary     clock.Timer // armed while alerts are being suppressed
	lastSummary time.Time
	closed      bool

	sent, failed, retried, deduped, limited, dropped, filtered atomic.Int64
}

func newSink(w Webhook, cfg Config, client *http.Client, clk clock.Clock, log *zap.Logger) (*sink, error) {
	render, err := newRenderer(w)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	headers.Set("Content-Type", "application/json")
	headers.Set("User-Agent", "spotwise-alerts")
	for k, v := range w.Headers {
		headers.Set(k, v)
	}
	return &sink{
		w:       w,
		minRank: severityRank[w.MinSeverity],
		render:  render,
		headers: headers,
		client:  client,
		clock:   clk,
		log:     log.With(zap.String("webhook", w.Name), zap.String("host", hostOf(w.URL))),
		retry:   cfg.Retry,
		ratePer: cfg.RateLimit.Per,
		redact:  redactor(w),
		wake:    make(chan struct{}, 1),
		queue:   ring{buf: make([]item, cfg.QueueSize)},
		dedupe:  newDedupe(cfg.DedupeWindow),
		bucket:  newBucket(cfg.RateLimit, clk.Now()),
	}, nil
}

// offer decides whether an alert goes to this webhook and queues it. It is
// called on the consumer's path: it takes a short lock and never waits.
func (s *sink) offer(it item) {
	a := &it.alert
	if severityRank[a.Severity] < s.minRank {
		s.filtered.Add(1)
		return
	}
	now := s.clock.Now()
	key := dedupeKey(a)
	s.mu.Lock()
	if s.dedupe.duplicate(key, now) {
		s.mu.Unlock()
		s.deduped.Add(1)
		s.log.Debug("duplicate alert not sent", alertFields(it)...)
		return
	}
	// A resolution is let through the rate limit: it ends an alert that
	// was, or might have been, sent, and there is at most one per alert.
	if !a.Resolved && !s.bucket.take(now) {
		s.supp.add(a, now)
		s.armSummary(now)
		s.mu.Unlock()
		s.limited.Add(1)
		s.log.Debug("alert dropped by the rate limit", alertFields(it)...)
		return
	}
	// Only what is let through counts for de-duplication: an alert the
	// rate limit dropped may be sent when it repeats.
	s.dedupe.record(key, now)
	s.enqueue(it)
	s.mu.Unlock()
	s.signal()
}

// enqueue adds it to the queue, dropping the oldest alert when the queue is
// full; called with mu held.
func (s *sink) enqueue(it item) {
	if old, ok := s.queue.push(it); ok {
		s.dropped.Add(1)
		if !s.overflowing {
			s.overflowing = true
			s.log.Warn("alert queue full: dropping the oldest alerts until the webhook catches up",
				append(alertFields(old), zap.Int("queue_size", len(s.queue.buf)))...)
		}
	}
}

func (s *sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// armSummary schedules the "N alerts suppressed" alert for when the
// webhook may send again, and no sooner than a rate period after the last
// one; called with mu held.
func (s *sink) armSummary(now time.Time) {
	if s.summary != nil || s.closed {
		return
	}
	wait := s.bucket.untilToken(now)
	if !s.lastSummary.IsZero() {
		wait = max(wait, s.lastSummary.Add(s.ratePer).Sub(now))
	}
	s.summary = s.clock.AfterFunc(wait, s.sendSummary)
}

// sendSummary queues one alert saying how many were suppressed. It does
// not spend a token: it replaces the alerts it counts, and there is at most
// one per rate period.
func (s *sink) sendSummary() {
	s.mu.Lock()
	s.summary = nil
	if s.closed || s.supp.count == 0 {
		s.mu.Unlock()
		return
	}
	now := s.clock.Now()
	sp := s.supp
	s.supp = suppressed{}
	s.lastSummary = now
	noun := "alerts"
	if sp.count == 1 {
		noun = "alert"
	}
	kinds := slices.SortedFunc(maps.Keys(sp.kinds), func(a, b string) int {
		if d := sp.kinds[b] - sp.kinds[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var byKind []string
	for _, k := range kinds {
		byKind = append(byKind, fmt.Sprintf("%s: %d", k, sp.kinds[k]))
	}
	s.enqueue(item{
		alert: events.Alert{
			Severity: sp.severity,
			Kind:     KindSuppressed,
			Summary:  fmt.Sprintf("%d %s suppressed by the rate limit of webhook %s", sp.count, noun, s.w.Name),
			Details: map[string]string{
				"suppressed": fmt.Sprint(sp.count),
				"since":      sp.since.UTC().Format(time.RFC3339),
				"kinds":      strings.Join(byKind, ", "),
			},
		},
		time:     now,
		source:   "spotwise-alerts",
		received: now,
	})
	s.mu.Unlock()
	s.log.Info("rate limit reopened: sending the suppressed-alerts summary", zap.Int("suppressed", sp.count))
	s.signal()
}

func (s *sink) pop() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.queue.pop()
	if !ok {
		s.overflowing = false
	}
	return it, ok
}

// run delivers queued alerts, one at a time and in order, until ctx ends.
func (s *sink) run(ctx context.Context) {
	for {
		it, ok := s.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		s.deliver(ctx, it)
		if ctx.Err() != nil {
			return
		}
	}
}

// close stops the summary timer; what is still queued is not delivered.
func (s *sink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.summary != nil {
		s.summary.Stop()
		s.summary = nil
	}
	if n := s.queue.n; n > 0 {
		s.log.Warn("stopping with alerts not delivered", zap.Int("queued", n))
	}
}

func (s *sink) stats() WebhookStats {
	s.mu.Lock()
	queued := s.queue.n
	s.mu.Unlock()
	return WebhookStats{
		Sent: s.sent.Load(), Failed: s.failed.Load(), Retried: s.retried.Load(),
		Deduplicated: s.deduped.Load(), RateLimited: s.limited.Load(), Dropped: s.dropped.Load(),
		Filtered: s.filtered.Load(), Queued: queued,
	}
}

// ring is a fixed-size FIFO that makes room by dropping its oldest item.
type ring struct {
	buf     []item
	head, n int
}

// push appends it; when the ring is full it first removes the oldest item
// and returns it.
func (r *ring) push(it item) (dropped item, ok bool) {
	if r.n == len(r.buf) {
		dropped, ok = r.pop()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = it
	r.n++
	return dropped, ok
}

func (r *ring) pop() (item, bool) {
	if r.n == 0 {
		return item{}, false
	}
	it := r.buf[r.head]
	r.buf[r.head] = item{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return it, true
}

// alertFields are the log fields naming an alert: never its details,
// which may carry anything.
func alertFields(it item) []zap.Field {
	fs := []zap.Field{zap.String("kind", it.alert.Kind), zap.String("severity", it.alert.Severity)}
	if it.alert.JobID != "" {
		fs = append(fs, zap.String("job", it.alert.JobID))
	}
	if it.id != "" {
		fs = append(fs, zap.String("event", it.id))
	}
	return fs
}
