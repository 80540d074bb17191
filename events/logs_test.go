package events_test

import (
	"context"
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

var logT0 = time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)

// shipLines publishes lines of one attempt's output as batches of per
// lines each, the way an agent does; each line's time is a second after
// the one before, from start.
func shipLines(t *testing.T, bus *events.Bus, jobID string, attempt int, texts []string, per int, start time.Time) {
	t.Helper()
	for i, seq := 0, int64(1); i < len(texts); i, seq = i+per, seq+1 {
		b := &events.LogBatch{JobID: jobID, Attempt: attempt, Instance: fmt.Sprintf("i-%d", attempt), Seq: seq}
		for j := i; j < min(i+per, len(texts)); j++ {
			b.Lines = append(b.Lines, events.LogLine{Time: start.Add(time.Duration(j) * time.Second), Stream: events.LogStdout, Text: texts[j]})
		}
		if err := bus.Publish(context.Background(), events.LogSubject(jobID, attempt), b); err != nil {
			t.Fatal(err)
		}
	}
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

func texts(es []events.LogEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Text
	}
	return out
}

// readAll follows a job's output page by page, as a client does.
func readAll(t *testing.T, bus *events.Bus, jobID string, q events.LogQuery) []events.LogEntry {
	out, _ := readPages(t, bus, jobID, q)
	return out
}

// readPages is readAll, with how many pages it took.
func readPages(t *testing.T, bus *events.Bus, jobID string, q events.LogQuery) ([]events.LogEntry, int) {
	t.Helper()
	var out []events.LogEntry
	for pages := 1; pages <= 1000; pages++ {
		page, err := bus.JobLogs(context.Background(), jobID, q)
		if err != nil {
			t.Fatal(err)
		}
		if q.Limit > 0 && len(page.Lines) > q.Limit {
			t.Fatalf("a page of %d lines, over the limit of %d", len(page.Lines), q.Limit)
		}
		out = append(out, page.Lines...)
		if !page.More {
			return out, pages
		}
		if page.Next == q.After {
			t.Fatalf("a page that says more did not move its cursor from %s", q.After)
		}
		q.After = page.Next
	}
	t.Fatal("the pages never end")
	return nil, 0
}

