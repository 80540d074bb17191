package auth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
)

var t0 = time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)

func openTokens(t *testing.T, bus *events.Bus, clk clock.Clock) *auth.Tokens {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tokens, err := auth.OpenTokens(ctx, bus.TokenStore(), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tokens.Close)
	return tokens
}

func TestRoles(t *testing.T) {
	op := auth.Principal{Role: auth.Operator}
	platformViewer := auth.Principal{Role: auth.Viewer}
	viewer := auth.Principal{Team: "nlp", Role: auth.Viewer}
	sub := auth.Principal{Team: "nlp", Role: auth.Submitter}
	admin := auth.Principal{Team: "nlp", Role: auth.Admin}
	tests := []struct {
		who    auth.Principal
		action auth.Action
		team   string
		want   bool
	}{
		{viewer, auth.ReadJobs, "nlp", true},
		{viewer, auth.ReadJobs, "cv", false},
		{viewer, auth.SubmitJobs, "nlp", false},
		{viewer, auth.CancelJobs, "nlp", false},
		{sub, auth.SubmitJobs, "nlp", true},
		{sub, auth.SubmitJobs, "cv", false},
		{sub, auth.CancelJobs, "nlp", true},
		{sub, auth.CancelJobs, "cv", false},
		{sub, auth.ManageTokens, "nlp", false},
		{admin, auth.ManageTokens, "nlp", true},
		{admin, auth.ManageTokens, "cv", false},
		{admin, auth.Observe, "", false},
		{admin, auth.Operate, "", false},
		{platformViewer, auth.ReadJobs, "nlp", true},
		{platformViewer, auth.ReadJobs, "cv", true},
		{platformViewer, auth.Observe, "", true},
		{platformViewer, auth.SubmitJobs, "nlp", false},
		{platformViewer, auth.CancelJobs, "nlp", false},
		{platformViewer, auth.ManageTokens, "nlp", false},
		{platformViewer, auth.Operate, "", false},
		{op, auth.SubmitJobs, "cv", true},
		{op, auth.ManageTokens, "cv", true},
		{op, auth.Operate, "", true},
		{auth.Principal{Team: "nlp", Role: "root"}, auth.ReadJobs, "nlp", false},
	}
	for _, tt := range tests {
		if got := tt.who.Can(tt.action, tt.team); got != tt.want {
			t.Errorf("%s may %s on %q: %v, want %v", tt.who, tt.action, tt.team, got, tt.want)
		}
	}
	grants := []struct {
		who  auth.Principal
		team string
		role auth.Role
		want bool
	}{
		{admin, "nlp", auth.Submitter, true},
		{admin, "nlp", auth.Admin, true},
		{admin, "nlp", auth.Operator, false},
		{admin, "cv", auth.Viewer, false},
		{admin, "", auth.Viewer, false},
		{sub, "nlp", auth.Viewer, false},
		{op, "", auth.Operator, true},
		{op, "cv", auth.Admin, true},
	}
	for _, g := range grants {
		if got := g.who.Grants(g.team, g.role); got != g.want {
			t.Errorf("%s grants %s of %q: %v, want %v", g.who, g.role, g.team, got, g.want)
		}
	}
}

