package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// examplePayloads is one valid payload of every event type; a type added
// to the registry without one here fails TestEveryTypeHasAnExample.
func examplePayloads(now time.Time) []Payload {
	id := "j-0123456789abcdefghjkmnpqrs"
	in := providers.Instance{ID: "i-0abc", Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge",
		Purchase: providers.Spot, Price: money.Micros(526000), State: providers.InstanceRunning, JobID: id, Attempt: 1,
		IdempotencyKey: job.LaunchKey(id, 1), LaunchedAt: now, RunningAt: now}
	offer := providers.Offer{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge", GPU: "T4", GPUs: 1,
		GPUMemoryGB: 16, VCPUs: 4, MemoryGiB: 16, Purchase: providers.Spot, Price: 158000, OnDemandPrice: 526000, Available: -1,
		Capacity: providers.CapacityHigh, LaunchLatency: 90 * time.Second, UpdatedAt: now}
	return []Payload{
		&JobSubmitted{JobID: id, Name: "bert", Team: "nlp", Priority: 100, SubmittedAt: now, Via: "http"},
		&JobEvent{JobID: id, Kind: KindPending, State: job.Queued, Attempt: 1, Message: "not placed yet",
			Placement: &job.Placement{OfferID: offer.ID(), Provider: "aws", Region: "us-east-1", GPU: "T4", GPUs: 1, Nodes: 1, PricePerHour: 158000},
			Reasons:   []job.PendingReason{{Code: "max-price", Offers: 3, Message: "too dear"}}, Progress: 0.25, Cost: 1234},
		&OffersUpdated{Provider: "aws", Region: "us-east-1", Offers: []providers.Offer{offer}, Source: "sim"},
		&InstanceChanged{Instance: in, Kind: providers.EventInstanceRunning, Reason: "booted"},
		&Interruption{Kind: providers.EventSpotInterruption, Instance: in, Deadline: now.Add(2 * time.Minute), Reason: "capacity"},
		&AgentReport{JobID: id, Attempt: 1, InstanceID: in.ID, Kind: AgentCheckpoint, Progress: 0.5, Message: "periodic",
			Checkpoint: &job.CheckpointRef{Attempt: 1, Step: 500, Progress: 0.5, SHA256: "ab", Size: 1 << 20, Location: "file:///ck/" + id + "/500", At: now}},
		&AgentControl{JobID: id, Attempt: 1, Kind: ControlCheckpoint, Deadline: now.Add(2 * time.Minute), Reason: "notice"},
		&Alert{Severity: SeverityWarning, Kind: "preemption", JobID: id, Summary: "job bert preempted", Details: map[string]string{"zone": "us-east-1a"}},
		&AuditRecord{Action: "job.cancel", Principal: "token:abcdefghijklmnop", Name: "ci", Team: "nlp", Role: "submitter",
			Target: id, TargetTeam: "nlp", Source: "127.0.0.1:50000", Outcome: "ok"},
		&LogBatch{JobID: id, Attempt: 2, Instance: in.ID, Seq: 1, Lines: []LogLine{{Time: now, Stream: LogStdout, Text: "step 10/100"},
			{Time: now, Stream: LogAgent, Text: "spotwise: 3 lines dropped"}}},
	}
}

func TestEveryTypeHasAnExample(t *testing.T) {
	have := map[string]bool{}
	for _, p := range examplePayloads(time.Now()) {
		have[p.EventType()] = true
	}
	for typ := range registry {
		if !have[typ] {
			t.Errorf("no example %s payload: FuzzDecode's seeds miss a type", typ)
		}
	}
}

