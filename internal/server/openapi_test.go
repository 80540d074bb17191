package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// methods are the methods a route is probed with.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// apiDoc is what these tests read of the OpenAPI document: per path, the
// methods it documents and the values its path parameters take.
type apiDoc map[string]struct {
	methods []string
	params  map[string][]string // path parameter -> values to try
}

func readAPIDoc(t *testing.T, doc []byte) apiDoc {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	type param struct {
		Name   string `json:"name"`
		In     string `json:"in"`
		Schema struct {
			Enum []string `json:"enum"`
		} `json:"schema"`
	}
	out := apiDoc{}
	for path, item := range d.Paths {
		e := out[path]
		e.params = map[string][]string{}
		for key, raw := range item {
			var op struct {
				Parameters []param `json:"parameters"`
			}
			if key == "parameters" {
				_ = json.Unmarshal(raw, &op.Parameters)
			} else {
				e.methods = append(e.methods, strings.ToUpper(key))
				if err := json.Unmarshal(raw, &op); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range op.Parameters {
				if p.In == "path" {
					e.params[p.Name] = append(p.Schema.Enum, "probe")[:max(1, len(p.Schema.Enum))]
				}
			}
		}
		out[path] = e
	}
	return out
}

// urls are the URLs of a documented path: each value of each path
// parameter ("/v1/sim/preempt", "/v1/sim/rebalance", ...).
func (d apiDoc) urls(path string) []string {
	urls := []string{path}
	for name, values := range d[path].params {
		var next []string
		for _, u := range urls {
			for _, v := range values {
				next = append(next, strings.ReplaceAll(u, "{"+name+"}", v))
			}
		}
		urls = next
	}
	return urls
}

// covers reports whether a ServeMux pattern's path serves a documented
// path: the same, or under a pattern that ends in a slash.
func covers(patternPath, docPath string) bool {
	return patternPath == docPath || strings.HasSuffix(patternPath, "/") && strings.HasPrefix(docPath, patternPath)
}

// probe sends method to url as the operator and reports whether a route
// took it: not the catch-all's 404, not a 405.
func probe(t *testing.T, s *Server, method, url string) (bool, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+s.HTTPAddr()+url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error api.Error `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	catchAll := resp.StatusCode == http.StatusNotFound && strings.HasPrefix(body.Error.Message, "no such endpoint")
	return !catchAll && resp.StatusCode != http.StatusMethodNotAllowed, resp.StatusCode
}

// The document and the server's route table agree: every route served is
// documented, with every method it answers, and every documented
// operation is served. The routes come from the server's own mux.
func TestOpenAPIDocumentsEveryRouteServed(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	doc := readAPIDoc(t, api.OpenAPI())
	routes := api.Routes(s.http.Handler)
	if !slices.Contains(routes, "/v1/jobs") {
		t.Fatalf("the server's routes: %v", routes)
	}
	servedBy := map[string]string{} // documented path -> pattern
	for _, pattern := range routes {
		method, path, hasMethod := strings.Cut(pattern, " ")
		if !hasMethod {
			path, method = method, ""
		}
		var docPaths []string
		for p := range doc {
			if covers(path, p) {
				docPaths = append(docPaths, p)
				servedBy[p] = pattern
			}
		}
		if len(docPaths) == 0 {
			t.Errorf("route %q is served but not documented", pattern)
			continue
		}
		for _, p := range docPaths {
			documented := doc[p].methods
			if method != "" {
				if !slices.Contains(documented, method) {
					t.Errorf("%s %s is served but not documented (documented: %v)", method, p, documented)
				}
				continue
			}
			// A pattern without a method: its handler says which it takes.
			for _, url := range doc.urls(p) {
				for _, m := range methods {
					served, status := probe(t, s, m, url)
					switch {
					case served && !slices.Contains(documented, m):
						t.Errorf("%s %s is served (%d) but not documented (documented: %v)", m, url, status, documented)
					case !served && slices.Contains(documented, m):
						t.Errorf("%s %s is documented but answers %d", m, url, status)
					}
				}
			}
		}
	}
	for p, e := range doc {
		pattern, ok := servedBy[p]
		if !ok {
			t.Errorf("%s is documented but no route serves it", p)
			continue
		}
		if method, _, ok := strings.Cut(pattern, " "); ok && !slices.Equal(e.methods, []string{method}) {
			t.Errorf("%s documents %v, the route serves %s only", p, e.methods, method)
		}
	}
}

// apiCall is one real call, checked against the document.
type apiCall struct {
	t     *testing.T
	s     *Server
	v     validator.Validator
	token string
}

// do sends a request, checks the request (when it should be valid) and
// the response against the document, and returns the status and body.
func (c apiCall) do(method, path, contentType string, body []byte, header ...string) (int, []byte) {
	c.t.Helper()
	newReq := func() *http.Request {
		req, err := http.NewRequestWithContext(c.t.Context(), method, "http://"+c.s.HTTPAddr()+path, bytes.NewReader(body))
		if err != nil {
			c.t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if ok, errs := c.v.ValidateHttpResponse(newReq(), resp); !ok {
		for _, e := range errs {
			c.t.Errorf("%s %s -> %d: the response does not fit the document: %s: %s %v\n%.600s", method, path, resp.StatusCode, e.Message, e.Reason, schemaErrors(e.SchemaValidationErrors), b)
		}
	}
	return resp.StatusCode, b
}

func schemaErrors[E any](errs []E) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%+v", e))
	}
	return out
}

// requestFits reports whether a request fits the document (its
// parameters and, for JSON, its body against the spec's schema).
func (c apiCall) requestFits(method, path string, body []byte) (bool, []string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, "http://"+c.s.HTTPAddr()+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	ok, errs := c.v.ValidateHttpRequestSync(req)
	var why []string
	for _, e := range errs {
		why = append(why, e.Message+": "+e.Reason)
		for _, f := range e.SchemaValidationErrors {
			why = append(why, fmt.Sprintf("  at %s (%s): %s", strings.Join(f.InstancePath, "."), f.FieldPath, f.Reason))
		}
	}
	return ok, why
}

func (c apiCall) as(token string) apiCall { c.token = token; return c }

func (c apiCall) want(want int, method, path, contentType string, body []byte, header ...string) []byte {
	c.t.Helper()
	status, b := c.do(method, path, contentType, body, header...)
	if status != want {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, b)
	}
	return b
}

// Real answers of a real server (embedded NATS, simulated cloud) fit the
// document: a job submitted, listed, got, preempted and cancelled;
// refusals (401, 403, 404, 400 for a malformed spec, 409, 415); tokens,
// audit, status, instances, metrics and the simulated clock.
func TestOpenAPIDescribesRealResponses(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	op := apiCall{t: t, s: s, v: v, token: s.OperatorToken()}
	anon := op.as("")

	anon.want(200, "GET", "/healthz", "", nil)
	anon.want(200, "GET", "/v1/openapi.json", "", nil)
	anon.want(401, "GET", "/v1/jobs", "", nil)
	anon.want(401, "POST", "/v1/jobs", "application/json", []byte(`{}`))
	op.as("spw_not_a_token").want(401, "GET", "/v1/jobs/x", "", nil)

	spec := []byte(`{"name": "openapi-check", "team": "nlp", "command": ["python", "train.py"],
		"resources": {"gpus_per_node": 1}, "work": "1000h on T4", "purchase": "spot", "deadline": "2000h"}`)
	if ok, why := op.requestFits("POST", "/v1/jobs", spec); !ok {
		t.Errorf("a valid spec does not fit the document: %v", why)
	}
	var created api.JobView
	if err := json.Unmarshal(op.want(201, "POST", "/v1/jobs", "application/json", spec), &created); err != nil {
		t.Fatal(err)
	}
	op.want(201, "POST", "/v1/jobs", "application/yaml", example(t, "bert-finetune.yaml"), "Idempotency-Key", "openapi-1")
	op.want(200, "POST", "/v1/jobs", "application/yaml", example(t, "bert-finetune.yaml"), "Idempotency-Key", "openapi-1")
	op.want(409, "POST", "/v1/jobs", "application/json", spec, "Idempotency-Key", "openapi-1")
	op.want(415, "POST", "/v1/jobs", "text/html", spec)

	// A malformed spec: refused by the server and by the document's
	// schema, for the same fields.
	bad := []byte(`{"name": "bad", "command": ["x"], "resources": {"gpus_per_node": "two"}, "work": "6h on V100", "colour": "red"}`)
	var refusal struct {
		Error api.Error `json:"error"`
	}
	if err := json.Unmarshal(op.want(400, "POST", "/v1/jobs", "application/json", bad), &refusal); err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, f := range refusal.Error.Fields {
		fields = append(fields, f.Field)
	}
	if refusal.Error.Code != api.CodeInvalidSpec || !slices.Contains(fields, "resources.gpus_per_node") || !slices.Contains(fields, "colour") {
		t.Errorf("malformed spec: %+v", refusal.Error)
	}
	if ok, why := op.requestFits("POST", "/v1/jobs", bad); ok {
		t.Error("the document takes the malformed spec")
	} else if all := strings.Join(why, "\n"); !strings.Contains(all, "gpus_per_node") || !strings.Contains(all, "colour") {
		t.Errorf("the document refuses the malformed spec, but not for its fields:\n%s", all)
	}
	op.want(400, "POST", "/v1/jobs", "application/json", []byte(`{"name": `))

	op.want(200, "GET", "/v1/jobs", "", nil)
	op.want(200, "GET", "/v1/jobs?team=nlp&state=queued,running&state=placing&limit=5", "", nil)
	op.want(400, "GET", "/v1/jobs?state=sleeping", "", nil)
	waitState(t, clientOf(s), created.ID, job.Running, 30*time.Second)
	var running api.JobView
	if err := json.Unmarshal(op.want(200, "GET", "/v1/jobs/"+created.ID, "", nil), &running); err != nil {
		t.Fatal(err)
	}
	if running.Placement == nil || running.Current == nil || running.Spec == nil {
		t.Errorf("a running job shows no placement, attempt or spec: %+v", running)
	}
	op.want(404, "GET", "/v1/jobs/no-such-job", "", nil)
	op.want(200, "GET", "/v1/instances", "", nil)
	op.want(200, "GET", "/v1/status", "", nil)
	op.want(200, "GET", "/metrics", "", nil)

	op.want(200, "GET", "/v1/sim/clock", "", nil)
	op.want(200, "POST", "/v1/sim/clock", "application/json", []byte(`{"paused": false}`))
	op.want(200, "POST", "/v1/sim/preempt", "application/json", []byte(`{"job": "`+created.ID+`"}`))
	op.want(400, "POST", "/v1/sim/preempt", "application/json", []byte(`{}`))
	// The job moves on: it runs again, and its view carries the attempt
	// that ended.
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		v, err := clientOf(s).Get(t.Context(), created.ID)
		if err != nil || v.Attempt <= running.Attempt || v.State != job.Running {
			return fmt.Errorf("after its preemption the job is %s on attempt %d (%v)", v.State, v.Attempt, err)
		}
		return nil
	})
	op.want(200, "GET", "/v1/jobs/"+created.ID, "", nil)
	op.want(200, "GET", "/v1/jobs?provider=sim&q=openapi", "", nil)

	// The dashboard's reads: costs, the market and an offer's prices, the
	// alerts (the preemption raised one).
	op.want(200, "GET", "/v1/costs?group_by=provider&hours=2&bucket=15m", "", nil)
	op.want(400, "GET", "/v1/costs?group_by=colour", "", nil)
	var m api.Market
	if err := json.Unmarshal(op.want(200, "GET", "/v1/market?purchase=spot", "", nil), &m); err != nil || len(m.Offers) == 0 {
		t.Fatalf("the market lists no spot offers (%v)", err)
	}
	op.want(200, "GET", "/v1/market/prices?key="+url.QueryEscape(m.Offers[0].Key), "", nil)
	op.want(404, "GET", "/v1/market/prices?key=no/such/offer", "", nil)
	op.want(400, "GET", "/v1/market/prices", "", nil)
	op.want(200, "GET", "/v1/alerts?limit=10", "", nil)
	op.want(400, "GET", "/v1/alerts?limit=0", "", nil)
	anon.want(401, "GET", "/v1/market", "", nil)
	anon.want(200, "GET", "/ui/", "", nil)
	// Its output, both attempts' or the end of one's; a parameter that is
	// not a number; another job.
	op.want(200, "GET", "/v1/jobs/"+created.ID+"/logs", "", nil)
	op.want(200, "GET", "/v1/jobs/"+created.ID+"/logs?attempt=1&tail=5", "", nil)
	op.want(400, "GET", "/v1/jobs/"+created.ID+"/logs?tail=lots", "", nil)
	op.want(404, "GET", "/v1/jobs/no-such-job/logs", "", nil)

	op.want(200, "DELETE", "/v1/jobs/"+created.ID+"?reason=openapi", "", nil)
	op.want(200, "DELETE", "/v1/jobs/"+created.ID, "", nil) // again: the same answer
	op.want(404, "DELETE", "/v1/jobs/no-such-job", "", nil)
	// The cancelled job's stream: its history, then its end.
	if b := op.want(200, "GET", "/v1/jobs/"+created.ID+"/events", "", nil); !strings.Contains(string(b), "event: end") {
		t.Errorf("a finished job's stream does not end: %.300s", b)
	}
	op.want(400, "GET", "/v1/jobs/"+created.ID+"/events", "", nil, "Last-Event-ID", "last")
	op.want(404, "GET", "/v1/jobs/no-such-job/events", "", nil)
	op.want(400, "GET", "/v1/events?state=sleeping", "", nil)
	op.want(200, "POST", "/v1/quote", "application/json", spec)
	op.want(200, "POST", "/v1/quote?months=12&runs_per_month=4", "application/yaml", example(t, "bert-finetune.yaml"))
	op.want(400, "POST", "/v1/quote", "application/json", bad)
	op.want(400, "POST", "/v1/quote?months=lots", "application/json", spec)

	var tok api.CreatedToken
	if err := json.Unmarshal(op.want(201, "POST", "/v1/tokens", "application/json", []byte(`{"name": "ci", "team": "nlp", "role": "viewer", "ttl": "24h"}`)), &tok); err != nil {
		t.Fatal(err)
	}
	op.want(400, "POST", "/v1/tokens", "application/json", []byte(`{"role": "viewer", "colour": "red"}`))
	op.want(200, "GET", "/v1/tokens", "", nil)
	viewer := op.as(tok.Token)
	viewer.want(403, "GET", "/v1/status", "", nil)
	viewer.want(403, "POST", "/v1/jobs", "application/json", spec)
	viewer.want(200, "GET", "/v1/jobs?team=nlp", "", nil)
	viewer.want(200, "POST", "/v1/quote", "application/json", spec)
	viewer.want(403, "GET", "/v1/events?team=vision", "", nil)
	op.want(200, "DELETE", "/v1/tokens/"+tok.Info.ID, "", nil)
	op.want(404, "DELETE", "/v1/tokens/no-such-token", "", nil)
	viewer.want(401, "GET", "/v1/jobs", "", nil)

	op.want(200, "GET", "/v1/audit?since=1h&limit=50", "", nil)
	op.want(400, "GET", "/v1/audit?since=yesterday", "", nil)
}

// The simulated cloud's request and reply types are what the document
// says, field by field.
func TestOpenAPISimSchemasHaveEveryField(t *testing.T) {
	for name, typ := range map[string]reflect.Type{
		"SimRequest":   reflect.TypeFor[SimRequest](),
		"SimReply":     reflect.TypeFor[SimReply](),
		"ClockRequest": reflect.TypeFor[ClockRequest](),
		"ClockReply":   reflect.TypeFor[ClockReply](),
	} {
		var d struct {
			Components struct {
				Schemas map[string]struct {
					Properties map[string]any `json:"properties"`
				} `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(api.OpenAPI(), &d); err != nil {
			t.Fatal(err)
		}
		var fields, props []string
		for f := range typ.Fields() {
			n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, n)
		}
		for p := range d.Components.Schemas[name].Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: the type's fields %v, the document's %v", name, fields, props)
		}
	}
}
