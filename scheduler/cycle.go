package scheduler

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// cycle runs one scheduling cycle over the queued jobs that need a look:
// new ones, and ones last found unplaceable against an older offer book.
// Placements are handed to the executor; pending jobs get their reasons.
func (s *Scheduler) cycle(ctx context.Context) {
	start := time.Now()
	now := s.o.Clock.Now()
	offers, unavailable, version := s.book.snapshot(now)
	s.mu.Lock()
	batch := make([]*QueuedJob, 0, min(s.q.len(), 1024))
	for _, qj := range s.q.jobs {
		e := s.index[qj.ID]
		if e == nil || e.inflight || e.seen == version {
			continue
		}
		batch = append(batch, qj)
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	plan := Decide(Snapshot{Now: now, Jobs: batch, Offers: offers, Unavailable: unavailable, Throughput: s.o.Throughput, Geography: s.o.Geography})

	type reasonsWrite struct {
		id      string
		reasons []job.PendingReason
		changed bool
	}
	var writes []reasonsWrite
	s.mu.Lock()
	for _, p := range plan.Placements {
		e := s.index[p.JobID]
		if e == nil || e.queued == nil || e.inflight {
			continue
		}
		e.inflight = true
		s.book.take(p.Offer, p.Nodes)
		s.goAction(ctx, func(ctx context.Context) { s.place(ctx, p) })
	}
	for _, p := range plan.Pending {
		e := s.index[p.JobID]
		if e == nil || e.queued == nil {
			continue
		}
		e.seen = version
		key := reasonsKey(p.Reasons)
		if key != e.reasonsKey {
			codes := codesOf(e.reasonsKey) != codesOf(key)
			e.reasonsKey = key
			writes = append(writes, reasonsWrite{p.JobID, p.Reasons, codes})
		}
	}
	s.mu.Unlock()
	s.metrics.cycles.Add(1)
	s.metrics.lastCycle.Store(int64(time.Since(start)))
	if len(writes) > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for _, w := range writes {
				s.writeReasons(ctx, w.id, w.reasons, w.changed)
			}
		}()
	}
	s.log.Debug("cycle", zap.Int("jobs", len(batch)), zap.Int("placed", len(plan.Placements)), zap.Int("pending", len(plan.Pending)), zap.Duration("took", time.Since(start)))
}

// PendingInfo is what the pending bucket holds for a queued job.
type PendingInfo struct {
	Reasons     []job.PendingReason `json:"reasons"`
	EvaluatedAt time.Time           `json:"evaluated_at"`
}

// writeReasons stores why a job is pending and, when the kinds of reasons
// changed, records it in the job's history.
func (s *Scheduler) writeReasons(ctx context.Context, id string, reasons []job.PendingReason, changed bool) {
	b, err := json.Marshal(PendingInfo{Reasons: reasons, EvaluatedAt: s.o.Clock.Now()})
	if err != nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.bus.Pending().Put(wctx, id, b); err != nil {
		s.log.Warn("storing pending reasons", zap.String("job", id), zap.Error(err))
		return
	}
	if changed {
		s.emit(wctx, &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Reasons: reasons,
			Message: "not placed yet: " + reasons[len(reasons)-1].Message}, id+"-pending-"+codesOf(reasonsKey(reasons)))
	}
}

// reasonsKey summarises reasons for change detection: codes and counts.
func reasonsKey(rs []job.PendingReason) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Code)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(r.Offers))
		b.WriteByte(',')
	}
	return b.String()
}

// codesOf keeps only the codes of a reasons key.
func codesOf(key string) string {
	parts := strings.Split(key, ",")
	for i, p := range parts {
		parts[i], _, _ = strings.Cut(p, ":")
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "+")
}

// emit publishes a job event, logging (not failing) when it cannot: the
// job's state is in the bucket either way.
func (s *Scheduler) emit(ctx context.Context, ev *events.JobEvent, id string) {
	var opts []events.PublishOption
	if id != "" {
		opts = append(opts, events.WithID(id))
	}
	if err := s.bus.Publish(ctx, events.JobEventsSubject(ev.JobID), ev, opts...); err != nil {
		s.log.Warn("publishing job event", zap.String("job", ev.JobID), zap.String("event", ev.Kind), zap.Error(err))
	}
}
