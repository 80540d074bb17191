package auth

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Role is what a principal may do within its team (or, with no team, on
// the whole platform).
type Role string

// The roles, each allowing what the one before it does and more.
const (
	// Viewer reads its team's jobs and costs.
	Viewer Role = "viewer"
	// Submitter also submits and cancels its team's jobs.
	Submitter Role = "submitter"
	// Admin also manages its team's tokens (and, later, quotas and
	// budgets).
	Admin Role = "admin"
	// Operator does everything, on every team: the simulated cloud's
	// controls, instances, server status, every team's tokens.
	Operator Role = "operator"
)

// Roles lists the roles in order of power.
var Roles = []Role{Viewer, Submitter, Admin, Operator}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if r.rank() == 0 {
		return "", fmt.Errorf("unknown role %q (roles: viewer, submitter, admin, operator)", s)
	}
	return r, nil
}

// Principal is who a request comes from: a person or service, proven by a
// token, with one role in one team. A principal with no team is a
// platform one: an operator, or a viewer of every team (a dashboard, a
// metrics scraper).
type Principal struct {
	// Subject names the principal in logs and audit records:
	// "token:<id>", "oidc:<issuer>#<sub>", "system:<component>".
	Subject string `json:"subject"`
	// Name is what people call it: a token's name, an OIDC email.
	Name string `json:"name,omitempty"`
	Team string `json:"team,omitempty"`
	Role Role   `json:"role"`
}

// System is the server acting on its own behalf (a benchmark filling its
// store, a component submitting for a test): an operator.
func System(component string) Principal {
	return Principal{Subject: "system:" + component, Name: component, Role: Operator}
}

// String is how the principal shows in messages: "token:ab12 (ci, submitter of nlp)".
func (p Principal) String() string {
	who := p.Subject
	if p.Name != "" && p.Name != p.Subject {
		who += " (" + p.Name + ")"
	}
	if p.Team == "" {
		return fmt.Sprintf("%s, platform %s", who, p.Role)
	}
	return fmt.Sprintf("%s, %s of %s", who, p.Role, p.Team)
}

// Validate checks that the role exists and that a platform principal is
// an operator or a viewer.
func (p Principal) Validate() error {
	switch {
	case p.Role.rank() == 0:
		return fmt.Errorf("unknown role %q", p.Role)
	case p.Role == Operator && p.Team != "":
		return fmt.Errorf("an operator belongs to no team (not %q)", p.Team)
	case p.Team == "" && p.Role != Operator && p.Role != Viewer:
		return fmt.Errorf("a %s needs a team (only viewers and operators are platform-wide)", p.Role)
	case p.Team != "" && !ValidTeam(p.Team):
		return fmt.Errorf("team %q is not a team name (letters, digits, '.', '_', '-', starting with a letter or digit)", p.Team)
	}
	return nil
}

// ValidTeam reports whether s can name a team: what a job spec's team
// may be (letters, digits, '.', '_', '-', starting with a letter or
// digit, up to 128).
func ValidTeam(s string) bool { return len(s) <= 128 && teamRE.MatchString(s) }

var teamRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Action is something a principal may be allowed to do.
type Action int

const (
	// ReadJobs: see a team's jobs, their specs (secrets withheld) and
	// costs.
	ReadJobs Action = iota
	// SubmitJobs: submit jobs for a team.
	SubmitJobs
	// CancelJobs: cancel a team's jobs.
	CancelJobs
	// ManageTokens: create, list and revoke a team's tokens.
	ManageTokens
	// Observe: the platform's status, instances and metrics, across
	// teams.
	Observe
	// Operate: the simulated cloud's controls and the server's
	// configuration.
	Operate
)

var actionNames = map[Action]string{
	ReadJobs: "read jobs", SubmitJobs: "submit jobs", CancelJobs: "cancel jobs",
	ManageTokens: "manage tokens", Observe: "observe the platform", Operate: "operate the platform",
}

func (a Action) String() string { return actionNames[a] }

// needs is the least role an action takes within the team it is on.
var needs = map[Action]Role{ReadJobs: Viewer, SubmitJobs: Submitter, CancelJobs: Submitter, ManageTokens: Admin, Observe: Viewer, Operate: Operator}

// Can reports whether p may do a on team's things (team is ignored for
// the platform actions Observe and Operate).
func (p Principal) Can(a Action, team string) bool {
	need, ok := needs[a]
	if !ok || p.Role.rank() < need.rank() {
		return false
	}
	switch {
	case p.Role == Operator:
		return true
	case a == Operate:
		return false
	case p.Team == "":
		// A platform viewer reads every team and the platform.
		return a == ReadJobs || a == Observe
	case a == Observe:
		return false
	}
	return p.Team == team
}

// Grants reports whether p may hand out a token for team with role r: an
// operator any, a team's admin its own team's up to admin.
func (p Principal) Grants(team string, r Role) bool {
	if p.Role == Operator {
		return true
	}
	return team != "" && p.Can(ManageTokens, team) && r.rank() <= p.Role.rank()
}

type ctxKey struct{}

// WithPrincipal returns a context that carries p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext is the principal a context carries; ok is false when none
// does (an unauthenticated request: refuse it).
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}
