package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
)

// LogShipOptions bound what a LogShipper sends; zero values take the
// defaults.
type LogShipOptions struct {
	// FlushEvery is how long lines gather before a batch goes (wall time,
	// default 200 ms); a batch that fills (events.MaxLogBatchBytes or
	// events.MaxLogBatchLines) goes at once.
	FlushEvery time.Duration
	// Rate is how many lines per second (of the shipper's clock) an
	// attempt may ship on average, Burst how many at once (default 100
	// and 1000). Lines over it are dropped and counted.
	Rate  float64
	Burst int
	// BufferBytes bounds the text waiting to be sent or being sent
	// (default 1 MiB):
	// while the bus is slow or away, lines beyond it are dropped and
	// counted rather than held.
	BufferBytes int
	// Tries is how many times a batch is published before its lines are
	// given up (default 3).
	Tries int
}

func (o LogShipOptions) withDefaults() LogShipOptions {
	if o.FlushEvery <= 0 {
		o.FlushEvery = 200 * time.Millisecond
	}
	if o.Rate <= 0 {
		o.Rate = 100
	}
	if o.Burst <= 0 {
		o.Burst = 1000
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 1 << 20
	}
	if o.Tries <= 0 {
		o.Tries = 3
	}
	return o
}

// LogShipper ships one attempt's output to the log stream
// (events.LogSubject) in batches of lines, each line tagged with its
// stream and time. It never holds up the workload: a line is queued or,
// over the rate limit or the buffer's bound, dropped; a note in the
// output says how many were dropped and why. Lines longer than
// events.MaxLogLine are cut, and the cut is marked.
type LogShipper struct {
	pub     Reporter
	subject string
	head    events.LogBatch // job, attempt, instance, node
	idBase  string
	clock   clock.Clock
	o       LogShipOptions
	log     *zap.Logger

	mu       sync.Mutex
	queue    []events.LogLine
	bytes    int // text queued
	inflight int // text being published
	tokens   float64
	refilled time.Time
	dropRate int // lines dropped over the rate since the last note
	dropFull int // lines dropped since the last note for a full buffer, or not delivered
	accepted int64
	handled  int64
	waiters  []flushWaiter
	writers  []*lineWriter
	closed   bool
	seq      int64

	ctx     context.Context
	cancel  context.CancelFunc
	kick    chan struct{}
	now     chan struct{} // send without waiting the flush interval
	closing chan struct{}
	stopped chan struct{}
}

type flushWaiter struct {
	upTo int64
	ch   chan struct{}
}

// LogSource names where output comes from: its job's attempt, the
// instance and the node's rank.
type LogSource struct {
	JobID    string
	Attempt  int
	Instance string
	Node     int
}

// NewLogShipper starts shipping for one attempt through pub; Close ends
// it. clk times the lines and the rate limit.
func NewLogShipper(pub Reporter, src LogSource, clk clock.Clock, log *zap.Logger, o LogShipOptions) *LogShipper {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &LogShipper{
		pub: pub, subject: events.LogSubject(src.JobID, src.Attempt), clock: clk, o: o, log: log,
		head:   events.LogBatch{JobID: src.JobID, Attempt: src.Attempt, Instance: src.Instance, Node: src.Node},
		idBase: fmt.Sprintf("%s-a%d-n%d-log-%s-", src.JobID, src.Attempt, src.Node, nuid.Next()),
		tokens: float64(o.Burst), refilled: clk.Now(),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), now: make(chan struct{}, 1),
		closing: make(chan struct{}), stopped: make(chan struct{}),
	}
	go s.run()
	return s
}

// Line ships one line of output on stream (stdout or stderr; a line
// ending is not part of it).
func (s *LogShipper) Line(stream, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accept(stream, text, len(text))
}

// Writer is an io.Writer for one stream of the workload: it splits what
// is written into lines (at "\n", "\r\n" or a lone "\r", the way a
// progress bar redraws) and ships each. Its Write never blocks on the
// bus.
func (s *LogShipper) Writer(stream string) io.Writer {
	w := &lineWriter{s: s, stream: stream}
	s.mu.Lock()
	s.writers = append(s.writers, w)
	s.mu.Unlock()
	return w
}

