package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/events"
)

// Health, for probes and load balancers (open, like /healthz: they hold
// no data):
//
//   - GET /livez: the process runs and its HTTP server answers. It asks
//     nothing else, so a NATS outage does not get the server restarted.
//   - GET /readyz: the server can do its work: its NATS connection is up,
//     the job bucket and every stream answer within readyTimeout, and it
//     knows its scheduler role (leader, or standby behind a named
//     leader). 503 otherwise; the body lists each check either way.
//
// /healthz (the API's) answers as /livez does.

// readyTimeout bounds the readiness checks together.
const readyTimeout = 2 * time.Second

// Check is one readiness check's outcome.
type Check struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Readiness is what GET /readyz answers.
type Readiness struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	// Role is "leader" (this server schedules), "standby" (another one
	// does) or "unknown".
	Role   string  `json:"role"`
	Checks []Check `json:"checks"`
}

// Ready reports whether every check passed.
func (r Readiness) Ready() bool { return r.Status == "ready" }

// Roles of a server in its cluster.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
	RoleUnknown = "unknown"
)

// readyStreams are the streams whose answer readiness waits for.
var readyStreams = []string{events.StreamJobs, events.StreamPrices, events.StreamInstances, events.StreamInterruptions,
	events.StreamAgent, events.StreamAlerts, events.StreamAudit}

func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	writeHealth(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.Readiness(r.Context())
	code := http.StatusOK
	if !rd.Ready() {
		code = http.StatusServiceUnavailable
	}
	writeHealth(w, code, rd)
}

func writeHealth(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Readiness runs the readiness checks, at once, within readyTimeout.
func (s *Server) Readiness(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	rd := Readiness{Status: "ready", Role: RoleUnknown}
	nc := s.bus.Conn()
	conn := connCheck(nc)
	// The others ask NATS; with no connection they would only wait.
	checks := []func(context.Context) Check{s.checkRole}
	js, err := jetstream.New(nc)
	if err != nil {
		conn.OK, conn.Error = false, err.Error()
	}
	if js != nil {
		checks = append(checks, func(ctx context.Context) Check {
			_, err := js.KeyValue(ctx, events.BucketJobs)
			return checkOf("job store", err)
		})
		for _, name := range readyStreams {
			checks = append(checks, func(ctx context.Context) Check {
				_, err := js.Stream(ctx, name)
				return checkOf("stream "+name, err)
			})
		}
	}
	rd.Checks = make([]Check, 1+len(checks))
	rd.Checks[0] = conn
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { rd.Checks[i+1] = c(ctx) })
	}
	wg.Wait()
	if rd.Checks[0].OK {
		// The connection may have gone while the others waited on it:
		// say so rather than blame what answered no longer.
		rd.Checks[0] = connCheck(nc)
	}
	for _, c := range rd.Checks {
		if c.Name == "scheduler" && c.OK {
			rd.Role = s.role()
		}
		if !c.OK {
			rd.Status = "not ready"
		}
	}
	return rd
}

// connCheck says whether the NATS connection is up, and if not, how it is.
func connCheck(nc *nats.Conn) Check {
	c := Check{Name: "nats", OK: nc.IsConnected()}
	if !c.OK {
		c.Error = "the NATS connection is " + nc.Status().String()
	}
	return c
}

func checkOf(name string, err error) Check {
	c := Check{Name: name, OK: err == nil}
	if err != nil {
		c.Error = err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			c.Error = fmt.Sprintf("no answer within %s", readyTimeout)
		}
	}
	return c
}

// role is this server's scheduler role as it knows it without asking:
// leader while it holds a valid lease and its term runs.
func (s *Server) role() string {
	if s.term.Load() != nil && s.lease.Valid() {
		return RoleLeader
	}
	return RoleStandby
}

// checkRole knows the server's role: it leads, or the lease names
// another server that does.
func (s *Server) checkRole(ctx context.Context) Check {
	c := Check{Name: "scheduler"}
	if s.role() == RoleLeader {
		c.OK = true
		return c
	}
	holder, err := s.lease.Holder(ctx)
	switch {
	case err != nil:
		return checkOf("scheduler", fmt.Errorf("reading the scheduler lease: %w", err))
	case holder == "":
		c.Error = "no server holds the scheduler lease"
	case holder == s.node:
		c.Error = "this server holds the scheduler lease but its term has not started"
	default:
		c.OK = true
	}
	return c
}
