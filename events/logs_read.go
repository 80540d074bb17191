package events

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// LogQuery selects lines of a job's output.
type LogQuery struct {
	// Attempt is one attempt's output; 0 is every attempt's, in the order
	// it was stored.
	Attempt int
	// After is where to go on from (a page's Next); zero is the start.
	After LogCursor
	// Since keeps only lines at or after this time (zero: all).
	Since time.Time
	// Limit is the most lines a page holds (default and cap
	// MaxLogPageLines); MaxBytes the most text (default and cap
	// MaxLogPageBytes; a page holds one line at least).
	Limit    int
	MaxBytes int
}

// Bounds of one read: a page holds at most MaxLogPageLines lines and
// MaxLogPageBytes of text, and reads at most MaxLogPageMessages batches to
// fill them (a page cut short by any says More, and its Next goes on from
// there). A tail holds as many lines, and as much text, at most.
const (
	MaxLogPageLines    = 5000
	MaxLogPageBytes    = 4 << 20
	MaxLogPageMessages = 2048
)

// LogPage is a page of a job's output.
type LogPage struct {
	Lines []LogEntry
	// Next is where the next page starts: past the last line read, so
	// that reading again from it gives what was stored since.
	Next LogCursor
	// More says the page was cut short: more is stored already.
	More bool
}

// logReadBatch is how many messages one direct get asks for.
const logReadBatch = 256

// JobLogs reads a page of a job's output from q.After on, oldest first.
// Batches that do not decode, or name another job or attempt than their
// subject, are skipped.
func (b *Bus) JobLogs(ctx context.Context, jobID string, q LogQuery) (LogPage, error) {
	limit, maxBytes := q.Limit, q.MaxBytes
	if limit <= 0 || limit > MaxLogPageLines {
		limit = MaxLogPageLines
	}
	if maxBytes <= 0 || maxBytes > MaxLogPageBytes {
		maxBytes = MaxLogPageBytes
	}
	size := 0
	page := LogPage{Next: q.After}
	filter := JobLogsFilter(jobID, q.Attempt)
	from := max(q.After.Seq, 1)
	scanned := 0
	for {
		var stop bool
		last, more, err := b.directBatch(ctx, StreamLogs, filter, from, logReadBatch, func(seq uint64, subject string, data []byte) {
			if stop {
				return
			}
			scanned++
			lines := entries(seq, subject, data)
			start := 0
			if seq == q.After.Seq {
				start = q.After.Line
			}
			for _, e := range lines[min(start, len(lines)):] {
				if len(page.Lines) == limit || len(page.Lines) > 0 && size+len(e.Text) > maxBytes {
					page.Next, page.More, stop = e.At, true, true
					return
				}
				if q.Since.IsZero() || !e.Time.Before(q.Since) {
					page.Lines = append(page.Lines, e)
					size += len(e.Text)
				}
			}
			page.Next = LogCursor{Seq: seq + 1}
			if scanned >= MaxLogPageMessages {
				stop = true
			}
		})
		if err != nil {
			return page, fmt.Errorf("output of %s: %w", jobID, err)
		}
		if stop {
			// Cut by the line limit (More is set) or by the scan bound:
			// more if the stream holds more.
			page.More = page.More || more || last >= page.Next.Seq
			return page, nil
		}
		if !more {
			return page, nil
		}
		from = last + 1
	}
}

// JobLogTail reads the last n lines of a job's output (one attempt's, or
// every attempt's for 0) at or after since, oldest first, at most
// MaxLogPageBytes of text (the newest), and the cursor to follow the
// output from. It reads back from the newest batch, a
// growing span of the stream at a time, so a long output costs no more
// than its tail.
func (b *Bus) JobLogTail(ctx context.Context, jobID string, attempt, n int, since time.Time) ([]LogEntry, LogCursor, error) {
	n = min(max(n, 0), MaxLogPageLines)
	filter := JobLogsFilter(jobID, attempt)
	last, ok, err := b.lastSeq(ctx, StreamLogs, filter)
	if err != nil || !ok {
		return nil, LogCursor{}, err
	}
	next := LogCursor{Seq: last + 1}
	if n == 0 {
		return nil, next, nil
	}
	var chunks [][]LogEntry // newest first
	total, messages := 0, 0
	hi, span := last+1, uint64(64)
	for total < n && hi > 1 && messages < MaxLogPageMessages {
		lo := hi - min(span, hi-1)
		var chunk []LogEntry
		reached := false // a line before since: nothing older is wanted
		if err := b.scanRange(ctx, filter, lo, hi, func(seq uint64, subject string, data []byte) {
			messages++
			for _, e := range entries(seq, subject, data) {
				if !since.IsZero() && e.Time.Before(since) {
					reached = true
					continue
				}
				chunk = append(chunk, e)
			}
		}); err != nil {
			return nil, next, fmt.Errorf("output of %s: %w", jobID, err)
		}
		chunks = append(chunks, chunk)
		total += len(chunk)
		if reached {
			break
		}
		hi, span = lo, min(span*4, 1<<14)
	}
	out := make([]LogEntry, 0, min(total, n))
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	size := 0
	for i := len(out) - 1; i >= 0; i-- {
		if size += len(out[i].Text); size > MaxLogPageBytes && i < len(out)-1 {
			out = out[i+1:]
			break
		}
	}
	return out, next, nil
}

// scanRange hands fn every message on filter stored at a sequence in
// [lo, hi), in order.
func (b *Bus) scanRange(ctx context.Context, filter string, lo, hi uint64, fn func(seq uint64, subject string, data []byte)) error {
	for from := lo; from < hi; {
		last, more, err := b.directBatch(ctx, StreamLogs, filter, from, int(min(hi-from, logReadBatch)), func(seq uint64, subject string, data []byte) {
			if seq < hi {
				fn(seq, subject, data)
			}
		})
		if err != nil || !more || last == 0 {
			return err
		}
		from = last + 1
	}
	return nil
}

// lastSeq is the sequence of the last message on filter in a stream; ok
// is false when there is none.
func (b *Bus) lastSeq(ctx context.Context, stream, filter string) (uint64, bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	req := fmt.Appendf(nil, `{"last_by_subj":%q}`, filter)
	m, err := b.readConn().RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, req)
	if err != nil {
		return 0, false, err
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("direct get from %s: %s %s", stream, status, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("direct get from %s: a message without a sequence", stream)
	}
	return seq, true, nil
}

// entries are the lines of one stored batch (none when it does not
// decode).
func entries(seq uint64, subject string, data []byte) []LogEntry {
	batch, err := DecodeLogBatch(subject, data)
	if err != nil {
		return nil
	}
	out := make([]LogEntry, len(batch.Lines))
	for i, l := range batch.Lines {
		out[i] = LogEntry{LogLine: l, Attempt: batch.Attempt, Instance: batch.Instance, Node: batch.Node, At: LogCursor{seq, i}}
	}
	return out
}

// WatchLogs rings (a non-blocking send on the returned channel) whenever
// a batch of the job's output is published, until stop: a follower reads
// the stream when it rings instead of polling it. A ring may be missed
// while the channel is full; the follower reads everything new anyway.
func (b *Bus) WatchLogs(jobID string) (rings <-chan struct{}, stop func(), err error) {
	ch := make(chan struct{}, 1)
	sub, err := b.nc.Subscribe(JobLogsFilter(jobID, 0), func(*nats.Msg) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("watching the output of %s: %w", jobID, err)
	}
	return ch, func() { _ = sub.Unsubscribe() }, nil
}
