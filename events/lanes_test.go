package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// A consumer with lanes (Workers and Key) handles each job's reports in
// the order they were published, one at a time, while other jobs' reports
// are handled beside them; a garbled message goes nowhere and stop
// returns with nothing left running.
func TestConsumerLanesKeepEachKeyInOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := eventstest.NewBus(t, nil)
	const jobs, each = 8, 12
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = job.NewID(time.Now().Add(time.Duration(i) * time.Millisecond))
	}
	var mu sync.Mutex
	seen := map[string][]float64{}
	busy := map[string]bool{}
	running, most := 0, 0
	var overlapped error
	stop, err := b.Consume(ctx, events.ConsumerConfig{Stream: events.StreamAgent, Durable: "test-lanes", Subjects: []string{events.AllAgentReports},
		Workers: 4, Key: func(_ string, p events.Payload) string { return p.(*events.AgentReport).JobID }},
		func(_ context.Context, m events.Message) error {
			rep := m.Payload.(*events.AgentReport)
			mu.Lock()
			if busy[rep.JobID] {
				overlapped = fmt.Errorf("two reports of %s handled at once", rep.JobID)
			}
			busy[rep.JobID] = true
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			busy[rep.JobID] = false
			running--
			seen[rep.JobID] = append(seen[rep.JobID], rep.Progress)
			mu.Unlock()
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PublishRaw(ctx, events.AgentSubject(ids[0], 1), []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	for n := range each {
		for _, id := range ids {
			rep := &events.AgentReport{JobID: id, Attempt: 1, InstanceID: "i-1", Kind: events.AgentProgress, Progress: float64(n) / each}
			if err := b.Publish(ctx, events.AgentSubject(id, 1), rep); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if len(seen[id]) < each {
				return errors.New("waiting for every report")
			}
		}
		return nil
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if overlapped != nil {
		t.Fatal(overlapped)
	}
	for _, id := range ids {
		if !slices.IsSorted(seen[id]) || len(seen[id]) != each {
			t.Fatalf("job %s's reports handled as %v, want %d in order", id, seen[id], each)
		}
	}
	if most < 2 {
		t.Errorf("at most %d reports handled at once, want several jobs' side by side", most)
	}
	if g := b.Garbled(); g != 1 {
		t.Errorf("garbled = %d, want 1", g)
	}
}
