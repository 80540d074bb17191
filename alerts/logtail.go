package alerts

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spotwise/spotwise/events"
)

// A job-failed alert carries the last lines of the job's output, so that
// whoever is paged sees why without looking it up: at most logTailLines
// lines and logTailBytes bytes of text, the newest kept.
const (
	kindJobFailed = "job-failed"
	logTailLines  = 10
	logTailBytes  = 2 << 10
	// logTailWait bounds the read: an alert is never held up long.
	logTailWait = 2 * time.Second
)

// logReader reads the end of a job's output; the bus implements it.
type logReader interface {
	JobLogTail(ctx context.Context, jobID string, attempt, n int, since time.Time) ([]events.LogEntry, events.LogCursor, error)
}

// logTail is the end of a failed job's output for its alert (nil for any
// other alert, or when it cannot be read in time).
func (n *Notifier) logTail(ctx context.Context, a *events.Alert) []string {
	if n.logs == nil || a.Kind != kindJobFailed || a.JobID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, logTailWait)
	defer cancel()
	lines, _, err := n.logs.JobLogTail(ctx, a.JobID, 0, logTailLines, time.Time{})
	if err != nil {
		return nil // the alert goes without them
	}
	var out []string
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		text := lines[i].Text
		if size+len(text) > logTailBytes {
			if size == 0 { // one long line: its end, from a character's start
				start := len(text) - logTailBytes + len("…")
				for start < len(text) && !utf8.RuneStart(text[start]) {
					start++
				}
				out = append(out, "…"+text[start:])
			}
			break
		}
		size += len(text) + 1
		out = append(out, text)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// logTailText is the lines as one text, for a webhook's body.
func logTailText(lines []string) string { return strings.Join(lines, "\n") }
