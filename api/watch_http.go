package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// CodeTooManyStreams is the error code of a stream refused because the
// server has as many open as it keeps.
const CodeTooManyStreams = "too_many_streams"

// StreamJob is a job as each streamed event shows it: its state, cost and
// progress as the server knew them when it sent the event.
type StreamJob struct {
	ID       string       `json:"id"`
	Name     string       `json:"name,omitempty"`
	Team     string       `json:"team,omitempty"`
	State    job.State    `json:"state,omitempty"`
	CostUSD  money.Micros `json:"cost_usd"`
	Progress float64      `json:"progress"`
}

// StreamEvent is one job event as the event streams send it (SSE event
// "job", its id the event's stream sequence): an entry of the job view's
// events, the sequence, and the job as it is now.
type StreamEvent struct {
	EventView
	Seq uint64    `json:"seq"`
	Job StreamJob `json:"job"`
}

// StreamEnd is a stream's last event ("end"): why it ended (EndFinished,
// EndDeleted, EndSlow, EndShutdown) and, for a job's stream, the job as it
// ended.
type StreamEnd struct {
	Reason  string     `json:"reason"`
	Message string     `json:"message"`
	Job     *StreamJob `json:"job,omitempty"`
}

// StreamGap ("gap") tells a client resuming GET /v1/events that more
// events were stored while it was away than a resume sends: it got the
// newest, and should list the jobs again for the rest.
type StreamGap struct {
	Missed  int    `json:"missed"`
	Message string `json:"message"`
}

