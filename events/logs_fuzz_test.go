package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// FuzzLogRead holds the readers of a job's output (JobLogs, JobLogTail) to
// their contract whatever is stored on its subject: stored between two
// good batches, a message is read as lines only if it is a valid batch of
// the subject's own job and attempt; anything else is skipped, and the
// good batches around it read as written. Nothing panics.
func FuzzLogRead(f *testing.F) {
	bus, err := events.Open(f.Context(), events.Config{Embedded: events.EmbeddedOptions{DataDir: f.TempDir()}}, "fuzz", nil, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(bus.Close)
	// "JOBID" in an input stands for the run's job: a seed can be a
	// valid batch of it, or of another job (forged on its subject).
	other := job.NewID(logT0)
	seed := func(jobID string, attempt int, lines ...events.LogLine) []byte {
		b, err := events.Encode(&events.LogBatch{JobID: "j-00000000000000000000000000", Attempt: attempt, Seq: 2, Lines: lines}, "", "agent", logT0)
		if err != nil {
			f.Fatal(err)
		}
		return bytes.ReplaceAll(b, []byte("j-00000000000000000000000000"), []byte(jobID))
	}
	mid := events.LogLine{Time: logT0, Stream: events.LogStdout, Text: "middle"}
	f.Add(seed("JOBID", 1, mid, events.LogLine{Time: logT0, Stream: events.LogAgent, Text: "spotwise: 2 lines dropped"}))
	f.Add(seed(other, 1, mid))
	f.Add(seed("JOBID", 2, mid))
	f.Add([]byte(`{"v":1,"id":"x","type":"log.batch","time":"2031-05-01T12:00:00Z","source":"a","data":{"job_id":"JOBID","attempt":1,"seq":1,"lines":[]}}`))
	f.Add([]byte(`{"v":1,"id":"x","type":"log.batch","time":"2031-05-01T12:00:00Z","source":"a","data":{"job_id":"JOBID","attempt":1,"seq":1,"lines":[{"time":"2031-05-01T12:00:00Z","stream":"stdin","text":"x"}]}}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte) {
		// A job of its own each run.
		id := job.NewID(logT0.Add(time.Duration(n.Add(1)) * time.Millisecond))
		data = bytes.ReplaceAll(data, []byte("JOBID"), []byte(id))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shipLines(t, bus, id, 1, []string{"before"}, 1, logT0)
		if err := bus.PublishRaw(ctx, events.LogSubject(id, 1), data); err != nil {
			t.Fatal(err)
		}
		shipLines(t, bus, id, 1, []string{"after"}, 1, logT0)

		want := []string{"before"}
		if b, err := events.DecodeLogBatch(events.LogSubject(id, 1), data); err == nil {
			for _, l := range b.Lines {
				want = append(want, l.Text)
			}
		} else if b != nil {
			t.Fatalf("DecodeLogBatch returned a batch with an error: %v", err)
		}
		want = append(want, "after")
		page, err := bus.JobLogs(ctx, id, events.LogQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(page.Lines); !slices.Equal(got, want) {
			t.Fatalf("read %q, want %q (stored %q)", got, want, data)
		}
		tail, _, err := bus.JobLogTail(ctx, id, 0, len(want), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(tail); !slices.Equal(got, want) {
			t.Fatalf("tail %q, want %q", got, want)
		}
		for _, e := range page.Lines {
			if e.Attempt != 1 || e.Time.IsZero() {
				t.Fatalf("a line read with attempt %d, time %v", e.Attempt, e.Time)
			}
			if _, err := json.Marshal(e); err != nil {
				t.Fatalf("a line read cannot be written as JSON: %v", err)
			}
		}
	})
}
