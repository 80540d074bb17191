package providers

import (
	"fmt"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

// HoursPerMonth is the month every cloud bills commitments and storage by
// (8760 hours a year / 12); the simulated cloud uses it too.
const HoursPerMonth = money.HoursPerMonth

// Term is the length of a commitment: one or three years, as every cloud
// sells reserved instances, savings plans and committed-use discounts.
// Providers read it from their reservations' configuration and price rows;
// bidding prices commitments over it.
type Term string

// Terms.
const (
	Term1Year Term = "1y"
	Term3Year Term = "3y"
)

// ParseTerm reads "1y" or "3y" ("1yr", "1year", "3-year", "12mo", "36mo"
// too).
func ParseTerm(s string) (Term, error) {
	t := strings.ToLower(strings.NewReplacer(" ", "", "-", "").Replace(s))
	switch t {
	case "1y", "1yr", "1year", "12mo", "12months":
		return Term1Year, nil
	case "3y", "3yr", "3year", "3years", "36mo", "36months":
		return Term3Year, nil
	}
	return "", fmt.Errorf("term %q: want 1y or 3y", s)
}

// Months is how many billing months the term has.
func (t Term) Months() int {
	switch t {
	case Term1Year:
		return 12
	case Term3Year:
		return 36
	}
	return 0
}

// Hours is how many hours the term bills: 8760 a year.
func (t Term) Hours() int64 { return int64(t.Months()) * HoursPerMonth }

// Duration is the term's length.
func (t Term) Duration() time.Duration { return time.Duration(t.Hours()) * time.Hour }
