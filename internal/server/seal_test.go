package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// eventLines is what a job's page shows of its history, one line an event.
func eventLines(v *api.JobView) []string {
	var out []string
	for _, e := range v.Events {
		out = append(out, fmt.Sprintf("%s %s %s attempt %d: %s", e.Time.Format(time.RFC3339Nano), e.Kind, e.State, e.Attempt, e.Message))
	}
	return out
}

// An hour of the scheduler's clock after a job finished for good, the
// scheduling server seals its history: the job's own subject leaves the
// stream and its record names the seal; a day after, its record leaves
// the job bucket for the archive. A user sees nothing of it: the job's
// page lists the same events, and so it does after a restart, when the
// server's copy of job pages is made again from the stores.
func TestFinishedJobsHistoriesAreSealed(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Retention.Interval = job.Duration(time.Second) // the sealer's rounds
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx := context.Background()
	var ids []string
	for _, team := range []string{"nlp", "vision"} {
		v, _, err := c.Submit(ctx, costSpec(team, 1), "application/yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	before := map[string][]string{}
	for _, id := range ids {
		waitState(t, c, id, job.Succeeded, 120*time.Second)
		// Its page once its capacity is gone (its instances' ends are the
		// last events) and the page lists all the store holds.
		testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			r, _, err := s.Bus().Jobs().Get(ctx, id)
			if err != nil {
				return err
			}
			if r.Status.Current != nil || r.Status.Previous != nil {
				return fmt.Errorf("job %s still holds an attempt", id)
			}
			stored, err := s.Bus().JobHistory(ctx, id, r.SealedHistory(), 0)
			if err != nil {
				return err
			}
			v, err := c.Get(ctx, id)
			if err != nil {
				return err
			}
			if len(v.Events) < 3 || len(v.Events) != len(stored) {
				return fmt.Errorf("job %s's page lists %d events, the store holds %d", id, len(v.Events), len(stored))
			}
			before[id] = eventLines(v)
			return nil
		})
	}

	testutil.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		left, _, err := s.Bus().JobHistories(ctx, 0)
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, _, err := s.Bus().Jobs().Get(ctx, id)
			if err != nil {
				return err
			}
			if slices.Contains(left, id) || len(r.SealedHistory()) == 0 {
				return fmt.Errorf("job %s's history is not sealed (its record names %v)", id, r.SealedHistory())
			}
		}
		return nil
	})
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var sealed float64
		m := getText(t, s, "/metrics")
		for _, l := range strings.Split(m, "\n") {
			fmt.Sscanf(l, "spotwise_jobs_sealed_histories_total %g", &sealed)
		}
		if sealed < float64(len(ids)) || !strings.Contains(m, "\nspotwise_jobs_unsealed_histories ") {
			return fmt.Errorf("the metrics say %v histories sealed:\n%s", sealed, grepLines(m, "histories"))
		}
		return nil
	})
	same := func(c *api.Client, when string) {
		t.Helper()
		for _, id := range ids {
			v, err := c.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := eventLines(v); !slices.Equal(got, before[id]) {
				t.Errorf("%s, job %s's page lists\n%s\nwant\n%s", when, id, strings.Join(got, "\n"), strings.Join(before[id], "\n"))
			}
		}
	}
	same(c, "once sealed")

	// A day of the scheduler's clock after they finished, their records
	// leave the job bucket for the archive; their pages read the same.
	testutil.CheckFor(t, 180*time.Second, 200*time.Millisecond, func() error {
		for _, id := range ids {
			if _, _, err := s.Bus().Jobs().Get(ctx, id); !errors.Is(err, events.ErrNotFound) {
				return fmt.Errorf("job %s's record is still in the job bucket (%v)", id, err)
			}
		}
		var archived float64
		for _, l := range strings.Split(getText(t, s, "/metrics"), "\n") {
			fmt.Sscanf(l, "spotwise_jobs_archived_total %g", &archived)
		}
		if archived < float64(len(ids)) {
			return fmt.Errorf("the metrics say %v records archived", archived)
		}
		return nil
	})
	same(c, "once archived")
	s.Close()
	s = startServer(t, cfg)
	same(clientOf(s), "after a restart")
}
