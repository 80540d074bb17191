package api

import (
	"unsafe"

	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

var base = time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)

func rec(id string, at time.Time, state job.State) *job.Record {
	return &job.Record{ID: id, Spec: job.Spec{Name: id}, Status: job.Status{State: state, SubmittedAt: at}}
}

func listed(t *testing.T, ix *index, q Query) []string {
	t.Helper()
	l, ok := ix.list(q, base)
	if !ok {
		t.Fatalf("list(%+v) refused the cursor", q)
	}
	var out []string
	for _, s := range l.Jobs {
		out = append(out, s.ID)
	}
	return out
}

// The service applies its own writes at once and the watch brings them
// again later; whichever order changes arrive in, the newest revision
// wins and a deleted job stays deleted.
func TestIndexAppliesNewestRevision(t *testing.T) {
	id := job.NewID(base)
	cases := []struct {
		name      string
		changes   []events.JobChange
		wantState job.State // "" for not listed
	}{
		{"in order", []events.JobChange{
			{ID: id, Revision: 1, Record: rec(id, base, job.Queued)},
			{ID: id, Revision: 2, Record: rec(id, base, job.Cancelled)},
		}, job.Cancelled},
		{"own write first, watch late", []events.JobChange{
			{ID: id, Revision: 2, Record: rec(id, base, job.Cancelled)},
			{ID: id, Revision: 1, Record: rec(id, base, job.Queued)},
			{ID: id, Revision: 2, Record: rec(id, base, job.Cancelled)},
		}, job.Cancelled},
		{"deleted", []events.JobChange{
			{ID: id, Revision: 1, Record: rec(id, base, job.Queued)},
			{ID: id, Revision: 3},
		}, ""},
		{"a late write does not bring back a deleted job", []events.JobChange{
			{ID: id, Revision: 1, Record: rec(id, base, job.Queued)},
			{ID: id, Revision: 3},
			{ID: id, Revision: 2, Record: rec(id, base, job.Cancelled)},
		}, ""},
		{"delete of an unseen job, then its stale write", []events.JobChange{
			{ID: id, Revision: 3},
			{ID: id, Revision: 2, Record: rec(id, base, job.Queued)},
		}, ""},
		{"created again after a delete", []events.JobChange{
			{ID: id, Revision: 1, Record: rec(id, base, job.Queued)},
			{ID: id, Revision: 2},
			{ID: id, Revision: 5, Record: rec(id, base, job.Running)},
		}, job.Running},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ix := newIndex()
			for _, c := range tc.changes {
				ix.apply(c)
			}
			l, _ := ix.list(Query{}, base)
			switch {
			case tc.wantState == "" && len(l.Jobs) != 0:
				t.Errorf("listed %+v, want nothing", l.Jobs)
			case tc.wantState != "" && (len(l.Jobs) != 1 || l.Jobs[0].State != tc.wantState):
				t.Errorf("listed %+v, want one %s job", l.Jobs, tc.wantState)
			}
			if ix.order.Len() > 1 {
				t.Errorf("order holds %d entries for one job", ix.order.Len())
			}
		})
	}
}

