package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

// Exit codes. `submit --wait` and `job --watch` exit 0 only when every job
// they followed succeeded; the README lists these.
const (
	exitOK          = 0
	exitGeneric     = 1 // bad flags, a refused spec, an error the server answered
	exitFailed      = 2 // a job failed
	exitCancelled   = 3 // a job was cancelled
	exitExpired     = 4 // a job expired (its deadline passed before it could finish)
	exitUnreachable = 5 // the server could not be reached, or was lost while waiting
)

// codedError is an error that asks for a particular exit code.
type codedError struct {
	code int
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// exitCode is the process's exit code for an error RunE returned.
func exitCode(err error) int {
	var ee *codedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, api.ErrUnreachable):
		return exitUnreachable
	}
	return exitGeneric
}

// outcomeCode is the exit code for jobs that ended in these states: the
// worst of them (failed, then expired, then cancelled).
func outcomeCode(states []job.State) int {
	code := exitOK
	rank := map[int]int{exitOK: 0, exitCancelled: 1, exitExpired: 2, exitFailed: 3}
	for _, s := range states {
		c := exitOK
		switch s {
		case job.Succeeded:
		case job.Failed:
			c = exitFailed
		case job.Cancelled:
			c = exitCancelled
		case job.Expired:
			c = exitExpired
		default:
			c = exitGeneric
			return c
		}
		if rank[c] > rank[code] {
			code = c
		}
	}
	return code
}

// outcomeError is nil when every job succeeded, else an error with the
// exit code of the worst outcome that says which jobs did not.
func outcomeError(ended map[string]job.State, order []string) error {
	var states []job.State
	var bad []string
	for _, id := range order {
		st := ended[id]
		states = append(states, st)
		if st != job.Succeeded {
			bad = append(bad, fmt.Sprintf("%s %s", id, st))
		}
	}
	code := outcomeCode(states)
	if code == exitOK {
		return nil
	}
	return &codedError{code: code, msg: "not every job succeeded: " + strings.Join(bad, ", ")}
}
