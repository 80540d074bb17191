package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sealing a job's history. Each job's events are stored on a subject of
// its own (JobEventsSubject), so that one job's history is read in a few
// direct gets; but NATS keeps state for every subject a stream holds
// (about 100 bytes), which, for every job the store keeps, is a large
// part of a server holding a million finished jobs. So once a job has
// finished for good its history is sealed: its events are copied, each
// with the sequence it was stored at, into one message (a few, for a long
// history) on one shared subject; the sequences of those messages are
// kept in the job's record (job.Sealed), and the job's subject is purged.
//
// A reader of a sealed history gets the seals its record names (a direct
// get each, by sequence), then reads the job's subject for anything
// stored after them. Every event keeps its sequence, so the seal and the
// subject join without a gap or a duplicate: a seal published twice, or a
// purge not yet made (a crash between the steps), adds nothing. A seal is
// stored only if the job's subject still ends at the last event it holds
// (an event stored meanwhile refuses it: ErrHistoryMoved), so no event is
// ever older than a seal and missing from it.

// subjectJobsSealed is the one subject every sealed history is stored on.
const subjectJobsSealed = "spotwise.jobs.sealed"

// JobsSealedSubject is the subject sealed histories are stored on:
// `{"job": ..., "events": [{"seq": ..., "data": <the event as stored>}]}`.
const JobsSealedSubject = subjectJobsSealed

// ErrHistoryMoved is returned by SealJobHistory when an event was stored
// on the job's subject after the seal read it: read it again.
var ErrHistoryMoved = errors.New("the job's history has moved on")

// historySeal is one message of a job's sealed history.
type historySeal struct {
	Job    string        `json:"job"`
	Events []sealedEvent `json:"events"`
}

// sealedEvent is one event as it was stored on the job's subject: a
// garbled one as a JSON string (still skipped by readers).
type sealedEvent struct {
	Seq  uint64          `json:"seq"`
	Data json.RawMessage `json:"data"`
}

// beforeSeal, when set (tests), runs between reading a job's subject and
// publishing its seal.
var beforeSeal func(jobID string)

// historySealChunk bounds the events of one seal message (a stream
// message is at most 1 MB).
const historySealChunk = 512 << 10

// storedMsg is one message as a stream stores it.
type storedMsg struct {
	seq  uint64
	data []byte
}

// jobHistoryStored reads every message on a job's history subject.
func (b *Bus) jobHistoryStored(ctx context.Context, jobID string) ([]storedMsg, error) {
	var out []storedMsg
	for from := uint64(1); ; {
		last, more, err := b.directBatch(ctx, StreamJobs, JobEventsSubject(jobID), from, historyBatch, func(seq uint64, _ string, data []byte) {
			out = append(out, storedMsg{seq, data})
		})
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", jobID, err)
		}
		if !more {
			return out, nil
		}
		from = last + 1
	}
}

// HistorySealMessages encodes a job's stored events (data[i] stored at
// seqs[i], in order) as the messages that seal them, with the IDs that
// de-duplicate their publication.
func HistorySealMessages(jobID string, seqs []uint64, data [][]byte) (msgs [][]byte, ids []string, err error) {
	for i := 0; i < len(seqs); {
		m := historySeal{Job: jobID}
		size := 0
		for ; i < len(seqs) && (len(m.Events) == 0 || size+len(data[i]) < historySealChunk); i++ {
			raw := data[i]
			if !json.Valid(raw) {
				raw, _ = json.Marshal(string(raw))
			}
			m.Events = append(m.Events, sealedEvent{Seq: seqs[i], Data: raw})
			size += len(raw) + 32
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the sealed history of %s: %w", jobID, err)
		}
		msgs = append(msgs, b)
		ids = append(ids, fmt.Sprintf("hseal-%s-%d-%d", jobID, m.Events[0].Seq, m.Events[len(m.Events)-1].Seq))
	}
	return msgs, ids, nil
}

// SealJobHistory copies the events on a job's subject into seal messages
// on the shared subject, each stored only if the job's subject still ends
// at the last event read (ErrHistoryMoved if not). It returns the seals'
// sequences and the sequence of the last event sealed (none and 0 when
// the subject holds nothing). The job's subject is left as it is: the
// caller keeps the seals' sequences in the record first, then purges it
// (PurgeJobHistory).
func (b *Bus) SealJobHistory(ctx context.Context, jobID string) (seals []uint64, upTo uint64, err error) {
	msgs, err := b.jobHistoryStored(ctx, jobID)
	if err != nil || len(msgs) == 0 {
		return nil, 0, err
	}
	upTo = msgs[len(msgs)-1].seq
	if beforeSeal != nil {
		beforeSeal(jobID)
	}
	seqs, raw := make([]uint64, len(msgs)), make([][]byte, len(msgs))
	for i, m := range msgs {
		seqs[i], raw[i] = m.seq, m.data
	}
	data, ids, err := HistorySealMessages(jobID, seqs, raw)
	if err != nil {
		return nil, 0, err
	}
	for i := range data {
		msg := &nats.Msg{Subject: subjectJobsSealed, Data: data[i], Header: nats.Header{}}
		// The condition is on the job's subject, not the seal's.
		msg.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", JobEventsSubject(jobID))
		ack, err := b.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(upTo), jetstream.WithMsgID(ids[i]))
		if err != nil {
			var jerr jetstream.JetStreamError
			if errors.As(err, &jerr) && jerr.APIError() != nil {
				switch jerr.APIError().ErrorCode {
				case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
					return nil, 0, fmt.Errorf("sealing the history of %s after %d: %w", jobID, upTo, ErrHistoryMoved)
				}
			}
			return nil, 0, fmt.Errorf("sealing the history of %s: %w", jobID, err)
		}
		seals = append(seals, ack.Sequence)
	}
	return seals, upTo, nil
}