// jobEventsHTTP is GET /v1/jobs/{id}/events: the job's history (or what
// follows Last-Event-ID), then its events as they come, until it ends.
func (s *Service) jobEventsHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.principal(ctx)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	id := r.PathValue("id")
	for k := range r.URL.Query() {
		if k != "last_event_id" {
			writeError(w, errBadRequest("unknown parameter %q (last_event_id)", k))
			return
		}
	}
	after, aerr := lastEventID(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if !job.ValidID(id) {
		writeError(w, errNotFound(id))
		return
	}
	rec, _, err := s.readRecord(ctx, id)
	switch {
	case errors.Is(err, events.ErrNotFound):
		writeError(w, errNotFound(id))
		return
	case err != nil:
		writeError(w, storeError(err))
		return
	case !p.Can(auth.ReadJobs, rec.Spec.Team):
		writeError(w, errNotFound(id))
		return
	}
	wt := &watcher{jobID: id}
	if !s.openStream(w, wt) {
		return
	}
	defer s.hub.remove(wt)
	limit := historyLimit
	if after > 0 {
		limit = 0 // a resume gets exactly what it missed
	}
	hist, err := s.bus.JobHistoryAfter(ctx, id, rec.SealedHistory(), after, limit)
	if err != nil {
		writeError(w, errUnavailable(err))
		return
	}
	st := startSSE(w, s.hub.opts.WriteTimeout)
	last, final := after, job.State("")
	for _, h := range hist {
		if err := st.event("job", h.Seq, s.streamEvent(h)); err != nil {
			return
		}
		last = h.Seq
		if h.Event.State.Terminal() {
			final = h.Event.State
		}
	}
	if final != "" {
		s.endJob(ctx, st, id, final)
		return
	}
	var grace <-chan time.Time
	if rec.Status.State.Terminal() {
		if s.terminalSent(ctx, id, rec.SealedHistory(), last) {
			s.endJob(ctx, st, id, rec.Status.State)
			return
		}
		grace = time.After(s.hub.opts.EndGrace)
	}
	keep := time.NewTicker(s.hub.opts.Keepalive)
	defer keep.Stop()
	for {
		select {
		case it := <-wt.ch:
			switch {
			case it.deleted:
				_ = st.event("end", 0, StreamEnd{Reason: EndDeleted, Message: "the job was deleted", Job: &StreamJob{ID: id}})
				return
			case it.rec != nil:
				if it.rec.Status.State.Terminal() && grace == nil {
					grace = time.After(s.hub.opts.EndGrace)
				}
				continue
			case it.entry.Seq <= last:
				continue // already sent from the history
			}
			if err := st.event("job", it.entry.Seq, s.streamEvent(it.entry)); err != nil {
				return
			}
			last = it.entry.Seq
			if state := it.entry.Event.State; state.Terminal() {
				s.endJob(ctx, st, id, state)
				return
			}
		case <-grace:
			s.endJob(ctx, st, id, "")
			return
		case <-wt.gone:
			st.gone(wt.why)
			return
		case <-keep.C:
			if st.comment("keepalive") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// terminalSent reports whether a job's history up to sequence last holds
// the event of its end (a resume after it has nothing more to wait for).
func (s *Service) terminalSent(ctx context.Context, id string, sealed []uint64, last uint64) bool {
	hist, err := s.hist.read(ctx, s.bus, id, sealed, false)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(hist, func(h events.HistoryEntry) bool { return h.Seq <= last && h.Event.State.Terminal() })
}

// endJob sends a job stream's "end": the job as its record has it, with
// state (when set) the one its last event said, which the record may not
// show yet.
func (s *Service) endJob(ctx context.Context, st *sse, id string, state job.State) {
	sj := StreamJob{ID: id, State: state}
	if rec, _, err := s.readRecord(ctx, id); err == nil {
		now := s.clock.Now()
		sj = StreamJob{ID: id, Name: rec.Spec.Name, Team: rec.Spec.Team, State: rec.Status.State, CostUSD: rec.CostAt(now), Progress: rec.Status.Progress}
		if state != "" {
			sj.State = state
		}
	}
	_ = st.event("end", 0, StreamEnd{Reason: EndFinished, Message: "the job is " + string(sj.State), Job: &sj})
}

// eventsHTTP is GET /v1/events: the events of every job the caller may
// see (of one team, in some states, when asked), as they come.
func (s *Service) eventsHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.principal(ctx)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	q := r.URL.Query()
	for k := range q {
		if k != "team" && k != "state" {
			writeError(w, errBadRequest("unknown parameter %q (team, state)", k))
			return
		}
	}
	states, serr := parseStates(q["state"])
	if serr != nil {
		writeError(w, serr)
		return
	}
	after, aerr := lastEventID(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	wt := &watcher{}
	switch team := q.Get("team"); {
	case team != "" && !auth.ValidTeam(team):
		writeError(w, errBadRequest("team %q is not a team name", team))
		return
	case team != "" && !p.Can(auth.ReadJobs, team):
		writeError(w, errForbidden(p, "read jobs of team "+team))
		return
	case team != "":
		wt.teams = map[string]bool{team: true}
	case !p.Can(auth.ReadJobs, ""):
		// Only the caller's own team's jobs are there to watch.
		wt.teams = map[string]bool{p.Team: true}
	}
	if after == 0 {
		// A new stream sends what is stored from now: an event stored
		// before (a submission answered just before the stream was
		// asked for) may reach the hub after the stream joins it, and
		// is not sent; one stored between now and the join is read
		// from the store, as a resume's are.
		if after, err = s.bus.JobEventsLast(ctx); err != nil {
			writeError(w, errUnavailable(err))
			return
		}
	}
	if !s.openStream(w, wt) {
		return
	}
	defer s.hub.remove(wt)
	var missed []events.HistoryEntry
	skipped := 0
	if after > 0 {
		if missed, skipped, err = s.bus.JobEventsAfter(ctx, after, s.hub.opts.ResumeLimit); err != nil {
			writeError(w, errUnavailable(err))
			return
		}
	}
	st := startSSE(w, s.hub.opts.WriteTimeout)
	if skipped > 0 {
		if st.event("gap", 0, StreamGap{Missed: skipped, Message: fmt.Sprintf("%d events were stored while you were away, more than a resume sends; list the jobs again", skipped)}) != nil {
			return
		}
	}
	last := after
	pass := func(e events.HistoryEntry, team string, known bool) bool {
		if len(states) > 0 && !slices.Contains(states, e.Event.State) {
			return false
		}
		if wt.teams == nil {
			return true
		}
		if !known {
			team, known = s.ix.teamOf(e.Event.JobID)
		}
		if !known {
			rec, _, err := s.record(ctx, e.Event.JobID)
			if err != nil {
				return false // a job that cannot be placed in a team is not shown
			}
			team = rec.Spec.Team
		}
		return wt.teams[team]
	}
	for _, h := range missed {
		if pass(h, "", false) {
			if st.event("job", h.Seq, s.streamEvent(h)) != nil {
				return
			}
		}
		last = h.Seq
	}
	keep := time.NewTicker(s.hub.opts.Keepalive)
	defer keep.Stop()
	for {
		select {
		case it := <-wt.ch:
			if it.rec != nil || it.deleted || it.entry.Seq <= last {
				continue
			}
			last = it.entry.Seq
			if !pass(it.entry, it.team, it.team != "") {
				continue
			}
			if st.event("job", it.entry.Seq, s.streamEvent(it.entry)) != nil {
				return
			}
		case <-wt.gone:
			st.gone(wt.why)
			return
		case <-keep.C:
			if st.comment("keepalive") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// openStream registers a stream with the hub, or answers why it cannot.
func (s *Service) openStream(w http.ResponseWriter, wt *watcher) bool {
	err := s.hub.add(wt)
	switch {
	case err == nil:
		return true
	case errors.Is(err, errTooManyStreams):
		w.Header().Set("Retry-After", "10")
		writeError(w, &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyStreams,
			Message: fmt.Sprintf("this server already has %d event streams open; try again later", s.hub.opts.Max)})
	case errors.Is(err, errHubClosed):
		writeError(w, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()})
	default:
		writeError(w, errUnavailable(err))
	}
	return false
}

// streamEvent is a stored event as a stream sends it.
func (s *Service) streamEvent(h events.HistoryEntry) StreamEvent {
	e := h.Event
	out := StreamEvent{Seq: h.Seq, EventView: EventView{Time: h.Envelope.Time, Kind: e.Kind, State: e.State, Attempt: e.Attempt,
		Message: e.Message, Placement: e.Placement, Reasons: e.Reasons, Progress: e.Progress, CostUSD: e.Cost}}
	out.Job = StreamJob{ID: e.JobID, State: e.State, Progress: e.Progress, CostUSD: e.Cost}
	if sum, ok := s.ix.summary(e.JobID, s.clock.Now()); ok {
		out.Job = StreamJob{ID: sum.ID, Name: sum.Name, Team: sum.Team, State: sum.State, CostUSD: sum.CostUSD, Progress: sum.Progress}
	}
	return out
}

// lastEventID is where a stream resumes: the Last-Event-ID header a
// reconnecting EventSource sends, or the last_event_id parameter; 0 when
// neither is given.
func lastEventID(r *http.Request) (uint64, *Error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, errBadRequest("Last-Event-ID %q is not an event id (the id of an event this stream sent)", v)
	}
	return n, nil
}

// parseStates reads state filters ("running", "queued,running").
func parseStates(vals []string) ([]job.State, *Error) {
	var out []job.State
	for _, v := range vals {
		for _, part := range strings.Split(v, ",") {
			if part == "" {
				continue
			}
			st := job.State(strings.ToLower(part))
			if !st.Valid() {
				return nil, errBadRequest("unknown state %q", part)
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// sse writes one Server-Sent Events stream. Each write has its own
// deadline, so the server's WriteTimeout does not cut a long stream and a
// client that stops reading is let go.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func startSSE(w http.ResponseWriter, timeout time.Duration) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not hold events back
	st := &sse{w: w, rc: http.NewResponseController(w), timeout: timeout}
	// The request was read; the server's read deadline would otherwise
	// end the stream.
	_ = st.rc.SetReadDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	_ = st.write("retry: 3000\n\n")
	return st
}

func (st *sse) write(text string) error {
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := st.w.Write([]byte(text)); err != nil {
		return err
	}
	return st.rc.Flush()
}

// event sends one event; id 0 sends none (the client keeps its last).
func (st *sse) event(name string, id uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		zap.L().Warn("encoding a streamed event", zap.Error(err))
		return err
	}
	var sb strings.Builder
	if id > 0 {
		fmt.Fprintf(&sb, "id: %d\n", id)
	}
	fmt.Fprintf(&sb, "event: %s\ndata: %s\n\n", name, b)
	return st.write(sb.String())
}

func (st *sse) comment(text string) error { return st.write(": " + text + "\n\n") }

// gone tells a client the hub let its stream go.
func (st *sse) gone(why string) {
	msg := "the server is shutting down; reconnect with Last-Event-ID to resume"
	if why == EndSlow {
		msg = "the client read events too slowly and fell behind; reconnect with Last-Event-ID to resume"
	}
	_ = st.event("end", 0, StreamEnd{Reason: why, Message: msg})
}
