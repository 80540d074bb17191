package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// jobEventsReader names FollowJobEvents' reader in readings and drops.
const jobEventsReader = "job events"

// FollowJobEvents hands fn every job history event stored after the call
// returns, each with its stream sequence (the same numbers JobHistoryAfter
// reads by, so a live event and a history read can be told apart and
// joined without a gap), from one ordered consumer over every job's
// history, until ctx ends or stop is called (stop returns once fn no
// longer runs). fn runs on one goroutine, in stream order, and must not
// block. Garbled entries are skipped (and counted as dropped), as history
// reads skip them.
func (b *Bus) FollowJobEvents(ctx context.Context, fn func(HistoryEntry)) (stop func(), err error) {
	return b.followJobEvents(ctx, false, func(e HistoryEntry, _ bool) { fn(e) }, nil)
}

// ReplayJobEvents is FollowJobEvents from the first job event the stream
// holds: fn gets every stored one, oldest first, then every new one; old
// says the event was stored before the call was made (FollowJobEvents
// would not have handed it over). The events of sealed histories come
// where their seals were stored, each marked Sealed and old, with the
// sequence it was first stored at (below those fn had before it): fn
// takes each job's events once by their sequences. caughtUp (if not nil) is called once, on
// fn's goroutine, when fn has had every event stored when the consumer was
// made (at once if there was none).
func (b *Bus) ReplayJobEvents(ctx context.Context, fn func(e HistoryEntry, old bool), caughtUp func()) (stop func(), err error) {
	return b.followJobEvents(ctx, true, fn, caughtUp)
}

func (b *Bus) followJobEvents(ctx context.Context, all bool, fn func(HistoryEntry, bool), caughtUp func()) (stop func(), err error) {
	filter := []string{AllJobEvents}
	if all {
		filter = append(filter, subjectJobsSealed)
	}
	return b.replay(ctx, StreamJobs, filter, all, jobEventsReader, func(seq uint64, subject string, data []byte, old bool) {
		if subject == subjectJobsSealed {
			m, err := decodeHistorySeal(data, seq)
			if err != nil {
				switch {
				case old:
				case !json.Valid(data):
					b.drop(jobEventsReader, "garbled")
					b.log.Warn("dropping garbled event", zap.String("reader", jobEventsReader), zap.String("subject", subject), zap.Error(err))
				default: // JSON, but not a seal
					b.drop(jobEventsReader, "refused")
					b.log.Warn("dropping event", zap.String("reader", jobEventsReader), zap.String("subject", subject), zap.Error(err))
				}
				return
			}
			for _, e := range m.entries(m.Job) {
				fn(e, true)
			}
			return
		}
		// What cannot be shown is counted and skipped, never deleted: the
		// history is not this reader's to change. A replay skips old ones
		// without a word: they were counted when they were stored.
		env, p, err := Decode(data)
		if err != nil && old {
			return
		}
		if err != nil {
			b.drop(jobEventsReader, "garbled")
			b.log.Warn("dropping garbled event", zap.String("reader", jobEventsReader), zap.String("subject", subject), zap.Error(err))
			return
		}
		ev, ok := p.(*JobEvent)
		if !ok && old {
			return
		}
		if !ok {
			b.drop(jobEventsReader, "refused")
			b.log.Warn("dropping event", zap.String("reader", jobEventsReader), zap.String("subject", subject), zap.String("event", env.ID), zap.String("type", env.Type), zap.Error(errors.New("not a job event")))
			return
		}
		fn(HistoryEntry{Seq: seq, Envelope: env, Event: ev}, old)
	}, caughtUp)
}

