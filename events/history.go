package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HistoryEntry is one stored job event.
type HistoryEntry struct {
	Seq      uint64
	Envelope Envelope
	Event    *JobEvent
	// Sealed is set for an event read from a seal of the job's history
	// (see SealJobHistory): stored at Seq long before, and possibly seen
	// already from the job's own subject.
	Sealed bool
}

// historyBatch is how many events one request reads.
const historyBatch = 256

// JobHistory reads a job's history, oldest first, at most limit entries
// (the newest ones when there are more; 0 is all). sealed are the seals
// of it its record names (job.Record.SealedHistory), if any.
func (b *Bus) JobHistory(ctx context.Context, jobID string, sealed []uint64, limit int) ([]HistoryEntry, error) {
	return b.JobHistoryAfter(ctx, jobID, sealed, 0, limit)
}

// JobHistoryAfter reads the events of a job's history stored after
// sequence after, oldest first, at most limit (the newest ones when there
// are more; 0 is all). A history with nothing new is one request answered
// "none": this is how a cached history is brought up to date.
//
// Each event is one direct get of the next message on the job's subject,
// not a batch: a batch's answer ends with how many are left on the
// subject, and when the stream has grown meanwhile (on a busy server, it
// always has) the server counts them again by scanning every message of
// the blocks the subject spans, which cost more than the read itself and
// grew with the store. A get of the next message finds it by the
// subject's index, and "nothing new" is one get answered 404.
//
// A sealed history (sealed: the seals its record names) is read from its
// seals, one get each, then from the job's subject past the last event
// they hold.
func (b *Bus) JobHistoryAfter(ctx context.Context, jobID string, sealed []uint64, after uint64, limit int) ([]HistoryEntry, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	subj := JobEventsSubject(jobID)
	var out []HistoryEntry
	nc := b.readConn()
	from := after + 1
	if len(sealed) > 0 {
		s, err := b.sealedHistory(ctx, nc, jobID, sealed)
		if err != nil {
			return nil, err
		}
		for _, e := range s {
			if e.Seq > after {
				out = append(out, e)
			}
		}
		if len(s) > 0 {
			// Every event before the last sealed one is in a seal.
			from = max(from, s[len(s)-1].Seq+1)
		}
		if limit > 0 && len(out) > limit {
			out = out[len(out)-limit:]
		}
	}
	for {
		seq, data, ok, err := directNext(ctx, nc, StreamJobs, subj, from)
		if err != nil {
			return out, fmt.Errorf("history of %s: %w", jobID, err)
		}
		if !ok {
			return out, nil
		}
		from = seq + 1
		env, p, err := Decode(data)
		if err != nil {
			continue // a garbled entry is skipped, not fatal to the history
		}
		ev, isEvent := p.(*JobEvent)
		if !isEvent {
			continue
		}
		out = append(out, HistoryEntry{Seq: seq, Envelope: env, Event: ev})
		if limit > 0 && len(out) > limit {
			out = out[1:]
		}
	}
}

// directNext asks the stream, in one direct get, for the first message on
// subject (no wildcards) from sequence from on; ok is false when there is
// none.
func directNext(ctx context.Context, nc *nats.Conn, stream, subject string, from uint64) (seq uint64, data []byte, ok bool, err error) {
	req := fmt.Appendf(nil, `{"seq":%d,"next_by_subj":%q}`, from, subject)
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, req)
	if err != nil {
		return 0, nil, false, err
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404": // nothing (more) on the subject
		return 0, nil, false, nil
	default:
		return 0, nil, false, fmt.Errorf("direct get from %s: %s %s", stream, status, m.Header.Get("Description"))
	}
	seq, err = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil || seq < from {
		return 0, nil, false, errors.New("direct get: a message without a sequence, or out of order")
	}
	return seq, m.Data, true, nil
}

// directMaxBytes bounds the messages' bytes of one direct get's answer.
const directMaxBytes = 1 << 20

