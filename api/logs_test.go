package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// ship stores lines of one attempt's output as its agent would, one batch,
// each line a second after the one before from at.
func (e *env) ship(id string, attempt int, at time.Time, texts ...string) {
	e.t.Helper()
	b := &events.LogBatch{JobID: id, Attempt: attempt, Instance: fmt.Sprintf("i-%d", attempt), Seq: 1}
	for i, t := range texts {
		b.Lines = append(b.Lines, events.LogLine{Time: at.Add(time.Duration(i) * time.Second), Stream: events.LogStdout, Text: t})
	}
	if err := e.bus.Publish(e.t.Context(), events.LogSubject(id, attempt), b); err != nil {
		e.t.Fatal(err)
	}
}

func logTexts(ls []api.LogLineView) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Text
	}
	return out
}

func (e *env) logs(id, query string) (response, api.LogPage) {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/jobs/"+id+"/logs"+query, nil, nil)
	var p api.LogPage
	if res.status == http.StatusOK {
		res.decode(e.t, &p)
	}
	return res, p
}

// TestLogsReadsAJobsOutput: the output of every attempt in order, of one
// attempt, its end, since a time, and page by page with the cursor each
// page gives.
func TestLogsReadsAJobsOutput(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	other := e.submit(spec().Name("other"))
	e.ship(id, 1, t0, "epoch 1", "epoch 2", "checkpoint saved")
	e.ship(other, 1, t0, "not this job's")
	e.ship(id, 2, t0.Add(time.Hour), "resuming from checkpoint", "epoch 3")
	all := []string{"epoch 1", "epoch 2", "checkpoint saved", "resuming from checkpoint", "epoch 3"}
	e.clk.Set(t0.Add(90 * time.Minute))

	for _, tt := range []struct {
		name, query string
		want        []string
	}{
		{"every attempt", "", all},
		{"one attempt", "?attempt=2", all[3:]},
		{"the end", "?tail=2", all[3:]},
		{"the end of attempt 1", "?attempt=1&tail=1", all[2:3]},
		{"since a time", "?since=" + url.QueryEscape(t0.Add(time.Second).Format(time.RFC3339)), all[1:]},
		{"since a while", "?since=31m", all[3:]}, // back from now, 1h30m after t0
		{"no such attempt", "?attempt=9", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, page := e.logs(id, tt.query)
			if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/json" {
				t.Fatalf("GET logs%s: %d %s", tt.query, res.status, res.body)
			}
			if got := logTexts(page.Lines); !slices.Equal(got, tt.want) {
				t.Fatalf("GET logs%s: %q, want %q", tt.query, got, tt.want)
			}
		})
	}
	_, page := e.logs(id, "")
	if l := page.Lines[3]; l.Attempt != 2 || l.Instance != "i-2" || l.Stream != "stdout" || !l.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("a line reads %+v", l)
	}

	// Page by page: two lines a page, each going on where the last ended.
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the pages never end")
		}
		res, page := e.logs(id, "?limit=2&after="+after)
		if res.status != http.StatusOK || len(page.Lines) > 2 {
			t.Fatalf("page %d: %d %s", pages, res.status, res.body)
		}
		got = append(got, logTexts(page.Lines)...)
		after = page.Next
		if !page.More {
			break
		}
	}
	if !slices.Equal(got, all) {
		t.Fatalf("read by pages: %q", got)
	}
	// The last cursor gives what was written since, and nothing else.
	e.ship(id, 2, t0.Add(2*time.Hour), "epoch 4")
	if _, page := e.logs(id, "?after="+after); !slices.Equal(logTexts(page.Lines), []string{"epoch 4"}) {
		t.Fatalf("after the last cursor: %q", logTexts(page.Lines))
	}
}

