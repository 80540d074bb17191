package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/job"
)

// The cost ledger's stream: one subject per job (until its charges are
// sealed, below), whose charges are appended in order, each append conditional on the subject's last
// sequence, so that two writers (a deposed scheduler, a retry after a
// crash) can never both append, and one per item of overhead, appended
// once. The entries themselves are the ledger package's; this is their
// transport.

const subjectLedger = "spotwise.ledger"

// LedgerJobSubject is the subject of one job's charges.
func LedgerJobSubject(jobID string) string { return subjectLedgerJob + jobID }

// LedgerOverheadSubject is the subject of one item of overhead (an orphan
// instance, a reservation's idle hours in one period): written once.
func LedgerOverheadSubject(id string) string { return subjectLedger + ".overhead." + token(id) }

// AllLedger matches every charge.
const AllLedger = subjectLedger + ".>"

// A job's charges stay on its own subject while they may still change;
// once its bill is final they are sealed: copied, as one message (or a
// few, for a long bill), to one of LedgerSealShards shared subjects, and
// the job's subject is purged. NATS keeps state for every subject it
// holds, so a ledger kept forever on a subject per job would cost the
// server memory for every job ever billed; sealed, it costs that for the
// jobs billed lately only.
const (
	subjectLedgerJob    = subjectLedger + ".job."
	subjectLedgerSealed = subjectLedger + ".sealed."
	// LedgerSealShards is how many subjects the sealed charges are
	// spread over: enough that one job's seals are found by reading a
	// few dozen messages even with a million jobs sealed, few enough
	// that the subjects themselves cost NATS under 2 MB.
	LedgerSealShards = 16384
)

// LedgerSealedSubject is the shared subject a job's charges are sealed to.
func LedgerSealedSubject(jobID string) string {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return subjectLedgerSealed + strconv.Itoa(int(h.Sum32()%LedgerSealShards))
}

// IsLedgerSealed reports whether subject is one of the sealed charges'.
func IsLedgerSealed(subject string) bool { return strings.HasPrefix(subject, subjectLedgerSealed) }

// ErrLedgerMoved is returned by AppendLedger when the subject's last
// sequence is not the one expected: someone else appended first; read the
// subject again before deciding what to append.
var ErrLedgerMoved = errors.New("the ledger subject has moved on")

// LedgerMsg is one stored charge, as bytes for the ledger package to
// decode.
type LedgerMsg struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// AppendLedger stores data on subject if the subject's last message is
// the one at sequence last (0: the subject has none), and returns the
// sequence it got. id de-duplicates a retried append. A conflict is
// ErrLedgerMoved.
func (b *Bus) AppendLedger(ctx context.Context, subject string, data []byte, id string, last uint64) (uint64, error) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(last)}
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := b.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		var jerr jetstream.JetStreamError
		if errors.As(err, &jerr) && jerr.APIError() != nil {
			switch jerr.APIError().ErrorCode {
			case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
				return 0, fmt.Errorf("appending to %s after %d: %w", subject, last, ErrLedgerMoved)
			}
		}
		return 0, fmt.Errorf("appending to %s: %w", subject, err)
	}
	// A retry of an append that was stored (ack.Duplicate) is answered
	// with the sequence it was stored at.
	return ack.Sequence, nil
}

// LedgerSubject reads every charge stored on one subject, oldest first.
func (b *Bus) LedgerSubject(ctx context.Context, subject string) ([]LedgerMsg, error) {
	var out []LedgerMsg
	from := uint64(1)
	for {
		last, more, err := b.directBatch(ctx, StreamLedger, subject, from, historyBatch, func(seq uint64, subj string, data []byte) {
			out = append(out, LedgerMsg{Seq: seq, Subject: subj, Data: data})
		})
		if err != nil {
			return out, fmt.Errorf("reading the ledger of %s: %w", subject, err)
		}
		if !more {
			return out, nil
		}
		from = last + 1
	}
}

// LedgerJobID is the job a ledger subject belongs to ("" for overhead).
func LedgerJobID(subject string) string {
	id, ok := strings.CutPrefix(subject, subjectLedgerJob)
	if !ok {
		return ""
	}
	return id
}

