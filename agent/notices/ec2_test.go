package notices

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// imdsRun runs an EC2 notice source against the fake until the test ends.
type imdsRun struct {
	f   *awsfake.IMDS
	clk *clock.Fake

	mu      sync.Mutex
	notices []agent.Notice
}

func startEC2(t *testing.T) *imdsRun {
	t.Helper()
	r := &imdsRun{f: awsfake.StartIMDS(), clk: clock.NewFake(t0)}
	t.Cleanup(r.f.Close)
	n := NewEC2(WithEC2Endpoint(r.f.URL()), WithEC2Clock(r.clk), WithEC2Interval(5*time.Second),
		func(o *ec2Options) { o.backoff = time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- n.Watch(ctx, func(nt agent.Notice) {
			r.mu.Lock()
			r.notices = append(r.notices, nt)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	r.waitPoll(t)
	return r
}

// waitPoll waits until the poller sleeps after a poll.
func (r *imdsRun) waitPoll(t *testing.T) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if r.clk.Timers() != 1 {
			return fmt.Errorf("poller not asleep")
		}
		return nil
	})
}

// poll lets one interval pass and waits for the poll to finish.
func (r *imdsRun) poll(t *testing.T) {
	t.Helper()
	_, before, _ := r.f.Counts()
	r.clk.Advance(5 * time.Second)
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if _, gets, _ := r.f.Counts(); gets < before+3 || r.clk.Timers() != 1 {
			return fmt.Errorf("poll not done")
		}
		return nil
	})
}

func (r *imdsRun) got() []agent.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agent.Notice(nil), r.notices...)
}

func TestEC2(t *testing.T) {
	maintenance := time.Date(2025, 6, 7, 15, 10, 9, 0, time.UTC)
	tests := []struct {
		name     string
		announce func(*awsfake.IMDS)
		path     string // or a raw document at a path
		body     string
		want     []agent.Notice
		polls    int
		rotating bool
	}{
		{name: "nothing announced", polls: 2},
		{name: "spot instance-action", announce: func(m *awsfake.IMDS) { m.SetSpotInstanceAction("terminate", t0.Add(2*time.Minute)) },
			polls: 3, want: []agent.Notice{{Kind: string(providers.EventSpotInterruption), Deadline: t0.Add(2 * time.Minute)}}},
		{name: "rebalance recommendation", announce: func(m *awsfake.IMDS) { m.SetRebalance(t0.Add(30 * time.Second)) }, polls: 3,
			want: []agent.Notice{{Kind: string(providers.EventRebalance)}}},
		{name: "scheduled maintenance", polls: 2,
			announce: func(m *awsfake.IMDS) {
				m.SetMaintenance(
					awsfake.MaintenanceEvent{Code: "system-reboot", Description: "scheduled reboot", NotBefore: maintenance,
						NotAfter: maintenance.Add(2 * time.Hour)},
					awsfake.MaintenanceEvent{Code: "system-reboot", Description: "done", State: "completed", NotBefore: t0.Add(-11 * time.Hour)})
			},
			want: []agent.Notice{{Kind: string(providers.EventMaintenance), Deadline: maintenance}}},
		{name: "a raw maintenance document", path: pathMaintenance, polls: 2,
			body: `[{"NotBefore":"7 Jun 2025 15:10:09 GMT","Code":"system-reboot","Description":"scheduled reboot","EventId":"instance-event-0d59937288b749b32","NotAfter":"7 Jun 2025 17:00:00 GMT","State":"active"}]`,
			want: []agent.Notice{{Kind: string(providers.EventMaintenance), Deadline: maintenance}}},
		{name: "the token is refreshed when refused", announce: func(m *awsfake.IMDS) { m.SetSpotInstanceAction("stop", t0.Add(2*time.Minute)) },
			polls: 2, rotating: true,
			want: []agent.Notice{{Kind: string(providers.EventSpotInterruption), Deadline: t0.Add(2 * time.Minute)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startEC2(t)
			if len(r.got()) != 0 {
				t.Fatalf("notices before anything was announced: %+v", r.got())
			}
			if tt.announce != nil {
				tt.announce(r.f)
			}
			if tt.path != "" {
				r.f.Set(tt.path, tt.body)
			}
			for range tt.polls {
				if tt.rotating {
					r.f.RotateTokens()
				}
				r.poll(t)
			}
			got := r.got()
			if len(got) != len(tt.want) {
				t.Fatalf("notices %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].Kind != tt.want[i].Kind || !got[i].Deadline.Equal(tt.want[i].Deadline) {
					t.Errorf("notice %d: %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			puts, _, refused := r.f.Counts()
			switch {
			case tt.rotating && (puts != 1+tt.polls || refused != tt.polls):
				t.Errorf("%d token requests and %d refusals, want %d and %d", puts, refused, 1+tt.polls, tt.polls)
			case !tt.rotating && puts != 1:
				t.Errorf("%d token requests for one valid token", puts)
			}
			if ttl := r.f.TokenTTLs()[0]; ttl == "" || ttl == "0" {
				t.Errorf("token requested with TTL %q", ttl)
			}
		})
	}
}
