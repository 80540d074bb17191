package api

import (
	"fmt"
	"net/http"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// Error codes, stable for scripts.
const (
	CodeInvalidSpec     = "invalid_spec"
	CodeInvalidRequest  = "invalid_request"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeAlreadyFinished = "already_finished"
	CodeTooLarge        = "body_too_large"
	CodeMediaType       = "unsupported_media_type"
	CodeMethod          = "method_not_allowed"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
)

// Error is an API error as sent to clients: an HTTP status, a stable code,
// a message, and for invalid specs the field errors.
type Error struct {
	Status  int              `json:"-"`
	Code    string           `json:"code"`
	Message string           `json:"message"`
	Fields  []job.FieldError `json:"fields,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	s := fmt.Sprintf("%s: %s", e.Code, e.Message)
	for _, f := range e.Fields {
		s += "\n  " + f.Error()
	}
	return s
}

func errInvalidSpec(ve *job.ValidationError) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidSpec, Message: fmt.Sprintf("the job spec has %d problem(s)", len(ve.Errors)), Fields: ve.Errors}
}

func errBadRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

func errNotFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("no job %q", id)}
}

func errUnavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the job store is unavailable: " + err.Error()}
}

// storeError is the error for a failed read or write of the job store: a
// record that cannot be decoded is an internal error, since retrying will
// not help; anything else is the store being unavailable.
func storeError(err error) *Error {
	if events.IsDecodeError(err) {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "the stored job cannot be read: " + err.Error()}
	}
	return errUnavailable(err)
}

func errInternal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}
