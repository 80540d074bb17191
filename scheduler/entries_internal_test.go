package scheduler

import (
	"testing"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/catalog"
)

// The index's entries are reused once a job is forgotten (see forget):
// a QueuedJob a cycle still holds for the forgotten job then points at
// another job's entry, and every look through it must find that the
// entry no longer queues it: the new job is not decided on under the old
// one's needs, and the old one is not placed.
func TestAForgottenJobsEntryServesAnotherWithoutMixingThemUp(t *testing.T) {
	spec, err := job.Parse([]byte("name: x\nteam: t\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\n"), catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{}
	o.defaults()
	s := &Scheduler{o: o, book: newBook(), index: map[string]*entry{}, kickC: make(chan struct{}, 1), metrics: o.Metrics,
		work: &pool{}, calls: &pool{}, ends: &pool{}, holds: map[string]map[string]teamHolds{}, teamOf: map[string]string{}, capped: map[string]*job.Record{}}
	queued := func(id string, rev uint64) events.JobChange {
		return events.JobChange{ID: id, Revision: rev, Record: &job.Record{ID: id, Spec: spec,
			Status: job.Status{State: job.Queued, SubmittedAt: t0}}}
	}
	a, b2 := job.NewID(t0), job.NewID(t0.Add(1))
	s.onJobChange(queued(a, 1))
	ea := s.index[a]
	qa := ea.queued
	if qa == nil || qa.e != ea || qa.ID != a {
		t.Fatalf("job %s is not queued in its entry", a)
	}
	// Cancelled and gone from the bucket: its entry is free.
	s.onJobChange(events.JobChange{ID: a, Revision: 2})
	if _, ok := s.index[a]; ok || s.q.len() != 0 {
		t.Fatalf("a deleted job is still indexed (%v) or queued (%d)", ok, s.q.len())
	}
	s.onJobChange(queued(b2, 3))
	eb := s.index[b2]
	if eb != ea {
		t.Fatal("the freed entry was not reused") // the pool hands back the last freed first
	}
	qb := eb.queued
	if qb == nil || qb == qa || qb.ID != b2 {
		t.Fatalf("the new job's entry queues %+v", qb)
	}
	// What a cycle that took its snapshot before the deletion holds: the
	// check every look makes (needsLook, the plan's placements and
	// pending jobs) finds it no longer queued.
	if e := qa.e; e != nil && e.queued == qa {
		t.Fatalf("a cycle would look at forgotten job %s through the reused entry", qa.ID)
	}
	if eb.rev != 3 || eb.state != job.Queued || eb.inflight || eb.pending != nil {
		t.Fatalf("the reused entry carries the old job's state: %+v", *eb)
	}
}
