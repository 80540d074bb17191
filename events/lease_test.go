package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
)

func TestLeaseIsHeldByOneHolderAtATime(t *testing.T) {
	ctx := context.Background()
	b := eventstest.OpenBusConfig(t, events.Config{LeaseTTL: time.Second}, nil)
	a, other := b.Lease("scheduler", "node-a"), b.Lease("scheduler", "node-b")
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("first acquire: %v, %v", ok, err)
	}
	if ok, _ := other.TryAcquire(ctx); ok {
		t.Fatal("a second holder took a held lease")
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.Holder(ctx); h != "node-a" {
		t.Fatalf("holder %q", h)
	}
	// A restarted server with the same identity takes its lease back at
	// once.
	again := b.Lease("scheduler", "node-a")
	if ok, err := again.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("re-acquire by the same holder: %v, %v", ok, err)
	}
	// The old handle has lost it (its revision is stale).
	if err := a.Renew(ctx); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("stale renew: %v, want ErrLeaseLost", err)
	}
	// Released: the other holder takes it at once.
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("acquire after release: %v, %v", ok, err)
	}
	// Not renewed: it expires and the first holder can take it.
	testutil.CheckFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		ok, err := b.Lease("scheduler", "node-c").TryAcquire(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("still held")
		}
		return nil
	})
	if err := other.Renew(ctx); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("renew after expiry: %v, want ErrLeaseLost", err)
	}
}
