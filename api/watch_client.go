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

// ErrUnreachable marks a client error that means the server could not be
// reached (or a stream could not be taken up again): nothing was said
// about the job, one way or the other.
var ErrUnreachable = errors.New("cannot reach the spotwise server")

// WatchOptions tunes how a client follows a stream.
type WatchOptions struct {
	// After resumes after this event id (0: from the start).
	After uint64
	// ReconnectFor is how long a dropped stream is tried again, with
	// Last-Event-ID, before the client gives up with ErrUnreachable
	// (0: 30 s; negative: never reconnect).
	ReconnectFor time.Duration
	// OnGap is told when a resumed GET /v1/events missed events.
	OnGap func(StreamGap)
}

// WatchJob follows a job's events (GET /v1/jobs/{id}/events): fn gets each,
// in order, once, across reconnections (a dropped connection, or a server
// that let the stream go, is taken up again after the last event seen).
// It returns the stream's end once the job ended (or was deleted), an
// *Error the server answered, ctx's error, or an ErrUnreachable error.
func (c *Client) WatchJob(ctx context.Context, id string, o WatchOptions, fn func(StreamEvent)) (*StreamEnd, error) {
	return c.follow(ctx, "/v1/jobs/"+url.PathEscape(id)+"/events", o, fn)
}

// WatchEvents follows the events of every job the caller may see (GET
// /v1/events), of one team and in some states when given, until ctx ends
// or the stream cannot be taken up again.
func (c *Client) WatchEvents(ctx context.Context, team string, states []string, o WatchOptions, fn func(StreamEvent)) error {
	v := url.Values{}
	if team != "" {
		v.Set("team", team)
	}
	if len(states) > 0 {
		v.Set("state", strings.Join(states, ","))
	}
	path := "/v1/events"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	_, err := c.follow(ctx, path, o, fn)
	return err
}

// follow reads a stream, reconnecting after the last event seen, until it
// ends for good.
func (c *Client) follow(ctx context.Context, path string, o WatchOptions, fn func(StreamEvent)) (*StreamEnd, error) {
	retryFor := o.ReconnectFor
	if retryFor == 0 {
		retryFor = 30 * time.Second
	}
	last := o.After
	var lost time.Time // when the stream was last lost; zero while connected
	backoff := 200 * time.Millisecond
	for {
		end, connected, err := c.readStream(ctx, path, &last, o.OnGap, fn)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case end != nil && end.Reason != EndSlow && end.Reason != EndShutdown:
			return end, nil
		case err != nil && !errors.Is(err, ErrUnreachable) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
			var ae *Error
			if errors.As(err, &ae) && ae.Status != http.StatusTooManyRequests && ae.Status < 500 {
				return nil, err
			}
		}
		if connected || lost.IsZero() {
			lost, backoff = time.Now(), 200*time.Millisecond
		}
		if retryFor < 0 || time.Since(lost) > retryFor {
			if err == nil {
				err = errors.New("the stream ended")
			}
			if errors.Is(err, ErrUnreachable) {
				return nil, err
			}
			return nil, fmt.Errorf("%w at %s: the event stream was lost and could not be resumed: %w", ErrUnreachable, c.Base, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// readStream reads one connection of a stream. connected says the server
// answered 200 (so the next loss starts a new reconnection window).
func (c *Client) readStream(ctx context.Context, path string, last *uint64, onGap func(StreamGap), fn func(StreamEvent)) (end *StreamEnd, connected bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(*last, 10))
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	// Not c.HTTP itself: its timeout bounds a whole response, and a
	// stream's response lasts as long as the job.
	hc := &http.Client{Transport: c.HTTP.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("%w at %s (is `spotwise server` running? set --server or SPOTWISE_SERVER): %w", ErrUnreachable, c.Base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
			eb.Error.Status = resp.StatusCode
			return nil, false, eb.Error
		}
		return nil, false, fmt.Errorf("server answered %s", resp.Status)
	}
	err = readSSE(resp.Body, func(name, id string, data []byte) error {
		switch name {
		case "job":
			var ev StreamEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				return fmt.Errorf("reading a streamed event: %w", err)
			}
			if n, err := strconv.ParseUint(id, 10, 64); err == nil && n > *last {
				*last = n
			} else if err == nil {
				return nil // seen before a reconnection
			}
			fn(ev)
		case "gap":
			var g StreamGap
			if json.Unmarshal(data, &g) == nil && onGap != nil {
				onGap(g)
			}
		case "end":
			end = &StreamEnd{}
			if err := json.Unmarshal(data, end); err != nil {
				return fmt.Errorf("reading a stream's end: %w", err)
			}
			return io.EOF
		}
		return nil
	})
	if errors.Is(err, io.EOF) && end != nil {
		err = nil
	}
	if end == nil && err == nil {
		err = io.ErrUnexpectedEOF // the connection closed without an end
	}
	return end, true, err
}

// readSSE parses a text/event-stream, calling fn for each event (comments
// and retry fields skipped) until the body ends or fn returns an error.
func readSSE(r io.Reader, fn func(name, id string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var name, id string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				if name == "" {
					name = "message"
				}
				if err := fn(name, id, data); err != nil {
					return err
				}
			}
			name, data = "", nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "id":
			id = value
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
