package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/internal/clock"
)

// imds is the instance metadata service's Scheduled Events endpoint.
type imds struct {
	srv   *httptest.Server
	mu    sync.Mutex
	doc   string
	gets  int
	posts []string
	bad   int // requests without "Metadata: true"
}

func newIMDS(t *testing.T) *imds {
	m := &imds{doc: `{"DocumentIncarnation":0,"Events":[]}`}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if r.Header.Get("Metadata") != "true" {
			m.bad++
			http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
			return
		}
		switch {
		case r.URL.Path == "/metadata/instance/compute/name":
			_, _ = io.WriteString(w, "sw-job-7f3a-a2-1a2b3c4d-n0")
		case r.URL.Path != "/metadata/scheduledevents" || r.URL.Query().Get("api-version") != scheduledEventsAPI:
			http.NotFound(w, r)
		case r.Method == http.MethodGet:
			m.gets++
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, m.doc)
		case r.Method == http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			m.posts = append(m.posts, string(b))
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *imds) set(doc string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doc = doc
}

func (m *imds) getCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

// eventsDoc is a Scheduled Events document with one event, as IMDS
// writes it.
func eventsDoc(id, typ, resource, notBefore string) string {
	return fmt.Sprintf(`{"DocumentIncarnation":2,"Events":[{"EventId":%q,"EventStatus":"Scheduled","EventType":%q,`+
		`"ResourceType":"VirtualMachine","Resources":[%q],"NotBefore":%q,"Description":"","EventSource":"Platform","DurationInSeconds":-1}]}`,
		id, typ, resource, notBefore)
}

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

// runPoller starts a ScheduledEvents poller for vm on a fake clock.
func runPoller(t *testing.T, m *imds, vm string) (*clock.Fake, *noticeLog) {
	t.Helper()
	clk := clock.NewFake(t0)
	opts := []Option{WithIMDSEndpoint(m.srv.URL), WithClock(clk), WithNoticePolling(time.Second, 5*time.Second)}
	if vm != "" {
		opts = append(opts, WithVMName(vm))
	}
	se := NewScheduledEvents(opts...)
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
func pollAgain(t *testing.T, m *imds, clk *clock.Fake, d time.Duration) {
	t.Helper()
	waitFor(t, func() error {
		if clk.Timers() == 0 {
			return errors.New("poller not asleep")
		}
		return nil
	})
	n := m.getCount()
	clk.Advance(d)
	waitFor(t, func() error {
		if m.getCount() == n || clk.Timers() == 0 {
			return errors.New("no poll")
		}
		return nil
	})
}

func TestScheduledEvents(t *testing.T) {
	const vm = "sw-job-7f3a-a2-1a2b3c4d-n0"
	notBefore := "Mon, 02 Mar 2026 09:00:30 GMT"
	tests := []struct {
		name     string
		doc      string
		wantKind string // "" none
	}{
		{"no events", `{"DocumentIncarnation":0,"Events":[]}`, ""},
		{"preempt for this VM", eventsDoc("C7061BAC-AFDC-4513-B24B-AA5F13A16123", "Preempt", vm, notBefore), "spot-interruption"},
		{"preempt for another VM", eventsDoc("C7061BAC-AFDC-4513-B24B-AA5F13A16124", "Preempt", "someone-else", notBefore), ""},
		{"terminate", eventsDoc("E1", "Terminate", vm, notBefore), "maintenance"},
		{"reboot", eventsDoc("E2", "Reboot", vm, notBefore), "maintenance"},
		{"redeploy", eventsDoc("E3", "Redeploy", vm, notBefore), "maintenance"},
		{"freeze", eventsDoc("E4", "Freeze", vm, notBefore), "maintenance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newIMDS(t)
			m.set(tt.doc)
			clk, log := runPoller(t, m, vm)
			waitFor(t, func() error {
				if m.getCount() == 0 {
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
			if got[0].Kind != tt.wantKind || !got[0].Deadline.Equal(t0.Add(30*time.Second)) || got[0].Ack == nil {
				t.Fatalf("notice %+v, want %s at NotBefore", got[0], tt.wantKind)
			}
		})
	}
}

func TestScheduledEventsAck(t *testing.T) {
	m := newIMDS(t)
	// The VM's name comes from IMDS when not given.
	m.set(eventsDoc("C7061BAC-AFDC-4513-B24B-AA5F13A16123", "Preempt", "sw-job-7f3a-a2-1a2b3c4d-n0", "Mon, 02 Mar 2026 09:00:30 GMT"))
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.posts) != 1 {
		t.Fatalf("%d POSTs", len(m.posts))
	}
	var body struct {
		StartRequests []struct{ EventId string }
	}
	if err := json.Unmarshal([]byte(m.posts[0]), &body); err != nil || len(body.StartRequests) != 1 || body.StartRequests[0].EventId != "C7061BAC-AFDC-4513-B24B-AA5F13A16123" {
		t.Fatalf("ack body %s (%v)", m.posts[0], err)
	}
	if m.bad != 0 {
		t.Fatalf("%d requests without the Metadata header", m.bad)
	}
}

func TestScheduledEventsPollsSlowlyWhenIdle(t *testing.T) {
	m := newIMDS(t)
	clk, _ := runPoller(t, m, "vm")
	waitFor(t, func() error {
		if m.getCount() != 1 || clk.Timers() == 0 {
			return errors.New("first poll not done")
		}
		return nil
	})
	clk.Advance(time.Second)
	time.Sleep(20 * time.Millisecond)
	if n := m.getCount(); n != 1 {
		t.Fatalf("%d polls after 1s with nothing pending, want 1", n)
	}
	pollAgain(t, m, clk, 4*time.Second)
}
