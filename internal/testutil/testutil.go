// Package testutil holds helpers shared by spotwise's tests.
package testutil

import (
	"testing"
	"time"
)

// CheckFor polls fn every interval until it returns nil or timeout passes,
// then fails the test with fn's last error. Tests wait on conditions with
// it instead of sleeping.
func CheckFor(t testing.TB, timeout, interval time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
