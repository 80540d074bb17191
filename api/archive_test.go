package api_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/catalog"
)

// startBareService is startService without the local copy of job pages:
// every page is read from the store (the archive included).
func startBareService(t *testing.T, e *env) *api.Service {
	t.Helper()
	svc := api.NewService(e.bus, catalog.Default(), e.clk, eventstest.Logger(t))
	svc.KeepPages("", 0)
	ready := make(chan error, 1)
	go func() { ready <- svc.Start(t.Context()) }()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the API service's index did not become ready")
	}
	return svc
}

// A finished job's record is archived a day after it finished, once its
// history is sealed, and not before; archived, it is off the job bucket,
// and its page, its listing and a cancellation read as before, on the
// server that archived it, on one started after (with or without a copy
// of job pages) and on one that was running meanwhile. Retention removes
// it everywhere.
func TestArchivedJobReadsAsBefore(t *testing.T) {
	e := newEnv(t)
	ctx := asOp(t.Context())
	running := startBareService(t, e) // started before the archiving
	submit := e.submitEveryMinute
	old, unsealed, live := submit("old"), submit("unsealed"), submit("live")
	for _, id := range []string{old, unsealed} {
		if _, err := e.svc.Cancel(ctx, id, "done"); err != nil {
			t.Fatal(err)
		}
	}
	var sealed []uint64
	seal := func(id string) {
		t.Helper()
		seals, upTo, err := e.bus.SealJobHistory(t.Context(), id)
		if err != nil || len(seals) == 0 {
			t.Fatalf("sealing %s: %v, %v", id, seals, err)
		}
		sealed = seals
		e.setRecord(id, func(r *job.Record) { r.Status.Sealed = &job.Sealed{History: seals} })
		if err := e.bus.PurgeJobHistory(t.Context(), id, upTo); err != nil {
			t.Fatal(err)
		}
	}
	e.clk.Advance(2 * time.Hour)
	seal(old)
	before, err := e.svc.Get(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.svc.Archive(t.Context(), 100); err != nil || n != 0 {
		t.Fatalf("two hours after it finished: archived %d (%v), want none", n, err)
	}

	e.clk.Advance(api.ArchiveAfter)
	if n, err := e.svc.Archive(t.Context(), 100); err != nil || n != 1 {
		t.Fatalf("a day after: archived %d (%v), want the one sealed job", n, err)
	}
	if keys := e.storedKeys(); slices.Contains(keys, old) || len(keys) != 2 {
		t.Fatalf("the job bucket holds %v after the archiving, want %s and %s", keys, unsealed, live)
	}
	if n, err := e.svc.Archive(t.Context(), 100); err != nil || n != 0 {
		t.Fatalf("archiving again: %d (%v), want none", n, err)
	}

	same := func(who string, v *api.JobView) {
		t.Helper()
		if v.ID != old || v.State != before.State || v.Name != before.Name || !slices.Equal(kinds(v), kinds(before)) {
			t.Fatalf("%s: the archived job's page shows %s %s %s %v, want %s %s %v", who, v.ID, v.State, v.Name, kinds(v), before.State, before.Name, kinds(before))
		}
	}
	listed := func(who string, svc *api.Service) {
		t.Helper()
		testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
			l, err := svc.List(ctx, api.Query{})
			if err != nil {
				return err
			}
			if got := ids(l.Jobs); !slices.Contains(got, old) || len(got) != 3 {
				return errors.New(who + ": the listing shows " + strings.Join(got, ","))
			}
			return nil
		})
	}
	restarted, bare := startService(t, e.bus, e.clk), startBareService(t, e)
	for who, svc := range map[string]*api.Service{"the archiving server": e.svc, "a server running meanwhile": running, "a server started after": restarted, "one without a copy of pages": bare} {
		listed(who, svc)
		testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
			v, err := svc.Get(ctx, old)
			if err != nil {
				return err
			}
			same(who, v)
			return nil
		})
		var ae *api.Error
		if _, err := svc.Cancel(ctx, old, "again"); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
			t.Fatalf("%s: cancelling the archived job: %v, want a conflict (already finished)", who, err)
		}
	}
	if v, err := e.client.Get(t.Context(), old); err != nil {
		t.Fatal(err)
	} else {
		same("over HTTP", v)
	}

	// Retention: gone from every server, and from the store.
	if n, err := e.svc.Prune(ctx, api.Retention{MaxAge: time.Hour}); err != nil || n != 2 {
		t.Fatalf("retention removed %d (%v), want the two finished jobs", n, err)
	}
	for who, svc := range map[string]*api.Service{"the archiving server": e.svc, "a server running meanwhile": running, "a server started after": restarted, "one without a copy of pages": bare} {
		testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
			_, err := svc.Get(ctx, old)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
				return errors.New(who + ": the removed archived job still reads")
			}
			l, err := svc.List(ctx, api.Query{})
			if err != nil {
				return err
			}
			if got := ids(l.Jobs); len(got) != 1 || got[0] != live {
				return errors.New(who + ": the listing after retention shows " + strings.Join(got, ","))
			}
			return nil
		})
	}
	if h, err := e.bus.JobHistory(t.Context(), old, sealed, 0); err != nil || len(h) != 0 {
		t.Fatalf("the removed archived job's history: %d events (%v)", len(h), err)
	}
	again := startBareService(t, e)
	if l, err := again.List(ctx, api.Query{}); err != nil || len(l.Jobs) != 1 {
		t.Fatalf("a server started after the removal lists %v (%v), want the live job only", l, err)
	}
}
