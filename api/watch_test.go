package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// sseEvent is one event read off a stream.
type sseEvent struct {
	name, id string
	data     []byte
}

func (ev sseEvent) job(t *testing.T) api.StreamEvent {
	t.Helper()
	if ev.name != "job" {
		t.Fatalf("got a %q event (%s), want a job event", ev.name, ev.data)
	}
	var se api.StreamEvent
	if err := json.Unmarshal(ev.data, &se); err != nil {
		t.Fatalf("a job event's data: %v: %s", err, ev.data)
	}
	if ev.id != strconv.FormatUint(se.Seq, 10) {
		t.Errorf("event id %q, its seq %d", ev.id, se.Seq)
	}
	return se
}

func (ev sseEvent) end(t *testing.T) api.StreamEnd {
	t.Helper()
	if ev.name != "end" {
		t.Fatalf("got a %q event (%s), want the end", ev.name, ev.data)
	}
	var end api.StreamEnd
	if err := json.Unmarshal(ev.data, &end); err != nil {
		t.Fatal(err)
	}
	return end
}

// stream is one open event stream.
type stream struct {
	t      *testing.T
	events chan sseEvent
	closed chan struct{}
	cancel context.CancelFunc
}

// open opens a stream as token, failing the test unless it is answered 200.
func (e *env) open(path, token string, header ...string) *stream {
	e.t.Helper()
	resp, cancel := e.openResp(path, token, header...)
	if resp.StatusCode != http.StatusOK {
		cancel()
		e.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Errorf("Content-Type %q", ct)
	}
	s := &stream{t: e.t, events: make(chan sseEvent, 1024), closed: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.closed)
		defer resp.Body.Close()
		_ = api.ReadSSE(resp.Body, func(name, id string, data []byte) error {
			s.events <- sseEvent{name, id, slices.Clone(data)}
			return nil
		})
	}()
	e.t.Cleanup(cancel)
	return s
}

func (e *env) openResp(path, token string, header ...string) (*http.Response, context.CancelFunc) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	return resp, cancel
}

// next is the stream's next event.
func (s *stream) next() sseEvent {
	s.t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(10 * time.Second):
		s.t.Fatal("no event within 10s")
		return sseEvent{}
	}
}

// ends waits for the server to close the stream.
func (s *stream) ends() {
	s.t.Helper()
	select {
	case <-s.closed:
	case ev := <-s.events:
		s.t.Fatalf("an event (%s %s) after the end", ev.name, ev.data)
	case <-time.After(10 * time.Second):
		s.t.Fatal("the stream did not close")
	}
}

// publish appends an event to a job's history and returns its kind.
func (e *env) publish(id, kind string, state job.State) {
	e.t.Helper()
	if err := e.bus.Publish(e.t.Context(), events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: kind, State: state, Message: kind}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) finish(id string, state job.State) {
	e.t.Helper()
	e.setRecord(id, func(r *job.Record) { r.Status.State = state })
	e.publish(id, string(state), state)
}

func jobKinds(t *testing.T, evs ...sseEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		out = append(out, ev.job(t).Kind)
	}
	return out
}

// A client sees the job's history, then what happens after it connected,
// each with the job's current state, and the stream ends with the job.
func TestWatchJobHistoryThenLiveUntilTheEnd(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Placing })
	e.publish(id, job.KindPlacing, job.Placing)
	s := e.open("/v1/jobs/"+id+"/events", e.client.Token)
	first, second := s.next(), s.next()
	if got := jobKinds(t, first, second); !slices.Equal(got, []string{job.KindQueued, job.KindPlacing}) {
		t.Fatalf("history %v", got)
	}
	if j := second.job(t).Job; j.ID != id || j.Name != "resnet" || j.Team != "vision" {
		t.Errorf("the event's job: %+v", j)
	}
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Running; r.Status.Progress = 0.25 })
	e.publish(id, job.KindRunning, job.Running)
	live := s.next().job(t)
	if live.Kind != job.KindRunning || live.Seq <= second.job(t).Seq {
		t.Fatalf("live event %+v", live)
	}
	e.finish(id, job.Succeeded)
	if got := s.next().job(t); got.Kind != string(job.Succeeded) {
		t.Fatalf("got %s, want the succeeded event", got.Kind)
	}
	end := s.next().end(t)
	if end.Reason != api.EndFinished || end.Job == nil || end.Job.State != job.Succeeded || end.Job.Name != "resnet" {
		t.Fatalf("end %+v", end)
	}
	s.ends()

	// A job already over: its history, then the end at once.
	s = e.open("/v1/jobs/"+id+"/events", e.client.Token)
	var got []string
	for ev := s.next(); ev.name == "job"; ev = s.next() {
		got = append(got, ev.job(t).Kind)
	}
	if want := []string{job.KindQueued, job.KindPlacing, job.KindRunning, string(job.Succeeded)}; !slices.Equal(got, want) {
		t.Errorf("finished job's stream %v, want %v", got, want)
	}
	s.ends()
}

