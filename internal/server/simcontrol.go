package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/sim"
)

// SubjectSimControl is where the simulated cloud takes orders for demos
// and tests (answered by the server holding the scheduler lease, which
// runs the cloud).
const SubjectSimControl = "spotwise.sim.control"

// SimRequest asks the simulated cloud to interrupt capacity through the
// normal path: a real notice, then the capacity goes.
type SimRequest struct {
	// Action is preempt (default), rebalance or maintenance.
	Action   string `json:"action"`
	Job      string `json:"job,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Zone preempts every spot instance of a zone at once (a storm).
	Zone string `json:"zone,omitempty"`
	// In is how far ahead maintenance is announced (default 1h).
	In job.Duration `json:"in,omitempty"`
}

// SimReply names the instances that got a notice.
type SimReply struct {
	Instances []string `json:"instances"`
	Error     string   `json:"error,omitempty"`
}

func (s *Server) simControl(cloud *sim.Cloud) func(context.Context, []byte) []byte {
	return func(_ context.Context, data []byte) []byte {
		var req SimRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return simReply(nil, fmt.Errorf("request: %w", err))
		}
		ids, err := runSimRequest(cloud, req)
		return simReply(ids, err)
	}
}

// operatorOnly answers the simulated cloud's NATS controls for operators
// only (the token in the request's Authorization header), as over HTTP.
func (s *Server) operatorOnly(h func(context.Context, []byte) []byte) func(context.Context, []byte) []byte {
	return func(ctx context.Context, data []byte) []byte {
		source := "nats"
		if fwd := events.RequestHeader(ctx, forwardedFor); fwd != "" {
			source = "http " + fwd + " via nats" // as the HTTP API says
		}
		ctx = api.WithSource(ctx, source)
		var req SimRequest
		_ = json.Unmarshal(data, &req)
		action, target := "sim."+cmp.Or(req.Action, "preempt"), cmp.Or(req.Job, req.Instance, req.Zone)
		p, err := s.api.Authenticate(ctx, events.RequestHeader(ctx, "Authorization"))
		if err != nil {
			s.api.Audit(ctx, action, target, "", err)
			return simReply(nil, err)
		}
		ctx = auth.WithPrincipal(ctx, p)
		if !p.Can(auth.Operate, "") {
			err := api.Forbidden(p, auth.Operate.String())
			s.api.Audit(ctx, action, target, "", err)
			return simReply(nil, err)
		}
		out := h(ctx, data)
		var r SimReply
		if json.Unmarshal(out, &r) == nil && r.Error != "" {
			s.api.Audit(ctx, action, target, "", errors.New(r.Error))
		} else {
			s.api.Audit(ctx, action, target, "", nil)
		}
		return out
	}
}

// forwardedFor is the header in which the HTTP API tells the scheduling
// server the client's address (for the audit record only).
const forwardedFor = "Spotwise-Forwarded-For"

func simReply(ids []string, err error) []byte {
	r := SimReply{Instances: ids}
	if r.Instances == nil {
		r.Instances = []string{}
	}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r)
	return b
}

func runSimRequest(cloud *sim.Cloud, req SimRequest) ([]string, error) {
	targets := 0
	for _, v := range []string{req.Job, req.Instance, req.Zone} {
		if v != "" {
			targets++
		}
	}
	if targets != 1 {
		return nil, errors.New("name exactly one of job, instance or zone")
	}
	switch req.Action {
	case "", "preempt":
		switch {
		case req.Job != "":
			return cloud.PreemptJob(req.Job)
		case req.Zone != "":
			return cloud.PreemptZone(req.Zone)
		}
		if err := cloud.Preempt(req.Instance); err != nil {
			return nil, err
		}
		return []string{req.Instance}, nil
	case "rebalance", "maintenance":
		ids := []string{req.Instance}
		if req.Job != "" {
			var err error
			if ids, err = jobInstances(cloud, req.Job); err != nil {
				return nil, err
			}
		} else if req.Instance == "" {
			return nil, fmt.Errorf("%s takes a job or an instance, not a zone", req.Action)
		}
		for _, id := range ids {
			var err error
			if req.Action == "rebalance" {
				err = cloud.Rebalance(id)
			} else {
				in := req.In.D()
				if in <= 0 {
					in = time.Hour
				}
				err = cloud.Maintenance(id, in)
			}
			if err != nil {
				return nil, err
			}
		}
		return ids, nil
	}
	return nil, fmt.Errorf("unknown action %q (preempt, rebalance, maintenance)", req.Action)
}

// jobInstances lists a job's live instances.
func jobInstances(cloud *sim.Cloud, jobID string) ([]string, error) {
	insts, err := cloud.Instances(context.Background())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, in := range insts {
		if in.JobID == jobID && !in.State.Ended() {
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("job %s has no live instances: %w", jobID, sim.ErrUnknownInstance)
	}
	return ids, nil
}

// ClockRequest pauses or resumes the simulated clock (POST /v1/sim/clock).
type ClockRequest struct {
	Paused bool `json:"paused"`
}

// ClockReply is the simulated clock after a request.
type ClockReply struct {
	Now    time.Time `json:"now"`
	Speed  float64   `json:"speed"`
	Paused bool      `json:"paused"`
}

// simClockHTTP pauses or resumes the simulated clock every process of the
// system keeps (servers and agents follow the shared anchor): while it is
// paused, no simulated time passes, so a demo can be looked at, or a test
// can let a real workload checkpoint inside a notice window whatever the
// machine's speed. GET reads it.
func (s *Server) simClockHTTP(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.clock.(*clock.Scaled)
	if !ok {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "real_time",
			"message": "the server runs on real time (sim speed 1 with real clouds or no simulated history): there is no simulated clock to pause"}})
		return
	}
	if r.Method == http.MethodPost {
		var req ClockRequest
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "invalid_request", "message": "body: " + err.Error() + ` (want {"paused": true|false})`}})
			return
		}
		a := sc.Resume()
		if req.Paused {
			a = sc.Pause()
		}
		if err := putAnchor(r.Context(), s.bus, a); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unavailable", "message": err.Error()}})
			return
		}
		s.log.Info("simulated clock", zap.Bool("paused", a.Paused), zap.Time("now", sc.Now()))
		target := "resume"
		if req.Paused {
			target = "pause"
		}
		s.api.Audit(r.Context(), "sim.clock", target, "", nil)
	}
	_ = json.NewEncoder(w).Encode(ClockReply{Now: sc.Now(), Speed: sc.Speed(), Paused: sc.Paused()})
}

// simHTTP serves POST /v1/sim/{preempt,rebalance,maintenance} by asking
// the server that runs the simulated cloud, and /v1/sim/clock.
func (s *Server) simHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	action := strings.TrimPrefix(r.URL.Path, "/v1/sim/")
	if action == "clock" && r.Method == http.MethodGet {
		s.simClockHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte(`{"error":{"code":"method_not_allowed","message":"use POST"}}` + "\n"))
		return
	}
	if action == "clock" {
		s.simClockHTTP(w, r)
		return
	}
	var req SimRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "invalid_request", "message": err.Error()}})
		return
	}
	req.Action = action
	data, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	// The scheduling server answers, checking the same token again.
	replyData, err := s.bus.RequestWithHeader(ctx, SubjectSimControl, data, map[string]string{"Authorization": r.Header.Get("Authorization"), forwardedFor: r.RemoteAddr})
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unavailable", "message": "the simulated cloud did not answer: " + err.Error()}})
		return
	}
	var reply SimReply
	if err := json.Unmarshal(replyData, &reply); err != nil || reply.Error != "" {
		msg := reply.Error
		if err != nil {
			msg = err.Error()
		}
		code, status := "invalid_request", http.StatusBadRequest
		if errors.Is(errors.New(msg), sim.ErrUnknownInstance) || strings.Contains(msg, "unknown") {
			code, status = "not_found", http.StatusNotFound
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		return
	}
	_ = json.NewEncoder(w).Encode(reply)
}

// openCheckpoints opens the default checkpoint store.
func openCheckpoints(ctx context.Context, cfg Config, clk clock.Clock) (checkpoint.Store, error) {
	uri := cfg.Checkpoints.URI
	if uri == "" {
		dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "checkpoints"))
		if err != nil {
			return nil, err
		}
		if cfg.NATS.URL != "" && cfg.DataDir == "" {
			dir = filepath.Join(os.TempDir(), "spotwise-checkpoints")
		}
		uri = "file://" + dir
	}
	opts := []checkpoint.Option{checkpoint.WithClock(clk)}
	if cfg.Checkpoints.Endpoint != "" {
		opts = append(opts, checkpoint.WithEndpoint(cfg.Checkpoints.Endpoint))
	}
	if cfg.Checkpoints.Region != "" {
		opts = append(opts, checkpoint.WithRegion(cfg.Checkpoints.Region))
	}
	st, err := checkpoint.Open(ctx, uri, opts...)
	if err != nil {
		return nil, fmt.Errorf("checkpoints.uri: %w", err)
	}
	return st, nil
}

// redactURI drops credentials from a URI for logs.
func redactURI(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "[unparsable uri]"
	}
	if p.User != nil {
		p.User = url.User("[redacted]")
	}
	p.RawQuery = ""
	return p.String()
}

// workRoot is where the real agent's work directories go.
func (s *Server) workRoot() string {
	if s.cfg.DataDir != "" && s.cfg.NATS.URL == "" {
		abs, err := filepath.Abs(filepath.Join(s.cfg.DataDir, "agents"))
		if err == nil {
			return abs
		}
	}
	return filepath.Join(os.TempDir(), "spotwise-agents")
}
