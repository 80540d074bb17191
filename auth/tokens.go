package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
)

// API tokens look like "spw_<id>_<secret>": the id names the token (in
// listings, audit records, revocation) and is not secret; the secret is
// 32 random bytes. The store keeps only the SHA-256 of the whole token.
const tokenPrefix = "spw_"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// Token is a stored API token: who it stands for and for how long. The
// secret itself is shown once, when it is created, and never stored.
type Token struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Team string `json:"team,omitempty"`
	Role Role   `json:"role"`
	// Hash is the hex SHA-256 of the whole token string.
	Hash      string    `json:"hash,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
	// ExpiresAt is when it stops working; zero: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`
}

// Principal is who the token stands for.
func (t *Token) Principal() Principal {
	return Principal{Subject: "token:" + t.ID, Name: t.Name, Team: t.Team, Role: t.Role}
}

// Public is the token without its hash, for listings.
func (t Token) Public() Token {
	t.Hash = ""
	return t
}

// Errors of authentication. Each wraps ErrUnauthenticated.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrUnknownToken    = fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	ErrRevoked         = fmt.Errorf("%w: the token was revoked", ErrUnauthenticated)
	ErrExpired         = fmt.Errorf("%w: the token has expired", ErrUnauthenticated)
	// ErrNotFound: no token has that id (revoking one).
	ErrNotFound = errors.New("no such token")
)

// Tokens is the API token store, in a KV bucket (key: the token id),
// with an in-memory copy a watch keeps current, so that checking a token
// costs no round trip and a revocation anywhere in the cluster takes
// effect everywhere.
type Tokens struct {
	kv    *events.KV
	clock clock.Clock

	mu    sync.RWMutex
	byID  map[string]*Token
	stop  func()
	ready chan struct{}
}

