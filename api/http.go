package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/job"
)

// MaxBodyBytes limits a request body; a job spec is far smaller.
const MaxBodyBytes = 1 << 20

// acceptedTypes are the content types a spec may be sent as.
var acceptedTypes = map[string]bool{
	"": true, "application/json": true, "application/yaml": true, "application/x-yaml": true,
	"text/yaml": true, "text/x-yaml": true, "text/plain": true,
}

// Handler returns the HTTP API. extra handlers (metrics, status) are
// mounted beside it, behind the same authentication: wrap each in
// Require for the platform action it takes. Only /healthz, /livez,
// /readyz and /v1/openapi.json are open.
//
// Every route is in the OpenAPI document (OpenAPI), served at
// /v1/openapi.json; a test holds the two together.
func (s *Service) Handler(extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	rt := &router{}
	handle := func(pattern string, h http.Handler) {
		mux.Handle(pattern, h)
		rt.patterns = append(rt.patterns, pattern)
	}
	handle("/v1/jobs", http.HandlerFunc(s.jobsCollection))
	handle("/v1/jobs/{id}", http.HandlerFunc(s.jobsItem))
	handle("GET /v1/jobs/{id}/events", http.HandlerFunc(s.jobEventsHTTP))
	handle("GET /v1/events", http.HandlerFunc(s.eventsHTTP))
	handle("GET /v1/jobs/{id}/logs", http.HandlerFunc(s.logsHTTP))
	handle("/v1/tokens", http.HandlerFunc(s.tokensCollection))
	handle("/v1/tokens/{id}", http.HandlerFunc(s.tokensItem))
	handle("/v1/audit", http.HandlerFunc(s.auditHTTP))
	handle("GET /v1/costs", http.HandlerFunc(s.httpCosts))
	handle("GET /v1/costs/entries", http.HandlerFunc(s.httpCostEntries))
	handle("GET /v1/budgets", http.HandlerFunc(s.httpBudgets))
	handle("GET /v1/market", http.HandlerFunc(s.httpMarket))
	handle("GET /v1/market/prices", http.HandlerFunc(s.httpPrices))
	handle("GET /v1/alerts", http.HandlerFunc(s.httpAlerts))
	handle("GET /v1/openapi.json", http.HandlerFunc(serveOpenAPI))
	handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	for pattern, h := range extra {
		handle(pattern, h)
	}
	// A route for some methods ("GET /v1/status") answers the others
	// 405, not the catch-all's 404.
	allow := map[string][]string{}
	for _, p := range rt.patterns {
		if method, path, ok := strings.Cut(p, " "); ok {
			allow[path] = append(allow[path], method)
		}
	}
	for path, methods := range allow {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { methodNotAllowed(w, strings.Join(methods, ", ")) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// A person who opens the server's address gets the dashboard.
			http.Redirect(w, r, "/ui/", http.StatusFound)
			return
		}
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint: " + r.URL.Path})
	})
	rt.Handler = s.authHTTP(mux)
	return rt
}

func (s *Service) jobsCollection(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		s.httpSubmit(w, r)
	case http.MethodGet:
		s.httpList(w, r)
	default:
		methodNotAllowed(w, "GET, POST")
	}
}

func (s *Service) jobsItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	switch r.Method {
	case http.MethodGet:
		v, err := s.Get(r.Context(), id)
		respond(w, http.StatusOK, v, err)
	case http.MethodDelete:
		v, err := s.Cancel(r.Context(), id, r.URL.Query().Get("reason"))
		respond(w, http.StatusOK, v, err)
	default:
		methodNotAllowed(w, "GET, DELETE")
	}
}

func (s *Service) httpSubmit(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !acceptedTypes[mt] {
			writeError(w, &Error{Status: http.StatusUnsupportedMediaType, Code: CodeMediaType, Message: "send the job spec as application/json or application/yaml, not " + ct})
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: "request body is larger than " + strconv.Itoa(MaxBodyBytes) + " bytes"})
			return
		}
		writeError(w, errBadRequest("reading request body: %v", err))
		return
	}
	res, err := s.Submit(r.Context(), body, r.Header.Get("Idempotency-Key"), "http")
	if err != nil {
		writeError(w, asError(err))
		return
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/jobs/"+res.Job.ID)
	}
	writeJSON(w, status, res.Job)
}

func (s *Service) httpList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := Query{Team: q.Get("team"), Name: q.Get("name"), After: q.Get("after"), Provider: q.Get("provider"), Search: q.Get("q")}
	for _, st := range q["state"] {
		for _, part := range strings.Split(st, ",") {
			if part != "" {
				query.States = append(query.States, job.State(strings.ToLower(part)))
			}
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, errBadRequest("limit must be a number from 1 to 1000"))
			return
		}
		query.Limit = n
	}
	list, err := s.List(r.Context(), query)
	respond(w, http.StatusOK, list, err)
}

func respond(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, status, v)
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return errInternal(err)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethod, Message: "allowed methods: " + allow})
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error *Error `json:"error"`
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, errorBody{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// Compact: indenting a page of 100 jobs costs as much again as
	// encoding it (pipe to jq to read it).
	enc := json.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		zap.L().Debug("writing response", zap.Error(err))
	}
}
