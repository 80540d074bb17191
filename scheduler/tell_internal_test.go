package scheduler

import (
	"context"
	"slices"
	"testing"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
)

// What a written change tells of itself is told even when the context of
// the input that made it ends as it is carried out (Run stopping: a
// deploy's SIGTERM): its history entry is stored, not dropped with the
// context.
func TestAWrittenChangeIsToldWhenRunStops(t *testing.T) {
	log := eventstest.Logger(t)
	clk := clock.NewFake(t0)
	bus, err := events.Open(context.Background(), events.Config{Embedded: events.EmbeddedOptions{DataDir: t.TempDir()}}, "test", clk, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	o := Options{Clock: clk, Log: log}
	o.defaults()
	s := &Scheduler{o: o, log: log, pub: bus, metrics: o.Metrics, work: &pool{}, calls: &pool{}, ends: &pool{}}
	id := job.NewID(t0)
	rec := &job.Record{ID: id, Status: job.Status{State: job.Succeeded}}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	s.carryOut(stopped, rec, []job.Effect{job.History{Kind: job.KindSucceeded, Attempt: 1, Message: "command succeeded", ID: id + "-1-succeeded"}})
	h, err := bus.JobHistory(context.Background(), id, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, 0, len(h))
	for _, e := range h {
		kinds = append(kinds, e.Event.Kind)
	}
	if !slices.Contains(kinds, job.KindSucceeded) {
		t.Fatalf("history %v: the succeeded entry was dropped with the stopped context", kinds)
	}
}
