package api

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
)

// How a followed output streams: a comment every followKeepalive keeps
// proxies from closing a quiet stream; the job's state (and the output,
// should a ring be missed) is read every followPoll. Both are wall time.
const (
	followKeepalive = 15 * time.Second
	followPoll      = time.Second
)

// CodeTooManyFollowers refuses a follow beyond MaxFollowers at once.
const CodeTooManyFollowers = "too_many_followers"

// followHTTP streams a job's output as Server-Sent Events: what q selects
// first, then each line as it is stored, one "line" event each (its id is
// the cursor after it, so a client that reconnects with Last-Event-ID
// goes on where it was), until the job has finished and its output is
// read to the end (an "end" event with the job's state), or the client
// goes.
func (s *Service) followHTTP(w http.ResponseWriter, r *http.Request, id string, q LogsQuery) {
	ctx := r.Context()
	if _, err := s.readable(ctx, id); err != nil {
		writeError(w, asError(err))
		return
	}
	most := cmp.Or(s.maxFollows, MaxFollowers)
	if n := s.follows.Add(1); n > int64(most) {
		s.follows.Add(-1)
		writeError(w, &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyFollowers,
			Message: fmt.Sprintf("this server already streams %d outputs; read pages (without follow) or try later", most)})
		return
	}
	defer s.follows.Add(-1)
	// Ring before the first read: a line stored in between still rings.
	rings, stop, err := s.bus.WatchLogs(id)
	if err != nil {
		writeError(w, errUnavailable(err))
		return
	}
	defer stop()
	first, cur, err := s.followStart(ctx, id, q)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	f := &follower{w: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := f.lines(first); err != nil {
		return
	}
	poll := time.NewTicker(followPoll)
	defer poll.Stop()
	idle := time.NewTimer(followKeepalive)
	defer idle.Stop()
	checkState, finished := true, ""
	for {
		for { // everything stored since cur
			page, err := s.bus.JobLogs(ctx, id, events.LogQuery{Attempt: q.Attempt, After: cur, Since: q.Since})
			if err != nil {
				if ctx.Err() == nil {
					_ = f.event("error", errorBody{errUnavailable(err)})
				}
				return
			}
			if err := f.lines(page.Lines); err != nil {
				return
			}
			if len(page.Lines) > 0 {
				idle.Reset(followKeepalive)
			}
			cur = page.Next
			if !page.More {
				break
			}
		}
		if finished != "" { // its output is read to the end
			_ = f.event("end", map[string]string{"state": finished})
			return
		}
		if checkState {
			rec, _, err := s.readRecord(ctx, id)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Debug("following a job's output: reading its state", zap.String("job", id), zap.Error(err))
			case err == nil && rec.Status.State.Terminal():
				// The agent stores the output before it reports the
				// end: one more read has it all.
				finished = string(rec.Status.State)
				continue
			}
		}
		checkState = false
		select {
		case <-ctx.Done():
			return
		case <-rings:
		case <-poll.C:
			checkState = true
		case <-idle.C:
			if err := f.comment("keepalive"); err != nil {
				return
			}
			idle.Reset(followKeepalive)
		}
	}
}

// followStart reads what a follow begins with: the tail, or the output
// from q's cursor (the rest comes in the loop), and the cursor after it.
func (s *Service) followStart(ctx context.Context, id string, q LogsQuery) ([]events.LogEntry, events.LogCursor, error) {
	cur, err := checkLogsQuery(q)
	if err != nil || q.Tail == 0 {
		return nil, cur, err
	}
	lines, next, err := s.bus.JobLogTail(ctx, id, q.Attempt, q.Tail, q.Since)
	if err != nil {
		return nil, next, errUnavailable(err)
	}
	return lines, next, nil
}

// follower writes Server-Sent Events, each within a write deadline of
// its own (a client that stops reading is let go).
type follower struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f *follower) write(b []byte) error {
	_ = f.rc.SetWriteDeadline(time.Now().Add(2 * followKeepalive))
	if _, err := f.w.Write(b); err != nil {
		return err
	}
	return f.rc.Flush()
}

// lines sends one "line" event per line, its id the cursor after it.
func (f *follower) lines(es []events.LogEntry) error {
	if len(es) == 0 {
		return nil
	}
	var buf []byte
	for i, e := range es {
		data, err := json.Marshal(viewLines(es[i : i+1])[0])
		if err != nil {
			return err
		}
		next := events.LogCursor{Seq: e.At.Seq, Line: e.At.Line + 1}
		buf = fmt.Appendf(buf, "id: %s\nevent: line\ndata: %s\n\n", next, data)
	}
	return f.write(buf)
}

func (f *follower) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.write(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, data))
}

func (f *follower) comment(text string) error {
	return f.write([]byte(": " + text + "\n\n"))
}