func TestTokens(t *testing.T) {
	clk := clock.NewFake(t0)
	bus := eventstest.NewBus(t, clk)
	tokens := openTokens(t, bus, clk)
	ctx := context.Background()

	secret, tok, err := tokens.Create(ctx, auth.NewToken{Name: "ci", Team: "nlp", Role: auth.Submitter, TTL: 720 * time.Hour}, "token:admin")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "spw_"+tok.ID+"_") || tok.Hash != "" || !tok.ExpiresAt.Equal(t0.Add(720*time.Hour)) {
		t.Fatalf("created %q: %+v", secret, tok)
	}
	p, err := tokens.Verify(ctx, secret)
	if err != nil || p.Team != "nlp" || p.Role != auth.Submitter || p.Subject != "token:"+tok.ID || p.Name != "ci" {
		t.Fatalf("verify = %+v, %v", p, err)
	}
	// What is stored is a hash: the secret is nowhere in the bucket.
	raw, _, err := bus.TokenStore().Get(ctx, tok.ID)
	if err != nil || strings.Contains(string(raw), strings.TrimPrefix(secret, "spw_"+tok.ID+"_")) {
		t.Fatalf("stored token %s (%v) holds its secret", raw, err)
	}

	bad := map[string]string{
		"empty":              "",
		"not a token":        "hello",
		"tampered secret":    secret[:len(secret)-1] + flip(secret[len(secret)-1]),
		"unknown id":         "spw_aaaaaaaaaaaaaaaa_" + strings.Repeat("b", 52),
		"id only":            "spw_" + tok.ID,
		"malformed id":       "spw_AAAA_secret",
		"another's secret":   "spw_" + tok.ID + "_" + strings.Repeat("c", 52),
		"trailing garbage":   secret + "x",
		"prefix of a secret": secret[:len(secret)-10],
	}
	for name, s := range bad {
		if _, err := tokens.Verify(ctx, s); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: verify = %v, want unauthenticated", name, err)
		}
	}

	// Another server on the same bucket knows the token too, and sees
	// its revocation.
	other := openTokens(t, bus, clk)
	if _, err := other.Verify(ctx, secret); err != nil {
		t.Fatalf("another server: %v", err)
	}
	if _, err := tokens.Revoke(ctx, tok.ID, "token:admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Verify(ctx, secret); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("revoked token: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := other.Verify(ctx, secret)
		if errors.Is(err, auth.ErrRevoked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another server still takes the revoked token: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tokens.Revoke(ctx, "aaaaaaaaaaaaaaaa", "x"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("revoking an unknown token: %v", err)
	}

	// Expiry is wall time as the injected clock tells it.
	short, _, err := tokens.Create(ctx, auth.NewToken{Team: "nlp", Role: auth.Viewer, TTL: time.Hour}, "token:admin")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(59 * time.Minute)
	if _, err := tokens.Verify(ctx, short); err != nil {
		t.Errorf("before expiry: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := tokens.Verify(ctx, short); !errors.Is(err, auth.ErrExpired) {
		t.Errorf("at expiry: %v", err)
	}

	list := tokens.List("nlp", false)
	if len(list) != 2 {
		t.Fatalf("list = %+v", list)
	}
	for _, l := range list {
		if l.Hash != "" || (l.ID == tok.ID) == l.RevokedAt.IsZero() {
			t.Errorf("listed %+v", l)
		}
	}
	if n := len(tokens.List("cv", false)); n != 0 {
		t.Errorf("team cv lists %d tokens", n)
	}
	for _, bad := range []auth.NewToken{
		{Team: "nlp", Role: "root"},
		{Team: "nlp", Role: auth.Operator},
		{Role: auth.Submitter},
		{Team: "no spaces", Role: auth.Viewer},
		{Team: "nlp", Role: auth.Viewer, TTL: -time.Second},
		{Team: "nlp", Role: auth.Viewer, Name: "two\nlines"},
	} {
		if _, _, err := tokens.Create(ctx, bad, "x"); err == nil {
			t.Errorf("created %+v", bad)
		}
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestBootstrapLeavesAWorkingOperatorToken(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	bus := eventstest.NewBus(t, clk)
	tokens := openTokens(t, bus, clk)
	ctx := context.Background()
	path := filepath.Join(dir, auth.OperatorTokenFile)
	first, created, err := auth.Bootstrap(ctx, tokens, path)
	if err != nil || !created {
		t.Fatalf("first start: %v (created %v)", err, created)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v", path, err, fi.Mode())
	}
	if p, err := tokens.Verify(ctx, first); err != nil || p.Role != auth.Operator {
		t.Fatalf("operator token: %+v, %v", p, err)
	}
	again, created, err := auth.Bootstrap(ctx, tokens, path)
	if err != nil || created || again != first {
		t.Errorf("second start: made a new token (%v, %v)", created, err)
	}
	// A store wiped (or a token revoked) since: a new one replaces it.
	if _, err := tokens.Revoke(ctx, strings.Split(first, "_")[1], "x"); err != nil {
		t.Fatal(err)
	}
	third, created, err := auth.Bootstrap(ctx, tokens, path)
	if err != nil || !created || third == first {
		t.Errorf("after revocation: %v, created %v", err, created)
	}
	b, _ := os.ReadFile(path)
	if strings.TrimSpace(string(b)) != third {
		t.Errorf("the file holds %q, want the new token", b)
	}
}

func TestBearer(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "": "", "Bearer": "", "abc": "",
	} {
		if got := auth.Bearer(in); got != want {
			t.Errorf("Bearer(%q) = %q, want %q", in, got, want)
		}
	}
}
