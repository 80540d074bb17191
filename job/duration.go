package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as text in specs: "48h", "2h30m",
// "90m", "1.5h" or "3d" (days of 24 hours).
type Duration time.Duration

// ParseDuration parses the forms Duration accepts.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "d") && !strings.ContainsAny(s[:len(s)-1], "hmsuµn") {
		days, err := strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
		// Written so that NaN fails too.
		if err != nil || !(days >= 0 && days <= 36500) {
			return 0, fmt.Errorf("%q is not a duration (try 48h, 90m, 2d)", s)
		}
		return time.Duration(days * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (try 48h, 90m, 2d)", s)
	}
	return d, nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as text ("48h0m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string. Plain numbers are refused: "48"
// could be hours or seconds and a wrong guess is expensive.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is not a duration: write it as text with a unit, such as \"48h\"", string(b))
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Deadline is when a job must be done: an absolute time, or a duration
// counted from submission. Zero means no deadline; a spec leaves deadline out
// (or empty) for none, since the zero time or "0s" written out is refused.
type Deadline struct {
	At     time.Time
	Within time.Duration
}

// IsZero reports whether no deadline is set.
func (d Deadline) IsZero() bool { return d.At.IsZero() && d.Within == 0 }

// Resolve returns the absolute deadline for a job submitted at submitted,
// or the zero time when there is none.
func (d Deadline) Resolve(submitted time.Time) time.Time {
	switch {
	case !d.At.IsZero():
		return d.At
	case d.Within > 0:
		return submitted.Add(d.Within)
	}
	return time.Time{}
}

// MarshalJSON writes the deadline back in the form it was given.
func (d Deadline) MarshalJSON() ([]byte, error) {
	switch {
	case !d.At.IsZero():
		// RFC3339Nano, so a deadline with fractional seconds survives a
		// round trip; whole seconds are still written without a fraction.
		return json.Marshal(d.At.UTC().Format(time.RFC3339Nano))
	case d.Within > 0:
		return json.Marshal(d.Within.String())
	}
	return []byte(`""`), nil
}

// UnmarshalJSON reads an RFC 3339 time ("2026-12-01T18:00:00Z") or a
// duration from submission ("36h", "2d").
func (d *Deadline) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is not a deadline: give a time (2026-12-01T18:00:00Z) or a duration (36h)", string(b))
	}
	s = strings.TrimSpace(s)
	if s == "" {
		*d = Deadline{}
		return nil
	}
	// The zero values of both forms would read back as "no deadline":
	// refuse them rather than silently drop a deadline the spec names.
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if t.IsZero() {
			return errors.New("the zero time is not a deadline; leave deadline out for none")
		}
		*d = Deadline{At: t.UTC()}
		return nil
	}
	v, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a deadline: give a time (2026-12-01T18:00:00Z) or a duration (36h)", s)
	}
	if v <= 0 {
		return fmt.Errorf("must be positive, not %q; leave deadline out for none", s)
	}
	*d = Deadline{Within: v}
	return nil
}
