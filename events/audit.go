package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AuditScan is how many of the newest records of the audit stream one
// query reads at most.
const AuditScan = 200_000

// AuditEntry is one audit record as stored.
type AuditEntry struct {
	Time   time.Time    `json:"time"`
	Record *AuditRecord `json:"record"`
}

// Audit reads the audit records on subjects (AuditSubject patterns)
// stored at or after since (the NATS server's wall time), at most limit
// of them, the newest kept when there are more, oldest first.
func (b *Bus) Audit(ctx context.Context, subjects []string, since time.Time, limit int) ([]AuditEntry, error) {
	st, err := b.js.Stream(ctx, StreamAudit)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// Bounded work whatever the stream holds: the newest AuditScan
	// records of the stream are read (older ones need a narrower query).
	si, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	start := si.State.FirstSeq
	if last := si.State.LastSeq; last > AuditScan && last-AuditScan > start {
		start = last - AuditScan
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(start, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	left := info.NumPending
	var out []AuditEntry
	for left > 0 {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			env, p, err := Decode(msg.Data())
			if err != nil {
				continue
			}
			if rec, ok := p.(*AuditRecord); ok {
				at := rec.At
				if at.IsZero() {
					at = env.Time
				}
				if meta, err := msg.Metadata(); err == nil && meta.Timestamp.Before(since) {
					continue
				}
				out = append(out, AuditEntry{Time: at, Record: rec})
				if limit > 0 && len(out) > limit {
					out = out[1:]
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if n == 0 {
			break
		}
		left -= uint64(min(uint64(n), left))
	}
	return out, nil
}
