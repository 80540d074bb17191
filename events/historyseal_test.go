package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
)

// sameHistory fails unless got holds want's events, in order, each at the
// sequence it was first stored at.
func sameHistory(t *testing.T, what string, got, want []events.HistoryEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Event.Message != want[i].Event.Message || got[i].Event.JobID != want[i].Event.JobID ||
			!got[i].Envelope.Time.Equal(want[i].Envelope.Time) {
			t.Fatalf("%s: event %d is %q at %d, want %q at %d", what, i, got[i].Event.Message, got[i].Seq, want[i].Event.Message, want[i].Seq)
		}
	}
}

// A sealed history reads as it did on the job's own subject: the same
// events at the same sequences, whether the subject is purged yet or not,
// sealed once or twice, with events stored after the seal following it;
// the job's subject is gone from the stream; a replay of the stream hands
// each event over once; removing the job removes its seal.
func TestSealedHistoryReadsAsBefore(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	id, other := job.NewID(time.Now()), job.NewID(time.Now().Add(time.Millisecond))
	if _, err := b.Jobs().Create(ctx, &job.Record{ID: id, Status: job.Status{State: job.Succeeded}}); err != nil {
		t.Fatal(err)
	}
	publish := func(jobID, msg string) {
		t.Helper()
		if err := b.Publish(ctx, events.JobEventsSubject(jobID), &events.JobEvent{JobID: jobID, Kind: events.KindPending, State: job.Queued, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		publish(id, fmt.Sprint("event ", i))
		publish(other, fmt.Sprint("other ", i))
		if i == 3 {
			if err := b.PublishRaw(ctx, events.JobEventsSubject(id), []byte("{garbled")); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, err := b.JobHistory(ctx, id, nil, 0)
	if err != nil || len(before) != 6 {
		t.Fatalf("history before the seal: %d events, %v", len(before), err)
	}

	seals, upTo, err := b.SealJobHistory(ctx, id)
	if err != nil || len(seals) != 1 || upTo != before[5].Seq || seals[0] <= upTo {
		t.Fatalf("seal: %v up to %d, %v (the last event at %d)", seals, upTo, err, before[5].Seq)
	}
	got, err := b.JobHistory(ctx, id, seals, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameHistory(t, "sealed, not purged", got, before)
	again, _, err := b.SealJobHistory(ctx, id)
	if err != nil || !slices.Equal(again, seals) {
		t.Fatalf("sealing again within the duplicate window: %v, %v; want %v", again, err, seals)
	}

	if err := b.PurgeJobHistory(ctx, id, upTo); err != nil {
		t.Fatal(err)
	}
	if own, err := b.JobHistory(ctx, id, nil, 0); err != nil || len(own) != 0 {
		t.Fatalf("the job's subject after the purge: %d events, %v", len(own), err)
	}
	if ids, _, err := b.JobHistories(ctx, 0); err != nil || slices.Contains(ids, id) || !slices.Contains(ids, other) {
		t.Fatalf("jobs with a history subject after the purge: %v, %v", ids, err)
	}
	got, err = b.JobHistory(ctx, id, seals, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameHistory(t, "sealed and purged", got, before)
	if first, ok, err := b.JobHistoryStart(ctx, id, seals); err != nil || !ok || first != before[0].Seq {
		t.Fatalf("history start: %d %v %v, want %d", first, ok, err, before[0].Seq)
	}

	publish(id, "after the seal")
	got, err = b.JobHistory(ctx, id, seals, 0)
	if err != nil || len(got) != 7 || got[6].Event.Message != "after the seal" {
		t.Fatalf("history with an event after the seal: %d events, %v", len(got), err)
	}
	sameHistory(t, "the sealed part", got[:6], before)
	tail, err := b.JobHistoryAfter(ctx, id, seals, before[2].Seq, 2)
	if err != nil || len(tail) != 2 || tail[0].Seq != before[5].Seq || tail[1].Seq != got[6].Seq {
		t.Fatalf("the newest 2 after event 2: %+v, %v", tail, err)
	}
	if tail, err := b.JobHistoryAfter(ctx, id, seals, got[6].Seq, 0); err != nil || len(tail) != 0 {
		t.Fatalf("after the newest: %d events, %v", len(tail), err)
	}

	// A resume of every job's events from before the seal gets the
	// sealed ones where they were first stored, each once.
	all, skipped, err := b.JobEventsAfter(ctx, before[1].Seq, 0)
	var mineSeqs []uint64
	for i, e := range all {
		if i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("resume: event %d at %d after one at %d", i, e.Seq, all[i-1].Seq)
		}
		if e.Event.JobID == id {
			mineSeqs = append(mineSeqs, e.Seq)
		}
	}
	if err != nil || skipped != 0 || fmt.Sprint(mineSeqs) != fmt.Sprint([]uint64{before[2].Seq, before[3].Seq, before[4].Seq, before[5].Seq, got[6].Seq}) {
		t.Fatalf("resume after event 1: the job's events at %v (%d skipped, %v)", mineSeqs, skipped, err)
	}
	newest, skipped, err := b.JobEventsAfter(ctx, before[1].Seq, 3)
	if err != nil || len(newest) != 3 || skipped != len(all)-3 || newest[2].Seq != all[len(all)-1].Seq {
		t.Fatalf("resume, the newest 3: %d events, %d skipped, %v", len(newest), skipped, err)
	}

	// Another job's record cannot name this job's seal.
	if _, err := b.JobHistory(ctx, other, seals, 0); err == nil {
		t.Fatal("a history read through another job's seal was accepted")
	}

	// A replay hands over every event once: the sealed ones with the
	// sequences they were first stored at.
	var mine []events.HistoryEntry
	caught := make(chan struct{})
	stop, err := b.ReplayJobEvents(ctx, func(e events.HistoryEntry, old bool) {
		if e.Event.JobID == id {
			mine = append(mine, e)
		}
	}, func() { close(caught) })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-caught:
	case <-time.After(10 * time.Second):
		t.Fatal("the replay did not catch up")
	}
	stop()
	// The seal comes where it was stored, after the job's last live event.
	if len(mine) != 7 || !mine[0].Sealed || mine[6].Sealed {
		t.Fatalf("replayed %d events of the job (first sealed %v)", len(mine), len(mine) > 0 && mine[0].Sealed)
	}
	slices.SortFunc(mine, func(a, b events.HistoryEntry) int { return int(a.Seq) - int(b.Seq) })
	sameHistory(t, "replayed", mine[:6], before)

	// As the sealer does: the record names the seal.
	if _, _, err := b.Jobs().Modify(ctx, id, func(r *job.Record) error {
		r.Status.Sealed = &job.Sealed{History: seals}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.DeleteJobs(ctx, []string{id}, nil); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if got, err := b.JobHistory(ctx, id, seals, 0); err != nil || len(got) != 0 {
		t.Fatalf("history after the job was removed: %d events, %v", len(got), err)
	}
	if rest, err := b.JobHistory(ctx, other, nil, 0); err != nil || len(rest) != 6 {
		t.Fatalf("the other job's history after the removal: %d events, %v", len(rest), err)
	}
}

// An event stored between the seal's read of the job's subject and its
// publication refuses the seal: nothing is stored, and a seal made after
// holds every event.
func TestSealRefusedWhenAnEventComesMeanwhile(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	id := job.NewID(time.Now())
	for i := range 3 {
		if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	events.SetBeforeSeal(func(string) {
		events.SetBeforeSeal(nil)
		if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: "late"}); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { events.SetBeforeSeal(nil) })
	if seals, _, err := b.SealJobHistory(ctx, id); !errors.Is(err, events.ErrHistoryMoved) || seals != nil {
		t.Fatalf("seal with an event stored meanwhile: %v, %v", seals, err)
	}
	seals, upTo, err := b.SealJobHistory(ctx, id)
	if err != nil || len(seals) != 1 {
		t.Fatalf("seal after: %v, %v", seals, err)
	}
	if err := b.PurgeJobHistory(ctx, id, upTo); err != nil {
		t.Fatal(err)
	}
	got, err := b.JobHistory(ctx, id, seals, 0)
	if err != nil || len(got) != 4 || got[3].Event.Message != "late" {
		t.Fatalf("sealed history: %d events, %v", len(got), err)
	}
}

// A history too long for one message is sealed in several, and reads
// whole and in order from them.
func TestLongHistorySealsInSeveralMessages(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	id := job.NewID(time.Now())
	pad := strings.Repeat("x", 400)
	for i := range 2000 {
		if err := b.Publish(ctx, events.JobEventsSubject(id), &events.JobEvent{JobID: id, Kind: events.KindPending, State: job.Queued, Message: fmt.Sprint(i, pad)}); err != nil {
			t.Fatal(err)
		}
	}
	seals, upTo, err := b.SealJobHistory(ctx, id)
	if err != nil || len(seals) < 2 {
		t.Fatalf("sealed in %v (%v), want several messages", seals, err)
	}
	if err := b.PurgeJobHistory(ctx, id, upTo); err != nil {
		t.Fatal(err)
	}
	got, err := b.JobHistory(ctx, id, seals, 0)
	if err != nil || len(got) != 2000 {
		t.Fatalf("sealed history: %d events, %v", len(got), err)
	}
	for i, e := range got {
		if e.Event.Message != fmt.Sprint(i, pad) || (i > 0 && e.Seq <= got[i-1].Seq) {
			t.Fatalf("event %d is %.20q at %d", i, e.Event.Message, e.Seq)
		}
	}
}

// The jobs stream keeps histories as long as it is told (retention may
// keep finished jobs longer than its default), or without an age limit,
// and has no size limit of its own: past one, NATS would drop the oldest
// histories of jobs retention still keeps.
func TestJobsStreamKeepsWhatRetentionKeeps(t *testing.T) {
	for _, tc := range []struct {
		age, want time.Duration
	}{
		{0, events.DefaultJobsMaxAge},
		{91 * 24 * time.Hour, 91 * 24 * time.Hour},
		{-1, 0},
	} {
		b := eventstest.OpenBusConfig(t, events.Config{JobsMaxAge: tc.age}, nil)
		js, err := jetstream.New(b.Conn())
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(context.Background(), events.StreamJobs)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		if cfg.MaxAge != tc.want || cfg.MaxBytes != -1 {
			t.Errorf("told %v: the jobs stream keeps messages %v and %d bytes, want %v and no limit", tc.age, cfg.MaxAge, cfg.MaxBytes, tc.want)
		}
	}
}
