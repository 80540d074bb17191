package events_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
)

// bucketSubjects is how many subjects the job bucket's stream holds.
func bucketSubjects(t *testing.T, b *events.Bus) uint64 {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), "KV_"+events.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.NumSubjects
}

// archiveLog follows the archive, keeping what it hands over.
type archiveLog struct {
	mu  sync.Mutex
	got []events.Archived
}

func (l *archiveLog) add(a events.Archived) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, a)
}

func (l *archiveLog) wait(t *testing.T, n int) []events.Archived {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		got := append([]events.Archived(nil), l.got...)
		l.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("the archive's follower got %d messages, want %d: %+v", len(got), n, got)
			}
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A finished job's record leaves the bucket for the archive: its subject
// is gone from the bucket's stream, the archive gives the record back by
// its sequence with the revision it was, a follower (from the start, or
// live) gets it, and a version written after the one archived stays in
// the bucket. Removing the archived job leaves nothing of it, in the
// bucket or the archive, and tells the followers.
func TestArchivedRecordLeavesTheBucket(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	at := time.Now().UTC().Truncate(time.Second)
	mk := func(d time.Duration) *job.Record {
		r := &job.Record{ID: job.NewID(at.Add(d)), Spec: job.Spec{Name: "train", Team: "ml"},
			Status: job.Status{State: job.Succeeded, SubmittedAt: at.Add(d), FinishedAt: at.Add(d + time.Hour)}}
		return r
	}
	old, changed, live := mk(0), mk(time.Millisecond), mk(2*time.Millisecond)
	revs := map[string]uint64{}
	for _, r := range []*job.Record{old, changed, live} {
		rev, err := b.Jobs().Create(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		revs[r.ID] = rev
	}
	if n := bucketSubjects(t, b); n != 3 {
		t.Fatalf("the bucket holds %d subjects, want 3", n)
	}
	if _, err := b.ArchiveJob(ctx, &job.Record{ID: live.ID, Status: job.Status{State: job.Running}}, revs[live.ID]); err == nil {
		t.Fatal("a running job was archived")
	}

	var early archiveLog
	caught := make(chan struct{})
	stop, err := b.FollowArchive(ctx, early.add, func() { close(caught) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	<-caught // an empty archive: at once

	seq, err := b.ArchiveJob(ctx, old, revs[old.ID])
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.ArchiveJob(ctx, old, revs[old.ID]); err != nil || again != seq {
		t.Fatalf("archived again: at %d (%v), want %d (the first)", again, err, seq)
	}
	// A newer version is written after the archiver read the record.
	c := changed.Clone()
	c.Spec.Name = "renamed"
	newer, err := b.Jobs().Update(ctx, c, revs[changed.ID])
	if err != nil {
		t.Fatal(err)
	}
	cseq, err := b.ArchiveJob(ctx, changed, revs[changed.ID])
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := b.Jobs().Get(ctx, old.ID); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("the archived record is still in the bucket: %v", err)
	}
	if r, rev, err := b.Jobs().Get(ctx, changed.ID); err != nil || rev != newer || r.Spec.Name != "renamed" {
		t.Fatalf("the version written after the archived one: %v at %d (%v), want renamed at %d", r, rev, err, newer)
	}
	if n := bucketSubjects(t, b); n != 2 {
		t.Fatalf("the bucket holds %d subjects after archiving, want 2 (the running job's, the one changed since)", n)
	}
	r, rev, err := b.ArchivedRecord(ctx, old.ID, seq)
	if err != nil || rev != revs[old.ID] || r.ID != old.ID || !r.Status.FinishedAt.Equal(old.Status.FinishedAt) {
		t.Fatalf("the archived record: %+v at %d (%v), want %s at %d", r, rev, err, old.ID, revs[old.ID])
	}
	if _, _, err := b.ArchivedRecord(ctx, changed.ID, seq); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("another job's archived record read as %s's: %v", changed.ID, err)
	}

	got := early.wait(t, 2)
	if got[0].ID != old.ID || got[0].Seq != seq || got[0].Revision != revs[old.ID] || got[0].Record == nil || len(got[0].Raw) == 0 ||
		got[1].ID != changed.ID || got[1].Seq != cseq {
		t.Fatalf("the live follower got %+v", got)
	}
	// A follower from the start, past a garbled message.
	if err := b.PublishRaw(ctx, events.ArchiveSubject, []byte(`{"job":`)); err != nil {
		t.Fatal(err)
	}
	var late archiveLog
	caught = make(chan struct{})
	stop2, err := b.FollowArchive(ctx, late.add, func() { close(caught) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	<-caught
	if got := late.wait(t, 2); got[0].ID != old.ID || got[1].ID != changed.ID {
		t.Fatalf("the follower from the start got %+v", got)
	}

	// Retention removes the archived job.
	if n, err := b.DeleteJobs(ctx, []string{old.ID}, []uint64{seq}); err != nil || n != 1 {
		t.Fatalf("removing the archived job: %d, %v", n, err)
	}
	if _, _, err := b.ArchivedRecord(ctx, old.ID, seq); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("the removed job's archived record is still there: %v", err)
	}
	if n := bucketSubjects(t, b); n != 2 {
		t.Fatalf("the bucket holds %d subjects after the removal, want 2: the removal gave the archived job a subject again", n)
	}
	if all, err := b.ArchivedRecords(ctx); err != nil || len(all) != 1 || all[changed.ID] == nil {
		t.Fatalf("every archived record after the removal: %v (%v), want %s's only", all, err, changed.ID)
	}
	for _, l := range []*archiveLog{&early, &late} {
		got := l.wait(t, 3)
		if rm := got[2]; rm.ID != old.ID || rm.Record != nil || rm.Revision <= revs[old.ID] {
			t.Fatalf("the removal as followed: %+v (the record was at revision %d)", rm, revs[old.ID])
		}
	}
}
