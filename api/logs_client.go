package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

func (q LogsQuery) values() url.Values {
	v := url.Values{}
	if q.Attempt > 0 {
		v.Set("attempt", strconv.Itoa(q.Attempt))
	}
	if q.Tail > 0 {
		v.Set("tail", strconv.Itoa(q.Tail))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.SinceAgo > 0 {
		v.Set("since", q.SinceAgo.String())
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Logs reads one page of a job's output.
func (c *Client) Logs(ctx context.Context, id string, q LogsQuery) (*LogPage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/jobs/"+url.PathEscape(id)+"/logs?"+q.values().Encode(), nil)
	if err != nil {
		return nil, err
	}
	var p LogPage
	_, err = c.do(req, &p)
	return &p, err
}

// maxEventBytes bounds one Server-Sent Event a client reads (a line of
// output is at most 16 KiB, as JSON a little more).
const maxEventBytes = 1 << 20

// FollowLogs streams a job's output: fn gets each line as it is stored,
// until the job has finished and its output is read to the end (the
// job's final state is returned), fn fails, or ctx ends.
func (c *Client) FollowLogs(ctx context.Context, id string, q LogsQuery, fn func(LogLineView) error) (state string, err error) {
	v := q.values()
	v.Set("follow", "true")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/jobs/"+url.PathEscape(id)+"/logs?"+v.Encode(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := *c.HTTP
	hc.Timeout = 0 // a stream lasts as long as the job: ctx bounds it
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot reach the spotwise server at %s (is `spotwise server` running? set --server or SPOTWISE_SERVER): %w", c.Base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
			eb.Error.Status = resp.StatusCode
			return "", eb.Error
		}
		return "", fmt.Errorf("server answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				data += value
			}
			continue
		}
		switch event { // a blank line ends an event
		case "line":
			var l LogLineView
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				return "", fmt.Errorf("reading the server's stream: %w", err)
			}
			if err := fn(l); err != nil {
				return "", err
			}
		case "end":
			var end struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal([]byte(data), &end)
			return end.State, nil
		case "error":
			var eb errorBody
			if json.Unmarshal([]byte(data), &eb) == nil && eb.Error != nil {
				return "", eb.Error
			}
			return "", errors.New("the server's stream ended with an error")
		}
		event, data = "", ""
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading the server's stream: %w", err)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return "", errors.New("the server's stream ended before the job did")
}
