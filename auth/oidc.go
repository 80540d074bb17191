package auth

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/spotwise/spotwise/clock"
)

// OIDCIssuer trusts the ID tokens of one OpenID Connect issuer: those
// signed with a key from the issuer's JWKS, for the audience ClientID,
// not expired. Rules map the token's claims to a team and role.
type OIDCIssuer struct {
	// Issuer is the issuer URL, as ID tokens name it in "iss".
	Issuer string `json:"issuer"`
	// ClientID is the audience ("aud") the tokens must be for.
	ClientID string `json:"client_id"`
	// NameClaim names the person in logs and audit records; default
	// "email" (the subject when the token has none).
	NameClaim string `json:"name_claim,omitempty"`
	// Rules decide the team and role: the first rule whose claim
	// matches does. A token no rule matches is refused.
	Rules []OIDCRule `json:"rules"`
}

// OIDCRule matches a claim that equals Value (a string claim) or
// contains it (a list claim, such as "groups").
type OIDCRule struct {
	Claim string `json:"claim"`
	Value string `json:"value"`
	// Team is the team the person acts in; empty for a platform role
	// (operator, or viewer of every team).
	Team string `json:"team,omitempty"`
	Role Role   `json:"role"`
}

// Validate checks an issuer's configuration.
func (c OIDCIssuer) Validate() error {
	switch {
	case !strings.HasPrefix(c.Issuer, "https://") && !strings.HasPrefix(c.Issuer, "http://"):
		return fmt.Errorf("oidc issuer %q: want an http(s) URL", c.Issuer)
	case c.ClientID == "":
		return fmt.Errorf("oidc issuer %s: client_id is required (the audience its tokens are for)", c.Issuer)
	case len(c.Rules) == 0:
		return fmt.Errorf("oidc issuer %s: no rules map its tokens' claims to a team and role", c.Issuer)
	}
	for i, r := range c.Rules {
		if r.Claim == "" || r.Value == "" {
			return fmt.Errorf("oidc issuer %s: rule %d needs a claim and a value", c.Issuer, i+1)
		}
		if err := (Principal{Team: r.Team, Role: r.Role}).Validate(); err != nil {
			return fmt.Errorf("oidc issuer %s: rule %d: %w", c.Issuer, i+1, err)
		}
	}
	return nil
}

// oidcVerifier checks one issuer's tokens. Its discovery document and
// keys are fetched when the first token comes (an issuer down at start
// does not keep the server from starting), and again after a failure.
type oidcVerifier struct {
	cfg   OIDCIssuer
	clock clock.Clock
	http  *http.Client

	mu sync.Mutex
	v  *oidc.IDTokenVerifier
}

func (o *oidcVerifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.v != nil {
		return o.v, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(dctx, o.http), o.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc issuer %s: %w", o.cfg.Issuer, err)
	}
	// Keys are fetched with the server's lifetime, not a request's.
	o.v = p.VerifierContext(oidc.ClientContext(context.Background(), o.http), &oidc.Config{ClientID: o.cfg.ClientID, Now: o.clock.Now})
	return o.v, nil
}

func (o *oidcVerifier) verify(ctx context.Context, raw string) (Principal, error) {
	v, err := o.verifier(ctx)
	if err != nil {
		return Principal{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return Principal{}, fmt.Errorf("%w (%s)", ErrExpired, exp.Expiry.UTC().Format(time.RFC3339))
		}
		return Principal{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, fmt.Errorf("%w: the token's claims: %v", ErrUnauthenticated, err)
	}
	name, _ := claims[cmp.Or(o.cfg.NameClaim, "email")].(string)
	for _, r := range o.cfg.Rules {
		if claimHas(claims[r.Claim], r.Value) {
			return Principal{Subject: "oidc:" + o.cfg.Issuer + "#" + tok.Subject, Name: name, Team: r.Team, Role: r.Role}, nil
		}
	}
	return Principal{}, fmt.Errorf("%w: no rule gives %s a team and role", ErrUnauthenticated, cmp.Or(name, tok.Subject))
}

// claimHas reports whether a claim's value is v or a list holding v.
func claimHas(c any, v string) bool {
	switch c := c.(type) {
	case string:
		return c == v
	case []any:
		for _, x := range c {
			if s, ok := x.(string); ok && s == v {
				return true
			}
		}
	}
	return false
}

// unverifiedIssuer reads the "iss" claim of a JWT without checking it:
// only to pick the issuer whose keys then check the token.
func unverifiedIssuer(raw string) (string, bool) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil || c.Issuer == "" {
		return "", false
	}
	return c.Issuer, true
}