// Reconnecting with Last-Event-ID gets exactly the events missed, however
// the id is given.
func TestWatchJobResumesAfterLastEventID(t *testing.T) {
	for _, how := range []string{"header", "query"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			id := e.submit(spec())
			s := e.open("/v1/jobs/"+id+"/events", e.client.Token)
			queued := s.next()
			s.cancel()
			e.publish(id, job.KindPending, job.Queued)
			e.publish(id, job.KindPlacing, job.Placing)
			path, header := "/v1/jobs/"+id+"/events", []string{"Last-Event-ID", queued.id}
			if how == "query" {
				path, header = path+"?last_event_id="+queued.id, nil
			}
			s = e.open(path, e.client.Token, header...)
			if got := jobKinds(t, s.next(), s.next()); !slices.Equal(got, []string{job.KindPending, job.KindPlacing}) {
				t.Fatalf("resumed with %v", got)
			}
			e.finish(id, job.Failed)
			if got := s.next().job(t).Kind; got != string(job.Failed) {
				t.Fatalf("then %s", got)
			}
			if end := s.next().end(t); end.Job.State != job.Failed {
				t.Errorf("end %+v", end)
			}
		})
	}
}

// A job whose record is finished but whose last event never comes (its
// history write was lost) still ends its stream, after the grace.
func TestWatchJobEndsWhenOnlyTheRecordSaysSo(t *testing.T) {
	e := newEnv(t)
	e.svc.WithStreams(api.StreamOptions{EndGrace: 50 * time.Millisecond})
	id := e.submit(spec())
	s := e.open("/v1/jobs/"+id+"/events", e.client.Token)
	s.next()
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Cancelled })
	if end := s.next().end(t); end.Reason != api.EndFinished || end.Job.State != job.Cancelled {
		t.Fatalf("end %+v", end)
	}
	s.ends()
}

// Another team's jobs are not there: their streams are 404, and the
// stream of every job shows only the caller's team's, whatever it asks.
func TestWatchEventsOnlyShowsTheCallersTeams(t *testing.T) {
	e := newEnv(t)
	vision := e.submit(spec().Team("vision"))
	nlp := e.submit(spec().Team("nlp").Name("bert"))
	viewer := e.as("vision", auth.Viewer)
	if res := e.do("GET", "/v1/jobs/"+nlp+"/events", nil, map[string]string{"Authorization": "Bearer " + viewer.Token}); res.status != http.StatusNotFound {
		t.Errorf("another team's job stream: %d", res.status)
	}
	if res := e.do("GET", "/v1/events?team=nlp", nil, map[string]string{"Authorization": "Bearer " + viewer.Token}); res.status != http.StatusForbidden {
		t.Errorf("another team's events: %d %s", res.status, res.body)
	}
	mine := e.open("/v1/events", viewer.Token)
	nlpOnly := e.open("/v1/events?team=nlp", e.client.Token)
	runningOnly := e.open("/v1/events?state=running", e.client.Token)
	e.publish(nlp, job.KindPlacing, job.Placing)
	e.publish(vision, job.KindPlacing, job.Placing)
	e.publish(nlp, job.KindRunning, job.Running)
	e.publish(vision, job.KindRunning, job.Running)
	var placing sseEvent
	for _, want := range []string{job.KindPlacing, job.KindRunning} {
		ev := mine.next()
		if want == job.KindPlacing {
			placing = ev
		}
		if got := ev.job(t); got.Job.ID != vision || got.Kind != want || got.Job.Team != "vision" {
			t.Errorf("the vision viewer got %s of %s (%s), want %s of %s", got.Kind, got.Job.ID, got.Job.Team, want, vision)
		}
		if got := nlpOnly.next().job(t); got.Job.ID != nlp || got.Kind != want || got.Job.Name != "bert" {
			t.Errorf("team=nlp got %s of %s, want %s of %s", got.Kind, got.Job.ID, want, nlp)
		}
	}
	for _, want := range []string{nlp, vision} {
		if got := runningOnly.next().job(t); got.Job.ID != want || got.State != job.Running {
			t.Errorf("state=running got %s (%s) of %s", got.Kind, got.State, got.Job.ID)
		}
	}

	// Resumed after vision's placing, the viewer's stream sends vision's
	// running (nlp's, stored between, is not the viewer's), then goes on.
	resumed := e.open("/v1/events", viewer.Token, "Last-Event-ID", placing.id)
	e.publish(vision, job.KindProgress, job.Running)
	for _, want := range []string{job.KindRunning, job.KindProgress} {
		if got := resumed.next().job(t); got.Job.ID != vision || got.Kind != want {
			t.Errorf("resumed: got %s of %s, want %s of %s", got.Kind, got.Job.ID, want, vision)
		}
	}
}

