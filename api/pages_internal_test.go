package api

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// The copy gives back what it was given: each job's events in order, the
// newest limit of them, none of another job's, and an event stored twice
// (a replay overlapping the live follow) once; an event too large to copy
// sends the job's reads to the store.
func TestPagesKeepEachJobsChain(t *testing.T) {
	p := livePages(t, 1<<30)
	ids := []string{job.NewID(time.Unix(1, 0)), job.NewID(time.Unix(2, 0)), job.NewID(time.Unix(3, 0))}
	at := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i := range 300 {
		id := ids[i%len(ids)]
		seq++
		e := events.HistoryEntry{Seq: seq, Envelope: events.Envelope{Time: at.Add(time.Duration(i) * time.Second)}, Event: &events.JobEvent{JobID: id, Kind: job.KindProgress, State: job.Running, Message: fmt.Sprint(i)}}
		p.observe(e)
		p.observe(e) // again: ignored
	}
	for j, id := range ids {
		h, ok := p.chain(id, 40, anyRef)
		if !ok || len(h) != 40 {
			t.Fatalf("job %d: %d events (ok %v), want its newest 40", j, len(h), ok)
		}
		for k, e := range h {
			i := 300 - 3*(40-k) + j
			if e.Event.Message != fmt.Sprint(i) || e.Event.JobID != id || !e.Envelope.Time.Equal(at.Add(time.Duration(i)*time.Second)) || e.Seq != uint64(i+1) {
				t.Fatalf("job %d, event %d: %+v at %v (seq %d), want event %d", j, k, e.Event, e.Envelope.Time, e.Seq, i)
			}
		}
	}
	big := events.HistoryEntry{Seq: seq + 1, Event: &events.JobEvent{JobID: ids[0], Kind: job.KindProgress, State: job.Running, Message: strings.Repeat("x", maxPageEntry)}}
	p.observe(big)
	if _, ok := p.chain(ids[0], 40, anyRef); ok {
		t.Error("a job with an event too large to copy is read from the copy")
	}
	if _, ok := p.chain(ids[1], 40, anyRef); !ok {
		t.Error("another job's reads stopped coming from the copy")
	}
}

// A chain read over a garbled file, from any place, fails or reads what
// is there; it never panics, nor trusts a length to allocate.
func FuzzPagesChain(f *testing.F) {
	f.Add([]byte{}, int64(1), uint32(40), uint32(3))
	entry := make([]byte, eventHeader+16)
	binary.LittleEndian.PutUint64(entry[12:], 7)
	entry = append(entry, `{"job_id":"j-01r6kjy8m0eed1nm8saejkysp4","kind":"progress","state":"running"}`...)
	f.Add(entry, int64(1), uint32(len(entry)), uint32(1))
	f.Add(entry, int64(1), uint32(len(entry)), uint32(9))
	f.Fuzz(func(t *testing.T, data []byte, off int64, size, n uint32) {
		file, err := os.CreateTemp(t.TempDir(), "pages")
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		if _, err := file.Write(data); err != nil {
			t.Fatal(err)
		}
		h, err := readChain(file, "j-01r6kjy8m0eed1nm8saejkysp4", pageRef{hist: off, histLen: size, events: n}, historyLimit)
		if err == nil && len(h) != min(int(n), historyLimit) {
			t.Fatalf("read %d events of %d", len(h), n)
		}
	})
}

// When deleted jobs leave more garbage than live entries, the copy moves
// the live ones to a new file: every job kept reads as before (events
// copied while the compaction ran included), the deleted ones are gone,
// and the file is smaller.
func TestPagesCompactWhenHalfIsGarbage(t *testing.T) {
	p := livePages(t, 1<<30)
	p.compactAt = 1 << 10
	const jobs = 200
	ids := make([]string, jobs)
	seq := uint64(0)
	event := func(id string, msg string) {
		seq++
		p.observe(events.HistoryEntry{Seq: seq, Envelope: events.Envelope{Time: time.Unix(int64(seq), 0)}, Event: &events.JobEvent{JobID: id, Kind: job.KindProgress, State: job.Running, Message: msg}})
	}
	for i := range ids {
		ids[i] = job.NewID(time.Unix(int64(i), 0))
	}
	for round := range 5 {
		for _, id := range ids {
			event(id, fmt.Sprint(round))
		}
	}
	for i, id := range ids {
		r := &job.Record{ID: id, Status: job.Status{State: job.Succeeded}}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p.record(events.JobChange{ID: id, Revision: uint64(i + 1), Record: r, Raw: raw})
	}
	before := p.cur.size
	// Deleting the first jobs passes half: a compaction starts; the other
	// deletions, and events of the jobs kept, come while it copies.
	entered, proceed := make(chan struct{}), make(chan struct{})
	p.snapshotted = func() {
		close(entered)
		<-proceed
	}
	i := 0
	for ; ; i++ {
		p.record(events.JobChange{ID: ids[i], Revision: uint64(jobs + i + 1)})
		p.mu.Lock()
		started := p.compacting
		p.mu.Unlock()
		if started {
			break
		}
	}
	<-entered
	for i++; i < 120; i++ {
		p.record(events.JobChange{ID: ids[i], Revision: uint64(jobs + i + 1)})
	}
	for j := range 120 {
		event(ids[120+j%80], "during")
	}
	close(proceed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		done := p.compacted > 0 && !p.compacting
		p.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no compaction")
		}
		time.Sleep(time.Millisecond)
	}
	for _, id := range ids[120:] {
		event(id, "after")
	}
	if after := p.cur.size; after >= before {
		t.Errorf("the file is %d bytes after compacting, %d before", after, before)
	}
	for i, id := range ids {
		f, ref, ok := p.open(id)
		if !ok {
			t.Fatalf("job %d cannot be read", i)
		}
		p.done(f)
		if i < 120 {
			if ref.events != 0 || ref.rec != 0 {
				t.Errorf("deleted job %d still has %d events and a record", i, ref.events)
			}
			continue
		}
		h, ok := p.chain(id, 0, anyRef)
		var got []string
		for _, e := range h {
			got = append(got, e.Event.Message)
		}
		want := []string{"0", "1", "2", "3", "4"}
		if i-120 < 40 {
			want = append(want, "during", "during")
		} else {
			want = append(want, "during")
		}
		want = append(want, "after")
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("job %d reads %v (ok %v), want %v", i, got, ok, want)
		}
		if r, _, ok := p.finished(id, uint64(i+1), 0, func(*job.Record) bool { return true }); !ok || r.ID != id {
			t.Errorf("job %d's record is not kept (%+v)", i, ref)
		}
	}
}