// accept queues a line of total bytes (text holds its start), or counts
// it dropped. s.mu is held.
func (s *LogShipper) accept(stream, text string, total int) {
	if s.closed {
		return
	}
	now := s.clock.Now()
	switch el := now.Sub(s.refilled); {
	case el > 0:
		s.tokens = min(float64(s.o.Burst), s.tokens+el.Seconds()*s.o.Rate)
		s.refilled = now
	case el < 0: // the clock was set back: count from now
		s.refilled = now
	}
	switch {
	case s.tokens < 1:
		s.dropRate++
		return
	case s.bytes+s.inflight+min(total, events.MaxLogLine) > s.o.BufferBytes:
		s.dropFull++
		return
	}
	s.tokens--
	s.note(now)
	s.push(events.LogLine{Time: now, Stream: stream, Text: cut(text, total)})
}

// note queues the line that says how many lines were dropped since the
// last one, if any were. s.mu is held.
func (s *LogShipper) note(now time.Time) {
	if s.dropRate == 0 && s.dropFull == 0 {
		return
	}
	var text string
	switch {
	case s.dropFull == 0:
		text = fmt.Sprintf("spotwise: %d lines dropped: over the rate limit of %g lines/s", s.dropRate, s.o.Rate)
	case s.dropRate == 0:
		text = fmt.Sprintf("spotwise: %d lines dropped: they could not be sent in time (the bus was slow or away)", s.dropFull)
	default:
		text = fmt.Sprintf("spotwise: %d lines dropped: %d over the rate limit of %g lines/s, %d not sent in time (the bus was slow or away)",
			s.dropRate+s.dropFull, s.dropRate, s.o.Rate, s.dropFull)
	}
	s.dropRate, s.dropFull = 0, 0
	s.push(events.LogLine{Time: now, Stream: events.LogAgent, Text: text})
}

func (s *LogShipper) push(l events.LogLine) {
	s.queue = append(s.queue, l)
	s.bytes += len(l.Text)
	s.accepted++
	select {
	case s.kick <- struct{}{}:
	default:
	}
	if len(s.queue) >= events.MaxLogBatchLines || s.bytes >= events.MaxLogBatchBytes {
		select {
		case s.now <- struct{}{}:
		default:
		}
	}
}

// cut keeps at most events.MaxLogLine bytes of a line of total bytes
// (whole characters, valid UTF-8) and marks a cut.
func cut(text string, total int) string {
	if total <= events.MaxLogLine && utf8.ValidString(text) {
		return text
	}
	keep := text
	if len(keep) > events.MaxLogLine {
		keep = keep[:events.MaxLogLine]
		// Not half a character at the end.
		for i := 0; i < utf8.UTFMax && len(keep) > 0; i++ {
			if r, size := utf8.DecodeLastRuneInString(keep); r != utf8.RuneError || size > 1 {
				break
			}
			keep = keep[:len(keep)-1]
		}
	}
	keep = toValidUTF8(keep)
	if total > events.MaxLogLine {
		keep += fmt.Sprintf(" … [line cut: %d of %d bytes kept]", len(keep), total)
	}
	return keep
}

// toValidUTF8 replaces bytes that are not UTF-8, keeping the length:
// each by one "?", so a cut line stays within its bound.
func toValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			b = append(b, '?')
			i++
			continue
		}
		b = append(b, s[i:i+n]...)
		i += n
	}
	return string(b)
}

// run sends what is queued: once lines come, it lets them gather for
// FlushEvery (less when a batch fills or a flush is asked), then sends
// them all.
func (s *LogShipper) run() {
	defer close(s.stopped)
	for {
		select {
		case <-s.kick:
		case <-s.now:
		case <-s.closing:
			s.sendAll()
			return
		}
		t := time.NewTimer(s.o.FlushEvery)
		select {
		case <-t.C:
		case <-s.now:
		case <-s.closing:
		}
		t.Stop()
		s.sendAll()
	}
}

