package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// longT4 runs for days of simulated time: it is still running when the
// test is over.
const longT4 = "name: long\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 5000h on T4\npurchase: on-demand\n"

// poisonOf is issue 9's poison message: a well-formed envelope of type
// typ (agent.report or alert), whatever the subject it is put on.
func poisonOf(typ string) []byte {
	data := `{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}`
	if typ == events.TypeAlert {
		data = `{"severity":"info","kind":"poison","summary":"not for this subject"}`
	}
	return []byte(`{"v":1,"id":"poison-` + typ + `","type":"` + typ + `","time":"2026-01-01T00:00:00Z","source":"x","data":` + data + `}`)
}

// wrongTypeFor is an event type a subject does not carry.
func wrongTypeFor(subject string) string {
	if typ, _ := events.EventTypeOn(subject); typ == events.TypeAgentReport {
		return events.TypeAlert
	}
	return events.TypeAgentReport
}

// concrete makes a subject to publish on from a filter: a job's ID for a
// one-token wildcard (every such filter takes a job ID), two tokens for a
// tail wildcard.
func concrete(filter, jobID string) string {
	toks := strings.Split(filter, ".")
	for i, tok := range toks {
		switch tok {
		case "*":
			toks[i] = jobID
		case ">":
			toks[i] = "poison.test"
		}
	}
	return strings.Join(toks, ".")
}

// observed is a server logger that also keeps its warnings for the test.
func observed(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	return zap.New(zapcore.NewTee(eventstest.Logger(t).Core(), core)), logs
}

func startObserved(t *testing.T, cfg Config) (*Server, *observer.ObservedLogs) {
	t.Helper()
	log, logs := observed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, logs
}

