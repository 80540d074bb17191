package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

func TestHTTPSubmitCreatesQueuedJob(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		body   []byte
		ctype  string
		wantNm string
	}{
		{"yaml", spec().Name("as-yaml").YAML(), "application/yaml", "as-yaml"},
		{"json", spec().Name("as-json").JSON(), "application/json", "as-json"},
		{"yaml with charset", spec().Name("charset").YAML(), "application/x-yaml; charset=utf-8", "charset"},
		{"text/yaml", spec().Name("text-yaml").YAML(), "text/yaml", "text-yaml"},
		{"json without a content type", spec().Name("no-ctype").JSON(), "", "no-ctype"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.ctype != "" {
				h["Content-Type"] = tc.ctype
			}
			r := e.post(tc.body, h)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d, want 201: %s", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var raw map[string]any
			r.decode(t, &raw)
			id, _ := raw["id"].(string)
			if !job.ValidID(id) {
				t.Fatalf("id %v is not a job ID: %s", raw["id"], r.body)
			}
			if loc := r.header.Get("Location"); loc != "/v1/jobs/"+id {
				t.Errorf("Location %q, want /v1/jobs/%s", loc, id)
			}
			if raw["state"] != "queued" || raw["name"] != tc.wantNm || raw["team"] != "vision" {
				t.Errorf("state %v name %v team %v, want queued %s vision", raw["state"], raw["name"], raw["team"], tc.wantNm)
			}
			if p, ok := raw["placement"]; !ok || p != nil {
				t.Errorf("placement = %v (present %v), want null", p, ok)
			}
			if c, ok := raw["cost_usd"]; !ok || c != 0.0 {
				t.Errorf("cost_usd = %v (present %v), want 0", c, ok)
			}
			if pr, ok := raw["pending_reasons"].([]any); !ok || len(pr) != 0 {
				t.Errorf("pending_reasons = %#v, want an empty list", raw["pending_reasons"])
			}
			evs, _ := raw["events"].([]any)
			if len(evs) != 1 {
				t.Fatalf("events = %v, want one", raw["events"])
			}
			ev, _ := evs[0].(map[string]any)
			if ev["kind"] != "queued" || ev["state"] != "queued" || !strings.Contains(fmt.Sprint(ev["message"]), "via http") {
				t.Errorf("event = %v, want a queued event saying via http", ev)
			}
			if raw["submitted_at"] != t0.Format(time.RFC3339) {
				t.Errorf("submitted_at %v, want the fake clock's %s", raw["submitted_at"], t0.Format(time.RFC3339))
			}

			// The Location answers with the same job and its stored history.
			g := e.do(http.MethodGet, r.header.Get("Location"), nil, nil)
			if g.status != http.StatusOK {
				t.Fatalf("GET Location: %d %s", g.status, g.body)
			}
			var v api.JobView
			g.decode(t, &v)
			if v.ID != id || v.State != job.Queued || !slices.Equal(kinds(&v), []string{"queued"}) {
				t.Errorf("GET Location = %s %s %v, want %s queued [queued]", v.ID, v.State, kinds(&v), id)
			}
		})
	}
}

func TestHTTPSubmitExamples(t *testing.T) {
	e := newEnv(t)
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			v, created, err := e.client.Submit(t.Context(), b, "application/yaml", "")
			if err != nil || !created || v.State != job.Queued {
				t.Fatalf("submit = %+v, %v, %v; want a created queued job", v, created, err)
			}
			if hasDeadline := bytes.Contains(b, []byte("\ndeadline:")); hasDeadline != (v.DeadlineAt != nil) || (hasDeadline && !v.DeadlineAt.After(t0)) {
				t.Errorf("deadline_at %v, want one after the fake clock's now exactly when the spec has a deadline", v.DeadlineAt)
			}
		})
	}
}