// replay follows subjects of stream with one ordered consumer, from the
// first message the stream holds (all) or from the next stored, handing
// fn each message with its sequence and subject, and whether it was
// stored before the call (old; never, unless all), until ctx ends or stop
// is called (stop returns once fn no longer runs). fn runs on one
// goroutine, in stream order, and must not block long. caughtUp (if not
// nil) is called once, on fn's goroutine, when fn has had every message
// stored when the consumer was made (at once if there was none). name
// names the reader in readings and errors.
func (b *Bus) replay(ctx context.Context, stream string, filter []string, all bool, name string, fn func(seq uint64, subject string, data []byte, old bool), caughtUp func()) (stop func(), err error) {
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("following %s: %w", name, err)
	}
	policy, last := jetstream.DeliverNewPolicy, uint64(0)
	if all {
		policy = jetstream.DeliverAllPolicy
		info, err := st.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("following %s: %w", name, err)
		}
		last = info.State.LastSeq
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: filter, DeliverPolicy: policy,
	})
	if err != nil {
		return nil, fmt.Errorf("following %s: %w", name, err)
	}
	var caught atomic.Bool
	catchUp := func() {
		if caughtUp != nil && caught.CompareAndSwap(false, true) {
			caughtUp()
		}
	}
	if caughtUp != nil {
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("following %s: %w", name, err)
		}
		if info.NumPending == 0 {
			catchUp()
		}
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
		if meta.NumPending == 0 || (all && meta.Sequence.Stream >= last) {
			defer catchUp()
		}
		fn(meta.Sequence.Stream, msg.Subject(), msg.Data(), meta.Sequence.Stream <= last)
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("following %s: %w", name, err)
	}
	return inflight.stopper(cctx, b.reading(Reading{Kind: "follow", Name: name, Stream: stream, Subjects: filter}, cancel), cc.Stop), nil
}

// JobEventsLast is the sequence of the last message stored in the jobs
// stream (0 when empty): a stream of every job's events that starts now
// sends what is stored after it.
func (b *Bus) JobEventsLast(ctx context.Context) (uint64, error) {
	return b.streamLastSeq(ctx, StreamJobs, "the jobs stream's last event")
}

// streamLastSeq is the sequence of the last message stored in a stream
// (0 when empty); what names it in an error.
func (b *Bus) streamLastSeq(ctx context.Context, stream, what string) (uint64, error) {
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return info.State.LastSeq, nil
}

// JobEventsAfter reads the events of every job stored after sequence
// after, oldest first: at most limit of them, the newest ones when there
// are more, with the number left out (a client resuming a stream after a
// long absence is told it missed some rather than sent them all). The
// events of histories sealed meanwhile are read from their seals, at the
// sequences they were stored at.
func (b *Bus) JobEventsAfter(ctx context.Context, after uint64, limit int) (_ []HistoryEntry, skipped int, _ error) {
	var out []HistoryEntry
	// tidy puts out in order, each event once (one read from its job's
	// subject and again from its seal), the newest limit of them.
	tidy := func() {
		slices.SortStableFunc(out, func(a, b HistoryEntry) int { return cmpUint(a.Seq, b.Seq) })
		out = slices.CompactFunc(out, func(a, b HistoryEntry) bool { return a.Seq == b.Seq })
		if limit > 0 && len(out) > limit {
			skipped += len(out) - limit
			out = slices.Delete(out, 0, len(out)-limit)
		}
	}
	from := after + 1
	for {
		last, more, err := b.directBatch(ctx, StreamJobs, subjectJobs+".>", from, historyBatch, func(seq uint64, subject string, data []byte) {
			if subject == subjectJobsSealed {
				if m, err := decodeHistorySeal(data, seq); err == nil {
					for _, e := range m.entries(m.Job) {
						if e.Seq > after {
							out = append(out, e)
						}
					}
				}
				return
			}
			if !strings.HasPrefix(subject, subjectJobEvents+".") {
				return // a submission
			}
			env, p, err := Decode(data)
			if err != nil {
				return
			}
			ev, ok := p.(*JobEvent)
			if !ok {
				return
			}
			out = append(out, HistoryEntry{Seq: seq, Envelope: env, Event: ev})
		})
		if limit > 0 && len(out) > 2*limit+historyBatch {
			tidy()
		}
		if err != nil {
			tidy()
			return out, skipped, fmt.Errorf("job events after %d: %w", after, err)
		}
		if !more {
			tidy()
			return out, skipped, nil
		}
		from = last + 1
	}
}
