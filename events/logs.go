package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spotwise/spotwise/job"
)

// A job's output (its workload's stdout and stderr, and the agent's own
// notes about it) is kept in the log stream, one subject per attempt:
// spotwise.logs.<job>.<attempt>. The attempt's agent ships it in batches
// of lines (LogBatch); the API reads it back (JobLogs, JobLogTail).
const (
	subjectLogs = "spotwise.logs"
	// StreamLogs keeps every job's output.
	StreamLogs = "SPOTWISE_LOGS"
	// TypeLogBatch is the event type of a batch of log lines.
	TypeLogBatch = "log.batch"
)

// Log streams: what a line was written to.
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
	// LogAgent is a note of the agent's about the output (lines dropped
	// by the rate limit, say), not the workload's.
	LogAgent = "agent"
)

var logStreams = map[string]bool{LogStdout: true, LogStderr: true, LogAgent: true}

// Bounds of what a batch may hold. The agent cuts a longer line to
// MaxLogLine bytes and marks the cut (with at most MaxLogLineMark more);
// it sends a batch once it holds MaxLogBatchBytes of text or
// MaxLogBatchLines lines.
const (
	MaxLogLine       = 16 << 10
	MaxLogLineMark   = 64
	MaxLogBatchBytes = 64 << 10
	MaxLogBatchLines = 1000
)

// Retention of the log stream: by default a week, 4 GiB in all, and the
// newest LogMessagesPerAttempt batches of each attempt (older ones go
// first, so a chatty attempt keeps its end).
const (
	DefaultLogsMaxAge     = 7 * 24 * time.Hour
	DefaultLogsMaxBytes   = int64(4 << 30)
	LogMessagesPerAttempt = 100_000
)

// LogRetention is how long and how much of jobs' output the log stream
// keeps; zero values take the defaults.
type LogRetention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

func (r LogRetention) withDefaults() LogRetention {
	if r.MaxAge <= 0 {
		r.MaxAge = DefaultLogsMaxAge
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultLogsMaxBytes
	}
	return r
}

// LogSubject is where the agent of one attempt ships its job's output:
// spotwise.logs.<job>.<attempt>, the only log subject that attempt's NATS
// user may publish on.
func LogSubject(jobID string, attempt int) string {
	return subjectLogs + "." + jobID + "." + strconv.Itoa(attempt)
}

// JobLogsFilter matches one job's output: one attempt's, or every
// attempt's when attempt is 0.
func JobLogsFilter(jobID string, attempt int) string {
	if attempt > 0 {
		return LogSubject(jobID, attempt)
	}
	return subjectLogs + "." + jobID + ".*"
}

// AllLogs matches every job's output.
const AllLogs = subjectLogs + ".*.*"

// parseLogSubject reads the job and attempt a log subject names.
func parseLogSubject(subject string) (jobID string, attempt int, ok bool) {
	rest, ok := strings.CutPrefix(subject, subjectLogs+".")
	if !ok {
		return "", 0, false
	}
	jobID, a, ok := strings.Cut(rest, ".")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.Atoi(a)
	if err != nil || n < 1 || !job.ValidID(jobID) {
		return "", 0, false
	}
	return jobID, n, true
}

// LogLine is one line of a job's output as the agent saw it.
type LogLine struct {
	// Time is when the line was complete (the agent's clock).
	Time time.Time `json:"time"`
	// Stream is stdout, stderr or agent.
	Stream string `json:"stream"`
	// Text is the line without its end; a line longer than MaxLogLine
	// is cut and ends with a mark saying so.
	Text string `json:"text"`
}

// LogBatch is a batch of lines of one attempt's output, on
// LogSubject(job, attempt).
type LogBatch struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Instance is the instance the output comes from; Node its node's
	// rank in a job of several nodes.
	Instance string `json:"instance,omitempty"`
	Node     int    `json:"node,omitempty"`
	// Seq numbers the attempt's batches from 1, in the order they were
	// sent (also the batch's de-duplication ID).
	Seq   int64     `json:"seq"`
	Lines []LogLine `json:"lines"`
}

func (*LogBatch) EventType() string { return TypeLogBatch }

func (e *LogBatch) Validate() error {
	switch {
	case !job.ValidID(e.JobID):
		return fmt.Errorf("job_id %q is not a job ID", e.JobID)
	case e.Attempt < 1:
		return errors.New("attempt must be at least 1")
	case e.Node < 0:
		return errors.New("node must not be negative")
	case len(e.Instance) > 256:
		return errors.New("instance is longer than 256 characters")
	case e.Seq < 1:
		return errors.New("seq must be at least 1")
	case len(e.Lines) == 0 || len(e.Lines) > MaxLogBatchLines:
		return fmt.Errorf("a batch holds 1 to %d lines, not %d", MaxLogBatchLines, len(e.Lines))
	}
	for i, l := range e.Lines {
		switch {
		case !logStreams[l.Stream]:
			return fmt.Errorf("line %d: unknown stream %q (stdout, stderr or agent)", i, l.Stream)
		case l.Time.IsZero():
			return fmt.Errorf("line %d: time is required", i)
		case len(l.Text) > MaxLogLine+MaxLogLineMark:
			return fmt.Errorf("line %d: %d bytes, more than a line may hold (%d)", i, len(l.Text), MaxLogLine+MaxLogLineMark)
		case !utf8.ValidString(l.Text):
			return fmt.Errorf("line %d: not valid UTF-8", i)
		}
	}
	return nil
}

// LogEntry is one stored line of a job's output, with where it came from
// and where it is in the stream.
type LogEntry struct {
	LogLine
	Attempt  int
	Instance string
	Node     int
	// At is the line's position: the cursor of the line itself.
	At LogCursor
}

// LogCursor is a position in a job's output: line Line of the batch
// stored at stream sequence Seq. The zero cursor is the beginning.
type LogCursor struct {
	Seq  uint64
	Line int
}

// String writes the cursor as "<seq>.<line>" (what the API hands out).
func (c LogCursor) String() string {
	return strconv.FormatUint(c.Seq, 10) + "." + strconv.Itoa(c.Line)
}

// after is the cursor of the line after c.
func (c LogCursor) after() LogCursor { return LogCursor{c.Seq, c.Line + 1} }

// ParseLogCursor reads a cursor String wrote.
func ParseLogCursor(s string) (LogCursor, error) {
	seq, line, ok := strings.Cut(s, ".")
	n, err := strconv.ParseUint(seq, 10, 64)
	l, lerr := strconv.Atoi(line)
	if !ok || err != nil || lerr != nil || l < 0 || l > MaxLogBatchLines {
		return LogCursor{}, fmt.Errorf("%q is not a log cursor (<seq>.<line>, as a page's next gives it)", s)
	}
	return LogCursor{Seq: n, Line: l}, nil
}

// DecodeLogBatch reads one stored log message: an envelope holding a
// valid LogBatch whose job and attempt are the subject's. Anything else
// is an error (the readers skip such a message).
func DecodeLogBatch(subject string, data []byte) (*LogBatch, error) {
	jobID, attempt, ok := parseLogSubject(subject)
	if !ok {
		return nil, fmt.Errorf("%q is not a log subject", subject)
	}
	_, p, err := Decode(data)
	if err != nil {
		return nil, err
	}
	b, ok := p.(*LogBatch)
	if !ok {
		return nil, fmt.Errorf("a %s event on %s, which carries log batches", p.EventType(), subject)
	}
	if b.JobID != jobID || b.Attempt != attempt {
		return nil, fmt.Errorf("a batch of job %s attempt %d on %s: forged", b.JobID, b.Attempt, subject)
	}
	return b, nil
}
