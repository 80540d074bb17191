package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// natsEnv is an env whose service also answers over NATS.
func natsEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	serveNATS(t, e.svc, e.bus)
	return e
}

// request sends a request and decodes the reply; a request that is not
// answered within a few seconds fails the test (a hang is a bug).
func (e *env) request(subject string, data []byte) api.Reply {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Second)
	defer cancel()
	b, err := e.bus.RequestWithHeader(ctx, subject, data, map[string]string{"Authorization": "Bearer " + e.client.Token})
	if err != nil {
		e.t.Fatalf("request %s: %v", subject, err)
	}
	var r api.Reply
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatalf("reply to %s is not JSON (%v): %s", subject, err, b)
	}
	return r
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestNATSSubmit(t *testing.T) {
	e := natsEnv(t)
	cases := []struct {
		name string
		data []byte
	}{
		{"spec as an object", mustJSON(map[string]any{"spec": json.RawMessage(spec().Name("object").JSON())})},
		{"spec as yaml text", mustJSON(map[string]any{"spec": string(spec().Name("yaml-text").YAML())})},
		{"spec as json text", mustJSON(map[string]any{"spec": string(spec().Name("json-text").JSON())})},
		{"raw yaml", spec().Name("raw-yaml").YAML()},
		{"raw json spec", spec().Name("raw-json").JSON()},
		{"raw yaml with leading space", append([]byte("\n  \n"), spec().Name("spaced").YAML()...)},
	}
	var created []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.clk.Advance(time.Second)
			r := e.request(events.SubjectSubmit, tc.data)
			if r.Error != nil {
				t.Fatalf("error reply: %v", r.Error)
			}
			if r.Job == nil || !r.Created || r.Job.State != job.Queued || !job.ValidID(r.Job.ID) {
				t.Fatalf("reply %+v, want a created queued job", r)
			}
			if !slices.Equal(kinds(r.Job), []string{"queued"}) || !strings.Contains(r.Job.Events[0].Message, "via nats") {
				t.Errorf("events %+v, want one queued via nats", r.Job.Events)
			}
			created = append(created, r.Job.ID)
		})
	}
	t.Run("all stored", func(t *testing.T) {
		stored := e.storedKeys()
		slices.Sort(stored)
		slices.Sort(created)
		if !slices.Equal(stored, created) {
			t.Errorf("stored %v, want %v", stored, created)
		}
	})
}

func TestNATSSubmitIdempotencyKey(t *testing.T) {
	e := natsEnv(t)
	req := func(name string) []byte {
		return mustJSON(api.SubmitRequest{Spec: spec().Name(name).JSON(), IdempotencyKey: "nats-key"})
	}
	first := e.request(events.SubjectSubmit, req("keyed"))
	if first.Error != nil || !first.Created {
		t.Fatalf("first: %+v", first)
	}
	again := e.request(events.SubjectSubmit, req("keyed"))
	if again.Error != nil || again.Created || again.Job.ID != first.Job.ID {
		t.Fatalf("retry: %+v, want job %s not created again", again, first.Job.ID)
	}
	other := e.request(events.SubjectSubmit, req("other"))
	if other.Error == nil || other.Error.Code != api.CodeConflict {
		t.Fatalf("different spec under the key: %+v, want %s", other, api.CodeConflict)
	}
	if keys := e.storedKeys(); len(keys) != 1 {
		t.Errorf("stored %v, want one job", keys)
	}
}

func TestNATSSubmitGarbled(t *testing.T) {
	cases := []struct {
		name     string
		data     string
		wantCode string
	}{
		{"spec is a number", `{"spec": 5}`, api.CodeInvalidSpec},
		{"spec is null", `{"spec": null}`, api.CodeInvalidSpec},
		{"spec is a list", `{"spec": [1, 2]}`, api.CodeInvalidSpec},
		{"spec is empty text", `{"spec": ""}`, api.CodeInvalidSpec},
		{"not json", `{not json`, api.CodeInvalidSpec},
		{"key is a number", `{"spec": {"name": "x"}, "idempotency_key": 5}`, api.CodeInvalidRequest},
		{"empty request", ``, api.CodeInvalidSpec},
		{"binary", "\xff\xfe\x00", api.CodeInvalidSpec},
		{"invalid spec", `{"spec": {"name": "x", "resources": {"gpus_per_node": 99}}}`, api.CodeInvalidSpec},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := natsEnv(t)
			r := e.request(events.SubjectSubmit, []byte(tc.data))
			if r.Error == nil || r.Job != nil {
				t.Fatalf("reply %+v, want an error", r)
			}
			if r.Error.Code != tc.wantCode || r.Error.Message == "" {
				t.Errorf("error %+v, want code %q with a message", r.Error, tc.wantCode)
			}
			e.assertNothingStored()
		})
	}
}

