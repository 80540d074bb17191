package auth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// OperatorTokenFile is where, in the server's data directory, the first
// start leaves an operator token.
const OperatorTokenFile = "operator.token"

// Bootstrap makes sure the file at path (normally <data-dir>/
// operator.token) holds a working operator token: the one already there if
// the store still honours it, else a new one (the first start, or a store
// wiped since). It returns the token and whether it was made now. The
// file is written with mode 0600.
func Bootstrap(ctx context.Context, t *Tokens, path string) (token string, created bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(b))
		p, verr := t.Verify(ctx, tok)
		if verr == nil && p.Role == Operator {
			return tok, false, nil
		}
		if verr != nil && !errors.Is(verr, ErrUnauthenticated) {
			return "", false, verr // the store is not answering: do not replace a good token
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("reading the operator token: %w", err)
	}
	tok, _, err := t.Create(ctx, NewToken{Name: "operator (made at first start)", Role: Operator}, "system:bootstrap")
	if err != nil {
		return "", false, fmt.Errorf("creating the operator token: %w", err)
	}
	if err := WriteSecretFile(path, []byte(tok+"\n")); err != nil {
		return "", false, fmt.Errorf("writing the operator token: %w", err)
	}
	return tok, true, nil
}

// WriteSecretFile writes b to path with mode 0600, replacing the file
// whole (never a half-written secret), creating its directory (0700).
func WriteSecretFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
