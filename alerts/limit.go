package alerts

import (
	"time"

	"github.com/spotwise/spotwise/events"
)

// dedupe remembers when each (kind, job, summary) was last let through to
// one webhook. The window counts from that alert, not from the latest
// repeat, so an alert that keeps firing is sent again once per window.
// Not safe for concurrent use; the sink's lock guards it.
type dedupe struct {
	window    time.Duration
	seen      map[string]time.Time
	lastSweep time.Time
}

func newDedupe(window time.Duration) *dedupe {
	return &dedupe{window: window, seen: map[string]time.Time{}}
}

func dedupeKey(a *events.Alert) string {
	k := a.Kind + "\x00" + a.JobID + "\x00" + a.Summary
	if a.Resolved {
		k += "\x00resolved"
	}
	return k
}

// duplicate reports whether key was let through less than a window ago.
func (d *dedupe) duplicate(key string, now time.Time) bool {
	at, ok := d.seen[key]
	return ok && now.Sub(at) < d.window
}

// record notes that key was let through at now.
func (d *dedupe) record(key string, now time.Time) {
	d.seen[key] = now
	if now.Sub(d.lastSweep) >= d.window {
		d.lastSweep = now
		for k, at := range d.seen {
			if now.Sub(at) >= d.window {
				delete(d.seen, k)
			}
		}
	}
}

// bucket is a token bucket: rate tokens per second, holding at most burst.
// Not safe for concurrent use; the sink's lock guards it.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rl RateLimit, now time.Time) *bucket {
	return &bucket{
		rate:   float64(rl.Count) / rl.Per.Seconds(),
		burst:  float64(rl.Burst),
		tokens: float64(rl.Burst),
		last:   now,
	}
}

func (b *bucket) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
}

// take spends a token if there is one.
func (b *bucket) take(now time.Time) bool {
	b.refill(now)
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// untilToken is how long until a token is available.
func (b *bucket) untilToken(now time.Time) time.Duration {
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// suppressed counts what the rate limit dropped since the last summary.
type suppressed struct {
	count    int
	severity string
	kinds    map[string]int
	since    time.Time
}

func (s *suppressed) add(a *events.Alert, now time.Time) {
	if s.count == 0 {
		s.since, s.severity, s.kinds = now, a.Severity, map[string]int{}
	}
	s.count++
	s.kinds[a.Kind]++
	if severityRank[a.Severity] > severityRank[s.severity] {
		s.severity = a.Severity
	}
}