// An idempotency key names one job for a day (job.KeyPeriod): a retry an
// hour later, past midnight, returns it; the key used again a day after
// makes a new job with an ID of its own (never the first job's, whose
// launches and charges are named after its ID, even once retention has
// removed it); a job stored before keys had periods is found by a retry.
func TestIdempotencyKeyNamesOneJobForADay(t *testing.T) {
	e := newEnv(t)
	e.clk.Advance(14*time.Hour + 30*time.Minute) // 23:30 UTC
	key := map[string]string{"Content-Type": "application/yaml", "Idempotency-Key": "nightly"}
	submit := func(wantStatus int) api.JobView {
		t.Helper()
		r := e.post(spec().Name("nightly").YAML(), key)
		if r.status != wantStatus {
			t.Fatalf("submit at %s: %d %s, want %d", e.clk.Now().Format(time.RFC3339), r.status, r.body, wantStatus)
		}
		var v api.JobView
		r.decode(t, &v)
		return v
	}
	first := submit(http.StatusCreated)
	e.clk.Advance(time.Hour) // 00:30, the next day
	if again := submit(http.StatusOK); again.ID != first.ID {
		t.Fatalf("a retry an hour later, past midnight, made %s; want the first job %s", again.ID, first.ID)
	}
	e.clk.Advance(23*time.Hour + time.Minute) // a day and a minute after the first
	second := submit(http.StatusCreated)
	if second.ID == first.ID || second.ID == job.IDForKey("vision", "nightly") {
		t.Fatalf("the key used again a day later made %s: an ID used before", second.ID)
	}
	if again := submit(http.StatusOK); again.ID != second.ID {
		t.Fatalf("a retry of the second submission made %s; want %s", again.ID, second.ID)
	}
	if keys := e.storedKeys(); len(keys) != 2 || !slices.Contains(keys, first.ID) || !slices.Contains(keys, second.ID) {
		t.Fatalf("stored %v, want the two jobs %s and %s", keys, first.ID, second.ID)
	}

	// A job stored under the ID a key named before periods.
	plain := e.post(spec().Name("legacy").YAML(), map[string]string{"Content-Type": "application/yaml"})
	var pv api.JobView
	plain.decode(t, &pv)
	r, _, err := e.bus.Jobs().Get(t.Context(), pv.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.ID, r.Status.IdempotencyKey = job.IDForKey("vision", "old"), "old"
	if _, err := e.bus.Jobs().Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	retry := e.post(spec().Name("legacy").YAML(), map[string]string{"Content-Type": "application/yaml", "Idempotency-Key": "old"})
	var rv api.JobView
	retry.decode(t, &rv)
	if retry.status != http.StatusOK || rv.ID != r.ID {
		t.Fatalf("a retry of a submission stored before periods: %d, job %s; want 200 and %s", retry.status, rv.ID, r.ID)
	}
}

func TestHTTPSubmitIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	key := map[string]string{"Content-Type": "application/yaml", "Idempotency-Key": "nightly-2031-03-14"}
	first := e.post(spec().Name("nightly").YAML(), key)
	if first.status != http.StatusCreated {
		t.Fatalf("first submit: %d %s", first.status, first.body)
	}
	var v1 api.JobView
	first.decode(t, &v1)

	t.Run("a retry returns the same job", func(t *testing.T) {
		e.clk.Advance(time.Minute)
		// The same spec sent as JSON is the same submission.
		again := e.post(spec().Name("nightly").JSON(), map[string]string{"Content-Type": "application/json", "Idempotency-Key": key["Idempotency-Key"]})
		if again.status != http.StatusOK {
			t.Fatalf("retry: %d %s, want 200", again.status, again.body)
		}
		if again.header.Get("Location") != "" {
			t.Errorf("a retry sets Location %q; only a creation should", again.header.Get("Location"))
		}
		var v2 api.JobView
		again.decode(t, &v2)
		if v2.ID != v1.ID || !v2.SubmittedAt.Equal(v1.SubmittedAt) || v2.State != job.Queued {
			t.Errorf("retry = %s submitted %s, want %s submitted %s", v2.ID, v2.SubmittedAt, v1.ID, v1.SubmittedAt)
		}
		if !slices.Equal(kinds(&v2), []string{"queued"}) {
			t.Errorf("retry history %v, want the first submission's [queued]", kinds(&v2))
		}
	})
	t.Run("a different spec under the key is a conflict", func(t *testing.T) {
		r := e.post(spec().Name("nightly").Priority(900).YAML(), key)
		if r.status != http.StatusConflict {
			t.Fatalf("status %d, want 409: %s", r.status, r.body)
		}
		if ae := r.apiError(t); ae.Code != api.CodeConflict {
			t.Errorf("code %q, want %q", ae.Code, api.CodeConflict)
		}
	})
	t.Run("one job is stored", func(t *testing.T) {
		if keys := e.storedKeys(); !slices.Equal(keys, []string{v1.ID}) {
			t.Errorf("stored %v, want only %s", keys, v1.ID)
		}
		if l := e.list(api.Query{}); len(l.Jobs) != 1 || l.Jobs[0].Priority != 100 {
			t.Errorf("listing %+v, want the one first job", l.Jobs)
		}
	})
}

func TestHTTPSubmitConcurrentRetriesCreateOneJob(t *testing.T) {
	e := newEnv(t)
	const n = 10
	var wg sync.WaitGroup
	statuses := make([]int, n)
	idsSeen := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, created, err := e.client.Submit(t.Context(), spec().YAML(), "application/yaml", "same-key")
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = map[bool]int{true: 201, false: 200}[created]
			idsSeen[i] = v.ID
		}()
	}
	wg.Wait()
	if c := countOf(statuses, 201); c != 1 {
		t.Errorf("%d submissions created the job, want exactly 1 (%v)", c, statuses)
	}
	slices.Sort(idsSeen)
	if len(slices.Compact(idsSeen)) != 1 {
		t.Errorf("submissions answered with jobs %v, want one", idsSeen)
	}
	if keys := e.storedKeys(); len(keys) != 1 {
		t.Errorf("stored %v, want one job", keys)
	}
}

