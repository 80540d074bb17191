package agent

import (
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// FuzzAgentControl sends hostile requests, through a real bus, to the
// control subject of an agent running attempt 2 of a job: the agent
// answers, and hands to its workload, exactly the control requests for
// its own job and attempt, as they were sent; anything else (garbage,
// another type, another attempt, another job) meets silence and changes
// nothing.
//
//	go test -run '^$' -fuzz FuzzAgentControl -fuzztime 1m -fuzzminimizetime 10x ./agent/
func FuzzAgentControl(f *testing.F) {
	bus, err := events.Open(f.Context(), events.Config{Embedded: events.EmbeddedOptions{DataDir: f.TempDir()}}, "fuzz", nil, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(bus.Close)
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	jobID, other := job.NewID(now), job.NewID(now.Add(time.Hour))
	const attempt = 2
	requests, stop, err := controls(bus, jobID, attempt)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(stop)
	subject := events.AgentControlSubject(jobID, attempt)
	nc := bus.Conn()
	inbox, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		f.Fatal(err)
	}
	sentinel, err := events.Encode(&events.AgentControl{JobID: jobID, Attempt: attempt, Kind: events.ControlCheckpoint, Reason: "sentinel"}, "", "fuzz", now)
	if err != nil {
		f.Fatal(err)
	}

	for _, c := range []*events.AgentControl{
		{JobID: jobID, Attempt: attempt, Kind: events.ControlCheckpoint, Deadline: now.Add(2 * time.Minute), Reason: "notice"},
		{JobID: jobID, Attempt: attempt, Kind: events.ControlStop},
		{JobID: jobID, Attempt: attempt, Kind: events.ControlStart, Deadline: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
		{JobID: jobID, Attempt: attempt - 1, Kind: events.ControlStop},
		{JobID: jobID, Attempt: attempt + 1, Kind: events.ControlStart},
		{JobID: other, Attempt: attempt, Kind: events.ControlStop},
	} {
		b, err := events.Encode(c, "", "seed", now)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"` + jobID + `","attempt":2,"kind":"heartbeat"}}`,
		`{"v":1,"id":"a","type":"agent.control","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"` + jobID + `","attempt":2.0,"kind":"stop"}}`,
		`{"v":1,"id":"a","type":"agent.control","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"` + jobID + `","attempt":18446744073709551618,"kind":"stop"}}`,
		`{"v":1,"id":"a","type":"agent.control","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"` + jobID + `","attempt":2,"kind":"STOP"}}`,
		`{"v":1,"id":"a","type":"agent.control","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"` + jobID + `","attempt":2,"kind":"checkpoint","deadline":"0000-01-01T00:00:00-23:59"}}`,
		`{`, ``, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox.Subject, Data: data}); err != nil {
			t.Fatal(err)
		}
		// The agent handles its requests in order: once the sentinel is
		// answered, the request before it was handled, and its answer (if
		// any) has arrived.
		if _, err := nc.Request(subject, sentinel, 10*time.Second); err != nil {
			t.Fatalf("the agent no longer answers its own requests: %v", err)
		}
		answered := false
		if m, err := inbox.NextMsg(time.Millisecond); err == nil {
			answered = true
			if string(m.Data) != `{"ok":true}` {
				t.Fatalf("answered %q", m.Data)
			}
		}
		var got []*events.AgentControl
	drain:
		for {
			select {
			case c := <-requests:
				got = append(got, c)
			default:
				break drain
			}
		}
		if len(got) == 0 || got[len(got)-1].Reason != "sentinel" {
			t.Fatalf("the sentinel did not reach the workload: %+v", got)
		}
		got = got[:len(got)-1]

		_, p, err := events.Decode(data)
		c, isControl := p.(*events.AgentControl)
		mine := err == nil && isControl && c.JobID == jobID && c.Attempt == attempt
		switch {
		case mine && (!answered || len(got) != 1 || !reflect.DeepEqual(got[0], c)):
			t.Fatalf("a request for this attempt: answered %v, handed over %+v, want %+v", answered, got, c)
		case !mine && (answered || len(got) != 0):
			t.Fatalf("a request not for this attempt (%v, %+v) was answered (%v) or handed over (%+v)", err, p, answered, got)
		}
	})
}
