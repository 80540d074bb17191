package providers

import (
	"testing"
	"time"
)

func TestParseTerm(t *testing.T) {
	for _, tt := range []struct {
		in     string
		want   Term
		months int
		hours  int64
	}{{"1y", Term1Year, 12, 8760}, {"3yr", Term3Year, 36, 26280}, {"1-year", Term1Year, 12, 8760}, {"36mo", Term3Year, 36, 26280}} {
		got, err := ParseTerm(tt.in)
		if err != nil || got != tt.want || got.Months() != tt.months || got.Hours() != tt.hours || got.Duration() != time.Duration(tt.hours)*time.Hour {
			t.Errorf("ParseTerm(%q) = %q (%d months, %d h, %s), %v", tt.in, got, got.Months(), got.Hours(), got.Duration(), err)
		}
	}
	if _, err := ParseTerm("2y"); err == nil {
		t.Error("ParseTerm(2y) accepted")
	}
}
