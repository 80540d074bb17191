package providers

import (
	"strings"
	"time"
)

// Outcome is a provider's reading of one launch error it recognises: a
// lack of capacity or a permanent refusal, how far it reaches and for how
// long. Providers keep their cloud's error codes in tables of outcomes; an
// error none of them matches stays as it is, an unknown outcome.
type Outcome struct {
	// Refused marks a permanent refusal; otherwise capacity is lacking.
	Refused bool
	Scope   Scope
	// Account (refusals): the account's setup is wrong; operators are
	// alerted.
	Account bool
	// Lasts (capacity): how long the lack is expected to last; a provider
	// turns it into For with its configured TTL (Lasting.TTL).
	Lasts Lasting
	// For (capacity): how long the scope stays out.
	For time.Duration
	// Advice says what a user or operator can do about it; it leads the
	// error's Reason.
	Advice string
}

// Err is the outcome as Launch returns it for offerID: an
// *InsufficientCapacityError or a *LaunchRefusedError with Reason's
// reason.
func (oc Outcome) Err(offerID, code, message string) error {
	reason := oc.Reason(code, message)
	if oc.Refused {
		return &LaunchRefusedError{OfferID: offerID, Code: code, Reason: reason, Scope: oc.Scope, Account: oc.Account}
	}
	return &InsufficientCapacityError{OfferID: offerID, Code: code, Reason: reason, Scope: oc.Scope, For: oc.For}
}

// Reason is the advice followed by the cloud's code and message (trimmed:
// a cloud's message is for reading, never a request body).
func (oc Outcome) Reason(code, message string) string {
	said := code
	if m := TrimMessage(message); m != "" {
		said = strings.TrimPrefix(code+": "+m, ": ")
	}
	switch {
	case oc.Advice == "":
		return said
	case said == "":
		return oc.Advice
	}
	return oc.Advice + " (" + said + ")"
}

// Lasting is how long a lack of capacity is expected to last, by what
// causes it; TTL turns it into a provider's For.
type Lasting int

// Lastings, shortest first but for LastsShortage, which is what the
// provider's configuration says.
const (
	// LastsShortage: the cloud has none right now (the provider's
	// configured TTL).
	LastsShortage Lasting = iota
	// LastsPrice: the spot price is above the max price; the price moves
	// (a minute, never more than the configured TTL).
	LastsPrice
	// LastsQuota: a quota or a full subnet, which our own instances fill
	// too, so it lifts as they end (15 minutes, never less than the
	// configured TTL).
	LastsQuota
	// LastsLong: the cloud does not sell it to the account there now (an
	// hour, never less than the configured TTL).
	LastsLong
)

// TTL is how long the scope stays out, given the provider's configured
// TTL for a shortage.
func (l Lasting) TTL(shortage time.Duration) time.Duration {
	switch l {
	case LastsPrice:
		return min(time.Minute, shortage)
	case LastsQuota:
		return max(15*time.Minute, shortage)
	case LastsLong:
		return max(time.Hour, shortage)
	}
	return shortage
}

// maxMessage bounds how much of a cloud's error message a reason keeps.
const maxMessage = 300

// TrimMessage makes a cloud's error message fit a reason or a log line:
// one line, at most a few hundred characters.
func TrimMessage(m string) string {
	m = strings.Join(strings.Fields(m), " ")
	if r := []rune(m); len(r) > maxMessage {
		m = string(r[:maxMessage]) + "..."
	}
	return m
}
