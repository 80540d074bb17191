package events

import (
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	id := job.NewID(now)
	payloads := []Payload{
		&JobSubmitted{JobID: id, Name: "bert", Team: "nlp", Priority: 100, SubmittedAt: now, Via: "http"},
		&JobEvent{JobID: id, Kind: KindPlacing, State: job.Placing, Attempt: 1, Placement: &job.Placement{Provider: "sim", Region: "us-east-1"}},
		&AgentReport{JobID: id, Attempt: 1, InstanceID: "i-1", Kind: AgentProgress, Progress: 0.5},
		&Alert{Severity: SeverityWarning, Kind: "preemption", Summary: "job bert preempted"},
		&Interruption{Kind: providers.EventSpotInterruption, Instance: providers.Instance{ID: "i-1", Provider: "sim"}, Deadline: now.Add(2 * time.Minute)},
	}
	for _, p := range payloads {
		t.Run(p.EventType(), func(t *testing.T) {
			b, err := Encode(p, "", "test", now)
			if err != nil {
				t.Fatal(err)
			}
			env, got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if env.Type != p.EventType() || env.Version != Version || env.Source != "test" || !env.Time.Equal(now) {
				t.Fatalf("envelope = %+v", env)
			}
			if got.EventType() != p.EventType() {
				t.Fatalf("payload type %s, want %s", got.EventType(), p.EventType())
			}
		})
	}
}

func TestDecodeRefusesGarbledEvents(t *testing.T) {
	good := `{"job_id":"j-0123456789abcdefghjkmnpqrs","attempt":1,"instance_id":"i","kind":"progress","progress":0.5,"exit_code":0}`
	cases := []struct {
		name, msg, want string
	}{
		{"not json", `{{{`, "envelope"},
		{"empty", ``, "envelope"},
		{"wrong version", `{"v":2,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":` + good + `}`, "version 2"},
		{"unknown type", `{"v":1,"id":"x","type":"agent.dance","time":"2026-01-01T00:00:00Z","source":"t","data":` + good + `}`, "unknown event type"},
		{"no data", `{"v":1,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t"}`, "data is required"},
		{"no id", `{"v":1,"type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":` + good + `}`, "id and time"},
		{"unknown envelope field", `{"v":1,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":` + good + `,"extra":1}`, "unknown field"},
		{"wrong data type", `{"v":1,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":{"job_id":7}}`, "agent.report data"},
		{"invalid payload", `{"v":1,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":{"job_id":"j-0123456789abcdefghjkmnpqrs","attempt":1,"kind":"progress","progress":7}}`, "outside 0..1"},
		{"bad job id", `{"v":1,"id":"x","type":"job.event","time":"2026-01-01T00:00:00Z","source":"t","data":{"job_id":"../etc","kind":"queued","state":"queued"}}`, "not a job ID"},
		{"trailing data", `{"v":1,"id":"x","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"t","data":` + good + `}{"v":1}`, "data after the envelope"},
		{"time out of range", `{"v":1,"id":"x","type":"agent.report","time":"9999-12-31T23:59:59-01:00","source":"t","data":` + good + `}`, "out of range"},
		{"unknown state", `{"v":1,"id":"x","type":"job.event","time":"2026-01-01T00:00:00Z","source":"t","data":{"job_id":"j-0123456789abcdefghjkmnpqrs","kind":"queued","state":"napping"}}`, "napping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Decode([]byte(c.msg))
			if err == nil {
				t.Fatal("decoded a garbled event")
			}
			if !IsDecodeError(err) {
				t.Fatalf("error %v is not a DecodeError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestEncodeRefusesInvalidPayload(t *testing.T) {
	if _, err := Encode(&Alert{Severity: "meh"}, "", "t", time.Now()); err == nil {
		t.Fatal("encoded an invalid alert")
	}
}

func TestSubjectsAreSingleTokens(t *testing.T) {
	if got := PricesSubject("aws", "us.east*1"); got != "spotwise.prices.aws.us_east_1" {
		t.Fatalf("PricesSubject = %q", got)
	}
	if got := JobEventsSubject("j-abc"); got != "spotwise.jobs.events.j-abc" {
		t.Fatalf("JobEventsSubject = %q", got)
	}
}
