package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/job"
)

// Error codes of authentication and authorization.
const (
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
)

func errUnauthenticated(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), auth.ErrUnauthenticated.Error()+": ")
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: msg}
}

func errForbidden(p auth.Principal, what string) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: fmt.Sprintf("%s may not %s", p, what)}
}

// WithAuth makes the service authenticate every request with a: HTTP
// requests by their Authorization header, NATS requests by the same
// header on the message. Without it every request is refused.
func (s *Service) WithAuth(a *auth.Authenticator) *Service {
	s.authn = a
	return s
}

// principal is who a call comes from; calls with none are refused.
func (s *Service) principal(ctx context.Context) (auth.Principal, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Principal{}, errUnauthenticated(errors.New("no token (send Authorization: Bearer <token>)"))
	}
	return p, nil
}

// authenticate reads a request's credential into its context.
func (s *Service) authenticate(ctx context.Context, header string) (context.Context, *Error) {
	if s.authn == nil {
		return ctx, errUnauthenticated(errors.New("this server has no way to check tokens"))
	}
	p, err := s.authn.Authenticate(ctx, auth.Bearer(header))
	if err != nil {
		if errors.Is(err, auth.ErrUnauthenticated) {
			return ctx, errUnauthenticated(err)
		}
		return ctx, errUnavailable(err)
	}
	return auth.WithPrincipal(ctx, p), nil
}

// Authenticate says who presents an Authorization header's value, for
// the server's own request handlers (the simulated cloud's NATS
// controls); the error is an *Error (401, or 503 when the token store
// does not answer).
func (s *Service) Authenticate(ctx context.Context, header string) (auth.Principal, error) {
	ctx, aerr := s.authenticate(ctx, header)
	if aerr != nil {
		return auth.Principal{}, aerr
	}
	p, _ := auth.FromContext(ctx)
	return p, nil
}

// Forbidden is the error for a principal refused an action.
func Forbidden(p auth.Principal, what string) error { return errForbidden(p, what) }

// open paths need no token: a load balancer's health check and the
// server's /livez and /readyz (mounted by internal/server: probes carry no
// token, and they say only whether the server works), the API document
// (it describes the API and holds no data), and the dashboard's page and
// assets under /ui/ (they hold no data either: the page asks the API for
// everything with the token a person signs in with).
var open = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/v1/openapi.json": true}

func isOpen(path string) bool {
	return open[path] || path == "/" || strings.HasPrefix(path, "/ui/")
}

