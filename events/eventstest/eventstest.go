// Package eventstest starts real embedded NATS servers for tests.
package eventstest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
)

// NewBus starts an embedded NATS server with JetStream in a temporary
// directory (in-process connections only) and returns a bus on it, closed
// when the test ends.
func NewBus(t testing.TB, clk clock.Clock) *events.Bus {
	t.Helper()
	return OpenBus(t, t.TempDir(), "", clk)
}

// OpenBus opens a bus on an embedded server storing under dir; listen is
// the client address ("" for in-process only, "127.0.0.1:-1" for a random
// port). Reopening the same dir finds the same streams and buckets.
func OpenBus(t testing.TB, dir, listen string, clk clock.Clock) *events.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := events.Open(ctx, events.Config{Embedded: events.EmbeddedOptions{DataDir: dir, Listen: listen}}, "test", clk, Logger(t))
	if err != nil {
		t.Fatalf("starting embedded NATS: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// OpenBusConfig opens a bus with a configuration of the test's choosing
// (its Embedded.DataDir defaults to a temporary directory).
func OpenBusConfig(t testing.TB, cfg events.Config, clk clock.Clock) *events.Bus {
	t.Helper()
	if cfg.URL == "" && cfg.Embedded.DataDir == "" {
		cfg.Embedded.DataDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := events.Open(ctx, cfg, "test", clk, Logger(t))
	if err != nil {
		t.Fatalf("opening the bus: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// Logger returns a logger that writes warnings and errors to the test log.
func Logger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}
