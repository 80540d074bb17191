package agent_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// sink is a Reporter that keeps the log batches and reports it is given,
// in order; while held, every call waits for release.
type sink struct {
	mu      sync.Mutex
	batches []events.LogBatch
	subject []string
	order   []string // "log" or the report's kind, in publish order
	hold    chan struct{}
	fail    bool
}

func (s *sink) Publish(ctx context.Context, subject string, p events.Payload, _ ...events.PublishOption) error {
	s.mu.Lock()
	hold, fail := s.hold, s.fail
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("nats: no responders available for request")
	}
	if err := p.Validate(); err != nil {
		return err // what the bus refuses
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch p := p.(type) {
	case *events.LogBatch:
		s.batches = append(s.batches, *p)
		s.subject = append(s.subject, subject)
		s.order = append(s.order, "log")
	case *events.AgentReport:
		s.order = append(s.order, p.Kind)
	}
	return nil
}

func (s *sink) lines() []events.LogLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []events.LogLine
	for _, b := range s.batches {
		out = append(out, b.Lines...)
	}
	return out
}

func lineTexts(ls []events.LogLine) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Stream + ": " + l.Text
	}
	return out
}

var shipT0 = time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)

func newShipper(t *testing.T, s *sink, clk clock.Clock, o agent.LogShipOptions) (*agent.LogShipper, agent.LogSource) {
	src := agent.LogSource{JobID: job.NewID(shipT0), Attempt: 3, Instance: "i-0abc", Node: 1}
	sh := agent.NewLogShipper(s, src, clk, nil, o)
	t.Cleanup(func() { sh.Close(context.Background()) })
	return sh, src
}

// TestLogShipperShipsLines: what the workload writes, in any chunks, is
// shipped line by line with its stream, time and source; "\r\n" ends one
// line, a lone "\r" (a progress bar's redraw) ends one too, a blank line
// is kept, and the unfinished last line goes at close.
func TestLogShipperShipsLines(t *testing.T) {
	clk := clock.NewFake(shipT0)
	s := &sink{}
	sh, src := newShipper(t, s, clk, agent.LogShipOptions{})
	out, errs := sh.Writer(events.LogStdout), sh.Writer(events.LogStderr)
	for _, chunk := range []string{"epoch 1", " loss 0.5\nepoch 2\r", "\n\n", "10%\r20%\r", "\r\ndone"} {
		if _, err := out.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if _, err := errs.Write([]byte("warning: slow\n")); err != nil {
		t.Fatal(err)
	}
	sh.Line(events.LogStdout, "a whole line")
	sh.Close(context.Background())

	want := []string{"stdout: epoch 1 loss 0.5", "stdout: epoch 2", "stdout: ", "stdout: 10%", "stdout: 20%",
		"stderr: warning: slow", "stdout: a whole line", "stdout: done"}
	got := s.lines()
	if !slices.Equal(lineTexts(got), want) {
		t.Fatalf("shipped %q\nwant %q", lineTexts(got), want)
	}
	if got[0].Time != shipT0 || got[5].Time != shipT0.Add(time.Minute) {
		t.Errorf("line times %v, %v: want the clock's when each line ended", got[0].Time, got[5].Time)
	}
	for i, b := range s.batches {
		if b.JobID != src.JobID || b.Attempt != 3 || b.Instance != "i-0abc" || b.Node != 1 || b.Seq != int64(i+1) ||
			s.subject[i] != events.LogSubject(src.JobID, 3) {
			t.Errorf("batch %d: %+v on %s", i, b, s.subject[i])
		}
	}
}

// TestLogShipperCutsLongLines: a line longer than the bound is cut, on a
// character's boundary, and says how much of it was kept; the lines after
// it are whole.
func TestLogShipperCutsLongLines(t *testing.T) {
	s := &sink{}
	sh, _ := newShipper(t, s, clock.NewFake(shipT0), agent.LogShipOptions{})
	w := sh.Writer(events.LogStdout)
	long := "x" + strings.Repeat("é", events.MaxLogLine) // 1 + 2*MaxLogLine bytes
	for i := 0; i < len(long); i += 1000 {
		_, _ = w.Write([]byte(long[i:min(i+1000, len(long))]))
	}
	_, _ = w.Write([]byte("\nshort\n"))
	sh.Close(context.Background())
	got := s.lines()
	if len(got) != 2 || got[1].Text != "short" {
		t.Fatalf("shipped %d lines: %.80q", len(got), lineTexts(got))
	}
	cut := got[0].Text
	mark := fmt.Sprintf(" … [line cut: %d of %d bytes kept]", events.MaxLogLine-1, len(long))
	if !strings.HasSuffix(cut, mark) || !strings.HasPrefix(cut, "xéé") {
		t.Fatalf("the cut line ends %q, want the mark %q", cut[max(0, len(cut)-60):], mark)
	}
	if len(cut) > events.MaxLogLine+events.MaxLogLineMark {
		t.Errorf("the cut line is %d bytes", len(cut))
	}
}

var droppedNote = regexp.MustCompile(`^spotwise: (\d+) lines dropped`)

// dropped sums what the notes among lines say was dropped.
func dropped(ls []events.LogLine) (n int, notes int) {
	for _, l := range ls {
		if m := droppedNote.FindStringSubmatch(l.Text); m != nil && l.Stream == events.LogAgent {
			k, _ := strconv.Atoi(m[1])
			n += k
			notes++
		}
	}
	return n, notes
}

// TestLogShipperRateLimit: over the rate (on the shipper's clock) lines
// are dropped, and one line where they were missing says how many; the
// budget comes back as the clock moves.
func TestLogShipperRateLimit(t *testing.T) {
	clk := clock.NewFake(shipT0)
	s := &sink{}
	sh, _ := newShipper(t, s, clk, agent.LogShipOptions{Rate: 10, Burst: 5})
	for i := range 20 {
		sh.Line(events.LogStdout, fmt.Sprintf("burst %d", i))
	}
	clk.Advance(200 * time.Millisecond) // 2 lines' worth
	for i := range 4 {
		sh.Line(events.LogStdout, fmt.Sprintf("later %d", i))
	}
	clk.Advance(time.Hour) // back to a full burst, no more
	for i := range 7 {
		sh.Line(events.LogStderr, fmt.Sprintf("much later %d", i))
	}
	sh.Close(context.Background())
	want := []string{"stdout: burst 0", "stdout: burst 1", "stdout: burst 2", "stdout: burst 3", "stdout: burst 4",
		"agent: spotwise: 15 lines dropped: over the rate limit of 10 lines/s", "stdout: later 0", "stdout: later 1",
		"agent: spotwise: 2 lines dropped: over the rate limit of 10 lines/s",
		"stderr: much later 0", "stderr: much later 1", "stderr: much later 2", "stderr: much later 3", "stderr: much later 4",
		"agent: spotwise: 2 lines dropped: over the rate limit of 10 lines/s"}
	if got := lineTexts(s.lines()); !slices.Equal(got, want) {
		t.Fatalf("shipped\n%q\nwant\n%q", got, want)
	}
}

// TestLogShipperNeverBlocksTheWorkload: with the bus stuck, the workload
// writes on at full speed; what does not fit the buffer is dropped, and
// once the bus is back every line is either shipped or counted in a note.
func TestLogShipperNeverBlocksTheWorkload(t *testing.T) {
	s := &sink{hold: make(chan struct{})}
	sh, _ := newShipper(t, s, clock.NewFake(shipT0), agent.LogShipOptions{Rate: 1e9, Burst: 1 << 30, BufferBytes: 64 << 10})
	w := sh.Writer(events.LogStdout)
	const lines = 20000
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		line := []byte(strings.Repeat("y", 99) + "\n")
		for range lines {
			_, _ = w.Write(line)
		}
	}()
	select {
	case <-wrote: // every write returned while no publish could finish
	case <-time.After(30 * time.Second):
		t.Fatal("the workload's writes wait on the bus")
	}
	close(s.hold)
	sh.Close(context.Background())
	got := s.lines()
	n, notes := dropped(got)
	shipped := len(got) - notes
	if shipped+n != lines || n == 0 || notes == 0 {
		t.Fatalf("%d lines shipped and %d counted dropped in %d notes, want %d in all, some dropped", shipped, n, notes, lines)
	}
	if shipped > 64<<10/99+1 {
		t.Errorf("%d lines shipped: more than the buffer held while the bus was stuck", shipped)
	}
	for _, b := range s.batches {
		size := 0
		for _, l := range b.Lines {
			size += len(l.Text)
		}
		if len(b.Lines) > events.MaxLogBatchLines || size > events.MaxLogBatchBytes {
			t.Fatalf("a batch of %d lines, %d bytes", len(b.Lines), size)
		}
	}
}