// OpenTokens starts following the bucket; it returns once the copy holds
// every stored token. clk is wall time (tokens expire in real time, not
// in the simulated cloud's).
func OpenTokens(ctx context.Context, kv *events.KV, clk clock.Clock) (*Tokens, error) {
	t := &Tokens{kv: kv, clock: clk, byID: map[string]*Token{}, ready: make(chan struct{})}
	stop, err := kv.Watch(context.WithoutCancel(ctx), t.apply, func() { close(t.ready) })
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	t.stop = stop
	select {
	case <-t.ready:
		return t, nil
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// Close stops following the bucket.
func (t *Tokens) Close() { t.stop() }

func (t *Tokens) apply(e events.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Value == nil {
		delete(t.byID, e.Key)
		return
	}
	var tok Token
	if json.Unmarshal(e.Value, &tok) != nil || tok.ID != e.Key {
		return // not a token: it grants nothing
	}
	t.byID[e.Key] = &tok
}

// NewToken is a token to create.
type NewToken struct {
	Name string
	Team string
	Role Role
	// TTL is how long it works; zero: until revoked.
	TTL time.Duration
}

// Create makes a token and stores it; the returned string is the secret,
// to show once. by is who asked (Principal.Subject).
func (t *Tokens) Create(ctx context.Context, n NewToken, by string) (string, *Token, error) {
	p := Principal{Team: n.Team, Role: n.Role}
	if err := p.Validate(); err != nil {
		return "", nil, err
	}
	if n.TTL < 0 {
		return "", nil, fmt.Errorf("ttl %s is negative", n.TTL)
	}
	if len(n.Name) > 128 || strings.ContainsAny(n.Name, "\x00\r\n") {
		return "", nil, errors.New("a token's name is at most 128 characters on one line")
	}
	id, secret := randomString(10), randomString(32)
	full := tokenPrefix + id + "_" + secret
	now := t.clock.Now().UTC()
	tok := &Token{ID: id, Name: n.Name, Team: n.Team, Role: n.Role, Hash: hashOf(full), CreatedAt: now, CreatedBy: by}
	if n.TTL > 0 {
		tok.ExpiresAt = now.Add(n.TTL)
	}
	b, err := json.Marshal(tok)
	if err != nil {
		return "", nil, err
	}
	if _, err := t.kv.Create(ctx, id, b); err != nil {
		return "", nil, fmt.Errorf("storing the token: %w", err)
	}
	t.remember(tok)
	pub := tok.Public()
	return full, &pub, nil
}

// remember puts a token this server wrote into the copy at once (the
// watch brings it too, a moment later).
func (t *Tokens) remember(tok *Token) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[tok.ID] = tok
}

// Verify finds the token a request presents and says who it stands for.
func (t *Tokens) Verify(ctx context.Context, presented string) (Principal, error) {
	id, ok := tokenID(presented)
	if !ok {
		return Principal{}, fmt.Errorf("%w: not a spotwise API token (spw_...)", ErrUnauthenticated)
	}
	t.mu.RLock()
	tok := t.byID[id]
	t.mu.RUnlock()
	if tok == nil {
		// Created a moment ago on another server: the watch may not
		// have brought it yet.
		got, err := t.get(ctx, id)
		if err != nil {
			return Principal{}, err
		}
		tok = got
	}
	if subtle.ConstantTimeCompare([]byte(tok.Hash), []byte(hashOf(presented))) != 1 {
		return Principal{}, ErrUnknownToken
	}
	switch now := t.clock.Now(); {
	case !tok.RevokedAt.IsZero():
		return Principal{}, fmt.Errorf("%w (%s)", ErrRevoked, tok.RevokedAt.Format(time.RFC3339))
	case !tok.ExpiresAt.IsZero() && !now.Before(tok.ExpiresAt):
		return Principal{}, fmt.Errorf("%w (%s)", ErrExpired, tok.ExpiresAt.Format(time.RFC3339))
	}
	return tok.Principal(), nil
}

func (t *Tokens) get(ctx context.Context, id string) (*Token, error) {
	b, _, err := t.kv.Get(ctx, id)
	switch {
	case errors.Is(err, events.ErrNotFound):
		return nil, ErrUnknownToken
	case err != nil:
		return nil, fmt.Errorf("reading tokens: %w", err)
	}
	var tok Token
	if err := json.Unmarshal(b, &tok); err != nil || tok.ID != id {
		return nil, ErrUnknownToken
	}
	return &tok, nil
}

// Lookup returns a token by id, without its hash.
func (t *Tokens) Lookup(ctx context.Context, id string) (*Token, error) {
	tok, err := t.get(ctx, id)
	if errors.Is(err, ErrUnknownToken) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	pub := tok.Public()
	return &pub, nil
}

// List returns the tokens of a team ("" with all: every token), newest
// first, without their hashes.
func (t *Tokens) List(team string, all bool) []Token {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []Token
	for _, tok := range t.byID {
		if all || tok.Team == team {
			out = append(out, tok.Public())
		}
	}
	slices.SortFunc(out, func(a, b Token) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Revoke ends a token at once; revoking it again changes nothing.
func (t *Tokens) Revoke(ctx context.Context, id, by string) (*Token, error) {
	for range 10 {
		b, rev, err := t.kv.Get(ctx, id)
		if errors.Is(err, events.ErrNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("reading tokens: %w", err)
		}
		var tok Token
		if err := json.Unmarshal(b, &tok); err != nil {
			return nil, fmt.Errorf("token %s: %w", id, err)
		}
		if !tok.RevokedAt.IsZero() {
			pub := tok.Public()
			return &pub, nil
		}
		tok.RevokedAt, tok.RevokedBy = t.clock.Now().UTC(), by
		nb, err := json.Marshal(&tok)
		if err != nil {
			return nil, err
		}
		_, err = t.kv.Update(ctx, id, nb, rev)
		if errors.Is(err, events.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("revoking %s: %w", id, err)
		}
		t.remember(&tok)
		pub := tok.Public()
		return &pub, nil
	}
	return nil, fmt.Errorf("revoking %s: the token keeps changing", id)
}

// tokenID is the id part of a presented token.
func tokenID(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return "", false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 || secret == "" || !validID(id) {
		return "", false
	}
	return id, true
}

// validID reports whether s is a token id (lowercase base32).
func validID(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return s != ""
}

// ValidID reports whether s can be a token's id.
func ValidID(s string) bool { return len(s) == 16 && validID(s) }

func randomString(nbytes int) string {
	b := make([]byte, nbytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return strings.ToLower(b32.EncodeToString(b))
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