// FollowLedger hands every charge stored so far to fn, oldest first, calls
// ready once they are through (at once for an empty ledger), and then
// hands each new one, until stop. fn runs on one goroutine.
func (b *Bus) FollowLedger(ctx context.Context, fn func(LedgerMsg), ready func()) (stop func(), err error) {
	st, err := b.js.Stream(ctx, StreamLedger)
	if err != nil {
		return nil, fmt.Errorf("following the ledger: %w", err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{AllLedger}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("following the ledger: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("following the ledger: %w", err)
	}
	upTo := info.State.LastSeq // ready once this one is through
	var once sync.Once
	signal := func() {
		if ready != nil {
			once.Do(ready)
		}
	}
	if upTo == 0 {
		signal()
	}
	cctx, cancel := context.WithCancel(ctx)
	var inflight gate
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if !inflight.enter() {
			return
		}
		defer inflight.leave()
		meta, err := msg.Metadata()
		if err != nil {
			return
		}
		fn(LedgerMsg{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Data: msg.Data()})
		if meta.Sequence.Stream >= upTo || meta.NumPending == 0 {
			signal()
		}
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("following the ledger: %w", err)
	}
	return inflight.stopper(cctx, cancel, cc.Stop), nil
}

// PublishLedgerSeal stores one message of a job's sealed charges on the
// job's sealed subject and returns its sequence. id de-duplicates a
// retried publish.
func (b *Bus) PublishLedgerSeal(ctx context.Context, jobID string, data []byte, id string) (uint64, error) {
	subject := LedgerSealedSubject(jobID)
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := b.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return 0, fmt.Errorf("sealing the charges of %s on %s: %w", jobID, subject, err)
	}
	return ack.Sequence, nil
}

// PurgeLedger removes the messages of one ledger subject up to and
// including sequence upTo (those after it stay: a charge appended while
// the others were sealed is not lost).
func (b *Bus) PurgeLedger(ctx context.Context, subject string, upTo uint64) error {
	st, err := b.js.Stream(ctx, StreamLedger)
	if err != nil {
		return fmt.Errorf("purging %s: %w", subject, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(upTo+1)); err != nil {
		return fmt.Errorf("purging %s up to %d: %w", subject, upTo, err)
	}
	return nil
}

// LedgerJobs lists, from offset on, the jobs whose charges are on their
// own subject (not sealed), at most one page of the server's (100,000),
// and how many there are in all.
func (b *Bus) LedgerJobs(ctx context.Context, offset int) (jobs []string, total int, err error) {
	return b.subjectJobs(ctx, StreamLedger, subjectLedgerJob, offset, "the ledger's job subjects")
}

// subjectJobs lists, from offset on, the jobs with a subject of their own
// under prefix in stream (one page of the server's subject listing,
// 100,000), sorted, and how many there are in all; what names them in an
// error.
func (b *Bus) subjectJobs(ctx context.Context, stream, prefix string, offset int, what string) (jobs []string, total int, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	req, _ := json.Marshal(struct {
		Filter string `json:"subjects_filter"`
		Offset int    `json:"offset"`
	}{prefix + "*", offset})
	msg, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+stream, req)
	if err != nil {
		return nil, 0, fmt.Errorf("listing %s: %w", what, err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
		Total int `json:"total"`
		State struct {
			Subjects map[string]uint64 `json:"subjects"`
		} `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("listing %s: %w", what, err)
	}
	if resp.Error != nil {
		return nil, 0, fmt.Errorf("listing %s: %s", what, resp.Error.Description)
	}
	for subj := range resp.State.Subjects {
		if id, ok := strings.CutPrefix(subj, prefix); ok && id != "" {
			jobs = append(jobs, id)
		}
	}
	slices.Sort(jobs)
	return jobs, max(resp.Total, len(jobs)), nil
}

// JobLastRevision is the job bucket's revision of a record's last change,
// its removal included (0: the bucket holds nothing of it).
func (b *Bus) JobLastRevision(ctx context.Context, id string) (uint64, error) {
	if !job.ValidID(id) {
		return 0, nil
	}
	bucket := b.jobs.kv.Bucket()
	st, err := b.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return 0, fmt.Errorf("job %s: %w", id, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "$KV."+bucket+"."+id)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("job %s: %w", id, err)
	}
	return m.Sequence, nil
}

// JobsLastRevision is the job bucket's latest revision (0: empty).
func (b *Bus) JobsLastRevision(ctx context.Context) (uint64, error) {
	return b.streamLastSeq(ctx, "KV_"+b.jobs.kv.Bucket(), "the job bucket's last revision")
}
