package server

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/ledger"
)

// openLedger follows the cost ledger into this server's view of it (every
// server has one: the cost reports and budgets read it) and waits until
// it holds what is stored.
func (s *Server) openLedger(ctx, rctx context.Context) error {
	v := ledger.NewView(s.log.Named("ledger"))
	stop, err := v.Follow(rctx, s.bus)
	if err != nil {
		return fmt.Errorf("cost ledger: %w", err)
	}
	go func() {
		<-rctx.Done()
		stop()
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("the cost ledger's writer stopped", zap.Error(err))
		}
	}()
}
