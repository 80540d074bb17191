package api

import (
	"context"
	"encoding/json"
	"time"
)

// natsReplyMax bounds a reply of logs: NATS refuses a message over its
// max payload (1 MiB by default).
const natsReplyMax = 900 << 10

// natsLogs answers spotwise.jobs.logs with a page of a job's output, cut
// to what one NATS message carries (its next goes on from there).
func (s *Service) natsLogs(ctx context.Context, data []byte) []byte {
	var req LogsRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return reply(Reply{Error: errBadRequest("request must be {\"id\": \"...\", \"attempt\", \"tail\", \"since\", \"after\", \"limit\"}: %v", err)})
	}
	q := LogsQuery{Attempt: req.Attempt, Tail: req.Tail, After: req.After, Limit: req.Limit}
	if req.Since != "" {
		if d, err := time.ParseDuration(req.Since); err == nil && d >= 0 {
			q.Since = s.clock.Now().Add(-d)
		} else if q.Since, err = time.Parse(time.RFC3339Nano, req.Since); err != nil {
			return reply(Reply{Error: errBadRequest("since: %q is neither a duration (10m) nor an RFC 3339 time", req.Since)})
		}
	}
	// The text a page holds (or a tail's lines), halved until its reply
	// fits: escapes can make JSON several times the text.
	q.maxBytes = natsReplyMax / 2
	for {
		page, err := s.Logs(ctx, req.ID, q)
		if err != nil {
			return reply(Reply{Error: asError(err)})
		}
		b := reply(Reply{Logs: page})
		if len(b) <= natsReplyMax || len(page.Lines) <= 1 {
			return b
		}
		if q.Tail > 0 {
			q.Tail = len(page.Lines) / 2
		} else {
			q.maxBytes /= 2
		}
	}
}