// TestLogShipperGivesUpOnAFailingBus: batches that cannot be published
// are given up after their tries, and the next note counts their lines.
func TestLogShipperGivesUpOnAFailingBus(t *testing.T) {
	s := &sink{fail: true}
	sh, _ := newShipper(t, s, clock.NewFake(shipT0), agent.LogShipOptions{Tries: 2})
	sh.Line(events.LogStdout, "lost 1")
	sh.Line(events.LogStdout, "lost 2")
	if err := sh.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.fail = false
	s.mu.Unlock()
	sh.Line(events.LogStdout, "back")
	sh.Close(context.Background())
	want := []string{"agent: spotwise: 2 lines dropped: they could not be sent in time (the bus was slow or away)", "stdout: back"}
	if got := lineTexts(s.lines()); !slices.Equal(got, want) {
		t.Fatalf("shipped %q, want %q", got, want)
	}
}

// TestAgentShipsTheWorkloadsOutputBeforeItsExit: the real agent ships
// what its command prints on both streams, and the exit line, all stored
// before it reports the exit (so a failed job's page has them).
func TestAgentShipsTheWorkloadsOutputBeforeItsExit(t *testing.T) {
	s := &sink{}
	id := job.NewID(time.Now())
	err := agent.Run(context.Background(), agent.Config{
		JobID: id, Attempt: 1, InstanceID: "i-0abc", WorkDir: t.TempDir(),
		Workload: providers.Workload{Command: []string{"sh", "-c", "echo starting; echo 'CUDA out of memory' >&2; printf 'no newline'; exit 3"},
			Checkpoint: providers.CheckpointPlan{Disabled: true}},
		Reporter: s, Clock: clock.Real{},
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.order) == 0 || s.order[len(s.order)-1] != events.AgentExited {
			return fmt.Errorf("published %v", s.order)
		}
		return nil
	})
	got := lineTexts(s.lines())
	for _, want := range []string{"stdout: starting", "stderr: CUDA out of memory", "stdout: no newline", "agent: spotwise: the workload exited with code 3"} {
		if !slices.Contains(got, want) {
			t.Errorf("shipped %q: no %q", got, want)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if exit := slices.Index(s.order, events.AgentExited); exit < slices.Index(s.order, "log") || slices.Contains(s.order[exit:], "log") {
		t.Errorf("published in the order %v: the output must be stored before the exit", s.order)
	}
}