// TestLogsVisibility: the output is read by whoever may read the job, and
// by nobody else: another team's job is not found, as the job itself is.
func TestLogsVisibility(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec().Team("vision"))
	e.ship(id, 1, t0, "secret sauce")
	for _, tt := range []struct {
		name   string
		client *api.Client
		want   int
	}{
		{"the team's viewer", e.as("vision", auth.Viewer), http.StatusOK},
		{"a platform viewer", e.as("", auth.Viewer), http.StatusOK},
		{"another team's admin", e.as("nlp", auth.Admin), http.StatusNotFound},
		{"no token", &api.Client{Base: e.srv.URL, HTTP: http.DefaultClient}, http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, jobErr := tt.client.Get(t.Context(), id)
			page, err := tt.client.Logs(t.Context(), id, api.LogsQuery{})
			status := http.StatusOK
			if ae, ok := err.(*api.Error); ok {
				status = ae.Status
			} else if err != nil {
				t.Fatal(err)
			}
			jobStatus := http.StatusOK
			if ae, ok := jobErr.(*api.Error); ok {
				jobStatus = ae.Status
			}
			if status != tt.want || status != jobStatus {
				t.Fatalf("logs %d, job %d, want %d for both", status, jobStatus, tt.want)
			}
			if status == http.StatusOK && !slices.Equal(logTexts(page.Lines), []string{"secret sauce"}) {
				t.Fatalf("read %q", logTexts(page.Lines))
			}
			if status != http.StatusOK && strings.Contains(fmt.Sprint(err), "secret") {
				t.Fatalf("a refusal shows the output: %v", err)
			}
			// Following is read the same way.
			_, ferr := tt.client.FollowLogs(t.Context(), id, api.LogsQuery{Tail: 1}, func(api.LogLineView) error { return errStop })
			if tt.want != http.StatusOK {
				if ae, ok := ferr.(*api.Error); !ok || ae.Status != tt.want {
					t.Fatalf("follow: %v, want %d", ferr, tt.want)
				}
			} else if ferr != errStop {
				t.Fatalf("follow: %v, want the line", ferr)
			}
		})
	}
	for _, bad := range []string{"j-00000000000000000000000000", "not-a-job"} {
		if res, _ := e.logs(bad, ""); res.status != http.StatusNotFound || res.apiError(t).Code != api.CodeNotFound {
			t.Errorf("GET logs of %s: %d %s", bad, res.status, res.body)
		}
	}
}

var errStop = fmt.Errorf("stop")

// TestLogsRefusesBadParameters: a parameter that makes no sense is a 400
// that names it.
func TestLogsRefusesBadParameters(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	for _, tt := range []struct{ query, param string }{
		{"?attempt=0", "attempt"},
		{"?attempt=first", "attempt"},
		{"?tail=0", "tail"},
		{"?tail=5001", "tail"},
		{"?tail=-3", "tail"},
		{"?limit=lots", "limit"},
		{"?since=yesterday", "since"},
		{"?after=12", "after"},
		{"?after=x.y", "after"},
		{"?follow=maybe", "follow"},
		{"?tail=5&after=1.0", "tail and after"},
		{"?tail=5&after=1.0&follow=true", "tail and after"},
		{"?after=nope&follow=true", "after"},
	} {
		res, _ := e.logs(id, tt.query)
		if res.status != http.StatusBadRequest {
			t.Errorf("GET logs%s: %d %s, want 400", tt.query, res.status, res.body)
			continue
		}
		if ae := res.apiError(t); ae.Code != api.CodeInvalidRequest || !strings.HasPrefix(ae.Message, tt.param+":") {
			t.Errorf("GET logs%s: %s %q, want it to name %s", tt.query, ae.Code, ae.Message, tt.param)
		}
	}
}

// TestLogsFollow: a follower gets what was there, then each line as it is
// stored, and its stream ends once the job has finished (with the job's
// state), its last lines included; a follower of a finished job gets the
// output and the end at once, as Server-Sent Events.
func TestLogsFollow(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	e.ship(id, 1, t0, "before 1", "before 2")

	got := make(chan api.LogLineView, 16)
	ended := make(chan error, 1)
	var state string
	go func() {
		var err error
		state, err = e.client.FollowLogs(t.Context(), id, api.LogsQuery{Tail: 1}, func(l api.LogLineView) error {
			got <- l
			return nil
		})
		ended <- err
	}()
	next := func(want string) {
		t.Helper()
		select {
		case l := <-got:
			if l.Text != want {
				t.Fatalf("followed %q, want %q", l.Text, want)
			}
		case err := <-ended:
			t.Fatalf("the stream ended (%v) before %q", err, want)
		case <-time.After(20 * time.Second):
			t.Fatalf("no %q", want)
		}
	}
	next("before 2") // the tail of one line
	e.ship(id, 1, t0.Add(time.Minute), "while following")
	next("while following")
	e.ship(id, 2, t0.Add(time.Hour), "second attempt")
	next("second attempt")

	// The job fails; its last line came before.
	e.ship(id, 2, t0.Add(2*time.Hour), "CUDA out of memory")
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Failed })
	next("CUDA out of memory")
	select {
	case err := <-ended:
		if err != nil || state != string(job.Failed) {
			t.Fatalf("the stream ended with %q, %v; want the job's state", state, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end with the job")
	}
	select {
	case l := <-got:
		t.Fatalf("a line after the end: %q", l.Text)
	default:
	}

	// A finished job: everything, then the end, as an event stream.
	res := e.do(http.MethodGet, "/v1/jobs/"+id+"/logs?follow=true", nil, nil)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow a finished job: %d %q", res.status, res.header.Get("Content-Type"))
	}
	body := string(res.body)
	if n := strings.Count(body, "event: line\n"); n != 5 || !strings.HasSuffix(body, "event: end\ndata: {\"state\":\"failed\"}\n\n") {
		t.Fatalf("the stream of a finished job:\n%s", body)
	}
	// Each line's id is the cursor after it: a reconnect goes on there.
	ids := regexpIDs(body)
	res = e.do(http.MethodGet, "/v1/jobs/"+id+"/logs?follow=true", nil, map[string]string{"Last-Event-ID": ids[2]})
	if body := string(res.body); strings.Count(body, "event: line\n") != 2 || !strings.Contains(body, "second attempt") || strings.Contains(body, "while following") {
		t.Fatalf("reconnected after the third line:\n%s", body)
	}
}

