// Package money holds exact amounts of US dollars as integer micro-dollars.
//
// Prices and costs never pass through float64 on their way through the
// system: they are parsed from decimal text, multiplied with 128-bit integer
// arithmetic and rounded once, half away from zero, when a duration is billed.
package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Micros is an amount in millionths of a US dollar. A price per hour is also
// a Micros: the amount billed for one hour of use.
type Micros int64

// Common amounts.
const (
	Micro  Micros = 1
	Cent   Micros = 10_000
	Dollar Micros = 1_000_000
)

// USD builds an amount from whole dollars and micro-dollars, for literals in
// tables: USD(3, 60_000) is $3.06.
func USD(dollars int64, micros int64) Micros { return Micros(dollars)*Dollar + Micros(micros) }

// Parse reads a decimal dollar amount such as "3.06", "$0.9731" or "-1".
// More than six decimal places is an error rather than a silent rounding.
func Parse(s string) (Micros, error) {
	orig := s
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	s = strings.TrimPrefix(s, "$")
	s = strings.ReplaceAll(s, "_", "")
	if s == "" {
		return 0, fmt.Errorf("money: %q is not an amount", orig)
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && (!hasDot || frac == "") {
		return 0, fmt.Errorf("money: %q is not an amount", orig)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("money: %q has more than 6 decimal places", orig)
	}
	var w uint64
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 63); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return 0, fmt.Errorf("money: %q is too large", orig)
			}
			return 0, fmt.Errorf("money: %q is not an amount", orig)
		}
	}
	var f uint64
	if frac != "" {
		var err error
		if f, err = strconv.ParseUint(frac, 10, 32); err != nil {
			return 0, fmt.Errorf("money: %q is not an amount", orig)
		}
		for i := len(frac); i < 6; i++ {
			f *= 10
		}
	}
	// Exact bounds, so that every amount Decimal writes (saturated ones
	// included) reads back.
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if w > limit/uint64(Dollar) || w*uint64(Dollar) > limit-f {
		return 0, fmt.Errorf("money: %q is too large", orig)
	}
	u := w*uint64(Dollar) + f
	if neg {
		return Micros(-int64(u)), nil // u == 1<<63 wraps to math.MinInt64, as wanted
	}
	return Micros(u), nil
}

// MustParse is Parse for constants in tables; it panics on a bad literal.
func MustParse(s string) Micros {
	m, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return m
}

// String formats the amount with as many decimals as it needs (at least two):
// "$3.06", "$0.9731", "-$1.00".
func (m Micros) String() string {
	return m.Format(2)
}

// Format formats the amount with at least minDecimals decimals (0..6) and no
// trailing zeros beyond them.
func (m Micros) Format(minDecimals int) string {
	sign, v := m.signAbs()
	whole, frac := v/uint64(Dollar), v%uint64(Dollar)
	fs := fmt.Sprintf("%06d", frac)
	for len(fs) > minDecimals && strings.HasSuffix(fs, "0") {
		fs = fs[:len(fs)-1]
	}
	if fs == "" {
		return fmt.Sprintf("%s$%d", sign, whole)
	}
	return fmt.Sprintf("%s$%d.%s", sign, whole, fs)
}

// Round rounds to places decimals (0..6), half away from zero.
func (m Micros) Round(places int) Micros {
	if places >= 6 || places < 0 {
		return m
	}
	unit := int64(1)
	for range 6 - places {
		unit *= 10
	}
	return m.Scale(1, unit).MulInt(int(unit))
}

// Human formats an amount for people: cents from a dollar up, four
// decimals below ("$24.40", "$0.9731"). Exact values stay in JSON.
func (m Micros) Human() string {
	if m >= Dollar || m <= -Dollar {
		return m.Round(2).Format(2)
	}
	return m.Round(4).Format(2)
}

// Decimal formats the amount as a plain decimal number with six places, the
// form used on the wire ("3.060000").
func (m Micros) Decimal() string {
	sign, v := m.signAbs()
	return fmt.Sprintf("%s%d.%06d", sign, v/uint64(Dollar), v%uint64(Dollar))
}

// signAbs splits m into its sign and magnitude; the magnitude is unsigned
// so that the most negative amount (where saturation lands) formats too.
func (m Micros) signAbs() (string, uint64) {
	if m < 0 {
		return "-", magnitude(int64(m))
	}
	return "", uint64(m)
}

// Dollars converts to float64 dollars, for display and plots only.
func (m Micros) Dollars() float64 { return float64(m) / float64(Dollar) }

// ForDuration is what an hourly price m bills for d of use, per second of use
// with nanosecond precision, rounded half away from zero to a micro-dollar.
// A result too large for Micros saturates.
func (m Micros) ForDuration(d time.Duration) Micros {
	if m == 0 || d == 0 {
		return 0
	}
	return mulDiv(magnitude(int64(m)), magnitude(int64(d)), uint64(time.Hour), (m < 0) != (d < 0))
}

// MulInt multiplies by a count (instances, nodes), saturating on overflow.
func (m Micros) MulInt(n int) Micros {
	if n == 0 || m == 0 {
		return 0
	}
	return mulDiv(magnitude(int64(m)), magnitude(int64(n)), 1, (m < 0) != (n < 0))
}

// Scale multiplies by a ratio num/den with rounding half away from zero;
// it is how a discount or a share is applied without floats.
func (m Micros) Scale(num, den int64) Micros {
	if den == 0 {
		panic("money: Scale by zero denominator")
	}
	if m == 0 || num == 0 {
		return 0
	}
	return mulDiv(magnitude(int64(m)), magnitude(num), magnitude(den), (m < 0) != ((num < 0) != (den < 0)))
}

// mulDiv returns a*b/c rounded half away from zero, with the sign given by
// neg, saturating at the ends of Micros. The product is 128-bit, so nothing
// overflows on the way.
func mulDiv(a, b, c uint64, neg bool) Micros {
	limit := uint64(math.MaxInt64)
	if neg {
		limit++ // math.MinInt64 has one more unit of magnitude
	}
	hi, lo := bits.Mul64(a, b)
	if hi >= c { // the quotient needs more than 64 bits
		return saturated(neg)
	}
	q, r := bits.Div64(hi, lo, c)
	if q > limit {
		return saturated(neg)
	}
	if r >= c-r { // r >= c/2, exact for odd c too
		q++
		if q > limit {
			return saturated(neg)
		}
	}
	if neg {
		return Micros(-int64(q)) // q == 1<<63 wraps to math.MinInt64, as wanted
	}
	return Micros(q)
}

func saturated(neg bool) Micros {
	if neg {
		return math.MinInt64
	}
	return math.MaxInt64
}

// magnitude is |v| as an unsigned number; unlike -v it is right for
// math.MinInt64.
func magnitude(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

// MarshalJSON writes the amount as a JSON number with six decimals, so
// clients read dollars and nothing is lost.
func (m Micros) MarshalJSON() ([]byte, error) { return []byte(m.Decimal()), nil }

// UnmarshalJSON accepts a JSON number (3.06) or a string ("3.06", "$3.06").
// The number is read from its decimal text, never through a float.
func (m *Micros) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		s = str
	} else if isNumber(s) && strings.ContainsAny(s, "eE") {
		return fmt.Errorf("money: %s: write amounts as plain decimals", s)
	}
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// isNumber reports whether a JSON value is a number (not true, false, a
// list or a mapping).
func isNumber(s string) bool { return s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') }
