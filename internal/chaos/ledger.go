package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// ledger keeps what the run saw of every job record, over NATS, across
// the server's restarts: each server that comes up replays the bucket's
// latest records, and a record older than one seen before it went
// backwards (a write lost), as does one that forgets attempts or leaves
// the end it reached.
type ledger struct {
	mu        sync.Mutex
	jobs      map[string]*seen
	backwards map[string]string
	bus       *events.Bus
	stop      func()
}

// seen is the newest of one job's records seen so far.
type seen struct {
	rev uint64
	rec *job.Record
	// The furthest the record got: attempts placed, the end it reached.
	attempts int
	end      job.State
}

func newLedger() *ledger {
	return &ledger{jobs: map[string]*seen{}, backwards: map[string]string{}}
}

// connect watches the job bucket of the server at natsURL (as its
// service user, creds) until
// disconnect; it returns once the bucket's records have been replayed.
func (l *ledger) connect(ctx context.Context, natsURL, creds string) error {
	bus, err := events.Open(ctx, events.Config{URL: natsURL, CredsFile: creds, Client: true, ConnName: "spotwise-chaos"}, "chaos", clock.Real{}, nil)
	if err != nil {
		return err
	}
	ready := make(chan struct{})
	stop, err := bus.Jobs().Watch(context.Background(), l.observe, func() { close(ready) })
	if err != nil {
		bus.Close()
		return err
	}
	select {
	case <-ready:
	case <-ctx.Done():
		stop()
		bus.Close()
		return ctx.Err()
	case <-time.After(30 * time.Second):
		stop()
		bus.Close()
		return fmt.Errorf("the job bucket did not replay in 30s")
	}
	l.mu.Lock()
	l.bus, l.stop = bus, stop
	l.mu.Unlock()
	return nil
}

// disconnect stops watching (before the server is killed).
func (l *ledger) disconnect() {
	l.mu.Lock()
	bus, stop := l.bus, l.stop
	l.bus, l.stop = nil, nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	if bus != nil {
		bus.Close()
	}
}

// connected is the bus while connected, else nil.
func (l *ledger) connected() *events.Bus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bus
}

func (l *ledger) observe(ch events.JobChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.jobs[ch.ID]
	if ch.Record == nil {
		if s != nil {
			l.back(ch.ID, fmt.Sprintf("deleted at revision %d", ch.Revision))
		}
		return
	}
	r := ch.Record
	if s == nil {
		s = &seen{}
		l.jobs[ch.ID] = s
	}
	switch {
	case s.rec == nil:
	case ch.Revision < s.rev:
		l.back(ch.ID, fmt.Sprintf("revision %d after revision %d was seen (%s, attempt %d): writes lost", ch.Revision, s.rev, s.rec.Status.State, s.rec.Status.Attempt))
	case r.Status.Attempt < s.attempts:
		l.back(ch.ID, fmt.Sprintf("attempt %d after attempt %d (revision %d)", r.Status.Attempt, s.attempts, ch.Revision))
	case s.end != "" && r.Status.State != s.end:
		l.back(ch.ID, fmt.Sprintf("%s after it had %s (revision %d)", r.Status.State, s.end, ch.Revision))
	}
	if ch.Revision >= s.rev {
		s.rev, s.rec = ch.Revision, r
	}
	s.attempts = max(s.attempts, r.Status.Attempt)
	if s.end == "" && r.Status.State.Terminal() {
		s.end = r.Status.State
	}
}

// back records the first way a job's record went backwards.
func (l *ledger) back(id, why string) {
	if _, ok := l.backwards[id]; !ok {
		l.backwards[id] = why
	}
}

// states counts the latest states of the given jobs; unseen ones count as
// "unseen".
func (l *ledger) states(ids []string) map[job.State]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[job.State]int{}
	for _, id := range ids {
		if s := l.jobs[id]; s != nil && s.rec != nil {
			out[s.rec.Status.State]++
		} else {
			out["unseen"]++
		}
	}
	return out
}

// settled reports whether every given job has ended and holds no attempt
// (its capacity confirmed gone).
func (l *ledger) settled(ids []string) (ended, settled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ended, settled = true, true
	for _, id := range ids {
		s := l.jobs[id]
		if s == nil || s.rec == nil || !s.rec.Status.State.Terminal() {
			return false, false
		}
		if s.rec.Status.Current != nil || s.rec.Status.Previous != nil {
			settled = false
		}
	}
	return ended, settled
}

func (l *ledger) wentBackwards() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.backwards))
	for k, v := range l.backwards {
		out[k] = v
	}
	return out
}
