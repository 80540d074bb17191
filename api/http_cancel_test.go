package api_test

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

func TestHTTPCancel(t *testing.T) {
	e := newEnv(t)
	queued := e.submit(spec().Name("queued"))
	succeeded := e.submit(spec().Name("done"))
	e.setRecord(succeeded, func(r *job.Record) { r.Status.State = job.Succeeded })
	failed := e.submit(spec().Name("failed"))
	e.setRecord(failed, func(r *job.Record) { r.Status.State = job.Failed })

	cases := []struct {
		name       string
		id         string
		reason     string
		wantStatus int
		wantCode   string
	}{
		{"queued job", queued, "wrong dataset", http.StatusOK, ""},
		{"again", queued, "second thoughts", http.StatusOK, ""},
		{"succeeded job", succeeded, "", http.StatusConflict, api.CodeAlreadyFinished},
		{"failed job", failed, "", http.StatusConflict, api.CodeAlreadyFinished},
		{"unknown job", job.NewID(t0), "", http.StatusNotFound, api.CodeNotFound},
		{"malformed id", "j-UPPER", "", http.StatusNotFound, api.CodeNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.clk.Advance(time.Minute)
			path := "/v1/jobs/" + tc.id
			if tc.reason != "" {
				path += "?reason=" + url.QueryEscape(tc.reason)
			}
			r := e.do(http.MethodDelete, path, nil, nil)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.body)
			}
			if tc.wantCode != "" {
				if ae := r.apiError(t); ae.Code != tc.wantCode {
					t.Errorf("code %q, want %q", ae.Code, tc.wantCode)
				}
				return
			}
			var v api.JobView
			r.decode(t, &v)
			if v.State != job.Cancelled || !strings.Contains(v.Message, "wrong dataset") {
				t.Errorf("job %s %q, want cancelled with the first reason", v.State, v.Message)
			}
			if !slices.Equal(kinds(&v), []string{"queued", "cancelled"}) {
				t.Errorf("history %v, want queued then one cancelled", kinds(&v))
			}
			if v.FinishedAt == nil || !v.FinishedAt.Equal(t0.Add(time.Minute)) {
				t.Errorf("finished_at %v, want the first cancellation's time %s", v.FinishedAt, t0.Add(time.Minute))
			}
		})
	}

	t.Run("finished jobs are untouched", func(t *testing.T) {
		for id, want := range map[string]job.State{succeeded: job.Succeeded, failed: job.Failed} {
			v, err := e.client.Get(t.Context(), id)
			if err != nil || v.State != want || len(v.Events) != 1 {
				t.Errorf("%s after a refused cancel: %+v, %v; want %s with only its queued event", id, v, err, want)
			}
		}
	})
}

func TestCancelRunningJobBillsToNow(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	e.setRecord(id, func(r *job.Record) {
		r.Status.State = job.Running
		r.Status.Current = &job.Attempt{N: 1, LaunchedAt: t0, Placement: job.Placement{Nodes: 1, PricePerHour: money.USD(2, 0)}}
	})
	e.clk.Advance(45 * time.Minute)
	v, err := e.client.Cancel(t.Context(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	// The message says who: the token's subject.
	if v.State != job.Cancelled || !strings.HasPrefix(v.Message, "cancelled by token:") {
		t.Errorf("job %s %q, want cancelled by the operator's token", v.State, v.Message)
	}
	last := v.Events[len(v.Events)-1]
	if last.Kind != "cancelled" || last.CostUSD != money.USD(1, 500_000) {
		t.Errorf("cancel event %+v, want cancelled costing $1.50", last)
	}
}

func TestConcurrentCancelsAgree(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	views := make([]*api.JobView, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[i], errs[i] = e.client.Cancel(t.Context(), id, "")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent cancels: %v", err)
	}
	for i, v := range views {
		if v.State != job.Cancelled {
			t.Errorf("cancel %d answered %s", i, v.State)
		}
	}
	rec, _, err := e.bus.Jobs().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status.State != job.Cancelled || rec.Status.FinishedAt.IsZero() {
		t.Errorf("stored %+v, want cancelled and finished", rec.Status)
	}
	v, err := e.client.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds(v), []string{"queued", "cancelled"}) {
		t.Errorf("history %v, want exactly one cancelled event", kinds(v))
	}
}