// TestJobLogsReadsAttemptsInOrderByPages: a job's output is read back as
// it was written, every attempt's in order or one attempt's alone, in
// pages of the size asked whose cursors go on exactly where the last
// stopped, also in the middle of a batch; another job's output never
// shows.
func TestJobLogsReadsAttemptsInOrderByPages(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	a, other := job.NewID(logT0), job.NewID(logT0.Add(time.Second))
	first, second := numbered("attempt 1 line", 25), numbered("attempt 2 line", 12)
	shipLines(t, bus, a, 1, first, 4, logT0)
	shipLines(t, bus, other, 1, numbered("other", 9), 3, logT0)
	shipLines(t, bus, a, 2, second, 5, logT0.Add(time.Hour))

	for _, tt := range []struct {
		name  string
		q     events.LogQuery
		want  []string
		pages int
	}{
		{"all attempts, one page", events.LogQuery{}, append(slices.Clone(first), second...), 1},
		{"all attempts, pages of 7", events.LogQuery{Limit: 7}, append(slices.Clone(first), second...), 6},
		{"attempt 2", events.LogQuery{Attempt: 2}, second, 1},
		{"attempt 1, pages of 5", events.LogQuery{Attempt: 1, Limit: 5}, first, 5},
		{"attempt 3 (none)", events.LogQuery{Attempt: 3}, nil, 1},
		{"since", events.LogQuery{Since: logT0.Add(20 * time.Second)}, append(slices.Clone(first[20:]), second...), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, pages := readPages(t, bus, a, tt.q)
			if !slices.Equal(texts(got), tt.want) {
				t.Fatalf("read %q\nwant %q", texts(got), tt.want)
			}
			// A page that is full says more; the last may be empty.
			if pages < tt.pages || pages > tt.pages+1 {
				t.Fatalf("%d pages, want %d", pages, tt.pages)
			}
			for _, e := range got {
				if want := fmt.Sprintf("attempt %d line", e.Attempt); !strings.HasPrefix(e.Text, want) || e.Instance != fmt.Sprintf("i-%d", e.Attempt) {
					t.Fatalf("line %q tagged attempt %d instance %s", e.Text, e.Attempt, e.Instance)
				}
			}
		})
	}

	// Following: from the last page's cursor, only what came since.
	page, err := bus.JobLogs(context.Background(), a, events.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	shipLines(t, bus, a, 2, []string{"attempt 2 line late"}, 1, logT0.Add(2*time.Hour))
	next, err := bus.JobLogs(context.Background(), a, events.LogQuery{After: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(next.Lines); !slices.Equal(got, []string{"attempt 2 line late"}) {
		t.Fatalf("after the cursor: %q", got)
	}
}

// TestJobLogTail: the last lines of a job's output, or of one attempt's,
// however far back in the stream they are and however many other jobs
// wrote since; the cursor it gives follows on from the end.
func TestJobLogTail(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	a, noisy := job.NewID(logT0), job.NewID(logT0.Add(time.Second))
	first, second := numbered("attempt 1 line", 300), numbered("attempt 2 line", 30)
	shipLines(t, bus, a, 1, first, 7, logT0)
	shipLines(t, bus, a, 2, second, 4, logT0.Add(time.Hour))
	shipLines(t, bus, noisy, 1, numbered("noise", 600), 1, logT0) // 600 messages after a's

	all := append(slices.Clone(first), second...)
	for _, tt := range []struct {
		name    string
		attempt int
		n       int
		since   time.Time
		want    []string
	}{
		{"last 5", 0, 5, time.Time{}, all[len(all)-5:]},
		{"across attempts", 0, 40, time.Time{}, all[len(all)-40:]},
		{"more than there is", 0, 5000, time.Time{}, all},
		{"attempt 1", 1, 3, time.Time{}, first[297:]},
		{"since", 0, 1000, logT0.Add(time.Hour + 25*time.Second), second[25:]},
		{"none", 0, 0, time.Time{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, next, err := bus.JobLogTail(context.Background(), a, tt.attempt, tt.n, tt.since)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(texts(got), tt.want) {
				t.Fatalf("tail %q\nwant %q", texts(got), tt.want)
			}
			after, err := bus.JobLogs(context.Background(), a, events.LogQuery{Attempt: tt.attempt, After: next})
			if err != nil || len(after.Lines) != 0 {
				t.Fatalf("after the tail's cursor: %d lines, %v", len(after.Lines), err)
			}
		})
	}
	if got, _, err := bus.JobLogTail(context.Background(), job.NewID(logT0), 0, 10, time.Time{}); err != nil || len(got) != 0 {
		t.Fatalf("a job without output: %q, %v", texts(got), err)
	}
}

// TestJobLogsSkipGarbledAndForgedBatches: what is not a valid batch of
// the subject's own job and attempt is skipped, and the rest reads on.
func TestJobLogsSkipGarbledAndForgedBatches(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	a, b := job.NewID(logT0), job.NewID(logT0.Add(time.Second))
	shipLines(t, bus, a, 1, []string{"before"}, 1, logT0)
	ctx := context.Background()
	if err := bus.PublishRaw(ctx, events.LogSubject(a, 1), []byte(`{"v":1,"garbled`)); err != nil {
		t.Fatal(err)
	}
	forged := &events.LogBatch{JobID: b, Attempt: 1, Seq: 1, Lines: []events.LogLine{{Time: logT0, Stream: events.LogStdout, Text: "forged"}}}
	if err := bus.Publish(ctx, events.LogSubject(a, 1), forged); err != nil {
		t.Fatal(err)
	}
	if err := bus.Publish(ctx, events.LogSubject(a, 1), &events.Alert{Severity: "info", Kind: "x", Summary: "not a batch"}); err != nil {
		t.Fatal(err)
	}
	shipLines(t, bus, a, 1, []string{"after"}, 1, logT0)
	if got := texts(readAll(t, bus, a, events.LogQuery{})); !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("read %q", got)
	}
	if got, _, _ := bus.JobLogTail(ctx, a, 0, 10, time.Time{}); !slices.Equal(texts(got), []string{"before", "after"}) {
		t.Fatalf("tail %q", texts(got))
	}
}

// TestDeleteJobsDeletesTheirOutput: a job removed from the store takes
// its output with it; another job's stays.
func TestDeleteJobsDeletesTheirOutput(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	gone, kept := job.NewID(logT0), job.NewID(logT0.Add(time.Second))
	shipLines(t, bus, gone, 1, numbered("gone", 3), 1, logT0)
	shipLines(t, bus, gone, 2, numbered("gone again", 3), 1, logT0)
	shipLines(t, bus, kept, 1, numbered("kept", 2), 1, logT0)
	if _, err := bus.DeleteJobs(context.Background(), []string{gone}, nil); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, bus, gone, events.LogQuery{}); len(got) != 0 {
		t.Fatalf("a deleted job's output is still there: %q", texts(got))
	}
	if got := texts(readAll(t, bus, kept, events.LogQuery{})); len(got) != 2 {
		t.Fatalf("another job's output: %q", got)
	}
}