// FuzzDecode holds Decode to its contract on any input: it does not panic;
// an event it accepts is encoded again and decodes to the same event; and
// a refusal is a *DecodeError that says what is wrong (the envelope, the
// type, or the type's data).
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 1m ./events/
func FuzzDecode(f *testing.F) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, p := range examplePayloads(now) {
		b, err := Encode(p, "ev-1", "seed", now)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// The same event with each field of its data in turn replaced by
		// something hostile, and the envelope likewise.
		for _, m := range mutations(f, b) {
			f.Add(m)
		}
	}
	for _, s := range []string{
		// The poison message of issue 9: well formed, any type.
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}} trailing`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}{"v":1}`,
		`{"v":1,"id":"a","type":"agent.report","time":"0000-01-01T00:00:00+01:00","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		`{"v":1,"id":"a","type":"agent.report","time":"9999-12-31T23:59:59-01:00","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00.123456789123Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		`{"V":1,"ID":"a","Type":"agent.report","TIME":"2026-01-01T00:00:00Z","source":"x","data":{"JOB_ID":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat","kind":"exited"}}`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":"{}"}`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":[]}`,
		// Bytes that are not UTF-8 inside strings.
		"{\"v\":1,\"id\":\"a\",\"type\":\"agent.report\",\"time\":\"2026-01-01T00:00:00Z\",\"source\":\"\xff\xfe\",\"data\":{\"job_id\":\"j-00000000000000000000000000\",\"attempt\":1,\"kind\":\"heartbeat\",\"message\":\"\xff\"}}",
		`{"v":1,"id":"a","type":"offers.updated","time":"2026-01-01T00:00:00Z","source":"x","data":{"provider":"aws","region":"r","offers":[{"provider":"aws","region":"r","zone":"z","instance_type":"t","gpu":"T4","gpus":1,"purchase":"spot","price_per_hour":1e400}]}}`,
		`{"v":1,"id":"a","type":"offers.updated","time":"2026-01-01T00:00:00Z","source":"x","data":{"provider":"aws","region":"r","offers":[{"provider":"aws","region":"r","zone":"z","instance_type":"t","gpu":"T4","gpus":99999999999999999999,"purchase":"spot"}]}}`,
		`{"v":1.5,"id":"a"}`, `{"v":-1}`, `{"v":1,"id":"a","time":"yesterday"}`, `{"v":1,"id":"a","time":"2026-01-01T00:00:00Z","type":"alert","data":null}`,
		`null`, `[]`, `"x"`, `0`, ``, "\x00", "{", `{"v":1,"v":1}`, strings.Repeat("[", 10000), strings.Repeat(`{"a":`, 5000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, p, err := Decode(data)
		if err != nil {
			checkRefusal(t, env, p, err)
			return
		}
		if p == nil || p.EventType() != env.Type {
			t.Fatalf("accepted a %s envelope with payload %T", env.Type, p)
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input that is not one JSON value: %q", data)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted a payload that fails its own validation: %v", err)
		}
		again, err := Encode(p, env.ID, env.Source, env.Time)
		if err != nil {
			t.Fatalf("accepted %q, which cannot be encoded again: %v", data, err)
		}
		env2, p2, err := Decode(again)
		if err != nil {
			t.Fatalf("accepted %q, encoded it as %q, which is refused: %v", data, again, err)
		}
		if env2.Version != env.Version || env2.ID != env.ID || env2.Type != env.Type || env2.Source != env.Source || !env2.Time.Equal(env.Time) {
			t.Fatalf("envelope changed in a round trip:\n%+v\n%+v", env, env2)
		}
		// The same event: the same canonical encoding, down to the byte.
		if third, err := Encode(p2, env2.ID, env2.Source, env2.Time); err != nil || !bytes.Equal(third, again) {
			t.Fatalf("payload changed in a round trip (%v):\n%s\n%s", err, again, third)
		}
	})
}

