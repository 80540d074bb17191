package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
)

// FuzzAuthenticate presents hostile credentials (headers, API tokens
// near a real one, JWT-shaped strings naming the trusted issuer): none
// panics, none but the real token authenticates, and every refusal is
// ErrUnauthenticated.
//
//	go test -run '^$' -fuzz FuzzAuthenticate -fuzztime 1m ./auth/
func FuzzAuthenticate(f *testing.F) {
	clk := clock.NewFake(t0)
	bus, err := events.Open(f.Context(), events.Config{Embedded: events.EmbeddedOptions{DataDir: f.TempDir()}}, "fuzz", clk, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(bus.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tokens, err := auth.OpenTokens(ctx, bus.TokenStore(), clk)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(tokens.Close)
	// The issuer is never reached: no JWT here is validly signed, and the
	// refusal comes before or at the key fetch.
	a, err := auth.NewAuthenticator(tokens, []auth.OIDCIssuer{{Issuer: "http://127.0.0.1:1", ClientID: "spotwise",
		Rules: []auth.OIDCRule{{Claim: "groups", Value: "ops", Role: auth.Operator}}}}, clk)
	if err != nil {
		f.Fatal(err)
	}
	real, tok, err := tokens.Create(ctx, auth.NewToken{Team: "nlp", Role: auth.Viewer}, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{real, "Bearer " + real, real[:len(real)-1], real + "=", strings.ToUpper(real), "spw_" + tok.ID + "_",
		"spw__", "spw_" + strings.Repeat("a", 16) + "_x", "", " ", "a.b.c", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xOjEifQ.",
		"eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xOjEiLCJncm91cHMiOlsib3BzIl19.c2ln", strings.Repeat(".", 5000), "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cred string) {
		_ = auth.Bearer(cred)
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer ccancel()
		p, err := a.Authenticate(cctx, cred)
		if err == nil {
			if strings.TrimSpace(cred) != real {
				t.Fatalf("%q authenticated as %+v", cred, p)
			}
			return
		}
		if !errors.Is(err, auth.ErrUnauthenticated) && !strings.Contains(err.Error(), "oidc issuer") {
			t.Fatalf("%q: %v, want unauthenticated", cred, err)
		}
	})
}
