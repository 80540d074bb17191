package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// SubmitRequest is the body of a spotwise.jobs.submit request. Spec is the
// job spec as a JSON object or as YAML/JSON text. A request that is not
// such an object is read as the spec itself, so
// `nats req spotwise.jobs.submit "$(cat job.yaml)"` works.
type SubmitRequest struct {
	Spec           json.RawMessage `json:"spec"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// JobRequest is the body of spotwise.jobs.get and spotwise.jobs.cancel.
type JobRequest struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// ListRequest is the body of spotwise.jobs.list.
type ListRequest struct {
	States []job.State `json:"states,omitempty"`
	Team   string      `json:"team,omitempty"`
	Name   string      `json:"name,omitempty"`
	// Provider and Search: see Query.
	Provider string `json:"provider,omitempty"`
	Search   string `json:"search,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	After    string `json:"after,omitempty"`
}

// LogsRequest is the body of spotwise.jobs.logs: the parameters of GET
// /v1/jobs/{id}/logs (since as a duration back from now or an RFC 3339
// time), without follow.
type LogsRequest struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt,omitempty"`
	Tail    int    `json:"tail,omitempty"`
	Since   string `json:"since,omitempty"`
	After   string `json:"after,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// Reply is the body of every reply: one of Job, List, Logs or Error is
// set.
type Reply struct {
	Job     *JobView `json:"job,omitempty"`
	Created bool     `json:"created,omitempty"`
	List    *JobList `json:"list,omitempty"`
	Logs    *LogPage `json:"logs,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// ServeNATS answers the job API's request subjects until stop is called.
func (s *Service) ServeNATS(bus *events.Bus) (stop func(), err error) {
	handlers := map[string]events.Responder{
		events.SubjectSubmit: s.authNATS(s.natsSubmit),
		events.SubjectGet:    s.authNATS(s.natsGet),
		events.SubjectCancel: s.authNATS(s.natsCancel),
		events.SubjectList:   s.authNATS(s.natsList),
		events.SubjectLogs:   s.authNATS(s.natsLogs),
	}
	var stops []func()
	stopAll := func() {
		for _, f := range stops {
			f()
		}
	}
	for subject, h := range handlers {
		f, err := bus.Serve(subject, h)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, f)
	}
	return stopAll, nil
}

func (s *Service) natsSubmit(ctx context.Context, data []byte) []byte {
	if len(data) > MaxBodyBytes {
		return reply(Reply{Error: &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: "request is larger than 1 MiB"}})
	}
	spec, key := data, ""
	var req SubmitRequest
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var probe map[string]json.RawMessage
		if json.Unmarshal(trimmed, &probe) == nil {
			if _, ok := probe["spec"]; ok {
				if err := json.Unmarshal(trimmed, &req); err != nil {
					return reply(Reply{Error: errBadRequest("request: %v", err)})
				}
				spec, key = req.Spec, req.IdempotencyKey
				var text string
				if json.Unmarshal(spec, &text) == nil {
					spec = []byte(text)
				}
			}
		}
	}
	res, err := s.Submit(ctx, spec, key, "nats")
	if err != nil {
		return reply(Reply{Error: asError(err)})
	}
	return reply(Reply{Job: res.Job, Created: res.Created})
}

func (s *Service) natsGet(ctx context.Context, data []byte) []byte {
	var req JobRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return reply(Reply{Error: errBadRequest("request must be {\"id\": \"...\"}: %v", err)})
	}
	v, err := s.Get(ctx, req.ID)
	if err != nil {
		return reply(Reply{Error: asError(err)})
	}
	return reply(Reply{Job: v})
}

func (s *Service) natsCancel(ctx context.Context, data []byte) []byte {
	var req JobRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return reply(Reply{Error: errBadRequest("request must be {\"id\": \"...\"}: %v", err)})
	}
	v, err := s.Cancel(ctx, req.ID, req.Reason)
	if err != nil {
		return reply(Reply{Error: asError(err)})
	}
	return reply(Reply{Job: v})
}

func (s *Service) natsList(ctx context.Context, data []byte) []byte {
	var req ListRequest
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &req); err != nil {
			return reply(Reply{Error: errBadRequest("request: %v", err)})
		}
	}
	l, err := s.List(ctx, Query(req))
	if err != nil {
		return reply(Reply{Error: asError(err)})
	}
	return reply(Reply{List: l})
}

// natsActions are the request subjects that change something (audited
// even when refused).
var natsActions = map[string]string{events.SubjectSubmit: "job.submit", events.SubjectCancel: "job.cancel"}

// authNATS authenticates a request by its Authorization header, as the
// HTTP API does: the same tokens, the same rules.
func (s *Service) authNATS(h events.Responder) events.Responder {
	return func(ctx context.Context, data []byte) []byte {
		ctx = WithSource(ctx, "nats")
		ctx, aerr := s.authenticate(ctx, events.RequestHeader(ctx, "Authorization"))
		if aerr != nil {
			if action := natsActions[events.RequestSubject(ctx)]; action != "" {
				s.Audit(ctx, action, "", "", aerr)
			}
			return reply(Reply{Error: aerr})
		}
		return h(ctx, data)
	}
}

func reply(r Reply) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(Reply{Error: errInternal(err)})
	}
	return b
}