// A poison message on every subject a consumer of the server reads (taken
// from the bus's own list, so a new consumer is covered the day it is
// added), a garbled one on every stream subject, and an event whose
// handler fails the same way every time: the server drops each once,
// counts it by consumer and reason on /metrics, logs it once, and goes on
// scheduling. Restarted on the same data directory, it is not given any
// of them again.
func TestPoisonMessagesAreDroppedOnceAndNotRedelivered(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer hook.Close()
	cfg := testConfig(t.TempDir())
	cfg.Alerts.Webhooks = []alerts.Webhook{{Name: "test", URL: hook.URL}}
	// No capacity taken back by chance: the running job must run on.
	cfg.Sim.Interruptions = SimInterruptions{}
	s, logs := startObserved(t, cfg)
	c := clientOf(s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	running, _, err := c.Submit(ctx, []byte(longT4), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	before := waitState(t, c, running.ID, job.Running, 30*time.Second)
	// A job whose record is garbled in the bucket: every event for it
	// fails in its handler, the same way each time.
	broken, _, err := c.Submit(ctx, example(t, "too-cheap.yaml"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, broken.ID, job.Queued, 10*time.Second)
	js, err := jetstream.New(s.Bus().Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, events.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, broken.ID, []byte(`{"id": "`+broken.ID+`", "status": {"state": 7}}`)); err != nil {
		t.Fatal(err)
	}

	readings := s.Bus().Readings()
	want := map[events.DropKey]int64{}
	kinds := map[string]bool{}
	var streamSubjects []string
	for _, r := range readings {
		kinds[r.Kind] = true
		for _, filter := range r.Subjects {
			subject := concrete(filter, running.ID)
			poison := poisonOf(wrongTypeFor(subject))
			switch r.Kind {
			case "consume", "follow":
				for _, data := range [][]byte{poison, []byte(`{"v":1,"id":"garbled","type":`)} {
					if err := s.Bus().PublishRaw(ctx, subject, data); err != nil {
						t.Fatalf("publishing to %s: %v", subject, err)
					}
				}
				want[events.DropKey{Consumer: r.Name, Reason: "refused"}]++
				want[events.DropKey{Consumer: r.Name, Reason: "garbled"}]++
				streamSubjects = append(streamSubjects, subject)
			case "serve":
				// A request: the answer says what is wrong; nothing is
				// dropped, since nothing is stored.
				for _, data := range [][]byte{poison, []byte(`{garbled`)} {
					reply, err := opRequest(ctx, s, subject, data)
					if err != nil {
						t.Fatalf("request on %s: %v", subject, err)
					}
					if !json.Valid(reply) {
						t.Errorf("%s answered %q: not JSON", subject, reply)
					}
					if subject == events.SubjectSubmit || subject == events.SubjectGet || subject == events.SubjectCancel || subject == SubjectSimControl {
						if !strings.Contains(string(reply), `"error"`) {
							t.Errorf("%s answered %q to %q: want an error", subject, reply, data)
						}
					}
				}
			case "answer":
				// The agent of the running job answers its own attempt's
				// requests only: a poison request is met with silence.
				rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				_, err := s.Bus().Request(rctx, subject, poison)
				rcancel()
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
					t.Errorf("request on %s: %v, want no answer", subject, err)
				}
			default:
				t.Fatalf("reading of unknown kind %+v", r)
			}
		}
	}
	t.Logf("poisoned %d readings: %+v", len(readings), readings)
	for _, k := range []string{"consume", "follow", "serve", "answer"} {
		if !kinds[k] {
			t.Fatalf("the server reads nothing by %s (readings %+v): the test would not cover it", k, readings)
		}
	}
	// The event whose handler fails deterministically.
	if err := s.Bus().Publish(ctx, events.AgentSubject(broken.ID, 1), &events.AgentReport{JobID: broken.ID, Attempt: 1, InstanceID: "i-1", Kind: events.AgentProgress, Progress: 0.5}); err != nil {
		t.Fatal(err)
	}
	want[events.DropKey{Consumer: "scheduler-agent", Reason: "refused"}]++

	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if got := s.Bus().Dropped(); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("dropped %v, want %v", got, want)
		}
		return nil
	})
	// On /metrics, by consumer and reason.
	metrics := scrapeDropped(t, s)
	for k, n := range want {
		if metrics[k] != n {
			t.Errorf("/metrics: spotwise_events_dropped_total%v = %d, want %d (all: %v)", k, metrics[k], n, metrics)
		}
	}
	// Logged once each, never retried.
	perSubject := map[string]int{}
	for _, e := range logs.All() {
		switch e.Message {
		case "dropping event", "dropping garbled event":
			perSubject[fmt.Sprint(e.ContextMap()["subject"])]++
		case "event handler failed; will retry", "giving up on event", "event handler failed":
			t.Errorf("logged %q: %v", e.Message, e.ContextMap())
		}
	}
	for _, subject := range streamSubjects {
		if perSubject[subject] != 2 {
			t.Errorf("%s: %d drops logged, want 2 (the poison and the garbled message, once each)", subject, perSubject[subject])
		}
	}
	if n := perSubject[events.AgentSubject(broken.ID, 1)]; n != 1 {
		t.Errorf("the event whose handler fails was logged %d times, want once", n)
	}

	// The server goes on: the running job runs on, a new job is placed.
	if now := waitState(t, c, running.ID, job.Running, 5*time.Second); now.Attempt != before.Attempt {
		t.Fatalf("the running job went from attempt %d to %d", before.Attempt, now.Attempt)
	}
	next, _, err := c.Submit(ctx, []byte(longT4), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, next.ID, job.Running, 30*time.Second)

	// Restarted on the same data: nothing dropped is delivered again.
	s.Close()
	s2, logs2 := startObserved(t, cfg)
	js2, err := jetstream.New(s2.Bus().Conn())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		for _, r := range readings {
			if r.Kind != "consume" {
				continue
			}
			cons, err := js2.Consumer(ctx, r.Stream, r.Name)
			if err != nil {
				return fmt.Errorf("consumer %s: %w", r.Name, err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumPending != 0 || info.NumAckPending != 0 {
				return fmt.Errorf("consumer %s: %d pending, %d awaiting an ack", r.Name, info.NumPending, info.NumAckPending)
			}
		}
		return nil
	})
	// The price book is rebuilt from the last message of each subject:
	// the poison is no longer there to be met.
	prices, err := js2.Stream(ctx, events.StreamPrices)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := prices.GetLastMsgForSubject(ctx, concrete("spotwise.prices.>", "")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("the price stream still holds the dropped message %v (%v)", m, err)
	}
	waitState(t, clientOf(s2), next.ID, job.Running, 10*time.Second)
	if got := s2.Bus().Dropped(); len(got) != 0 {
		t.Errorf("after the restart, dropped %v: a poison message was delivered again", got)
	}
	for _, e := range logs2.All() {
		if strings.HasPrefix(e.Message, "dropping") {
			t.Errorf("after the restart: %s %v", e.Message, e.ContextMap())
		}
	}
}

// scrapeDropped reads spotwise_events_dropped_total from /metrics.
func scrapeDropped(t *testing.T, s *Server) map[events.DropKey]int64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[events.DropKey]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "spotwise_events_dropped_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		var k events.DropKey
		for _, l := range strings.Split(labels, ",") {
			name, v, _ := strings.Cut(l, "=")
			v, _ = strconv.Unquote(v)
			switch name {
			case "consumer":
				k.Consumer = v
			case "reason":
				k.Reason = v
			}
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", sc.Text(), err)
		}
		out[k] = int64(n)
	}
	return out
}