func TestNATSGetCancelList(t *testing.T) {
	e := natsEnv(t)
	e.clk.Advance(time.Second)
	a := e.submit(spec().Name("a").Team("nlp"))
	e.clk.Advance(time.Second)
	b := e.submit(spec().Name("b").Team("vision"))

	t.Run("get", func(t *testing.T) {
		r := e.request(events.SubjectGet, mustJSON(api.JobRequest{ID: a}))
		if r.Error != nil || r.Job == nil || r.Job.ID != a || !slices.Equal(kinds(r.Job), []string{"queued"}) {
			t.Fatalf("get: %+v", r)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		r := e.request(events.SubjectCancel, mustJSON(api.JobRequest{ID: b, Reason: "over budget"}))
		if r.Error != nil || r.Job == nil || r.Job.State != job.Cancelled || !strings.Contains(r.Job.Message, "over budget") {
			t.Fatalf("cancel: %+v", r)
		}
		if !slices.Equal(kinds(r.Job), []string{"queued", "cancelled"}) {
			t.Errorf("history %v", kinds(r.Job))
		}
	})
	t.Run("list", func(t *testing.T) {
		cases := []struct {
			name string
			data string
			want []string
		}{
			{"empty request", ``, []string{b, a}},
			{"empty object", `{}`, []string{b, a}},
			{"states", `{"states": ["cancelled"]}`, []string{b}},
			{"team", `{"team": "nlp"}`, []string{a}},
			{"name", `{"name": "a"}`, []string{a}},
			{"limit", `{"limit": 1}`, []string{b}},
			{"after", `{"after": "` + b + `"}`, []string{a}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.request(events.SubjectList, []byte(tc.data))
				if r.Error != nil || r.List == nil {
					t.Fatalf("list: %+v", r)
				}
				if got := ids(r.List.Jobs); !slices.Equal(got, tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			})
		}
	})
	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			name, subject, data, wantCode string
		}{
			{"get unknown", events.SubjectGet, string(mustJSON(api.JobRequest{ID: job.NewID(t0)})), api.CodeNotFound},
			{"get malformed id", events.SubjectGet, `{"id": "../x"}`, api.CodeNotFound},
			{"get without an id", events.SubjectGet, `{}`, api.CodeNotFound},
			{"get garbled", events.SubjectGet, `{not json`, api.CodeInvalidRequest},
			{"get empty", events.SubjectGet, ``, api.CodeInvalidRequest},
			{"get id is a number", events.SubjectGet, `{"id": 5}`, api.CodeInvalidRequest},
			{"cancel unknown", events.SubjectCancel, string(mustJSON(api.JobRequest{ID: job.NewID(t0)})), api.CodeNotFound},
			{"cancel garbled", events.SubjectCancel, `[1]`, api.CodeInvalidRequest},
			{"list garbled", events.SubjectList, `{not json`, api.CodeInvalidRequest},
			{"list unknown state", events.SubjectList, `{"states": ["done"]}`, api.CodeInvalidRequest},
			{"list bad after", events.SubjectList, `{"after": "x"}`, api.CodeInvalidRequest},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.request(tc.subject, []byte(tc.data))
				if r.Error == nil || r.Error.Code != tc.wantCode {
					t.Fatalf("reply %+v, want error %s", r, tc.wantCode)
				}
			})
		}
	})
}

// Two API services on one bus share the queue group: each request is
// answered once, so a submission creates one job.
func TestNATSQueueGroupAnswersOnce(t *testing.T) {
	e := natsEnv(t)
	other := startService(t, e.bus, e.clk)
	serveNATS(t, other, e.bus)

	nc := e.bus.Conn()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	const n = 5
	for i := range n {
		e.clk.Advance(time.Second)
		m := nats.NewMsg(events.SubjectSubmit)
		m.Reply, m.Data = inbox, spec().Name("q"+string(rune('a'+i))).YAML()
		m.Header.Set("Authorization", "Bearer "+e.client.Token)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		var r api.Reply
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Error != nil || !r.Created {
			t.Fatalf("reply %d: %s", i, m.Data)
		}
	}
	// Give a second answer time to arrive, should one be on its way.
	if m, err := sub.NextMsg(300 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a request was answered twice: %s (%v)", m.Data, err)
	}
	if keys := e.storedKeys(); len(keys) != n {
		t.Errorf("stored %d jobs, want %d", len(keys), n)
	}
}

func TestNATSStopEndsAnswers(t *testing.T) {
	e := newEnv(t)
	stop, err := e.svc.ServeNATS(e.bus)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.request(events.SubjectList, nil); r.List == nil {
		t.Fatalf("list before stop: %+v", r)
	}
	stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := e.bus.Request(ctx, events.SubjectList, nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("request after stop: %v, want no responders", err)
	}
}