// TestAgentMayShipOnlyItsOwnOutput: an attempt's agent may publish its
// own attempt's output (and it is stored), and not another attempt's or
// another job's.
func TestAgentMayShipOnlyItsOwnOutput(t *testing.T) {
	bus := eventstest.OpenBus(t, t.TempDir(), "127.0.0.1:-1", nil)
	mine, theirs := job.NewID(logT0), job.NewID(logT0.Add(time.Second))
	a, err := connectAgent(t, bus.ClientURL(), bus.Identity(), mine, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		subject string
		refused bool
	}{
		{events.LogSubject(mine, 2), false},
		{events.LogSubject(mine, 1), true},
		{events.LogSubject(mine, 3), true},
		{events.LogSubject(theirs, 2), true},
		{events.JobLogsFilter(mine, 0), true},
	} {
		if got := a.refused(t, tt.subject); got != tt.refused {
			t.Errorf("publish on %s: refused %v, want %v", tt.subject, got, tt.refused)
		}
	}
	// Through JetStream, as the agent ships: stored and read back.
	batch := &events.LogBatch{JobID: mine, Attempt: 2, Seq: 1, Lines: []events.LogLine{{Time: logT0, Stream: events.LogStderr, Text: "hello from the agent"}}}
	data, err := events.Encode(batch, "", "agent", logT0)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := a.nc.JetStream()
	if _, err := js.Publish(events.LogSubject(mine, 2), data); err != nil {
		t.Fatalf("the agent's JetStream publish of its own output: %v", err)
	}
	if _, err := js.Publish(events.LogSubject(theirs, 2), data); err == nil {
		t.Fatal("the agent published another job's output")
	}
	got := readAll(t, bus, mine, events.LogQuery{})
	if len(got) != 1 || got[0].Text != "hello from the agent" || got[0].Stream != events.LogStderr || got[0].Attempt != 2 {
		t.Fatalf("stored output: %+v", got)
	}
	if other := readAll(t, bus, theirs, events.LogQuery{}); len(other) != 0 {
		t.Fatalf("another job's output was written: %q", texts(other))
	}
}

