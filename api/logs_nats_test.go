package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
)

// TestNATSLogs: spotwise.jobs.logs reads what GET /v1/jobs/{id}/logs
// reads, with the same visibility and the same errors, and a page of long
// lines is cut to what one NATS message carries.
func TestNATSLogs(t *testing.T) {
	e := natsEnv(t)
	id := e.submit(spec().Team("vision"))
	e.ship(id, 1, t0, "epoch 1", "epoch 2")
	e.ship(id, 2, t0.Add(time.Hour), "resumed")

	r := e.request(events.SubjectLogs, mustJSON(api.LogsRequest{ID: id}))
	if r.Error != nil || r.Logs == nil || strings.Join(logTexts(r.Logs.Lines), "|") != "epoch 1|epoch 2|resumed" {
		t.Fatalf("logs: %+v %+v", r.Logs, r.Error)
	}
	r = e.request(events.SubjectLogs, mustJSON(api.LogsRequest{ID: id, Attempt: 1, Tail: 1}))
	if r.Error != nil || strings.Join(logTexts(r.Logs.Lines), "|") != "epoch 2" {
		t.Fatalf("attempt 1's last line: %+v %+v", r.Logs, r.Error)
	}
	for _, bad := range []struct {
		data []byte
		code string
	}{
		{mustJSON(api.LogsRequest{ID: id, Tail: -1}), api.CodeInvalidRequest},
		{mustJSON(api.LogsRequest{ID: id, Since: "yesterday"}), api.CodeInvalidRequest},
		{mustJSON(api.LogsRequest{ID: id, After: "x"}), api.CodeInvalidRequest},
		{[]byte(`{"id": 7}`), api.CodeInvalidRequest},
		{mustJSON(api.LogsRequest{ID: "j-00000000000000000000000000"}), api.CodeNotFound},
	} {
		if r := e.request(events.SubjectLogs, bad.data); r.Error == nil || r.Error.Code != bad.code {
			t.Errorf("%s: %+v, want %s", bad.data, r.Error, bad.code)
		}
	}
	// Another team's token: not found, as the job is.
	e.client = e.as("nlp", auth.Admin)
	if r := e.request(events.SubjectLogs, mustJSON(api.LogsRequest{ID: id})); r.Error == nil || r.Error.Code != api.CodeNotFound {
		t.Fatalf("another team's read: %+v", r.Error)
	}

	// 80 lines of 16 KiB of quotes (twice as long as JSON): pages that
	// fit a message, which together hold every line.
	e.client = e.as("", auth.Operator)
	big := e.submit(spec().Name("chatty"))
	line := strings.Repeat(`"`, events.MaxLogLine)
	for i := range 20 {
		e.ship(big, 1, t0.Add(time.Duration(i)*time.Minute), line, line, line, line)
	}
	total, after := 0, ""
	for pages := 0; ; pages++ {
		if pages > 200 {
			t.Fatal("the pages never end")
		}
		r := e.request(events.SubjectLogs, mustJSON(api.LogsRequest{ID: big, After: after}))
		if r.Error != nil || len(r.Logs.Lines) == 0 {
			t.Fatalf("page %d: %+v", pages, r.Error)
		}
		total += len(r.Logs.Lines)
		if after = r.Logs.Next; !r.Logs.More {
			break
		}
	}
	if total != 80 {
		t.Fatalf("read %d of 80 lines", total)
	}
}
