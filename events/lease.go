package events

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// DefaultLeaseTTL is how long a lease lasts without renewal: after a
// holder dies (or is cut off), another takes over within this time.
const DefaultLeaseTTL = 10 * time.Second

// ErrLeaseLost means the lease is no longer held: it expired or someone
// else holds it now.
var ErrLeaseLost = errors.New("lease lost")

// Lease is a named lock held by one holder at a time, kept in the leases
// bucket whose entries expire after the bus's LeaseTTL unless renewed. The
// scheduler uses one so that, of several servers on a cluster, exactly one
// schedules.
type Lease struct {
	kv     jetstream.KeyValue
	name   string
	holder string
	rev    uint64
	terms  atomic.Int64
	// held is the revision of the lease entry when this holder took it:
	// it grows with every new holding, whoever the holder, so it fences
	// the writes of a holder that lost the lease.
	held atomic.Int64
	// renewed is when (wall time, before asking) the lease was last made
	// or renewed, and ttl how long it lasts: Valid compares them.
	renewed atomic.Int64
	ttl     time.Duration
}

// Term is the current holding's term (0 when not held).
func (l *Lease) Term() int64 { return l.held.Load() }

// Valid reports whether this holder may still act on the lease: it was
// made or renewed less than half a TTL ago, well before anyone else could
// take it.
func (l *Lease) Valid() bool {
	at := l.renewed.Load()
	return at != 0 && l.held.Load() != 0 && time.Since(time.Unix(0, at)) < l.ttl/2
}

// LeaseTTL is how long this bus's leases last without renewal.
func (b *Bus) LeaseTTL() time.Duration { return b.leaseTTL }

// Lease returns the lease called name for holder (a stable identity of
// this server: a restarted server with the same identity takes its own
// lease back at once instead of waiting for it to expire).
func (b *Bus) Lease(name, holder string) *Lease {
	return &Lease{kv: b.leases, name: name, holder: holder, ttl: b.leaseTTL}
}

// TryAcquire takes the lease if it is free or already ours.
func (l *Lease) TryAcquire(ctx context.Context) (bool, error) {
	asked := time.Now()
	rev, err := l.kv.Create(ctx, l.name, []byte(l.holder))
	if err == nil {
		l.took(rev, asked)
		return true, nil
	}
	if !errors.Is(mapKVError(err), ErrExists) {
		return false, fmt.Errorf("lease %s: %w", l.name, err)
	}
	e, err := l.kv.Get(ctx, l.name)
	if err != nil {
		if errors.Is(mapKVError(err), ErrNotFound) {
			return false, nil // expired just now; try again next round
		}
		return false, fmt.Errorf("lease %s: %w", l.name, err)
	}
	if string(e.Value()) != l.holder {
		return false, nil
	}
	rev, err = l.kv.Update(ctx, l.name, []byte(l.holder), e.Revision())
	if err != nil {
		return false, nil
	}
	l.took(rev, asked)
	return true, nil
}

// took records a new holding.
func (l *Lease) took(rev uint64, asked time.Time) {
	l.rev = rev
	l.held.Store(int64(rev))
	l.renewed.Store(asked.UnixNano())
}

// Renew extends a held lease; ErrLeaseLost if it is not ours any more.
func (l *Lease) Renew(ctx context.Context) error {
	asked := time.Now()
	rev, err := l.kv.Update(ctx, l.name, []byte(l.holder), l.rev)
	if err != nil {
		switch mapped := mapKVError(err); {
		case errors.Is(mapped, ErrConflict), errors.Is(mapped, ErrNotFound):
			return fmt.Errorf("lease %s: %w", l.name, ErrLeaseLost)
		}
		return fmt.Errorf("lease %s: %w", l.name, err)
	}
	l.rev = rev
	l.renewed.Store(asked.UnixNano())
	return nil
}

// Release gives a held lease up so another holder can take it at once.
func (l *Lease) Release(ctx context.Context) error {
	l.held.Store(0)
	if l.rev == 0 {
		return nil
	}
	err := l.kv.Delete(ctx, l.name, jetstream.LastRevision(l.rev))
	l.rev = 0
	return mapKVError(err)
}

// Holder reads who holds the lease now ("" if nobody).
func (l *Lease) Holder(ctx context.Context) (string, error) {
	e, err := l.kv.Get(ctx, l.name)
	if err != nil {
		if errors.Is(mapKVError(err), ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	return string(e.Value()), nil
}

// RunElected runs fn only while holding the lease, so that of several
// servers on one NATS cluster exactly one does what fn does (schedule, run
// the simulated cloud); the others stand by and take over within the TTL
// when it goes away (at once when it lets go cleanly). A term whose lease
// cannot be renewed for half the TTL is ended: fn's context is cancelled
// and RunElected goes back to standing by.
func (l *Lease) RunElected(ctx context.Context, ttl time.Duration, log *zap.Logger, fn func(ctx context.Context) error) error {
	for ctx.Err() == nil {
		ok, err := l.TryAcquire(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("acquiring lease", zap.String("lease", l.name), zap.Error(err))
		}
		if !ok {
			sleepCtx(ctx, ttl/4)
			continue
		}
		log.Info("lease acquired", zap.String("lease", l.name), zap.String("holder", l.holder))
		l.terms.Add(1)
		l.term(ctx, ttl, log, fn)
	}
	return nil
}

// Terms counts how often this handle has taken the lease.
func (l *Lease) Terms() int64 { return l.terms.Load() }

func (l *Lease) term(ctx context.Context, ttl time.Duration, log *zap.Logger, fn func(ctx context.Context) error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(tctx) }()
	release := func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer rcancel()
		_ = l.Release(rctx)
	}
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	lastRenew := time.Now()
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-done
			release()
			return
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				log.Error("elected work stopped; giving the lease up", zap.String("lease", l.name), zap.Error(err))
			}
			release()
			sleepCtx(ctx, ttl/4)
			return
		case <-tick.C:
			rctx, rcancel := context.WithTimeout(ctx, ttl/4)
			err := l.Renew(rctx)
			rcancel()
			if err == nil {
				lastRenew = time.Now()
				continue
			}
			if time.Since(lastRenew) < ttl/2 && !errors.Is(err, ErrLeaseLost) {
				log.Warn("renewing lease; will retry", zap.String("lease", l.name), zap.Error(err))
				continue
			}
			log.Warn("lease lost: standing by", zap.String("lease", l.name), zap.Error(err))
			l.held.Store(0)
			cancel()
			<-done
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
