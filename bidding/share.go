package bidding

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/spotwise/spotwise/money"
)

// Share is a fraction in parts per million: a discount, an early
// termination penalty, a utilization. It is an integer so that applying it
// to money stays exact: 20% of $65,440.704 is exactly $13,088.1408.
type Share int64

// Common shares.
const (
	PPM     Share = 1
	Percent Share = 10_000
	Whole   Share = 1_000_000
)

// ParseShare reads "20%", "43.5%" or a fraction such as "0.2". Up to four
// decimals of a percent (six of a fraction) are kept exactly; more is an
// error rather than a silent rounding. Negative shares are refused.
func ParseShare(s string) (Share, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	if t == "" || strings.ContainsAny(t, "$-+_eE") {
		return 0, fmt.Errorf("%q is not a share (write 20%% or 0.2)", s)
	}
	// A fraction has the same shape as a dollar amount with six decimals:
	// money's exact decimal reader does the work.
	v, err := money.Parse(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a share (write 20%% or 0.2)", s)
	}
	if !pct {
		return Share(v), nil
	}
	if v%100 != 0 {
		return 0, fmt.Errorf("%q has more than four decimals of a percent", s)
	}
	return Share(v / 100), nil
}

// Of applies the share to an amount, rounding half away from zero.
func (s Share) Of(m money.Micros) money.Micros { return m.Scale(int64(s), int64(Whole)) }

// Float is the share as a fraction, for display and probabilities.
func (s Share) Float() float64 { return float64(s) / float64(Whole) }

// String writes the share as a percent with as many decimals as it needs:
// "20%", "56.98%", "0.0001%".
func (s Share) String() string {
	v := strconv.FormatFloat(float64(s)/float64(Percent), 'f', 4, 64)
	v = strings.TrimRight(strings.TrimRight(v, "0"), ".")
	return v + "%"
}

// MarshalJSON writes the share as a plain fraction ("0.2").
func (s Share) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(s.Float(), 'f', -1, 64)), nil
}

// UnmarshalJSON reads a fraction (0.2) or a string ("20%", "0.2").
func (s *Share) UnmarshalJSON(b []byte) error {
	t := strings.Trim(string(b), `"`)
	if t == "null" {
		return nil
	}
	v, err := ParseShare(t)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// exactRatio is the sum of the products of each term's factors, divided by
// den, rounded half away from zero once at the end and saturating: how a
// bill made of several pieces (tiers; price x megabytes x nanoseconds)
// stays exact to the micro-dollar.
func exactRatio(den *big.Int, terms ...[]int64) money.Micros {
	sum := new(big.Int)
	for _, t := range terms {
		p := big.NewInt(1)
		for _, f := range t {
			p.Mul(p, big.NewInt(f))
		}
		sum.Add(sum, p)
	}
	neg := sum.Sign() < 0
	sum.Abs(sum)
	q, r := new(big.Int).QuoRem(sum, den, new(big.Int))
	if r.Lsh(r, 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		if neg {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	if neg {
		return money.Micros(-q.Int64())
	}
	return money.Micros(q.Int64())
}

// megabytes is a size in GB as whole megabytes, rounded up: per-GB prices
// are applied to whole megabytes, exactly, as Transfer does.
func megabytes(gb float64) int64 {
	if gb <= 0 || math.IsNaN(gb) {
		return 0
	}
	if gb >= math.MaxInt64/1000 {
		return math.MaxInt64 / 1000
	}
	return int64(math.Ceil(gb * 1000))
}
