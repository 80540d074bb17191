package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// LogLineView is one line of a job's output as clients see it.
type LogLineView struct {
	Time    time.Time `json:"time"`
	Attempt int       `json:"attempt"`
	// Instance is where the line was written; Node that instance's rank
	// in a job of several nodes.
	Instance string `json:"instance,omitempty"`
	Node     int    `json:"node,omitempty"`
	// Stream is stdout, stderr, or agent for the agent's notes (lines
	// dropped, the exit).
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// LogPage is a page of a job's output, oldest line first.
type LogPage struct {
	Lines []LogLineView `json:"lines"`
	// Next is the cursor to go on from (the after parameter): past the
	// last line read, so it also gives, later, what was written since.
	Next string `json:"next,omitempty"`
	// More says more is stored already: ask again from next.
	More bool `json:"more"`
}

// LogsQuery selects lines of a job's output.
type LogsQuery struct {
	// Attempt is one attempt's output; 0 is every attempt's, in order.
	Attempt int
	// Tail is the last lines only (at most this many); 0 reads from the
	// start, or from After.
	Tail int
	// Since keeps lines written at or after it (the server's clock);
	// SinceAgo, in a client's query, is the same as a span back from the
	// server's now (which a simulation runs faster than the wall clock).
	Since    time.Time
	SinceAgo time.Duration
	// After is a cursor (a page's Next) to go on from.
	After string
	// Limit is the most lines a page holds (default and cap 5000).
	Limit int
	// maxBytes bounds the page's text below events.MaxLogPageBytes (a
	// NATS reply's).
	maxBytes int
}

// Bounds of the log API: lines of a page (and of a tail), followers a
// server streams to at once, and the lines a failed job's view carries.
const (
	MaxLogLines  = events.MaxLogPageLines
	MaxFollowers = 256
	LogTailLines = 20
)

func viewLines(es []events.LogEntry) []LogLineView {
	out := make([]LogLineView, len(es))
	for i, e := range es {
		out[i] = LogLineView{Time: e.Time, Attempt: e.Attempt, Instance: e.Instance, Node: e.Node, Stream: e.Stream, Text: e.Text}
	}
	return out
}

// Logs reads a page of a job's output; the caller must be allowed to read
// the job (another team's job is not found).
func (s *Service) Logs(ctx context.Context, id string, q LogsQuery) (*LogPage, error) {
	if _, err := s.readable(ctx, id); err != nil {
		return nil, err
	}
	page, _, err := s.logPage(ctx, id, q)
	return page, err
}

// readable is the job's record if the caller may read it.
func (s *Service) readable(ctx context.Context, id string) (*job.Record, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if !job.ValidID(id) {
		return nil, errNotFound(id)
	}
	rec, _, err := s.record(ctx, id)
	switch {
	case errors.Is(err, events.ErrNotFound):
		return nil, errNotFound(id)
	case err != nil:
		return nil, storeError(err)
	case !p.Can(auth.ReadJobs, rec.Spec.Team):
		return nil, errNotFound(id)
	}
	return rec, nil
}

// checkLogsQuery checks q and reads its cursor; an error names what is
// wrong.
func checkLogsQuery(q LogsQuery) (events.LogCursor, error) {
	switch {
	case q.Attempt < 0:
		return events.LogCursor{}, errBadRequest("attempt: must be a number from 1 (or none, for every attempt)")
	case q.Tail < 0 || q.Tail > MaxLogLines:
		return events.LogCursor{}, errBadRequest("tail: must be a number from 1 to %d", MaxLogLines)
	case q.Limit < 0 || q.Limit > MaxLogLines:
		return events.LogCursor{}, errBadRequest("limit: must be a number from 1 to %d", MaxLogLines)
	case q.Tail > 0 && q.After != "":
		return events.LogCursor{}, errBadRequest("tail and after: give one (tail reads the end, after goes on from a cursor)")
	case q.After == "":
		return events.LogCursor{}, nil
	}
	c, err := events.ParseLogCursor(q.After)
	if err != nil {
		return c, errBadRequest("after: %v", err)
	}
	return c, nil
}

// logPage reads one page for q, and the cursor after it.
func (s *Service) logPage(ctx context.Context, id string, q LogsQuery) (*LogPage, events.LogCursor, error) {
	after, err := checkLogsQuery(q)
	if err != nil {
		return nil, after, err
	}
	if q.Tail > 0 {
		lines, next, err := s.bus.JobLogTail(ctx, id, q.Attempt, q.Tail, q.Since)
		if err != nil {
			return nil, next, errUnavailable(err)
		}
		return &LogPage{Lines: viewLines(lines), Next: cursorText(next)}, next, nil
	}
	page, err := s.bus.JobLogs(ctx, id, events.LogQuery{Attempt: q.Attempt, After: after, Since: q.Since, Limit: q.Limit, MaxBytes: q.maxBytes})
	if err != nil {
		return nil, page.Next, errUnavailable(err)
	}
	return &LogPage{Lines: viewLines(page.Lines), Next: cursorText(page.Next), More: page.More}, page.Next, nil
}

// cursorText is a cursor for clients ("" for the start: nothing read).
func cursorText(c events.LogCursor) string {
	if c == (events.LogCursor{}) {
		return ""
	}
	return c.String()
}

// logTail is the last lines of a failed job's output, for its view.
func (s *Service) logTail(ctx context.Context, id string) []LogLineView {
	lines, _, err := s.bus.JobLogTail(ctx, id, 0, LogTailLines, time.Time{})
	if err != nil {
		s.log.Warn("reading a failed job's last output lines", zap.String("job", id), zap.Error(err))
		return nil
	}
	return viewLines(lines)
}

// parseLogsQuery reads the query parameters of GET /v1/jobs/{id}/logs;
// an error names the parameter that is wrong.
func (s *Service) parseLogsQuery(r *http.Request) (q LogsQuery, follow bool, err error) {
	v := r.URL.Query()
	num := func(name string, lo, hi int) (int, error) {
		t := v.Get(name)
		if t == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < lo || n > hi {
			return 0, errBadRequest("%s: must be a number from %d to %d, not %q", name, lo, hi, t)
		}
		return n, nil
	}
	if q.Attempt, err = num("attempt", 1, 1<<20); err != nil {
		return q, false, err
	}
	if q.Tail, err = num("tail", 1, MaxLogLines); err != nil {
		return q, false, err
	}
	if q.Limit, err = num("limit", 1, MaxLogLines); err != nil {
		return q, false, err
	}
	if t := v.Get("since"); t != "" {
		if d, derr := time.ParseDuration(t); derr == nil && d >= 0 {
			q.Since = s.clock.Now().Add(-d)
		} else if at, terr := time.Parse(time.RFC3339Nano, t); terr == nil {
			q.Since = at
		} else {
			return q, false, errBadRequest("since: %q is neither a duration (10m) nor an RFC 3339 time", t)
		}
	}
	q.After = v.Get("after")
	if q.After == "" {
		// A reconnecting event stream says where it was.
		q.After = r.Header.Get("Last-Event-ID")
	}
	switch f := strings.ToLower(v.Get("follow")); f {
	case "", "false", "0":
	case "true", "1":
		follow = true
	default:
		return q, false, errBadRequest("follow: must be true or false, not %q", v.Get("follow"))
	}
	return q, follow, nil
}

func (s *Service) logsHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q, follow, err := s.parseLogsQuery(r)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	if follow {
		s.followHTTP(w, r, id, q)
		return
	}
	page, err := s.Logs(r.Context(), id, q)
	respond(w, http.StatusOK, page, err)
}