// checkRefusal holds a refusal to its contract: a *DecodeError naming the
// envelope, the unknown type or the type whose data is wrong, and saying
// something about it.
func checkRefusal(t *testing.T, env Envelope, p Payload, err error) {
	t.Helper()
	if p != nil {
		t.Fatalf("refused (%v) but returned a payload %T", err, p)
	}
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error is %T (%v), want a *DecodeError", err, err)
	}
	msg := de.Err.Error()
	var detail string
	switch {
	case strings.HasPrefix(msg, "envelope"):
		detail = strings.TrimPrefix(msg, "envelope")
	case strings.HasPrefix(msg, "unknown event type "):
		detail = strings.TrimPrefix(msg, "unknown event type ")
	default:
		if _, known := registry[env.Type]; !known || !strings.HasPrefix(msg, env.Type) {
			t.Fatalf("refusal %q names neither the envelope nor the event's type %q", msg, env.Type)
		}
		detail = strings.TrimPrefix(msg, env.Type)
	}
	if strings.Trim(detail, " :") == "" {
		t.Fatalf("refusal %q does not say what is wrong", msg)
	}
}

// mutations returns the encoded event b with, in turn, each field of its
// envelope and each top-level field of its data replaced by hostile
// values, or removed.
func mutations(tb testing.TB, b []byte) [][]byte {
	tb.Helper()
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		tb.Fatal(err)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(env["data"], &data); err != nil {
		tb.Fatal(err)
	}
	hostile := []string{`null`, `""`, `-1`, `0`, `1e308`, `99999999999999999999999`, `"9999-12-31T23:59:59Z"`,
		`"0001-01-01T00:00:00Z"`, `{}`, `[]`, `"j-zzzzzzzzzzzzzzzzzzzzzzzzzz"`, `"../../etc"`, `true`}
	var out [][]byte
	enc := func(m map[string]json.RawMessage) []byte {
		x, err := json.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		return x
	}
	for i, k := range sortedKeys(data) {
		v := data[k]
		h := hostile[i%len(hostile)]
		data[k] = json.RawMessage(h)
		env["data"] = enc(data)
		out = append(out, enc(env))
		delete(data, k)
		env["data"] = enc(data)
		out = append(out, enc(env))
		data[k] = v
	}
	env["data"] = enc(data)
	for i, k := range sortedKeys(env) {
		if k == "data" {
			continue
		}
		v := env[k]
		env[k] = json.RawMessage(hostile[(i+3)%len(hostile)])
		out = append(out, enc(env))
		env[k] = v
	}
	// Another type's name on this data: a payload of the wrong shape.
	env["type"] = json.RawMessage(fmt.Sprintf("%q", TypeAgentReport))
	out = append(out, enc(env))
	return out
}

func sortedKeys(m map[string]json.RawMessage) []string { return slices.Sorted(maps.Keys(m)) }

// FuzzHistorySeal: whatever a message on the sealed-history subject
// holds, reading it never panics; one accepted names a job and holds only
// events stored before it, and what it gives are that job's events, each
// once at the sequence it names.
func FuzzHistorySeal(f *testing.F) {
	ev, err := Encode(&JobEvent{JobID: "j-a", Kind: KindPending, State: job.Queued}, "e1", "test", time.Unix(1e9, 0))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(historySeal{Job: "j-a", Events: []sealedEvent{{Seq: 3, Data: ev}, {Seq: 5, Data: json.RawMessage(`"{garbled"`)}}})
	f.Add(good, uint64(10))
	f.Add(good, uint64(4))
	f.Add([]byte(`{"job":"j-a","events":[{"seq":0,"data":{}}]}`), uint64(9))
	f.Add([]byte(`{"events":[]}`), uint64(9))
	f.Add([]byte(`not json`), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, seq uint64) {
		m, err := decodeHistorySeal(data, seq)
		if err != nil {
			return
		}
		if m.Job == "" {
			t.Fatal("a seal that names no job was accepted")
		}
		for _, e := range m.Events {
			if e.Seq == 0 || e.Seq >= seq {
				t.Fatalf("an event at %d in a seal at %d was accepted", e.Seq, seq)
			}
		}
		for _, e := range m.entries(m.Job) {
			if e.Event == nil || e.Event.JobID != m.Job || !e.Sealed || e.Seq >= seq {
				t.Fatalf("an entry %+v from a seal of %s at %d", e, m.Job, seq)
			}
		}
		if len(m.entries(m.Job+"x")) != 0 {
			t.Fatal("a seal gave another job's events")
		}
	})
}
