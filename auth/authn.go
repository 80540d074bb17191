package auth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spotwise/spotwise/clock"
)

// Authenticator says who presents a credential: a spotwise API token, or
// an ID token of a trusted OIDC issuer.
type Authenticator struct {
	tokens  *Tokens
	issuers map[string]*oidcVerifier
}

// NewAuthenticator trusts the token store and the issuers given (each
// validated). clk is wall time.
func NewAuthenticator(tokens *Tokens, issuers []OIDCIssuer, clk clock.Clock) (*Authenticator, error) {
	a := &Authenticator{tokens: tokens, issuers: map[string]*oidcVerifier{}}
	for _, c := range issuers {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		if _, dup := a.issuers[c.Issuer]; dup {
			return nil, fmt.Errorf("oidc issuer %s is configured twice", c.Issuer)
		}
		a.issuers[c.Issuer] = &oidcVerifier{cfg: c, clock: clk, http: &http.Client{Timeout: 10 * time.Second}}
	}
	return a, nil
}

// Tokens is the API token store.
func (a *Authenticator) Tokens() *Tokens { return a.tokens }

// Authenticate verifies a presented credential (the part after "Bearer ").
func (a *Authenticator) Authenticate(ctx context.Context, credential string) (Principal, error) {
	credential = strings.TrimSpace(credential)
	switch {
	case credential == "":
		return Principal{}, fmt.Errorf("%w: no token (send Authorization: Bearer <token>)", ErrUnauthenticated)
	case strings.HasPrefix(credential, tokenPrefix):
		return a.tokens.Verify(ctx, credential)
	}
	iss, ok := unverifiedIssuer(credential)
	if !ok {
		return Principal{}, fmt.Errorf("%w: neither a spotwise API token (spw_...) nor an OIDC ID token", ErrUnauthenticated)
	}
	v := a.issuers[iss]
	if v == nil {
		return Principal{}, fmt.Errorf("%w: ID tokens of %s are not trusted here", ErrUnauthenticated, iss)
	}
	return v.verify(ctx, credential)
}

// Bearer is the credential of an Authorization header's value
// ("Bearer <token>"); "" when there is none.
func Bearer(header string) string {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(cred)
}
