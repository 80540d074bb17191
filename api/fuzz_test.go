package api_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/catalog"
)

var errorCodes = []string{api.CodeInvalidSpec, api.CodeInvalidRequest, api.CodeNotFound, api.CodeConflict, api.CodeAlreadyFinished,
	api.CodeTooLarge, api.CodeMediaType, api.CodeMethod, api.CodeUnavailable, api.CodeInternal, api.CodeUnauthenticated, api.CodeForbidden}

// FuzzNATSSubmit sends hostile request bodies to the API's NATS subjects
// (submit above all, and get, cancel and list) on a real bus: every
// request is answered, with one of a job, a list or an error with a known
// code and a message; a refused submission stores nothing; an accepted
// one stores exactly one job, queued, whose spec is valid when read back.
//
//	go test -run '^$' -fuzz FuzzNATSSubmit -fuzztime 1m -fuzzminimizetime 10x ./api/
func FuzzNATSSubmit(f *testing.F) {
	clk := clock.NewFake(t0)
	bus, err := events.Open(f.Context(), events.Config{Embedded: events.EmbeddedOptions{DataDir: f.TempDir()}}, "fuzz", clk, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(bus.Close)
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	tokens, err := auth.OpenTokens(ctx, bus.TokenStore(), clk)
	if err != nil {
		f.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(tokens, nil, clk)
	if err != nil {
		f.Fatal(err)
	}
	op, _, err := tokens.Create(ctx, auth.NewToken{Role: auth.Operator}, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	svc := api.NewService(bus, catalog.Default(), clk, zap.NewNop()).WithAuth(authn)
	if err := svc.Start(ctx); err != nil {
		f.Fatal(err)
	}
	stop, err := svc.ServeNATS(bus)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(stop)
	js, err := jetstream.New(bus.Conn())
	if err != nil {
		f.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, events.BucketJobs)
	if err != nil {
		f.Fatal(err)
	}
	stored := func(t *testing.T) uint64 {
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Values()
	}

	examples, _ := filepath.Glob("../examples/*.yaml")
	if len(examples) == 0 {
		f.Fatal("no example specs in ../examples")
	}
	for _, name := range examples {
		y, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), y)
		f.Add(uint8(0), mustJSON(map[string]any{"spec": string(y), "idempotency_key": filepath.Base(name)}))
	}
	obj := spec().JSON()
	for _, s := range []string{
		string(obj),
		`{"spec":` + string(obj) + `}`,
		`{"spec":` + string(obj) + `,"idempotency_key":"` + strings.Repeat("k", 257) + `"}`,
		`{"spec":` + mustString(string(obj)) + `,"idempotency_key":"k1"}`,
		`{"spec":` + mustString(`{"spec":`+string(obj)+`}`) + `}`,
		`{"spec":` + string(obj) + `,"spec":"name: x"}`,
		`{"Spec":` + string(obj) + `}`,
		`{"spec":null}`, `{"spec":5}`, `{"spec":{}}`, `{"spec":[]}`, `{"spec":"\u0000"}`, `{"spec":` + string(obj) + `,"extra":1}`,
		`{"spec":{"name":"x","command":["a"],"resources":{"gpus_per_node":1},"work":"1h on V100","deadline":"2000-01-01T00:00:00Z"}}`,
		`{"spec":{"name":"x","command":["a"],"resources":{"gpus_per_node":1e400},"work":"1h on V100"}}`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		"{", "", "\xff\xfe", "null", "[]", "---\n---\n", strings.Repeat("[", 5000), strings.Repeat("a: &a [*a, *a, *a]\n", 3),
	} {
		f.Add(uint8(0), []byte(s))
	}
	for _, s := range []string{`{"id":"j-00000000000000000000000000"}`, `{"id":"../../x"}`, `{"id":7}`, `{"states":["nope"],"limit":-1}`,
		`{"limit":99999999999999999999}`, `{"after":"\u0000","team":"` + strings.Repeat("t", 5000) + `"}`, ``} {
		for sel := range uint8(4) {
			f.Add(sel, []byte(s))
		}
	}

	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		subject := []string{events.SubjectSubmit, events.SubjectGet, events.SubjectCancel, events.SubjectList}[sel%4]
		// Each run a second later, so that relative deadlines move on.
		clk.Advance(time.Second)
		before := stored(t)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		b, err := bus.RequestWithHeader(rctx, subject, data, map[string]string{"Authorization": "Bearer " + op})
		if err != nil {
			t.Fatalf("request on %s not answered: %v", subject, err)
		}
		var r api.Reply
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("reply %q is not JSON: %v", b, err)
		}
		set := 0
		for _, ok := range []bool{r.Job != nil, r.List != nil, r.Error != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("reply %s: want one of job, list and error", b)
		}
		if e := r.Error; e != nil {
			if !slices.Contains(errorCodes, e.Code) || strings.TrimSpace(e.Message) == "" {
				t.Fatalf("error %+v: want a known code and a message", e)
			}
			if e.Code == api.CodeInternal || e.Code == api.CodeUnavailable {
				t.Fatalf("%s failed inside: %+v", subject, e)
			}
			for _, fe := range e.Fields {
				if strings.TrimSpace(fe.Message) == "" {
					t.Fatalf("field error %+v says nothing", fe)
				}
			}
		}
		if subject != events.SubjectSubmit {
			return
		}
		after := stored(t)
		switch {
		case r.Error != nil:
			if after != before {
				t.Fatalf("refused (%s) but stored something (%d values, was %d)", r.Error.Message, after, before)
			}
		case r.Job == nil:
			t.Fatalf("submission answered with %s", b)
		case r.Created:
			if after != before+1 {
				t.Fatalf("created a job but stored %d values (was %d)", after, before)
			}
			rec, _, err := bus.Jobs().Get(ctx, r.Job.ID)
			if err != nil {
				t.Fatalf("the created job %s: %v", r.Job.ID, err)
			}
			if rec.Status.State != job.Queued || r.Job.State != job.Queued {
				t.Fatalf("created job is %s", rec.Status.State)
			}
			// What was stored is a valid spec, and reads back as itself.
			spec, _ := json.Marshal(rec.Spec)
			again, err := job.Parse(spec, catalog.Default())
			if err != nil {
				t.Fatalf("accepted a spec that is not valid when read back: %v\n%s", err, spec)
			}
			if again.Hash() != rec.Status.SpecHash || !reflect.DeepEqual(again, rec.Spec) {
				t.Fatalf("the stored spec reads back as another:\n%s\n%+v", spec, again)
			}
			if !rec.Status.DeadlineAt.IsZero() && !rec.Status.DeadlineAt.After(rec.Status.SubmittedAt) {
				t.Fatalf("accepted a deadline in the past: %s", rec.Status.DeadlineAt)
			}
		default:
			if after != before {
				t.Fatalf("a repeated submission stored something")
			}
		}
	})
}

func mustString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