// directBatch asks the stream for up to n messages on subject from
// sequence from on, in one direct get (the stream allows them), and hands
// each to fn in order, with the subject it was stored on (subject may be a
// filter with wildcards). It returns the sequence of the last one and
// whether the subject has more after it.
func (b *Bus) directBatch(ctx context.Context, stream, subject string, from uint64, n int, fn func(seq uint64, subject string, data []byte)) (last uint64, more bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	// At most directMaxBytes an answer: a batch of large messages comes in
	// several, rather than as one burst the connection may not keep up
	// with.
	req := fmt.Appendf(nil, `{"seq":%d,"next_by_subj":%q,"batch":%d,"max_bytes":%d}`, from, subject, n, directMaxBytes)
	nc := b.readConn()
	inbox := nc.NewInbox()
	// Room for the whole answer (the batch and its end): a
	// SubscribeSync's channel would be 64k messages, half a megabyte to
	// allocate and clear per request.
	msgs := make(chan *nats.Msg, n+2)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return 0, false, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return 0, false, err
	}
	for got := 0; ; got++ {
		var m *nats.Msg
		select {
		case m = <-msgs:
		case <-ctx.Done():
			return last, false, ctx.Err()
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "404": // nothing (more) on the subject
			return last, false, nil
		case "204": // end of the batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return last, pending > 0 && got > 0, nil
		default:
			return last, false, fmt.Errorf("direct get from %s: %s %s", stream, status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil || seq <= last {
			return last, false, errors.New("direct get: a message without a sequence, or out of order")
		}
		last = seq
		fn(seq, m.Header.Get("Nats-Subject"), m.Data)
	}
}

// DeleteJobs removes jobs from the store: each one's history and output,
// then its record (and the record's older revisions), archived or not.
// archived, when not nil, holds for each job where its archived record is
// (0: not archived; see ArchiveJob). It returns how many it removed before
// an error; a job already gone is not an error.
func (b *Bus) DeleteJobs(ctx context.Context, ids []string, archived []uint64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	st, err := b.js.Stream(ctx, StreamJobs)
	if err != nil {
		return 0, err
	}
	logs, err := b.js.Stream(ctx, StreamLogs)
	if err != nil {
		return 0, err
	}
	for i, id := range ids {
		var at uint64
		if archived != nil {
			at = archived[i]
		}
		// A sealed history's seals are where its record says.
		var garbled *DecodeError
		r, rev, err := b.jobs.Get(ctx, id)
		inBucket := err == nil || !errors.Is(err, ErrNotFound)
		if errors.Is(err, ErrNotFound) && at != 0 {
			r, rev, err = b.ArchivedRecord(ctx, id, at)
		}
		if err == nil {
			if err := b.deleteSeals(ctx, st, r.SealedHistory()); err != nil {
				return i, fmt.Errorf("sealed history of %s: %w", id, err)
			}
		} else if !errors.Is(err, ErrNotFound) && !errors.As(err, &garbled) {
			return i, fmt.Errorf("record of %s: %w", id, err)
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(JobEventsSubject(id))); err != nil {
			return i, fmt.Errorf("history of %s: %w", id, err)
		}
		if err := logs.Purge(ctx, jetstream.WithPurgeSubject(JobLogsFilter(id, 0))); err != nil {
			return i, fmt.Errorf("output of %s: %w", id, err)
		}
		// An archived job's removal is told by the archive: a purge of
		// its empty subject in the bucket would give it a subject again.
		if inBucket || at == 0 {
			if err := b.jobs.purge(ctx, id); err != nil {
				return i, fmt.Errorf("record of %s: %w", id, err)
			}
		}
		if at != 0 {
			if err := b.removeArchived(ctx, id, rev+1, at); err != nil {
				return i, err
			}
		}
	}
	return len(ids), nil
}

// Recent reads the newest messages of a stream on subject (wildcards
// allowed), at most n, oldest first, handing each to fn: what an operator
// page shows of the alerts, say. Garbled ones are fn's to skip.
func (b *Bus) Recent(ctx context.Context, stream, subject string, n int, fn func(seq uint64, data []byte)) error {
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("reading %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", stream, err)
	}
	last := info.State.LastSeq
	// Messages on other subjects share the sequence: look back further
	// than n, then keep the newest n found.
	from := uint64(1)
	if span := uint64(n) * 4; last > span {
		from = last - span + 1
	}
	type msg struct {
		seq  uint64
		data []byte
	}
	var got []msg
	for {
		end, more, err := b.directBatch(ctx, stream, subject, from, historyBatch, func(seq uint64, _ string, data []byte) {
			got = append(got, msg{seq, data})
			if len(got) > n {
				got = got[1:]
			}
		})
		if err != nil {
			return fmt.Errorf("reading %s: %w", stream, err)
		}
		if !more || end == 0 {
			break
		}
		from = end + 1
	}
	for _, m := range got {
		fn(m.seq, m.data)
	}
	return nil
}

// JobHistoryStart is the stream sequence of the first event the stream
// holds for a job (sealed: the seals its record names); ok is false when
// it holds none.
func (b *Bus) JobHistoryStart(ctx context.Context, jobID string, sealed []uint64) (seq uint64, ok bool, err error) {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if len(sealed) > 0 {
		s, err := b.sealedHistory(ctx, b.readConn(), jobID, sealed[:1])
		if err != nil {
			return 0, false, err
		}
		if len(s) > 0 {
			return s[0].Seq, true, nil
		}
	}
	seq, _, ok, err = directNext(ctx, b.readConn(), StreamJobs, JobEventsSubject(jobID), 1)
	if err != nil {
		return 0, false, fmt.Errorf("history of %s: %w", jobID, err)
	}
	return seq, ok, nil
}
