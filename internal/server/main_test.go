package server

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestMain lets this package's test binary stand in for `spotwise agent`:
// a test server whose simulated cloud runs a job's agent as a process of
// its own (sim.agent: subprocess) starts its own executable with "agent".
// That stand-in runs nothing and reports nothing; it waits to be stopped
// (as the instance ends), and gives up after two minutes should the test
// that started it be gone.
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
	os.Exit(m.Run())
}