// authHTTP authenticates every request but the open ones.
func (s *Service) authHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpen(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		ctx := WithSource(r.Context(), r.RemoteAddr)
		ctx, aerr := s.authenticate(ctx, r.Header.Get("Authorization"))
		if aerr != nil {
			if action := refusedAction(r); action != "" {
				s.Audit(ctx, action, "", "", aerr)
			}
			if aerr.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="spotwise"`)
			}
			writeError(w, aerr)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Require lets through only principals that may do a platform action
// (auth.Observe, auth.Operate); the handler it wraps must be mounted
// behind the API's authentication (Handler's extra handlers are).
// A change refused is on the audit record.
func (s *Service) Require(a auth.Action, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		var refused *Error
		switch {
		case !ok:
			refused = errUnauthenticated(errors.New("no token"))
		case !p.Can(a, ""):
			refused = errForbidden(p, a.String())
		default:
			h.ServeHTTP(w, r)
			return
		}
		if action := refusedAction(r); action != "" {
			s.Audit(r.Context(), action, "", "", refused)
		}
		writeError(w, refused)
	})
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	Name string    `json:"name,omitempty"`
	Team string    `json:"team,omitempty"`
	Role auth.Role `json:"role"`
	// TTL is how long the token works ("720h", "30d"); empty: until
	// revoked.
	TTL job.Duration `json:"ttl,omitzero"`
}

// CreatedToken is the answer to POST /v1/tokens: the token, shown this
// once, and what it stands for.
type CreatedToken struct {
	Token string     `json:"token"`
	Info  auth.Token `json:"info"`
}

// TokenList is the answer to GET /v1/tokens.
type TokenList struct {
	Tokens []auth.Token `json:"tokens"`
}

// tokenCaller is who calls a token endpoint, and the token store.
func (s *Service) tokenCaller(ctx context.Context) (auth.Principal, *auth.Tokens, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return p, nil, err
	}
	if s.authn == nil {
		return p, nil, errUnavailable(errors.New("no token store"))
	}
	return p, s.authn.Tokens(), nil
}

// CreateToken makes an API token: an operator for anyone, a team's admin
// for its team up to admin.
func (s *Service) CreateToken(ctx context.Context, req TokenRequest) (*CreatedToken, error) {
	p, tokens, err := s.tokenCaller(ctx)
	if err != nil {
		return nil, err
	}
	if req.Team == "" && p.Role != auth.Operator {
		req.Team = p.Team
	}
	if !p.Grants(req.Team, req.Role) {
		err := errForbidden(p, fmt.Sprintf("create a %s token for %s", req.Role, teamName(req.Team)))
		s.Audit(ctx, "token.create", "", req.Team, err)
		return nil, err
	}
	secret, tok, err := tokens.Create(ctx, auth.NewToken{Name: req.Name, Team: req.Team, Role: req.Role, TTL: req.TTL.D()}, p.Subject)
	if err != nil {
		return nil, errBadRequest("%v", err)
	}
	s.Audit(ctx, "token.create", tok.ID, tok.Team, nil)
	s.log.Info("token created", zap.String("token", tok.ID), zap.String("team", tok.Team), zap.String("role", string(tok.Role)), zap.String("by", p.Subject))
	return &CreatedToken{Token: secret, Info: *tok}, nil
}

// ListTokens lists a team's tokens (an operator: every token, or one
// team's).
func (s *Service) ListTokens(ctx context.Context, team string) (*TokenList, error) {
	p, tokens, err := s.tokenCaller(ctx)
	if err != nil {
		return nil, err
	}
	all := p.Role == auth.Operator && team == ""
	if team == "" {
		team = p.Team
	}
	if !all && !p.Can(auth.ManageTokens, team) {
		return nil, errForbidden(p, "list the tokens of "+teamName(team))
	}
	return &TokenList{Tokens: tokens.List(team, all)}, nil
}

// RevokeToken ends a token at once. A token another team's admin could
// not see is "not found".
func (s *Service) RevokeToken(ctx context.Context, id string) (*auth.Token, error) {
	var team string
	tok, err := s.revokeToken(ctx, id, &team)
	s.Audit(ctx, "token.revoke", id, team, err)
	return tok, err
}

func (s *Service) revokeToken(ctx context.Context, id string, team *string) (*auth.Token, error) {
	p, tokens, err := s.tokenCaller(ctx)
	if err != nil {
		return nil, err
	}
	notFound := &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("no token %q", id)}
	if !auth.ValidID(id) {
		return nil, notFound
	}
	tok, err := tokens.Lookup(ctx, id)
	switch {
	case errors.Is(err, auth.ErrNotFound):
		return nil, notFound
	case err != nil:
		return nil, errUnavailable(err)
	}
	*team = tok.Team
	switch {
	case !p.Can(auth.ManageTokens, tok.Team) || tok.Team == "" && p.Role != auth.Operator:
		if p.Can(auth.ReadJobs, tok.Team) && tok.Team != "" {
			return nil, errForbidden(p, "revoke the tokens of "+teamName(tok.Team))
		}
		return nil, notFound
	}
	tok, err = tokens.Revoke(ctx, id, p.Subject)
	if err != nil {
		return nil, errUnavailable(err)
	}
	s.log.Info("token revoked", zap.String("token", id), zap.String("by", p.Subject))
	return tok, nil
}

func teamName(team string) string {
	if team == "" {
		return "the whole platform"
	}
	return "team " + team
}

func (s *Service) tokensCollection(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err != nil {
			writeError(w, errBadRequest("reading the body: %v", err))
			return
		}
		var req TokenRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, errBadRequest("the body must be a JSON object with name, team, role and ttl: %v", err))
			return
		}
		v, err := s.CreateToken(r.Context(), req)
		respond(w, http.StatusCreated, v, err)
	case http.MethodGet:
		v, err := s.ListTokens(r.Context(), r.URL.Query().Get("team"))
		respond(w, http.StatusOK, v, err)
	default:
		methodNotAllowed(w, "GET, POST")
	}
}

func (s *Service) tokensItem(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodDelete {
		methodNotAllowed(w, "DELETE")
		return
	}
	v, err := s.RevokeToken(r.Context(), r.PathValue("id"))
	respond(w, http.StatusOK, v, err)
}
