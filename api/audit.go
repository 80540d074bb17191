package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

type sourceKey struct{}

// WithSource records where a call comes from (the client's address over
// HTTP, "nats" over NATS), for its audit record.
func WithSource(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, sourceKey{}, source)
}

func sourceOf(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}

// Audit records a call that changes something, allowed or refused (err):
// who asked, what of, from where, and how it ended, on the audit subject
// of the team the target belongs to. It never holds the call up.
func (s *Service) Audit(ctx context.Context, action, target, targetTeam string, err error) {
	rec := &events.AuditRecord{Action: action, Principal: "anonymous", Target: target, TargetTeam: targetTeam,
		Source: sourceOf(ctx), Outcome: "ok", At: time.Now().UTC()} // wall time: what happened when, in the world
	if p, ok := auth.FromContext(ctx); ok {
		rec.Principal, rec.Name, rec.Team, rec.Role = p.Subject, p.Name, p.Team, string(p.Role)
	}
	if err != nil {
		e := asError(err)
		rec.Outcome, rec.Message = e.Code, e.Message
	}
	s.bus.PublishAsync(events.AuditSubject(targetTeam, action), rec, func(err error) {
		s.log.Warn("recording an audit record", zap.String("action", action), zap.String("target", target), zap.Error(err))
	})
}

// refusedAction names the change an unauthenticated HTTP call asked for
// ("" for a read: those are not audited).
func refusedAction(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/jobs":
		return "job.submit"
	case r.Method == http.MethodDelete && strings.HasPrefix(p, "/v1/jobs/"):
		return "job.cancel"
	case r.Method == http.MethodPost && p == "/v1/tokens":
		return "token.create"
	case r.Method == http.MethodDelete && strings.HasPrefix(p, "/v1/tokens/"):
		return "token.revoke"
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/sim/"):
		return "sim." + strings.TrimPrefix(p, "/v1/sim/")
	}
	return ""
}

// AuditList is the answer to GET /v1/audit.
type AuditList struct {
	Records []events.AuditEntry `json:"records"`
}

// AuditQuery selects audit records.
type AuditQuery struct {
	// Team: records of that team's things; "" for an operator is every
	// team's and the platform's.
	Team string
	// Target keeps the records of one job or token.
	Target string
	Since  time.Time
	Limit  int
}

// ListAudit returns audit records: an operator's of anything, a team
// admin's of its team.
func (s *Service) ListAudit(ctx context.Context, q AuditQuery) (*AuditList, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if q.Team == "" && p.Role != auth.Operator {
		q.Team = p.Team
	}
	if !p.Can(auth.ManageTokens, q.Team) && !(q.Team == "" && p.Role == auth.Operator) {
		return nil, errForbidden(p, "read the audit records of "+teamName(q.Team))
	}
	subjects := []string{events.AllAudit}
	if q.Team != "" {
		subjects = []string{events.AuditSubject(q.Team, "*")}
	}
	if q.Limit <= 0 || q.Limit > 10_000 {
		q.Limit = 1000
	}
	if q.Since.IsZero() {
		// The stream's timestamps are the NATS server's wall clock.
		q.Since = time.Now().Add(-7 * 24 * time.Hour)
	}
	entries, err := s.bus.Audit(ctx, subjects, q.Since, 0)
	if err != nil {
		return nil, errUnavailable(err)
	}
	out := []events.AuditEntry{}
	for _, e := range entries {
		if q.Target == "" || e.Record.Target == q.Target {
			out = append(out, e)
		}
	}
	if len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return &AuditList{Records: out}, nil
}

func (s *Service) auditHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	v := r.URL.Query()
	q := AuditQuery{Team: v.Get("team"), Target: v.Get("target")}
	if since := v.Get("since"); since != "" {
		if d, err := job.ParseDuration(since); err == nil {
			q.Since = time.Now().Add(-d) // the stream's wall clock
		} else if t, err := time.Parse(time.RFC3339, since); err == nil {
			q.Since = t
		} else {
			writeError(w, errBadRequest("since: %q is neither a duration (24h, 7d) nor an RFC 3339 time", since))
			return
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, errBadRequest("limit: %q is not a positive number", l))
			return
		}
		q.Limit = n
	}
	res, err := s.ListAudit(r.Context(), q)
	respond(w, http.StatusOK, res, err)
}