// PurgeJobHistory removes the events of a job's subject up to and
// including sequence upTo (one stored after stays).
func (b *Bus) PurgeJobHistory(ctx context.Context, jobID string, upTo uint64) error {
	st, err := b.js.Stream(ctx, StreamJobs)
	if err != nil {
		return fmt.Errorf("purging the history of %s: %w", jobID, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(JobEventsSubject(jobID)), jetstream.WithPurgeSequence(upTo+1)); err != nil {
		return fmt.Errorf("purging the history of %s up to %d: %w", jobID, upTo, err)
	}
	return nil
}

// JobHistories lists, from offset on, the jobs whose history (some of
// it) is on their own subject, at most one page of the server's
// (100,000), and how many there are in all.
func (b *Bus) JobHistories(ctx context.Context, offset int) (jobs []string, total int, err error) {
	return b.subjectJobs(ctx, StreamJobs, subjectJobEvents+".", offset, "the jobs' history subjects")
}

// decodeHistorySeal reads the seal message stored at seq: every event it
// holds must have been stored before it.
func decodeHistorySeal(data []byte, seq uint64) (historySeal, error) {
	var m historySeal
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("a garbled history seal: %w", err)
	}
	return m, CheckSeal(m.Job, len(m.Events), func(i int) uint64 { return m.Events[i].Seq }, seq, "history seal", "an event")
}

// CheckSeal checks what a seal stored at sequence at holds: it names a
// job, and each of its n items (seqOf: the sequence it was first stored
// at) was stored before the seal. what and item name them in an error.
func CheckSeal(job string, n int, seqOf func(i int) uint64, at uint64, what, item string) error {
	if job == "" {
		return fmt.Errorf("a %s that names no job", what)
	}
	for i := range n {
		if s := seqOf(i); s == 0 || s >= at {
			return fmt.Errorf("a %s at sequence %d of %s with %s at sequence %d", what, at, job, item, s)
		}
	}
	return nil
}

// sealedEntries are the events of a seal that decode as job events of
// jobID, each with the sequence it was first stored at (garbled ones and
// others' skipped, as history reads skip them).
func (m historySeal) entries(jobID string) []HistoryEntry {
	if m.Job != jobID {
		return nil
	}
	out := make([]HistoryEntry, 0, len(m.Events))
	for _, e := range m.Events {
		env, p, err := Decode(e.Data)
		if err != nil {
			continue
		}
		if ev, ok := p.(*JobEvent); ok && ev.JobID == jobID {
			out = append(out, HistoryEntry{Seq: e.Seq, Envelope: env, Event: ev, Sealed: true})
		}
	}
	return out
}

// sealedHistory reads a job's sealed events from the seals at the given
// sequences: each event once, oldest first. A seal the stream no longer
// holds (aged out) is skipped; one that is not a seal of this job is an
// error.
func (b *Bus) sealedHistory(ctx context.Context, nc *nats.Conn, jobID string, seals []uint64) ([]HistoryEntry, error) {
	var out []HistoryEntry
	for _, seq := range seals {
		subject, data, ok, err := directSeq(ctx, nc, StreamJobs, seq)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", jobID, err)
		}
		if !ok {
			continue
		}
		if subject != subjectJobsSealed {
			return nil, fmt.Errorf("history of %s: the message at %d is not a seal", jobID, seq)
		}
		m, err := decodeHistorySeal(data, seq)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", jobID, err)
		}
		if m.Job != jobID {
			return nil, fmt.Errorf("history of %s: the seal at %d is %s's", jobID, seq, m.Job)
		}
		out = append(out, m.entries(jobID)...)
	}
	slices.SortStableFunc(out, func(a, b HistoryEntry) int { return cmpUint(a.Seq, b.Seq) })
	return slices.CompactFunc(out, func(a, b HistoryEntry) bool { return a.Seq == b.Seq }), nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// directSeq asks the stream, in one direct get, for the message at
// sequence seq; ok is false when it holds none there.
func directSeq(ctx context.Context, nc *nats.Conn, stream string, seq uint64) (subject string, data []byte, ok bool, err error) {
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, fmt.Appendf(nil, `{"seq":%d}`, seq))
	if err != nil {
		return "", nil, false, err
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return "", nil, false, nil
	default:
		return "", nil, false, fmt.Errorf("direct get from %s: %s %s", stream, status, m.Header.Get("Description"))
	}
	if got, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64); err != nil || got != seq {
		return "", nil, false, fmt.Errorf("direct get from %s: asked for %d, got %q", stream, seq, m.Header.Get("Nats-Sequence"))
	}
	return m.Header.Get("Nats-Subject"), m.Data, true, nil
}

// deleteSeals removes a job's seals from the stream (those already gone
// are no error).
func (b *Bus) deleteSeals(ctx context.Context, st jetstream.Stream, seals []uint64) error {
	for _, seq := range seals {
		if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !isNoMessage(err) {
			return err
		}
	}
	return nil
}

// isNoMessage reports whether err is the stream saying it holds no
// message at that sequence (deleted already, or aged out).
func isNoMessage(err error) bool {
	var jerr jetstream.JetStreamError
	if !errors.As(err, &jerr) || jerr.APIError() == nil {
		return false
	}
	switch e := jerr.APIError(); e.ErrorCode {
	case jetstream.JSErrCodeMessageNotFound, 10043: // sequence not found
		return true
	case 10057: // a delete that failed: for want of the message?
		return strings.Contains(e.Description, "not found") || strings.Contains(e.Description, "no message")
	}
	return false
}