// padTo pads a YAML spec with a comment to exactly n bytes.
func padTo(b []byte, n int) []byte {
	b = append(b, "#"...)
	return append(b, bytes.Repeat([]byte("x"), n-len(b))...)
}

func countOf[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// Every refused submission leaves nothing behind: no record, no listing.
func TestHTTPSubmitRefused(t *testing.T) {
	past := t0.Add(-time.Hour).Format(time.RFC3339)
	cases := []struct {
		name       string
		body       []byte
		header     map[string]string
		wantStatus int
		wantCode   string
		wantFields []string
	}{
		{
			name:       "invalid spec names every bad field",
			body:       spec().Set("resources", map[string]any{"gpus_per_node": 64, "accelerators": []string{"V1000"}}).Set("work", nil).Set("purchase", "cheap").YAML(),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec,
			wantFields: []string{"purchase", "resources.accelerators[0]", "resources.gpus_per_node", "work"},
		},
		{
			name:       "unknown field",
			body:       spec().Set("gpus", 8).JSON(),
			header:     map[string]string{"Content-Type": "application/json"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec, wantFields: []string{"gpus"},
		},
		{
			name:       "not yaml",
			body:       []byte("name: [unclosed"),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec,
		},
		{
			name:       "empty body",
			body:       nil,
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec,
		},
		{
			name:       "deadline before the clock's now",
			body:       spec().Deadline(past).YAML(),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec, wantFields: []string{"deadline"},
		},
		{
			name:       "deadline exactly now",
			body:       spec().Deadline(t0.Format(time.RFC3339)).YAML(),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec, wantFields: []string{"deadline"},
		},
		{
			name:       "body over 1 MiB",
			body:       append(spec().YAML(), bytes.Repeat([]byte("# padding\n"), api.MaxBodyBytes/10+1)...),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusRequestEntityTooLarge, wantCode: api.CodeTooLarge,
		},
		{
			name:       "body of exactly 1 MiB is read, and refused as a spec",
			body:       padTo(spec().YAML(), api.MaxBodyBytes),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec,
		},
		{
			name:       "spec over the spec limit but under the body limit",
			body:       append(spec().YAML(), bytes.Repeat([]byte("# padding\n"), job.MaxSpecBytes/10+1)...),
			header:     map[string]string{"Content-Type": "application/yaml"},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidSpec,
		},
		{
			name:       "multipart form",
			body:       []byte("--x\r\nContent-Disposition: form-data; name=\"spec\"\r\n\r\nname: a\r\n--x--\r\n"),
			header:     map[string]string{"Content-Type": "multipart/form-data; boundary=x"},
			wantStatus: http.StatusUnsupportedMediaType, wantCode: api.CodeMediaType,
		},
		{
			name:       "form encoded",
			body:       []byte("name=a"),
			header:     map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			wantStatus: http.StatusUnsupportedMediaType, wantCode: api.CodeMediaType,
		},
		{
			name:       "garbled content type",
			body:       spec().YAML(),
			header:     map[string]string{"Content-Type": "application/yaml; ==="},
			wantStatus: http.StatusUnsupportedMediaType, wantCode: api.CodeMediaType,
		},
		{
			name:       "idempotency key too long",
			body:       spec().YAML(),
			header:     map[string]string{"Content-Type": "application/yaml", "Idempotency-Key": strings.Repeat("k", 257)},
			wantStatus: http.StatusBadRequest, wantCode: api.CodeInvalidRequest,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			r := e.post(tc.body, tc.header)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			ae := r.apiError(t)
			if ae.Code != tc.wantCode || ae.Message == "" {
				t.Errorf("error %+v, want code %q with a message", ae, tc.wantCode)
			}
			if tc.wantFields != nil {
				var got []string
				for _, f := range ae.Fields {
					if f.Message == "" {
						t.Errorf("field %s has no message", f.Field)
					}
					got = append(got, f.Field)
				}
				got = slices.Compact(got)
				if !slices.Equal(got, tc.wantFields) {
					t.Errorf("fields %v, want %v", got, tc.wantFields)
				}
			}
			e.assertNothingStored()
		})
	}
}

func TestHTTPSubmitFutureDeadlineByFakeClock(t *testing.T) {
	e := newEnv(t)
	// An hour after the fake clock's now, long after the wall clock's: the
	// service must judge deadlines by its own clock.
	at := t0.Add(time.Hour)
	v, created, err := e.client.Submit(t.Context(), spec().Deadline(at.Format(time.RFC3339)).YAML(), "application/yaml", "")
	if err != nil || !created {
		t.Fatalf("submit: %v", err)
	}
	if v.DeadlineAt == nil || !v.DeadlineAt.Equal(at) {
		t.Errorf("deadline_at %v, want %s", v.DeadlineAt, at)
	}
	v, _, err = e.client.Submit(t.Context(), spec().Deadline("90m").YAML(), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(90 * time.Minute); v.DeadlineAt == nil || !v.DeadlineAt.Equal(want) {
		t.Errorf("relative deadline_at %v, want %s", v.DeadlineAt, want)
	}
}
