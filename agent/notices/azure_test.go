package notices

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

type noticeLog struct {
	mu      sync.Mutex
	notices []agent.Notice
}

func (n *noticeLog) add(x agent.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notices = append(n.notices, x)
}

func (n *noticeLog) all() []agent.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]agent.Notice(nil), n.notices...)
}

// startIMDS starts a VM's metadata service for the test.
func startScheduledEvents(t *testing.T) *azurefake.ScheduledEvents {
	m := azurefake.StartScheduledEvents()
	t.Cleanup(m.Close)
	return m
}

// runPoller starts an Azure poller for vm on a fake clock.
func runPoller(t *testing.T, m *azurefake.ScheduledEvents, vm string) (*clock.Fake, *noticeLog) {
	t.Helper()
	clk := clock.NewFake(t0)
	opts := []AzureOption{WithAzureEndpoint(m.URL()), WithAzureClock(clk), WithAzurePolling(time.Second, 5*time.Second)}
	if vm != "" {
		opts = append(opts, WithAzureVMName(vm))
	}
	se := NewAzure(opts...)
	log := &noticeLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- se.Watch(ctx, log.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	return clk, log
}

// pollAgain advances the clock by d and waits for the next GET.
func pollAgain(t *testing.T, m *azurefake.ScheduledEvents, clk *clock.Fake, d time.Duration) {
	t.Helper()
	waitFor(t, func() error {
		if clk.Timers() == 0 {
			return errors.New("poller not asleep")
		}
		return nil
	})
	n := m.Polls()
	clk.Advance(d)
	waitFor(t, func() error {
		if m.Polls() == n || clk.Timers() == 0 {
			return errors.New("no poll")
		}
		return nil
	})
}

func TestAzure(t *testing.T) {
	const vm = "sw-job-7f3a-a2-1a2b3c4d-n0"
	notBefore := t0.Add(30 * time.Second)
	tests := []struct {
		name      string
		eventType string // "" none
		resource  string
		wantKind  string // "" none
	}{
		{"no events", "", "", ""},
		{"preempt for this VM", "Preempt", vm, "spot-interruption"},
		{"preempt for another VM", "Preempt", "someone-else", ""},
		{"terminate", "Terminate", vm, "maintenance"},
		{"reboot", "Reboot", vm, "maintenance"},
		{"redeploy", "Redeploy", vm, "maintenance"},
		{"freeze", "Freeze", vm, "maintenance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startScheduledEvents(t)
			if tt.eventType != "" {
				m.Schedule(tt.eventType, tt.resource, notBefore)
			}
			clk, log := runPoller(t, m, vm)
			waitFor(t, func() error {
				if m.Polls() == 0 {
					return errors.New("no poll yet")
				}
				return nil
			})
			// Several polls (every second while an event of this VM is
			// pending, every 5 s otherwise): one notice at most.
			every := 5 * time.Second
			if tt.wantKind != "" {
				every = time.Second
			}
			for range 3 {
				pollAgain(t, m, clk, every)
			}
			got := log.all()
			if tt.wantKind == "" {
				if len(got) != 0 {
					t.Fatalf("notices %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d notices, want 1 (de-duplicated by EventId)", len(got))
			}
			if got[0].Kind != tt.wantKind || !got[0].Deadline.Equal(notBefore) || got[0].Ack == nil {
				t.Fatalf("notice %+v, want %s at NotBefore", got[0], tt.wantKind)
			}
		})
	}
}

func TestAzureAck(t *testing.T) {
	m := startScheduledEvents(t)
	// The VM's name comes from IMDS when not given.
	m.SetComputeName("sw-job-7f3a-a2-1a2b3c4d-n0")
	id := m.Preempt("sw-job-7f3a-a2-1a2b3c4d-n0", t0.Add(30*time.Second))
	_, log := runPoller(t, m, "")
	waitFor(t, func() error {
		if len(log.all()) == 0 {
			return errors.New("no notice")
		}
		return nil
	})
	if err := log.all()[0].Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	if acked := m.Acked(); len(acked) != 1 || acked[0] != id {
		t.Fatalf("approved %v, want [%s]", acked, id)
	}
	if n := m.BadRequests(); n != 0 {
		t.Fatalf("%d requests without the Metadata header", n)
	}
}

func TestAzurePollsSlowlyWhenIdle(t *testing.T) {
	m := startScheduledEvents(t)
	clk, _ := runPoller(t, m, "vm")
	waitFor(t, func() error {
		if m.Polls() != 1 || clk.Timers() == 0 {
			return errors.New("first poll not done")
		}
		return nil
	})
	clk.Advance(time.Second)
	time.Sleep(20 * time.Millisecond)
	if n := m.Polls(); n != 1 {
		t.Fatalf("%d polls after 1s with nothing pending, want 1", n)
	}
	pollAgain(t, m, clk, 4*time.Second)
}