// TestLogBatchValidation: a batch out of bounds is refused, naming why.
func TestLogBatchValidation(t *testing.T) {
	id := job.NewID(logT0)
	line := events.LogLine{Time: logT0, Stream: events.LogStdout, Text: "ok"}
	many := make([]events.LogLine, events.MaxLogBatchLines+1)
	for i := range many {
		many[i] = line
	}
	for _, tt := range []struct {
		name string
		b    events.LogBatch
		want string
	}{
		{"valid", events.LogBatch{JobID: id, Attempt: 1, Seq: 1, Lines: []events.LogLine{line}}, ""},
		{"no job", events.LogBatch{JobID: "x", Attempt: 1, Seq: 1, Lines: []events.LogLine{line}}, "job_id"},
		{"no attempt", events.LogBatch{JobID: id, Seq: 1, Lines: []events.LogLine{line}}, "attempt"},
		{"no lines", events.LogBatch{JobID: id, Attempt: 1, Seq: 1}, "1 to 1000 lines"},
		{"too many lines", events.LogBatch{JobID: id, Attempt: 1, Seq: 1, Lines: many}, "1 to 1000 lines"},
		{"unknown stream", events.LogBatch{JobID: id, Attempt: 1, Seq: 1, Lines: []events.LogLine{{Time: logT0, Stream: "stdin", Text: "x"}}}, "unknown stream"},
		{"line too long", events.LogBatch{JobID: id, Attempt: 1, Seq: 1, Lines: []events.LogLine{{Time: logT0, Stream: "stdout", Text: strings.Repeat("x", events.MaxLogLine+events.MaxLogLineMark+1)}}}, "more than a line may hold"},
		{"not UTF-8", events.LogBatch{JobID: id, Attempt: 1, Seq: 1, Lines: []events.LogLine{{Time: logT0, Stream: "stdout", Text: "\xff"}}}, "UTF-8"},
		{"no time", events.LogBatch{JobID: id, Attempt: 1, Seq: 1, Lines: []events.LogLine{{Stream: "stdout", Text: "x"}}}, "time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		in string
		ok bool
	}{{"12.3", true}, {"0.0", true}, {"12", false}, {"x.1", false}, {"1.-1", false}, {"1.5000000", false}, {"", false}} {
		c, err := events.ParseLogCursor(tt.in)
		if (err == nil) != tt.ok || (tt.ok && c.String() != tt.in) {
			t.Errorf("ParseLogCursor(%q) = %v, %v", tt.in, c, err)
		}
	}
}

// TestLogStreamRetention: the log stream keeps what the server is told
// (a week and 4 GiB by default), the newest batches of each attempt, and
// takes a new setting at the next start.
func TestLogStreamRetention(t *testing.T) {
	dir := t.TempDir()
	info := func(b *events.Bus) (time.Duration, int64, int64) {
		t.Helper()
		js, _ := jetstreamOf(t, b)
		st, err := js.Stream(context.Background(), events.StreamLogs)
		if err != nil {
			t.Fatal(err)
		}
		i, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return i.Config.MaxAge, i.Config.MaxBytes, i.Config.MaxMsgsPerSubject
	}
	b := eventstest.OpenBusConfig(t, events.Config{Embedded: events.EmbeddedOptions{DataDir: dir}}, nil)
	if age, bytes, per := info(b); age != events.DefaultLogsMaxAge || bytes != events.DefaultLogsMaxBytes || per != events.LogMessagesPerAttempt {
		t.Fatalf("by default: max age %s, %d bytes, %d per attempt", age, bytes, per)
	}
	b.Close()
	b = eventstest.OpenBusConfig(t, events.Config{Embedded: events.EmbeddedOptions{DataDir: dir},
		Logs: events.LogRetention{MaxAge: 48 * time.Hour, MaxBytes: 1 << 30}}, nil)
	if age, bytes, _ := info(b); age != 48*time.Hour || bytes != 1<<30 {
		t.Fatalf("set to 48h and 1 GiB: max age %s, %d bytes", age, bytes)
	}
}

func jetstreamOf(t *testing.T, b *events.Bus) (jetstream.JetStream, error) {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	return js, nil
}

// TestJobLogsBoundTheirText: a page holds at most the text asked for (one
// line at least), and the default bound holds for pages and tails of long
// lines.
func TestJobLogsBoundTheirText(t *testing.T) {
	bus := eventstest.NewBus(t, nil)
	id := job.NewID(logT0)
	shipLines(t, bus, id, 1, numbered("thirty bytes of output, line", 10), 10, logT0) // "… line 0" is 31 bytes
	page, err := bus.JobLogs(context.Background(), id, events.LogQuery{MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Lines) != 3 || !page.More {
		t.Fatalf("a page of 100 bytes: %d lines, more %v", len(page.Lines), page.More)
	}
	if page, _ := bus.JobLogs(context.Background(), id, events.LogQuery{MaxBytes: 1}); len(page.Lines) != 1 {
		t.Fatalf("a page of 1 byte: %d lines, want the one that does not fit", len(page.Lines))
	}
	if got := readAll(t, bus, id, events.LogQuery{MaxBytes: 100}); len(got) != 10 {
		t.Fatalf("read by pages of 100 bytes: %d lines", len(got))
	}

	long := job.NewID(logT0.Add(time.Second))
	lines := make([]string, 300) // 4.8 MB in all
	for i := range lines {
		lines[i] = fmt.Sprintf("%05d", i) + strings.Repeat("x", events.MaxLogLine-5)
	}
	shipLines(t, bus, long, 1, lines, 3, logT0)
	page, err = bus.JobLogs(context.Background(), long, events.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Lines); n != events.MaxLogPageBytes/events.MaxLogLine || !page.More {
		t.Fatalf("a page of long lines: %d lines (more %v), want %d", n, page.More, events.MaxLogPageBytes/events.MaxLogLine)
	}
	tail, _, err := bus.JobLogTail(context.Background(), long, 0, 5000, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tail); n != events.MaxLogPageBytes/events.MaxLogLine || tail[n-1].Text != lines[299] {
		t.Fatalf("a tail of long lines: %d lines ending %.5q", n, tail[n-1].Text)
	}
}