// A client away for longer than a resume covers gets the newest events,
// told how many it missed before them.
func TestWatchEventsResumeSaysWhatItSkipped(t *testing.T) {
	e := newEnv(t)
	e.svc.WithStreams(api.StreamOptions{ResumeLimit: 2})
	id := e.submit(spec())
	s := e.open("/v1/events", e.client.Token)
	e.publish(id, job.KindPending, job.Queued)
	seen := s.next()
	if seen.job(t).Kind == job.KindQueued {
		// The submission's event, stored before the stream opened, came
		// through the shared follower after it did.
		seen = s.next()
	}
	s.cancel()
	for _, k := range []string{job.KindPlacing, job.KindLaunched, job.KindRunning, job.KindProgress} {
		state := job.Running
		if k == job.KindPlacing || k == job.KindLaunched {
			state = job.Placing
		}
		e.publish(id, k, state)
	}
	s = e.open("/v1/events", e.client.Token, "Last-Event-ID", seen.id)
	gap := s.next()
	var g api.StreamGap
	if gap.name != "gap" || json.Unmarshal(gap.data, &g) != nil || g.Missed != 2 {
		t.Fatalf("first event %s %s, want a gap of 2", gap.name, gap.data)
	}
	if got := jobKinds(t, s.next(), s.next()); !slices.Equal(got, []string{job.KindRunning, job.KindProgress}) {
		t.Errorf("after the gap: %v", got)
	}
}

// A garbled entry in a job's history is skipped, live and on a resume:
// the stream goes on with the next good one.
func TestWatchSkipsGarbledEvents(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	s := e.open("/v1/jobs/"+id+"/events", e.client.Token)
	queued := s.next()
	for _, raw := range []string{`{"v":1,"id":"x","type":`, `{"v":1,"id":"y","type":"job.submitted","time":"2031-03-14T09:00:00Z","data":{}}`} {
		if err := e.bus.PublishRaw(t.Context(), events.JobEventsSubject(id), []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	e.publish(id, job.KindPlacing, job.Placing)
	if got := s.next().job(t).Kind; got != job.KindPlacing {
		t.Fatalf("after garbled entries: %s", got)
	}
	resumed := e.open("/v1/jobs/"+id+"/events", e.client.Token, "Last-Event-ID", queued.id)
	if got := resumed.next().job(t).Kind; got != job.KindPlacing {
		t.Fatalf("resumed over garbled entries: %s", got)
	}
}

func TestWatchRefusesBadRequests(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	for _, c := range []struct {
		path   string
		header map[string]string
		status int
		says   string
	}{
		{"/v1/events?state=sleeping", nil, 400, `unknown state "sleeping"`},
		{"/v1/events?colour=red", nil, 400, `unknown parameter "colour"`},
		{"/v1/events?team=../etc", nil, 400, "not a team name"},
		{"/v1/events", map[string]string{"Last-Event-ID": "yesterday"}, 400, "not an event id"},
		{"/v1/jobs/" + id + "/events", map[string]string{"Last-Event-ID": "-3"}, 400, "not an event id"},
		{"/v1/jobs/j-nope/events", nil, 404, "no job"},
		{"/v1/jobs/" + id + "/events?from=3", nil, 400, `unknown parameter "from"`},
		{"/v1/events", map[string]string{"Authorization": ""}, 401, ""},
	} {
		res := e.do("GET", c.path, nil, c.header)
		if res.status != c.status {
			t.Errorf("GET %s %v: %d, want %d: %s", c.path, c.header, res.status, c.status, res.body)
			continue
		}
		if msg := res.apiError(t).Message; !strings.Contains(msg, c.says) {
			t.Errorf("GET %s: %q does not say %q", c.path, msg, c.says)
		}
	}
	if res := e.do("POST", "/v1/events", nil, nil); res.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/events: %d", res.status)
	}
}

// Beyond the cap a stream is refused 429, and a stream closed makes room.
func TestWatchCapsOpenStreams(t *testing.T) {
	e := newEnv(t)
	e.svc.WithStreams(api.StreamOptions{Max: 2})
	id := e.submit(spec())
	a := e.open("/v1/events", e.client.Token)
	e.open("/v1/jobs/"+id+"/events", e.client.Token)
	res := e.do("GET", "/v1/events", nil, nil)
	if res.status != http.StatusTooManyRequests || res.apiError(t).Code != api.CodeTooManyStreams || res.header.Get("Retry-After") == "" {
		t.Fatalf("a third stream: %d %s (Retry-After %q)", res.status, res.body, res.header.Get("Retry-After"))
	}
	a.cancel()
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if n := e.svc.OpenStreams(); n != 1 {
			return fmt.Errorf("%d streams open", n)
		}
		return nil
	})
	e.open("/v1/events", e.client.Token)
}

