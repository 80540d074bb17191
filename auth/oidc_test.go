package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events/eventstest"
)

// issuer is an OpenID Connect issuer on loopback: discovery, JWKS, and a
// signer for its ID tokens.
type issuer struct {
	url  string
	key  *rsa.PrivateKey
	kid  string
	stop func()
}

func startIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.SetIssuer(srv.URL)
	return &issuer{url: srv.URL, key: key, kid: "k1", stop: srv.Close}
}

func (i *issuer) sign(claims string) string {
	return oidctest.SignIDToken(i.key, i.kid, oidc.RS256, claims)
}

func (i *issuer) idToken(aud, sub, email string, groups []string, exp time.Time) string {
	g := "["
	for n, x := range groups {
		if n > 0 {
			g += ","
		}
		g += fmt.Sprintf("%q", x)
	}
	g += "]"
	return i.sign(fmt.Sprintf(`{"iss":%q,"aud":%q,"sub":%q,"email":%q,"groups":%s,"iat":%d,"exp":%d}`,
		i.url, aud, sub, email, g, exp.Add(-time.Hour).Unix(), exp.Unix()))
}

func TestOIDCTokensMapToTeamAndRole(t *testing.T) {
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	bus := eventstest.NewBus(t, clk)
	tokens := openTokens(t, bus, clk)
	trusted, stranger := startIssuer(t), startIssuer(t)
	a, err := auth.NewAuthenticator(tokens, []auth.OIDCIssuer{{
		Issuer: trusted.url, ClientID: "spotwise",
		Rules: []auth.OIDCRule{
			{Claim: "groups", Value: "platform", Role: auth.Operator},
			{Claim: "groups", Value: "nlp-admins", Team: "nlp", Role: auth.Admin},
			{Claim: "groups", Value: "nlp", Team: "nlp", Role: auth.Submitter},
			{Claim: "email", Value: "auditor@example.com", Role: auth.Viewer},
		},
	}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exp := clk.Now().Add(time.Hour)
	good := []struct {
		name  string
		token string
		want  auth.Principal
	}{
		{"a team member", trusted.idToken("spotwise", "u1", "ana@example.com", []string{"staff", "nlp"}, exp),
			auth.Principal{Subject: "oidc:" + trusted.url + "#u1", Name: "ana@example.com", Team: "nlp", Role: auth.Submitter}},
		{"the first rule that matches decides", trusted.idToken("spotwise", "u2", "bo@example.com", []string{"nlp", "nlp-admins"}, exp),
			auth.Principal{Subject: "oidc:" + trusted.url + "#u2", Name: "bo@example.com", Team: "nlp", Role: auth.Admin}},
		{"a platform operator", trusted.idToken("spotwise", "u3", "ops@example.com", []string{"platform"}, exp),
			auth.Principal{Subject: "oidc:" + trusted.url + "#u3", Name: "ops@example.com", Role: auth.Operator}},
		{"a string claim", trusted.idToken("spotwise", "u4", "auditor@example.com", nil, exp),
			auth.Principal{Subject: "oidc:" + trusted.url + "#u4", Name: "auditor@example.com", Role: auth.Viewer}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(ctx, tt.token)
			if err != nil || p != tt.want {
				t.Errorf("= %+v, %v; want %+v", p, err, tt.want)
			}
		})
	}
	bad := []struct {
		name  string
		token string
		is    error
	}{
		{"another issuer", stranger.idToken("spotwise", "u1", "ana@example.com", []string{"nlp"}, exp), auth.ErrUnauthenticated},
		{"signed by another key under the trusted issuer's name", stranger.sign(fmt.Sprintf(`{"iss":%q,"aud":"spotwise","sub":"u1","groups":["platform"],"exp":%d}`, trusted.url, exp.Unix())), auth.ErrUnauthenticated},
		{"for another audience", trusted.idToken("grafana", "u1", "ana@example.com", []string{"nlp"}, exp), auth.ErrUnauthenticated},
		{"expired", trusted.idToken("spotwise", "u1", "ana@example.com", []string{"nlp"}, clk.Now().Add(-time.Minute)), auth.ErrExpired},
		{"no rule matches", trusted.idToken("spotwise", "u5", "eve@example.com", []string{"staff"}, exp), auth.ErrUnauthenticated},
		{"not a JWT", "a.b.c", auth.ErrUnauthenticated},
		{"nothing", "", auth.ErrUnauthenticated},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(ctx, tt.token)
			if !errors.Is(err, tt.is) {
				t.Errorf("= %+v, %v; want %v", p, err, tt.is)
			}
		})
	}
}

func TestOIDCConfigIsChecked(t *testing.T) {
	for _, c := range []auth.OIDCIssuer{
		{Issuer: "ftp://x", ClientID: "a", Rules: []auth.OIDCRule{{Claim: "g", Value: "v", Role: auth.Viewer}}},
		{Issuer: "https://x", Rules: []auth.OIDCRule{{Claim: "g", Value: "v", Role: auth.Viewer}}},
		{Issuer: "https://x", ClientID: "a"},
		{Issuer: "https://x", ClientID: "a", Rules: []auth.OIDCRule{{Claim: "g", Value: "v", Role: auth.Submitter}}},
		{Issuer: "https://x", ClientID: "a", Rules: []auth.OIDCRule{{Claim: "g", Role: auth.Viewer}}},
		{Issuer: "https://x", ClientID: "a", Rules: []auth.OIDCRule{{Claim: "g", Value: "v", Team: "t", Role: "boss"}}},
	} {
		if _, err := auth.NewAuthenticator(nil, []auth.OIDCIssuer{c}, clock.Real{}); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}
