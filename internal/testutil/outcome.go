package testutil

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// OutcomeKind is which of the three launch outcomes (providers/errors.go)
// a test expects.
type OutcomeKind int

// Launch outcome kinds.
const (
	Unknown OutcomeKind = iota
	Capacity
	Refused
)

// Outcome is what a test expects a failed launch to tell the scheduler.
type Outcome struct {
	Kind    OutcomeKind
	OfferID string
	Code    string
	Scope   providers.Scope
	Account bool          // refusals
	For     time.Duration // capacity
}

// CheckOutcome fails the test unless err is the outcome wanted: its kind,
// and for capacity and refusals the offer, code, scope, account or TTL,
// and a reason naming the code.
func CheckOutcome(t testing.TB, err error, want Outcome) {
	t.Helper()
	if err == nil {
		t.Fatal("the launch succeeded")
	}
	var ice *providers.InsufficientCapacityError
	isICE := errors.As(err, &ice)
	lr, isRefused := providers.AsLaunchRefused(err)
	switch {
	case want.Kind == Unknown && (isICE || isRefused):
		t.Fatalf("%v: want an unknown outcome", err)
	case want.Kind == Capacity && (!isICE || isRefused):
		t.Fatalf("%v: want insufficient capacity", err)
	case want.Kind == Refused && (!isRefused || isICE):
		t.Fatalf("%v: want a refusal", err)
	case want.Kind == Capacity:
		got := Outcome{Capacity, ice.OfferID, ice.Code, ice.Scope, false, ice.For}
		if got != want || !strings.Contains(ice.Reason, want.Code) {
			t.Errorf("got %+v reason %q, want %+v", got, ice.Reason, want)
		}
	case want.Kind == Refused:
		got := Outcome{Refused, lr.OfferID, lr.Code, lr.Scope, lr.Account, 0}
		if got != want || !strings.Contains(lr.Reason, want.Code) {
			t.Errorf("got %+v reason %q, want %+v", got, lr.Reason, want)
		}
	}
}
