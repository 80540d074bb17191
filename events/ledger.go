package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The cost ledger's stream: one subject per job, whose charges are
// appended in order, each append conditional on the subject's last
// sequence, so that two writers (a deposed scheduler, a retry after a
// crash) can never both append, and one per item of overhead, appended
// once. The entries themselves are the ledger package's; this is their
// transport.

const subjectLedger = "spotwise.ledger"

// LedgerJobSubject is the subject of one job's charges.
func LedgerJobSubject(jobID string) string { return subjectLedger + ".job." + jobID }

// LedgerOverheadSubject is the subject of one item of overhead (an orphan
// instance, a reservation's idle hours in one period): written once.
func LedgerOverheadSubject(id string) string { return subjectLedger + ".overhead." + token(id) }

// AllLedger matches every charge.
const AllLedger = subjectLedger + ".>"

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
	id, ok := strings.CutPrefix(subject, subjectLedger+".job.")
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
