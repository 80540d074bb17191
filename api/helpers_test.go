package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/catalog"
)

// t0 is where every test's fake clock starts: far enough from the wall
// clock that a test using the wrong clock notices.
var t0 = time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)

// env is one API service on a real embedded NATS server, mounted on an
// HTTP test server.
type env struct {
	t      *testing.T
	bus    *events.Bus
	clk    *clock.Fake
	svc    *api.Service
	srv    *httptest.Server
	client *api.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clock.NewFake(t0)
	bus := eventstest.NewBus(t, clk)
	e := &env{t: t, bus: bus, clk: clk, svc: startService(t, bus, clk)}
	e.srv = httptest.NewServer(e.svc.Handler(nil))
	t.Cleanup(e.srv.Close)
	e.client = e.as("", auth.Operator)
	return e
}

// as is a client with a new token of role in team ("" for a platform
// token).
func (e *env) as(team string, role auth.Role) *api.Client {
	e.t.Helper()
	tok := newToken(e.t, e.bus, e.clk, auth.NewToken{Name: "test " + string(role), Team: team, Role: role})
	c := api.NewClient(e.srv.URL)
	c.Token = tok
	return c
}

// newToken makes a token in the bus's token store.
func newToken(t *testing.T, bus *events.Bus, clk clock.Clock, n auth.NewToken) string {
	t.Helper()
	tok, _, err := tokensOf(t, bus, clk).Create(t.Context(), n, "test")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokensOf opens the token store of a bus.
func tokensOf(t *testing.T, bus *events.Bus, clk clock.Clock) *auth.Tokens {
	t.Helper()
	tokens, err := auth.OpenTokens(t.Context(), bus.TokenStore(), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tokens.Close)
	return tokens
}

// asOp is a context for calling the service directly as an operator.
func asOp(ctx context.Context) context.Context {
	return auth.WithPrincipal(ctx, auth.System("test"))
}

// startService starts an API service on bus with its index ready; it
// takes the tokens of the bus's token store.
func startService(t *testing.T, bus *events.Bus, clk clock.Clock) *api.Service {
	t.Helper()
	authn, err := auth.NewAuthenticator(tokensOf(t, bus, clk), nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	svc := api.NewService(bus, catalog.Default(), clk, eventstest.Logger(t)).WithAuth(authn)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Start's context also bounds the index watch: use the test's.
	done := make(chan error, 1)
	go func() { done <- svc.Start(t.Context()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("starting the API service: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the API service's index did not become ready")
	}
	return svc
}

// serveNATS answers the API's request subjects until the test ends.
func serveNATS(t *testing.T, svc *api.Service, bus *events.Bus) {
	t.Helper()
	stop, err := svc.ServeNATS(bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// specBuilder builds job specs for tests: a valid one-GPU job unless told
// otherwise.
type specBuilder struct{ m map[string]any }

func spec() *specBuilder {
	return &specBuilder{m: map[string]any{
		"name":      "resnet",
		"team":      "vision",
		"command":   []string{"python", "train.py"},
		"resources": map[string]any{"gpus_per_node": 1},
		"work":      "1h on V100",
	}}
}

func (b *specBuilder) Name(n string) *specBuilder     { return b.Set("name", n) }
func (b *specBuilder) Team(n string) *specBuilder     { return b.Set("team", n) }
func (b *specBuilder) Deadline(d string) *specBuilder { return b.Set("deadline", d) }
func (b *specBuilder) Priority(p int) *specBuilder    { return b.Set("priority", p) }

// Set sets a top-level field; a nil value removes it.
func (b *specBuilder) Set(k string, v any) *specBuilder {
	if v == nil {
		delete(b.m, k)
	} else {
		b.m[k] = v
	}
	return b
}

func (b *specBuilder) JSON() []byte {
	out, err := json.Marshal(b.m)
	if err != nil {
		panic(err)
	}
	return out
}

func (b *specBuilder) YAML() []byte {
	out, err := yaml.Marshal(b.m)
	if err != nil {
		panic(err)
	}
	return out
}

// response is an HTTP answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, into any) {
	t.Helper()
	if err := json.Unmarshal(r.body, into); err != nil {
		t.Fatalf("response is not JSON (%v): %s", err, r.body)
	}
}

// apiError reads an error response's body.
func (r response) apiError(t *testing.T) *api.Error {
	t.Helper()
	var eb struct {
		Error *api.Error `json:"error"`
	}
	r.decode(t, &eb)
	if eb.Error == nil {
		t.Fatalf("error response without an error: %s", r.body)
	}
	return eb.Error
}

func (e *env) do(method, path string, body []byte, header map[string]string) response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	// As the operator, unless the test sends its own Authorization.
	req.Header.Set("Authorization", "Bearer "+e.client.Token)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	// Redirects are answers a user would see too: do not follow them.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) post(body []byte, header map[string]string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/v1/jobs", body, header)
}

// submit creates a job through the service and returns its ID.
func (e *env) submit(b *specBuilder) string {
	e.t.Helper()
	res, err := e.svc.Submit(asOp(e.t.Context()), b.YAML(), "", "test")
	if err != nil {
		e.t.Fatalf("submitting: %v", err)
	}
	return res.Job.ID
}

// list reads a listing through the service.
func (e *env) list(q api.Query) *api.JobList {
	e.t.Helper()
	l, err := e.svc.List(asOp(e.t.Context()), q)
	if err != nil {
		e.t.Fatalf("listing: %v", err)
	}
	return l
}

// storedKeys is every key in the job bucket, read from the store itself and
// not through the index.
func (e *env) storedKeys() []string {
	e.t.Helper()
	keys, err := e.bus.Jobs().Keys(e.t.Context())
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		e.t.Fatal(err)
	}
	return keys
}

// assertNothingStored fails unless the job bucket and the listing are empty.
func (e *env) assertNothingStored() {
	e.t.Helper()
	if keys := e.storedKeys(); len(keys) != 0 {
		e.t.Fatalf("job bucket holds %v, want nothing", keys)
	}
	if l := e.list(api.Query{}); len(l.Jobs) != 0 {
		e.t.Fatalf("listing shows %d jobs, want none", len(l.Jobs))
	}
}

// setRecord rewrites a stored record the way the scheduler would.
func (e *env) setRecord(id string, fn func(r *job.Record)) {
	e.t.Helper()
	if _, _, err := e.bus.Jobs().Modify(e.t.Context(), id, func(r *job.Record) error {
		fn(r)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func kinds(v *api.JobView) []string {
	var out []string
	for _, ev := range v.Events {
		out = append(out, ev.Kind)
	}
	return out
}

func ids(jobs []api.Summary) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// submitEveryMinute submits a job named name through the service as an
// operator, then moves the clock on a minute (so jobs submitted one after
// the other are a minute apart), and returns its ID.
func (e *env) submitEveryMinute(name string) string {
	e.t.Helper()
	res, err := e.svc.Submit(asOp(e.t.Context()), spec().Name(name).YAML(), "", "test")
	if err != nil {
		e.t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	return res.Job.ID
}
