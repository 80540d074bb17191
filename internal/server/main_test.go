package server

import (
	"flag"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestMain lets this package's test binary stand in for `spotwise agent`:
// a test server whose simulated cloud runs a job's agent as a process of
// its own (sim.agent: subprocess) starts its own executable with "agent".
// That stand-in runs nothing and reports nothing; it waits to be stopped
// (as the instance ends), and gives up after two minutes should the test
// that started it be gone. Benchmarks run with the collector tuned as
// `spotwise server` tunes it (TuneGC).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
		select {
		case <-stop:
		case <-time.After(2 * time.Minute):
		}
		os.Exit(0)
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		TuneGC(zap.NewNop())
	}
	os.Exit(m.Run())
}
