package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

func TestHTTPGetJob(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	unknown := job.NewID(t0.Add(time.Hour))
	cases := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantCode   string
		wantAllow  string
	}{
		{"existing job", http.MethodGet, "/v1/jobs/" + id, http.StatusOK, "", ""},
		{"unknown job", http.MethodGet, "/v1/jobs/" + unknown, http.StatusNotFound, api.CodeNotFound, ""},
		{"upper-case id", http.MethodGet, "/v1/jobs/j-UPPER", http.StatusNotFound, api.CodeNotFound, ""},
		{"escaped path traversal", http.MethodGet, "/v1/jobs/..%2F..", http.StatusNotFound, api.CodeNotFound, ""},
		{"escaped dots", http.MethodGet, "/v1/jobs/%2e%2e", http.StatusNotFound, api.CodeNotFound, ""},
		{"no id", http.MethodGet, "/v1/jobs/", http.StatusNotFound, api.CodeNotFound, ""},
		{"escaped slash in id", http.MethodGet, "/v1/jobs/j-abc%2Fdef", http.StatusNotFound, api.CodeNotFound, ""},
		{"subject wildcard id", http.MethodGet, "/v1/jobs/j-%3E", http.StatusNotFound, api.CodeNotFound, ""},
		{"over-long id", http.MethodGet, "/v1/jobs/j-" + strings.Repeat("0", 100), http.StatusNotFound, api.CodeNotFound, ""},
		{"trailing path", http.MethodGet, "/v1/jobs/" + id + "/history", http.StatusNotFound, api.CodeNotFound, ""},
		{"unknown path", http.MethodGet, "/v2/jobs", http.StatusNotFound, api.CodeNotFound, ""},
		{"root, not read", http.MethodPost, "/", http.StatusNotFound, api.CodeNotFound, ""},
		{"PUT a job", http.MethodPut, "/v1/jobs/" + id, http.StatusMethodNotAllowed, api.CodeMethod, "GET, DELETE"},
		{"POST a job", http.MethodPost, "/v1/jobs/" + id, http.StatusMethodNotAllowed, api.CodeMethod, "GET, DELETE"},
		{"PATCH the collection", http.MethodPatch, "/v1/jobs", http.StatusMethodNotAllowed, api.CodeMethod, "GET, POST"},
		{"DELETE the collection", http.MethodDelete, "/v1/jobs", http.StatusMethodNotAllowed, api.CodeMethod, "GET, POST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil, nil)
			if r.status != tc.wantStatus {
				t.Fatalf("%s %s: status %d, want %d: %s", tc.method, tc.path, r.status, tc.wantStatus, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if tc.wantAllow != "" && r.header.Get("Allow") != tc.wantAllow {
				t.Errorf("Allow %q, want %q", r.header.Get("Allow"), tc.wantAllow)
			}
			if tc.wantCode != "" {
				if ae := r.apiError(t); ae.Code != tc.wantCode {
					t.Errorf("code %q, want %q", ae.Code, tc.wantCode)
				}
				return
			}
			var v api.JobView
			r.decode(t, &v)
			if v.ID != id || v.State != job.Queued || v.Spec == nil || v.Spec.Name != "resnet" {
				t.Errorf("job %+v, want %s queued with its spec", v, id)
			}
			if !slices.Equal(kinds(&v), []string{"queued"}) || !v.Events[0].Time.Equal(t0) {
				t.Errorf("history %+v, want one queued event at the fake clock's now", v.Events)
			}
		})
	}
}

func TestHTTPHealthz(t *testing.T) {
	e := newEnv(t)
	if r := e.do(http.MethodGet, "/healthz", nil, nil); r.status != http.StatusOK {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
}

func TestHandlerMountsExtraHandlers(t *testing.T) {
	e := newEnv(t)
	h := e.svc.Handler(map[string]http.Handler{"/metrics": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("up 1\n"))
	})})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e.client.Token)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.String() != "up 1\n" {
		t.Errorf("/metrics = %d %q, want the extra handler's answer", rec.Code, rec.Body.String())
	}
}

func TestGetShowsHistoryAndPendingReasons(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	id := e.submit(spec())
	reasons := []job.PendingReason{{Code: "max-price", Offers: 12, Message: "12 offers: above max price"}}
	// Stand in for the scheduler, which answers for the jobs it looked at.
	stop, err := e.bus.Serve(events.SubjectPendingReasons, func(_ context.Context, data []byte) []byte {
		var req struct{ ID string }
		_ = json.Unmarshal(data, &req)
		if req.ID != id {
			return []byte(`{"reasons":[]}`)
		}
		b, _ := json.Marshal(map[string]any{"reasons": reasons})
		return b
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := e.bus.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: "no offer fits", Reasons: reasons}); err != nil {
		t.Fatal(err)
	}
	v, err := e.client.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.PendingReasons, reasons) {
		t.Errorf("pending_reasons %+v, want %+v", v.PendingReasons, reasons)
	}
	if !slices.Equal(kinds(v), []string{"queued", "pending"}) || len(v.Events[1].Reasons) != 1 {
		t.Errorf("history %+v, want queued then pending with its reasons", v.Events)
	}

	// Once the job has left the queue, stale reasons are not shown.
	e.setRecord(id, func(r *job.Record) { r.Status.State = job.Placing })
	v, err = e.client.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.PendingReasons == nil || len(v.PendingReasons) != 0 {
		t.Errorf("pending_reasons of a placing job = %#v, want an empty list", v.PendingReasons)
	}
}

func TestGetUnavailableStore(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.svc.Get(asOp(ctx), id)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUnavailable || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("Get with a dead context = %v, want %s", err, api.CodeUnavailable)
	}
}
