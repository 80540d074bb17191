package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/catalog"
)

// quoteHTTP is POST /v1/quote: a quote for the job spec in the body
// (YAML or JSON) over this server's clock, the scheduler's offer book and
// the interruption rates and speeds it learned, so that what it shows is
// what the scheduler would then do with the job. Nothing is stored. The
// caller must be able to see the spec's team (by default its own).
func (s *Server) quoteHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := auth.FromContext(r.Context())
	if !ok {
		writeAPIError(w, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthenticated, Message: "no token"})
		return
	}
	in := QuoteInput{RunsPerMonth: 1}
	q := r.URL.Query()
	for k := range q {
		if k != "months" && k != "runs_per_month" {
			writeAPIError(w, badRequest("unknown parameter %q (months, runs_per_month)", k))
			return
		}
	}
	if v := q.Get("months"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 120 {
			writeAPIError(w, badRequest("months must be a whole number from 0 to 120, not %q", v))
			return
		}
		in.Months = n
	}
	if v := q.Get("runs_per_month"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 10000) {
			writeAPIError(w, badRequest("runs_per_month must be a number above 0 (at most 10000), not %q", v))
			return
		}
		in.RunsPerMonth = f
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeAPIError(w, &api.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", api.MaxBodyBytes)})
			return
		}
		writeAPIError(w, badRequest("reading request body: %v", err))
		return
	}
	spec, err := job.ParseFor(body, catalog.Default(), p.Team)
	if err != nil {
		if ve, ok := job.AsValidationError(err); ok {
			writeAPIError(w, &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalidSpec, Message: fmt.Sprintf("the job spec has %d problem(s)", len(ve.Errors)), Fields: ve.Errors})
			return
		}
		writeAPIError(w, badRequest("%v", err))
		return
	}
	if !p.Can(auth.ReadJobs, spec.Team) {
		writeAPIError(w, api.Forbidden(p, "quote jobs of team "+spec.Team).(*api.Error))
		return
	}
	t := s.term.Load()
	if t == nil {
		writeAPIError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: "standby", Message: "this server is on standby; ask the server holding the scheduler lease, whose offer book the quote is made over"})
		return
	}
	in.Spec = spec
	in.Book = t.scheduler.Book(s.clock.Now())
	in.Source = "the running scheduler's offer book"
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Quote(in))
}

func badRequest(format string, args ...any) *api.Error {
	return &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// writeAPIError answers an error in the API's shape.
func writeAPIError(w http.ResponseWriter, e *api.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]*api.Error{"error": e})
}
