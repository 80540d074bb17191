package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/sim"
)

// openLedger follows the cost ledger into this server's view of it (every
// server has one: the cost reports and budgets read it) and waits until
// it holds what is stored.
func (s *Server) openLedger(ctx, rctx context.Context) error {
	v := ledger.NewView(s.log.Named("ledger"))
	// The charges the view holds go to a file beside the copy of job
	// pages, not memory (a million finished jobs: about 400 MB).
	if err := v.SpillTo(cmp.Or(s.cfg.PageCopy.Dir, s.cfg.DataDir), s.cfg.PageCopy.LedgerMaxBytes); err != nil {
		s.log.Warn("the ledger's view keeps its charges in memory", zap.Error(err))
	}
	stop, err := v.Follow(rctx, s.bus)
	if err != nil {
		v.Close()
		return fmt.Errorf("cost ledger: %w", err)
	}
	go func() {
		<-rctx.Done()
		stop()
		v.Close()
	}()
	select {
	case <-v.Ready():
	case <-ctx.Done():
		return fmt.Errorf("cost ledger: %w", ctx.Err())
	}
	s.ledger = v
	s.api.WithLedger(v)
	return nil
}

// writeLedger appends the jobs' charges to the ledger while this server's
// term lasts (one writer at a time; see ledger.Writer).
func (s *Server) writeLedger(ctx context.Context, wg *sync.WaitGroup) {
	w := ledger.NewWriter(s.bus, s.clock, s.log.Named("ledger"))
	s.ledgerWriter.Store(w)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("the cost ledger's writer stopped", zap.Error(err))
		}
	}()
}

// sealBatch is the most jobs one round of the ledger's sealer seals: one
// page of the job subjects NATS lists (a store with many to seal, one
// from before sealing, is brought down a page a round, each page listed
// once).
const sealBatch = 100_000

// archiveBatch is the most jobs one round archives (a few round trips
// to the store each: a store with many to archive is brought down over a
// round a second).
const archiveBatch = 10_000

// sealLedger seals the charges of the jobs whose bills are final, then
// their histories (see ledger.Sealer), then archives the records of those
// finished a day ago (api.Service.Archive), every retention interval while this server's term
// lasts. The first round waits two leases' time, for the server whose
// term ended before this one's (its writer may be reading old versions
// still) to have stopped.
func (s *Server) sealLedger(ctx context.Context) {
	sealer := ledger.NewSealer(s.bus, s.clock, s.log.Named("ledger"))
	sealer.FinishedAt = s.api.FinishedAt
	every(ctx, max(2*s.bus.LeaseTTL(), time.Second), func() time.Duration {
		// what was sealed: counted, with what is left (when the round
		// got through), and logged.
		sealed := func(n int, err error, what string, total, unsealed *atomic.Int64, left *atomic.Int64) {
			total.Add(int64(n))
			if err != nil && ctx.Err() == nil {
				s.log.Warn("sealing "+what, zap.Error(err))
			} else if err == nil {
				unsealed.Store(left.Load())
			}
			if n > 0 {
				s.log.Info(what+" sealed", zap.Int("jobs", n))
			}
		}
		n, err := sealer.Round(ctx, sealBatch)
		sealed(n, err, "jobs' charges", &s.sealedJobs, &s.unsealedJobs, &sealer.Left)
		h, err := sealer.Histories(ctx, sealBatch)
		sealed(h, err, "jobs' histories", &s.sealedHistories, &s.unsealedHistories, &sealer.HistoriesLeft)
		// Then the records of the jobs finished a day ago, whose
		// charges and histories are sealed: off the job bucket.
		a, err := s.api.Archive(ctx, archiveBatch)
		s.archivedJobs.Add(int64(a))
		if err != nil && ctx.Err() == nil {
			s.log.Warn("archiving finished jobs' records", zap.Error(err))
		}
		if n >= sealBatch || h >= sealBatch || a >= archiveBatch {
			return time.Second // more may be due
		}
		return s.cfg.Retention.Interval.D()
	})
}

// reservedIdleEvery is how often, on the scheduler's clock, the hours the
// simulated cloud's reservations left idle are recorded.
const reservedIdleEvery = 15 * time.Minute

// recordReservedIdle appends to the ledger, as overhead, the slot-hours
// each of the simulated cloud's reservations left idle, hour by hour once
// each hour is over, while this server's term lasts. Where it got to is
// kept in the meta bucket; an hour appended twice is refused by the
// ledger (each has its own subject), so a crash between the two costs
// nothing.
func (s *Server) recordReservedIdle(ctx context.Context, cloud *sim.Cloud) {
	log := s.log.Named("ledger")
	for {
		if err := s.reservedIdleOnce(ctx, cloud); err != nil && ctx.Err() == nil {
			log.Warn("recording reserved hours left idle", zap.Error(err))
		}
		t := s.clock.NewTimer(reservedIdleEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (s *Server) reservedIdleOnce(ctx context.Context, cloud *sim.Cloud) error {
	res, err := cloud.Reservations(ctx)
	if err != nil || len(res) == 0 {
		return err
	}
	offers, err := cloud.Offers(ctx)
	if err != nil {
		return err
	}
	onDemand := map[string]money.Micros{}
	for _, o := range offers {
		onDemand[o.ID()] = o.OnDemandPrice
	}
	now := s.clock.Now()
	for _, st := range res {
		r := st.Reservation
		key := "ledger.reserved." + strings.Map(func(c rune) rune {
			if c == '-' || c == '_' || c == '=' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				return c
			}
			return '_'
		}, r.ID)
		from := r.Start.UTC().Truncate(time.Hour)
		if v, _, err := s.bus.Meta().Get(ctx, key); err == nil {
			if t, err := time.Parse(time.RFC3339, string(v)); err == nil {
				from = t
			}
		} else if !errors.Is(err, events.ErrNotFound) {
			return err
		}
		until := now.UTC().Truncate(time.Hour)
		if r.End.Before(until) {
			until = r.End
		}
		h := from
		for ; h.Before(until) && !h.Add(time.Hour).After(now); h = h.Add(time.Hour) {
			e, ok := ledger.ReservedIdleHour(r, st.Uses, h, onDemand[st.OfferID], now)
			if !ok {
				continue
			}
			if _, err := ledger.AppendOverhead(ctx, s.bus, e); err != nil {
				return err
			}
		}
		if h.After(from) {
			if _, err := s.bus.Meta().Put(ctx, key, []byte(h.Format(time.RFC3339))); err != nil {
				return err
			}
		}
	}
	return nil
}