func regexpIDs(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if id, ok := strings.CutPrefix(l, "id: "); ok {
			out = append(out, id)
		}
	}
	return out
}

// TestFailedJobShowsItsLastLines: a failed job's view carries the end of
// its output; a running one's does not.
func TestFailedJobShowsItsLastLines(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	var texts []string
	for i := range 30 {
		texts = append(texts, fmt.Sprintf("line %d", i))
	}
	e.ship(id, 1, t0, texts...)
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Running })
	v, err := e.client.Get(context.Background(), id)
	if err != nil || len(v.LogTail) != 0 {
		t.Fatalf("a running job's view: %d lines of output, %v", len(v.LogTail), err)
	}
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Failed })
	v, err = e.client.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := logTexts(v.LogTail); !slices.Equal(got, texts[10:]) {
		t.Fatalf("a failed job's view ends with %q, want its last %d lines", got, api.LogTailLines)
	}
}

// TestLogsFollowOutlivesTheServersTimeouts: a server's read and write
// timeouts (which bound ordinary requests) do not end a follow.
func TestLogsFollowOutlivesTheServersTimeouts(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewUnstartedServer(e.svc.Handler(nil))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	c := api.NewClient(srv.URL)
	c.Token = e.client.Token
	id := e.submit(spec())
	got := make(chan string, 4)
	ended := make(chan error, 1)
	go func() {
		_, err := c.FollowLogs(t.Context(), id, api.LogsQuery{}, func(l api.LogLineView) error {
			got <- l.Text
			return nil
		})
		ended <- err
	}()
	e.ship(id, 1, t0, "first")
	if l := <-got; l != "first" {
		t.Fatalf("followed %q", l)
	}
	select {
	case err := <-ended:
		t.Fatalf("the follow ended with the server's timeouts: %v", err)
	case <-time.After(time.Second): // past both timeouts, three times over
	}
	e.ship(id, 1, t0, "after the timeouts")
	select {
	case l := <-got:
		if l != "after the timeouts" {
			t.Fatalf("followed %q", l)
		}
	case err := <-ended:
		t.Fatalf("the follow ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no line after the timeouts")
	}
}

// TestLogsFollowersAreBounded: past the bound a follow is refused (429,
// saying why) while pages are still read; a follower that goes frees its
// place.
func TestLogsFollowersAreBounded(t *testing.T) {
	e := newEnv(t)
	api.SetMaxFollowers(e.svc, 1)
	id := e.submit(spec())
	e.ship(id, 1, t0, "hello")
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = e.client.FollowLogs(ctx, id, api.LogsQuery{}, func(l api.LogLineView) error {
			first <- l.Text
			return nil
		})
	}()
	if l := <-first; l != "hello" {
		t.Fatalf("followed %q", l)
	}
	_, err := e.client.FollowLogs(t.Context(), id, api.LogsQuery{}, func(api.LogLineView) error { return nil })
	if ae, ok := err.(*api.Error); !ok || ae.Status != http.StatusTooManyRequests || ae.Code != api.CodeTooManyFollowers {
		t.Fatalf("a second follower: %v, want 429 %s", err, api.CodeTooManyFollowers)
	}
	if page, err := e.client.Logs(t.Context(), id, api.LogsQuery{}); err != nil || len(page.Lines) != 1 {
		t.Fatalf("a page while the follows are taken: %v", err)
	}
	cancel()
	<-ended
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		_, err := e.client.FollowLogs(ctx, id, api.LogsQuery{}, func(api.LogLineView) error { return errStop })
		if err != errStop {
			return fmt.Errorf("a follower after the first went: %v", err)
		}
		return nil
	})
}