// sendAll publishes everything queued, batch by batch, with the note of
// lines dropped meanwhile last.
func (s *LogShipper) sendAll() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.note(s.clock.Now())
		}
		n, size := 0, 0
		for n < len(s.queue) && n < events.MaxLogBatchLines && (n == 0 || size+len(s.queue[n].Text) <= events.MaxLogBatchBytes) {
			size += len(s.queue[n].Text)
			n++
		}
		if n == 0 {
			s.release()
			s.mu.Unlock()
			return
		}
		batch := s.head
		batch.Lines = append([]events.LogLine(nil), s.queue[:n]...)
		s.queue = s.queue[n:]
		s.bytes -= size
		s.inflight = size
		s.seq++
		batch.Seq = s.seq
		s.mu.Unlock()

		if !s.publish(&batch) {
			s.mu.Lock()
			s.dropFull += n
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.inflight = 0
		s.handled += int64(n)
		s.release()
		s.mu.Unlock()
	}
}

// release wakes the flushes whose lines are all handled. s.mu is held.
func (s *LogShipper) release() {
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if s.handled >= w.upTo {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	s.waiters = kept
}

// publish sends one batch, trying again a few times; false when it gave
// up (the lines are counted as dropped).
func (s *LogShipper) publish(b *events.LogBatch) bool {
	id := s.idBase + fmt.Sprint(b.Seq)
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		err := s.pub.Publish(ctx, s.subject, b, events.WithID(id))
		cancel()
		if err == nil {
			return true
		}
		if try >= s.o.Tries || s.ctx.Err() != nil {
			s.log.Warn("job output not shipped; its lines are dropped", zap.Int("lines", len(b.Lines)), zap.Error(err))
			return false
		}
		t := time.NewTimer(time.Duration(try) * 200 * time.Millisecond)
		select {
		case <-s.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Flush sends what has been written so far (partial lines stay until
// their end comes) and returns once it is stored or given up, or ctx
// ends. The agent flushes before it reports the exit, so that the
// output's last lines are there when the job's end is.
func (s *LogShipper) Flush(ctx context.Context) error {
	s.mu.Lock()
	if s.handled >= s.accepted && s.dropRate == 0 && s.dropFull == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.dropRate > 0 || s.dropFull > 0 {
		s.note(s.clock.Now())
	}
	w := flushWaiter{upTo: s.accepted, ch: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	select {
	case s.now <- struct{}{}:
	default:
	}
	select {
	case <-w.ch:
		return nil
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ships the rest, partial lines included, and stops; what is not
// stored when ctx ends is given up. Nothing is published after Close
// returns.
func (s *LogShipper) Close(ctx context.Context) {
	s.mu.Lock()
	writers := s.writers
	s.mu.Unlock()
	for _, w := range writers { // the locks in Write's order
		w.mu.Lock()
		s.mu.Lock()
		w.endLine(false)
		s.mu.Unlock()
		w.mu.Unlock()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.stopped
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.closing)
	select {
	case <-s.stopped:
	case <-ctx.Done():
		s.cancel()
		<-s.stopped
	}
	s.cancel()
}

// lineWriter splits one stream's bytes into lines.
type lineWriter struct {
	s      *LogShipper
	stream string
	mu     sync.Mutex
	buf    []byte // the current line's start (a byte past the bound at most)
	total  int    // the current line's length, what buf does not hold included
	cr     bool   // the last line ended with "\r" (a "\n" next ends nothing)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if w.cr && p[0] == '\n' { // the rest of a "\r\n"
			p = p[1:]
		}
		w.cr = false
		i := bytes.IndexAny(p, "\r\n")
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if room := events.MaxLogLine + 1 - len(w.buf); room > 0 {
			w.buf = append(w.buf, seg[:min(room, len(seg))]...)
		}
		w.total += len(seg)
		if i < 0 {
			break
		}
		// A blank line is output too; a "\r" that ends nothing is only a
		// progress bar's redraw.
		w.endLine(p[i] == '\n')
		w.cr = p[i] == '\r'
		p = p[i+1:]
	}
	return n, nil
}

// endLine ships the line gathered so far, if any (or, with blank, an
// empty one). Both locks are held.
func (w *lineWriter) endLine(blank bool) {
	if w.total == 0 && !blank {
		return
	}
	w.s.accept(w.stream, string(w.buf), w.total)
	w.buf, w.total = w.buf[:0], 0
}
