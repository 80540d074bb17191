package scheduler

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Leaser is the lease a scheduler holds while it schedules; the bus's
// events.Lease implements it.
type Leaser interface {
	TryAcquire(ctx context.Context) (bool, error)
	Renew(ctx context.Context) error
	Release(ctx context.Context) error
}

// RunElected schedules only while this server holds the lease, so that of
// several servers on one NATS cluster exactly one places jobs; the others
// stand by and take over within ttl when it goes away. A term that loses
// its lease (it could not renew within half the ttl) stops at once: state
// is rebuilt from the bucket at the start of the next term, and the
// bucket's revision checks and the launch keys keep an overlap harmless.
func (s *Scheduler) RunElected(ctx context.Context, l Leaser, ttl time.Duration) error {
	for ctx.Err() == nil {
		ok, err := l.TryAcquire(ctx)
		if err != nil {
			s.log.Warn("acquiring the scheduler lease", zap.Error(err))
		}
		if !ok {
			sleep(ctx, ttl/4)
			continue
		}
		s.log.Info("scheduler lease acquired: scheduling")
		s.metrics.terms.Add(1)
		s.term(ctx, l, ttl)
	}
	return nil
}

// term runs the scheduler for as long as the lease is renewed.
func (s *Scheduler) term(ctx context.Context, l Leaser, ttl time.Duration) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(tctx) }()
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	lastRenew := time.Now()
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-done
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = l.Release(rctx)
			rcancel()
			return
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				s.log.Error("scheduler stopped; giving the lease up", zap.Error(err))
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = l.Release(rctx)
			rcancel()
			sleep(ctx, ttl/4)
			return
		case <-tick.C:
			rctx, rcancel := context.WithTimeout(ctx, ttl/4)
			err := l.Renew(rctx)
			rcancel()
			if err == nil {
				lastRenew = time.Now()
				continue
			}
			if time.Since(lastRenew) < ttl/2 {
				s.log.Warn("renewing the scheduler lease; will retry", zap.Error(err))
				continue
			}
			s.log.Warn("scheduler lease lost: standing by", zap.Error(err))
			cancel()
			<-done
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