// The server's WriteTimeout does not cut a stream: keepalives and events
// still come well after it.
func TestWatchOutlivesTheServersWriteTimeout(t *testing.T) {
	e := newEnv(t)
	e.svc.WithStreams(api.StreamOptions{Keepalive: 20 * time.Millisecond})
	srv := httptest.NewUnstartedServer(e.svc.Handler(nil))
	srv.Config.WriteTimeout = 100 * time.Millisecond
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	id := e.submit(spec())
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/jobs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.client.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	start := time.Now()
	for keepalives := 0; keepalives < 15 || time.Since(start) < 300*time.Millisecond; {
		if !sc.Scan() {
			t.Fatalf("the stream closed after %s: %v", time.Since(start), sc.Err())
		}
		if sc.Text() == ": keepalive" {
			keepalives++
		}
	}
	e.publish(id, job.KindPlacing, job.Placing)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"kind":"placing"`) {
			return
		}
	}
	t.Fatalf("no event after the write timeout: %v", sc.Err())
}

// The client follows a job to its end across a dropped connection,
// resuming after the last event it saw: each event once, none missed.
func TestClientWatchJobReconnects(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	e.publish(id, job.KindPlacing, job.Placing)
	var got []string
	seen := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var end *api.StreamEnd
	go func() {
		var err error
		end, err = e.client.WatchJob(ctx, id, api.WatchOptions{}, func(ev api.StreamEvent) {
			got = append(got, ev.Kind)
			seen <- struct{}{}
		})
		done <- err
	}()
	<-seen
	<-seen
	// Drop every connection: the client reconnects with Last-Event-ID.
	e.srv.CloseClientConnections()
	e.publish(id, job.KindRunning, job.Running)
	e.finish(id, job.Succeeded)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{job.KindQueued, job.KindPlacing, job.KindRunning, string(job.Succeeded)}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if end.Job.State != job.Succeeded {
		t.Errorf("end %+v", end)
	}

	// A server that cannot be reached is ErrUnreachable, soon.
	c := api.NewClient(e.srv.URL)
	c.Token = e.client.Token
	e.srv.Close()
	_, err := c.WatchJob(ctx, id, api.WatchOptions{ReconnectFor: 300 * time.Millisecond}, func(api.StreamEvent) {})
	if !errors.Is(err, api.ErrUnreachable) {
		t.Errorf("watching with the server gone: %v", err)
	}
}

// A new stream of every job's events starts where it was asked for:
// events stored before (here a burst of them, which the server's one
// follower may still be handing out when the stream joins) are not sent,
// and the first event sent is the first stored after.
func TestEventsStreamStartsWhenItIsAskedFor(t *testing.T) {
	for round := range 5 {
		e := newEnv(t)
		id := e.submit(spec())
		e.open("/v1/events", e.client.Token) // the follower runs
		var burst []events.Outgoing
		for i := range 300 {
			burst = append(burst, events.Outgoing{Subject: events.JobEventsSubject(id),
				Payload: &events.JobEvent{JobID: id, Kind: job.KindProgress, State: job.Running, Message: fmt.Sprint("before ", i)}})
		}
		for i, err := range e.bus.PublishTogether(t.Context(), burst...) {
			if err != nil {
				t.Fatalf("storing event %d: %v", i, err)
			}
		}
		s := e.open("/v1/events", e.client.Token)
		e.publish(id, job.KindPlacing, job.Placing)
		if got := s.next().job(t); got.Kind != job.KindPlacing {
			t.Fatalf("round %d: the new stream's first event is %s (%q), want the placing stored after it opened", round, got.Kind, got.Message)
		}
	}
}