func TestIndexOrdersBySubmissionTime(t *testing.T) {
	ix := newIndex()
	keyed := job.IDForKey("team", "key") // sorts after every time-ordered ID
	a, b, c := job.NewID(base), job.NewID(base.Add(2*time.Second)), job.NewID(base.Add(3*time.Second))
	rev := uint64(0)
	for _, r := range []*job.Record{rec(c, base.Add(3*time.Second), job.Queued), rec(a, base, job.Queued), rec(keyed, base.Add(time.Second), job.Queued), rec(b, base.Add(2*time.Second), job.Queued)} {
		rev++
		ix.apply(events.JobChange{ID: r.ID, Revision: rev, Record: r})
	}
	want := []string{c, b, keyed, a}
	if got := listed(t, ix, Query{}); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	cursors := []struct {
		name  string
		after string
		want  []string
	}{
		{"after a listed keyed job", keyed, []string{a}},
		{"after a listed job", b, []string{keyed, a}},
		{"after an unseen time-ordered id", job.NewID(base.Add(2500 * time.Millisecond)), []string{b, keyed, a}},
		{"after an unseen id older than all", job.NewID(base.Add(-time.Hour)), nil},
	}
	for _, tc := range cursors {
		t.Run(tc.name, func(t *testing.T) {
			if got := listed(t, ix, Query{After: tc.after}); !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("after a deleted job", func(t *testing.T) {
		ix.apply(events.JobChange{ID: keyed, Revision: 100})
		if got := listed(t, ix, Query{After: keyed}); !slices.Equal(got, []string{a}) {
			t.Errorf("listed %v, want %v", got, []string{a})
		}
	})
	t.Run("after an unseen keyed id", func(t *testing.T) {
		if _, ok := ix.list(Query{After: job.IDForKey("team", "other")}, base); ok {
			t.Error("an unknown keyed cursor was accepted; it has no place in the order")
		}
	})
}

func TestIDTime(t *testing.T) {
	for _, at := range []time.Time{time.UnixMilli(0), base, base.Add(123 * time.Millisecond), time.Date(2999, 12, 31, 23, 59, 59, 999e6, time.UTC)} {
		got, ok := idTime(job.NewID(at))
		if !ok || !got.Equal(at) {
			t.Errorf("idTime(NewID(%s)) = %s, %v", at, got, ok)
		}
	}
	for _, id := range []string{job.IDForKey("t", "k"), "j-0", "j-" + string(make([]byte, 26))} {
		if _, ok := idTime(id); ok {
			t.Errorf("idTime(%q) claims a time", id)
		}
	}
}

// A listing of live jobs finds them among many finished ones, newest
// first and through the cursor, whatever came in between; and a finished
// job's cost, worked out once, is what its record says it cost.
func TestIndexListsLiveJobsAmongFinished(t *testing.T) {
	ix := newIndex()
	var running []string // oldest first
	rev := uint64(0)
	for i := range 3000 {
		at := base.Add(time.Duration(i) * time.Second)
		state := job.Succeeded
		if i%1000 == 7 {
			state = job.Running
		}
		r := rec(job.NewID(at), at, state)
		if state == job.Running {
			running = append(running, r.ID)
		} else {
			r.Status.FinishedAt = at.Add(time.Minute)
			r.Status.EndedCost = money.Micros(1_000_000)
			r.Status.Checkpoint, r.Status.CheckpointSince = &job.CheckpointRef{Size: 100e9}, at
		}
		rev++
		ix.apply(events.JobChange{ID: r.ID, Revision: rev, Record: r})
	}
	newest := slices.Clone(running)
	slices.Reverse(newest)
	cases := []struct {
		name string
		q    Query
		want []string
	}{
		{"running", Query{States: []job.State{job.Running}}, newest},
		{"running and queued", Query{States: []job.State{job.Running, job.Queued}}, newest},
		{"running, after the newest", Query{States: []job.State{job.Running}, After: newest[0]}, newest[1:]},
		{"running, one a page", Query{States: []job.State{job.Running}, Limit: 1}, newest[:1]},
		{"queued", Query{States: []job.State{job.Queued}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := listed(t, ix, tc.q); !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("finished job's cost", func(t *testing.T) {
		l, _ := ix.list(Query{States: []job.State{job.Succeeded}, Limit: 1}, base.Add(1000*time.Hour))
		at := l.Jobs[0].SubmittedAt
		r := rec(l.Jobs[0].ID, at, job.Succeeded)
		r.Status.FinishedAt, r.Status.EndedCost = at.Add(time.Minute), money.Micros(1_000_000)
		r.Status.Checkpoint, r.Status.CheckpointSince = &job.CheckpointRef{Size: 100e9}, at
		if want := r.CostAt(base.Add(1000 * time.Hour)); l.Jobs[0].CostUSD != want || want <= r.Status.EndedCost {
			t.Errorf("listed cost %s, want %s (its attempts' and a minute of checkpoint storage)", l.Jobs[0].CostUSD, want)
		}
	})
	// A job's state changing where it is listed: a listing of its new
	// state finds it, though no job of its chunk was in that state
	// before (the chunks' masks follow), and so does its team's.
	t.Run("a state changed in place", func(t *testing.T) {
		l, _ := ix.list(Query{States: []job.State{job.Succeeded}, Limit: 1000}, base)
		mid := l.Jobs[500]
		r := rec(mid.ID, mid.SubmittedAt, job.Failed)
		r.Status.FinishedAt = mid.SubmittedAt.Add(time.Minute)
		rev++
		ix.apply(events.JobChange{ID: r.ID, Revision: rev, Record: r})
		if got := listed(t, ix, Query{States: []job.State{job.Failed}}); !slices.Equal(got, []string{mid.ID}) {
			t.Errorf("failed jobs: %v, want %v", got, []string{mid.ID})
		}
		if got := listed(t, ix, Query{States: []job.State{job.Failed}, Team: "nobody"}); len(got) != 0 {
			t.Errorf("failed jobs of a team with none: %v", got)
		}
		r.Spec.Team = "interns"
		rev++
		ix.apply(events.JobChange{ID: r.ID, Revision: rev, Record: r})
		if got := listed(t, ix, Query{Team: "interns"}); !slices.Equal(got, []string{mid.ID}) {
			t.Errorf("the team's jobs: %v, want %v", got, []string{mid.ID})
		}
		// And among the active ones: running -> checkpointing.
		e, _ := ix.get(newest[1])
		c := rec(newest[1], time.Unix(0, e.submitted), job.Checkpointing)
		rev++
		ix.apply(events.JobChange{ID: c.ID, Revision: rev, Record: c})
		if got := listed(t, ix, Query{States: []job.State{job.Checkpointing}}); !slices.Equal(got, newest[1:2]) {
			t.Errorf("checkpointing jobs: %v, want %v", got, newest[1:2])
		}
		c.Status.State = job.Running
		rev++
		ix.apply(events.JobChange{ID: c.ID, Revision: rev, Record: c})
	})
	t.Run("retention removes a batch", func(t *testing.T) {
		ids := ix.expired(Retention{MaxJobs: 1000}, base, pruneBatch)
		if len(ids) != 3000-len(running)-1000 {
			t.Fatalf("%d jobs expired, want %d", len(ids), 3000-len(running)-1000)
		}
		ix.removed(ids)
		all := listed(t, ix, Query{Limit: 1000})
		if len(all) != 1000 {
			t.Errorf("listed %d after the removal, want 1000 (a page)", len(all))
		}
		if got := listed(t, ix, Query{States: []job.State{job.Running}}); !slices.Equal(got, newest) {
			t.Errorf("running jobs after the removal: %v, want %v", got, newest)
		}
		if again := ix.expired(Retention{MaxJobs: 1000}, base, pruneBatch); len(again) != 0 {
			t.Errorf("%d more expired after the removal, want none", len(again))
		}
	})
}

// What every job costs the API's memory stays small: a million finished
// jobs keep a listing entry and a ref into the copy of job pages each
// (see the README's sizing). A field added to either is a megabyte per
// 125,000 jobs per 8 bytes: this fails until the sizes below are
// revisited on purpose.
func TestPerJobStructsStaySmall(t *testing.T) {
	for _, c := range []struct {
		what       string
		size, want uintptr
	}{
		{"a listing entry", unsafe.Sizeof(entry{}), 96},
		{"a ref into the copy of job pages", unsafe.Sizeof(pageRef{}), 64},
	} {
		if c.size > c.want {
			t.Errorf("%s takes %d bytes, more than %d", c.what, c.size, c.want)
		}
	}
}
