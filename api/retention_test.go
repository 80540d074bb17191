package api_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// Retention removes finished jobs, record and history, once they are
// older than its age or beyond its count (oldest first), and never a live
// job: a removed job is a 404 and out of the listing.
func TestRetentionRemovesOnlyFinishedJobsPastItsLimits(t *testing.T) {
	e := newEnv(t)
	ctx := asOp(t.Context())
	submit := e.submitEveryMinute
	cancel := func(id string) {
		t.Helper()
		if _, err := e.svc.Cancel(ctx, id, "done"); err != nil {
			t.Fatal(err)
		}
	}
	old1, old2 := submit("old-1"), submit("old-2")
	cancel(old1)
	cancel(old2)
	live := submit("live") // queued, however old it gets
	e.clk.Advance(48 * time.Hour)
	recent := []string{submit("recent-1"), submit("recent-2"), submit("recent-3")}
	for _, id := range recent {
		cancel(id)
	}

	gone := func(id string) bool {
		t.Helper()
		_, err := e.svc.Get(ctx, id)
		var ae *api.Error
		if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusNotFound) {
			t.Fatal(err)
		}
		return err != nil
	}
	n, err := e.svc.Prune(ctx, api.Retention{MaxAge: 24 * time.Hour})
	if err != nil || n != 2 {
		t.Fatalf("by age: removed %d, %v; want the two old finished jobs", n, err)
	}
	for id, want := range map[string]bool{old1: true, old2: true, live: false, recent[0]: false} {
		if got := gone(id); got != want {
			t.Errorf("job %s gone = %v, want %v", id, got, want)
		}
	}
	for _, id := range []string{old1, old2} {
		h, err := e.bus.JobHistory(t.Context(), id, nil, 0)
		if err != nil || len(h) != 0 {
			t.Errorf("removed job %s still has %d history entries (%v)", id, len(h), err)
		}
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		l, err := e.client.List(t.Context(), api.Query{})
		if err != nil {
			return err
		}
		if len(l.Jobs) != 4 {
			return errors.New("the listing still shows removed jobs")
		}
		return nil
	})

	// By count: of three finished jobs, keep the newest one.
	if n, err := e.svc.Prune(ctx, api.Retention{MaxJobs: 1}); err != nil || n != 2 {
		t.Fatalf("by count: removed %d, %v; want 2", n, err)
	}
	for id, want := range map[string]bool{recent[0]: true, recent[1]: true, recent[2]: false, live: false} {
		if got := gone(id); got != want {
			t.Errorf("job %s gone = %v, want %v", id, got, want)
		}
	}
	if n, err := e.svc.Prune(ctx, api.Retention{MaxJobs: 1, MaxAge: time.Hour}); err != nil || n != 0 {
		t.Fatalf("again: removed %d, %v; want nothing", n, err)
	}
	if v, err := e.svc.Get(ctx, live); err != nil || v.State != job.Queued {
		t.Fatalf("the live job: %+v, %v", v, err)
	}
}