// A copy that would pass its bound stops: its reads go to the store.
func TestPagesStopAtTheirBound(t *testing.T) {
	p := livePages(t, 4<<10)
	id := job.NewID(time.Unix(1, 0))
	for i := range 100 {
		p.observe(events.HistoryEntry{Seq: uint64(i + 1), Event: &events.JobEvent{JobID: id, Kind: job.KindProgress, State: job.Running, Message: fmt.Sprint(i)}})
		if i == 0 {
			if _, ok := p.chain(id, 0, anyRef); !ok {
				t.Fatal("a copy under its bound does not answer")
			}
		}
	}
	if p.ready() {
		t.Error("a copy past its bound is still read from")
	}
	if _, ok := p.chain(id, 0, anyRef); ok {
		t.Error("a copy past its bound answers")
	}
}

// livePages is a copy in a test's directory, bounded by maxBytes, caught
// up (as after its replay), closed when the test ends.
func livePages(t *testing.T, maxBytes int64) *pages {
	t.Helper()
	p, err := newPages(t.TempDir(), maxBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	p.caughtUp()
	return p
}

// anyRef takes whatever the copy holds of a job.
func anyRef(pageRef) bool { return true }

// The copy's index holds each job once, under its ID's key (no string of
// its own), whatever order the record and the job's events (each decoded
// with a copy of the ID of its own) arrive in.
func TestPagesKeyJobsOnceByTheirID(t *testing.T) {
	p := livePages(t, 1<<30)
	at := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	id := job.NewID(at)
	event := func(seq uint64) {
		p.observe(events.HistoryEntry{Seq: seq, Envelope: events.Envelope{Time: at}, Event: &events.JobEvent{JobID: strings.Clone(id), Kind: job.KindProgress, State: job.Running}})
	}
	recID := strings.Clone(id)
	event(1) // before the record: held under the event's copy
	p.record(events.JobChange{ID: recID, Revision: 1, Record: &job.Record{ID: recID}})
	event(2) // after it
	event(3)
	var held []string
	for r := range p.cur.jobs.All() {
		held = append(held, r.key.String())
	}
	if len(held) != 1 || held[0] != id {
		t.Fatalf("the copy holds the job under %q, want one entry, %q", held, id)
	}
	if h, ok := p.chain(id, 10, anyRef); !ok || len(h) != 3 {
		t.Fatalf("%d events (ok %v), want 3", len(h), ok)
	}
}

// A sealed history comes into the copy as it was before: events the copy
// followed live are not copied again when their seal comes by, those it
// missed (a replay after the job's subject was purged, or reached in the
// middle of a purge) are, in order, and an event stored after the seal
// follows them.
func TestPagesTakeSealedEventsOnce(t *testing.T) {
	p := livePages(t, 1<<30)
	seen, missed, half := job.NewID(time.Unix(1, 0)), job.NewID(time.Unix(2, 0)), job.NewID(time.Unix(3, 0))
	at := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	ev := func(id string, seq uint64, sealed bool) events.HistoryEntry {
		return events.HistoryEntry{Seq: seq, Sealed: sealed, Envelope: events.Envelope{Time: at.Add(time.Duration(seq) * time.Second)},
			Event: &events.JobEvent{JobID: id, Kind: job.KindProgress, State: job.Running, Message: fmt.Sprint(seq)}}
	}
	// Live: seen's events 1-3 and half's 4; half's 5 and 6 purged before
	// the copy reached them.
	for _, e := range []events.HistoryEntry{ev(seen, 1, false), ev(seen, 2, false), ev(seen, 3, false), ev(half, 4, false)} {
		p.observe(e)
	}
	// The seals, stored later, hold every job's events since its first.
	for _, e := range []events.HistoryEntry{ev(seen, 1, true), ev(seen, 2, true), ev(seen, 3, true),
		ev(missed, 7, true), ev(missed, 8, true),
		ev(half, 4, true), ev(half, 5, true), ev(half, 6, true)} {
		p.observe(e)
	}
	p.observe(ev(seen, 10, false)) // after the seals
	p.observe(ev(seen, 2, true))   // a seal seen twice
	for id, want := range map[string][]uint64{seen: {1, 2, 3, 10}, missed: {7, 8}, half: {4, 5, 6}} {
		h, ok := p.chain(id, 0, anyRef)
		var got []uint64
		for _, e := range h {
			got = append(got, e.Seq)
			if e.Event.Message != fmt.Sprint(e.Seq) || !e.Envelope.Time.Equal(at.Add(time.Duration(e.Seq)*time.Second)) {
				t.Errorf("job %s: event %d is %+v at %v", id, e.Seq, e.Event, e.Envelope.Time)
			}
		}
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("job %s: the copy holds the events %v (ok %v), want %v", id, got, ok, want)
		}
	}
}
