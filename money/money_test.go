package money

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Micros
	}{
		{"3.06", 3_060_000},
		{"$0.9731", 973_100},
		{"-1", -1_000_000},
		{"-$1.50", -1_500_000},
		{".5", 500_000},
		{"1.", 1_000_000},
		{"0", 0},
		{"-0", 0},
		{"0.000001", 1},
		{"1.123456", 1_123_456},
		{"  42.10  ", 42_100_000},
		{"1_000.25", 1_000_250_000},
		{"007.5", 7_500_000},
		{"9223372036853.999999", 9_223_372_036_853_999_999},
		{"9223372036854.775807", math.MaxInt64},
		{"-9223372036854.775808", math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseRefused(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1.1234567", `"1.1234567" has more than 6 decimal places`},
		{"0.0000001", "has more than 6 decimal places"},
		{"abc", `"abc" is not an amount`},
		{"", `"" is not an amount`},
		{"   ", "is not an amount"},
		{"$", "is not an amount"},
		{"-", "is not an amount"},
		{".", "is not an amount"},
		{"-.", "is not an amount"},
		{"1.2.3", "is not an amount"},
		{"1e3", "is not an amount"},
		{"+1", "is not an amount"},
		{"$-1", "is not an amount"},
		{"--1", "is not an amount"},
		{"1,000", "is not an amount"},
		{"1.-5", "is not an amount"},
		{"NaN", "is not an amount"},
		{"9223372036854.775808", "is too large"},
		{"-9223372036854.775809", "is too large"},
		{"9223372036855", "is too large"},
		{"99999999999999999999", "is too large"},
		{"99999999999999999999999999999999.5", "is too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %d, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "money: ") {
				t.Errorf("error %q, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("MustParse panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("MustParse of a bad literal did not panic")
			}
		}()
		MustParse("three dollars")
	})
}

func TestFormat(t *testing.T) {
	tests := []struct {
		m                     Micros
		str, decimal, format0 string
	}{
		{USD(3, 60_000), "$3.06", "3.060000", "$3.06"},
		{973_100, "$0.9731", "0.973100", "$0.9731"},
		{-Dollar, "-$1.00", "-1.000000", "-$1"},
		{0, "$0.00", "0.000000", "$0"},
		{1, "$0.000001", "0.000001", "$0.000001"},
		{-1, "-$0.000001", "-0.000001", "-$0.000001"},
		{USD(1234, 500_000), "$1234.50", "1234.500000", "$1234.5"},
		{math.MaxInt64, "$9223372036854.775807", "9223372036854.775807", "$9223372036854.775807"},
		// Saturated negative results must still format.
		{math.MinInt64, "-$9223372036854.775808", "-9223372036854.775808", "-$9223372036854.775808"},
	}
	for _, tt := range tests {
		t.Run(tt.str, func(t *testing.T) {
			if got := tt.m.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if got := tt.m.Decimal(); got != tt.decimal {
				t.Errorf("Decimal() = %q, want %q", got, tt.decimal)
			}
			if got := tt.m.Format(0); got != tt.format0 {
				t.Errorf("Format(0) = %q, want %q", got, tt.format0)
			}
			if back, err := Parse(tt.decimal); err != nil || back != tt.m {
				t.Errorf("Parse(Decimal()) = %d, %v; want %d", back, err, tt.m)
			}
		})
	}
	t.Run("minimum decimals", func(t *testing.T) {
		m := USD(3, 60_000)
		for d, want := range []string{"$3.06", "$3.06", "$3.06", "$3.060", "$3.0600", "$3.06000", "$3.060000"} {
			if got := m.Format(d); got != want {
				t.Errorf("Format(%d) = %q, want %q", d, got, want)
			}
		}
	})
	t.Run("Dollars", func(t *testing.T) {
		if got := USD(3, 60_000).Dollars(); got != 3.06 {
			t.Errorf("Dollars() = %v, want 3.06", got)
		}
	})
}

func TestForDuration(t *testing.T) {
	tests := []struct {
		name  string
		price Micros
		d     time.Duration
		want  Micros
	}{
		{"one hour", USD(3, 60_000), time.Hour, USD(3, 60_000)},
		{"90 minutes", USD(6, 120_000), 90 * time.Minute, USD(9, 180_000)},
		{"$1/h for 1s rounds up", Dollar, time.Second, 278},                      // 277.78
		{"$1/h for 1ms rounds down", Dollar, time.Millisecond, 0},                // 0.28
		{"$1/h for 1.8ms is exactly half", Dollar, 1800 * time.Microsecond, 1},   // 0.5 away from zero
		{"$1/h for 1.79ms is under half", Dollar, 1799 * time.Microsecond, 0},    // 0.49972
		{"$0.9731/h for 1s", 973_100, time.Second, 270},                          // 270.31
		{"$0.9731/h for 13s", 973_100, 13 * time.Second, 3514},                   // 3513.97
		{"$98.32/h for 3h17m", USD(98, 320_000), 197 * time.Minute, 322_817_333}, // 322817333.3
		{"a year at $40/h", USD(40, 0), 365 * 24 * time.Hour, USD(350_400, 0)},
		{"microsecond", USD(3600, 0), time.Microsecond, 1},
		{"nanosecond precision", USD(3600, 0), 1500 * time.Nanosecond, 2}, // 1.5 rounds away from zero
		{"zero price", 0, time.Hour, 0},
		{"zero time", Dollar, 0, 0},
		{"negative time", Dollar, -time.Second, -278},
		{"negative price", -Dollar, time.Second, -278},
		{"both negative", -Dollar, -time.Second, 278},
		{"negative half rounds away from zero", -Dollar, 1800 * time.Microsecond, -1},
		{"longest duration at $1000/h", USD(1000, 0), math.MaxInt64, 2_562_047_788_015_216},
		{"huge price for long saturates", math.MaxInt64, 2 * time.Hour, math.MaxInt64},
		{"huge price for longest saturates", math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{"negative huge saturates low", math.MinInt64, math.MaxInt64, math.MinInt64},
		{"negative saturates exactly at the bottom", math.MinInt64, time.Hour, math.MinInt64},
		{"most negative price for minus an hour", math.MinInt64, -time.Hour, math.MaxInt64},
		// (2^65-1)/31 micros for 15.5 h is (2^64-1) + 1/2 micros: the
		// rounding step must not wrap the quotient around to zero.
		{"rounding at the 64-bit edge saturates", Micros((1<<65 - 1) / 31), 15*time.Hour + 30*time.Minute, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.price.ForDuration(tt.d); got != tt.want {
				t.Errorf("%s.ForDuration(%v) = %d, want %d", tt.price, tt.d, got, tt.want)
			}
		})
	}
	t.Run("seconds add up exactly", func(t *testing.T) {
		// $3.60/h is 1000 micro-dollars a second: every second bills the
		// same and they sum to the hour.
		p := USD(3, 600_000)
		var sum Micros
		for range 3600 {
			sum += p.ForDuration(time.Second)
		}
		if sum != p {
			t.Errorf("3600 seconds bill %s, the hour bills %s", sum, p)
		}
	})
}

func TestMulInt(t *testing.T) {
	tests := []struct {
		name string
		m    Micros
		n    int
		want Micros
	}{
		{"nodes", USD(3, 60_000), 2, USD(6, 120_000)},
		{"zero count", USD(3, 0), 0, 0},
		{"zero amount", 0, 1 << 40, 0},
		{"negative count", Dollar, -3, -3 * Dollar},
		{"negative amount", -Dollar, 3, -3 * Dollar},
		{"to the top exactly", math.MaxInt64, 1, math.MaxInt64},
		{"overflow saturates high", math.MaxInt64/2 + 1, 2, math.MaxInt64},
		{"overflow saturates low", math.MinInt64/2 - 1, 2, math.MinInt64},
		{"to the bottom exactly", math.MinInt64 / 2, 2, math.MinInt64},
		{"huge count", Dollar, math.MaxInt, math.MaxInt64},
		{"negative huge count", Dollar, math.MinInt, math.MinInt64},
		{"most negative times -1", math.MinInt64, -1, math.MaxInt64},
		{"-1 times most negative", -1, math.MinInt, math.MaxInt64},
		{"most negative times 1", math.MinInt64, 1, math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.MulInt(tt.n); got != tt.want {
				t.Errorf("%d.MulInt(%d) = %d, want %d", tt.m, tt.n, got, tt.want)
			}
		})
	}
}

func TestScale(t *testing.T) {
	tests := []struct {
		name     string
		m        Micros
		num, den int64
		want     Micros
	}{
		{"65% off", USD(10, 0), 35, 100, USD(3, 500_000)},
		{"a third rounds down", Dollar, 1, 3, 333_333},
		{"two thirds rounds up", Dollar, 2, 3, 666_667},
		{"half a micro rounds away from zero", 1, 1, 2, 1},
		{"minus half a micro rounds away from zero", -1, 1, 2, -1},
		{"negative ratio", Dollar, -1, 4, -250_000},
		{"negative denominator", Dollar, 1, -4, -250_000},
		{"both negative", Dollar, -1, -4, 250_000},
		{"zero", 0, 7, 3, 0},
		{"overflow saturates", math.MaxInt64, 3, 2, math.MaxInt64},
		{"negative overflow saturates", math.MinInt64, 3, 2, math.MinInt64},
		{"large but exact", math.MaxInt64, 1 << 40, 1 << 40, math.MaxInt64},
		{"rounding at the 64-bit edge saturates", Micros((1<<65 - 1) / 31), 31, 2, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Scale(tt.num, tt.den); got != tt.want {
				t.Errorf("%d.Scale(%d, %d) = %d, want %d", tt.m, tt.num, tt.den, got, tt.want)
			}
		})
	}
	t.Run("zero denominator panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("Scale(1, 0) did not panic")
			}
		}()
		Dollar.Scale(1, 0)
	})
}

func TestJSON(t *testing.T) {
	type row struct {
		Price Micros `json:"price"`
	}
	t.Run("written as a decimal number", func(t *testing.T) {
		b, err := json.Marshal(row{USD(3, 60_000)})
		if err != nil || string(b) != `{"price":3.060000}` {
			t.Errorf("Marshal = %s, %v", b, err)
		}
	})
	tests := []struct {
		in   string
		want Micros
	}{
		{`3.06`, USD(3, 60_000)},
		{`"3.06"`, USD(3, 60_000)},
		{`"$3.06"`, USD(3, 60_000)},
		{`-0.5`, -500_000},
		{`0.000001`, 1},
		{`3.060000`, USD(3, 60_000)},
		{`12`, USD(12, 0)},
		{`"\u00241.25"`, USD(1, 250_000)},
	}
	for _, tt := range tests {
		t.Run("reads "+tt.in, func(t *testing.T) {
			var r row
			if err := json.Unmarshal([]byte(`{"price":`+tt.in+`}`), &r); err != nil || r.Price != tt.want {
				t.Fatalf("Unmarshal(%s) = %d, %v; want %d", tt.in, r.Price, err, tt.want)
			}
			b, _ := json.Marshal(r)
			var back row
			if err := json.Unmarshal(b, &back); err != nil || back != r {
				t.Errorf("round trip through %s = %d, %v", b, back.Price, err)
			}
		})
	}
	t.Run("null leaves the amount", func(t *testing.T) {
		r := row{Dollar}
		if err := json.Unmarshal([]byte(`{"price":null}`), &r); err != nil || r.Price != Dollar {
			t.Errorf("null = %d, %v", r.Price, err)
		}
	})
	refused := []struct{ in, want string }{
		{`3e2`, "write amounts as plain decimals"},
		{`3.06E+00`, "write amounts as plain decimals"},
		{`"3.1234567"`, "more than 6 decimal places"},
		{`3.1234567`, "more than 6 decimal places"},
		{`"cheap"`, "is not an amount"},
		{`true`, "is not an amount"},
		{`[1]`, "is not an amount"},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.in, func(t *testing.T) {
			var r row
			err := json.Unmarshal([]byte(`{"price":`+tt.in+`}`), &r)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Unmarshal(%s) error = %v, want one containing %q", tt.in, err, tt.want)
			}
		})
	}
	t.Run("extremes round trip", func(t *testing.T) {
		// Saturated amounts are stored in records; they must read back.
		for _, m := range []Micros{math.MaxInt64, math.MinInt64, -1, 1} {
			b, err := json.Marshal(m)
			if err != nil || !json.Valid(b) {
				t.Fatalf("Marshal(%d) = %s, %v", m, b, err)
			}
			var back Micros
			if err := json.Unmarshal(b, &back); err != nil || back != m {
				t.Errorf("round trip of %d through %s = %d, %v", m, b, back, err)
			}
		}
	})
}

func TestHuman(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{"24.4", "$24.40"}, {"5.928923", "$5.93"}, {"0.9731", "$0.9731"}, {"0.232715", "$0.2327"},
		{"0.00005", "$0.0001"}, {"0", "$0.00"}, {"-3.456", "-$3.46"}, {"1.005", "$1.01"}, {"0.99995", "$1.00"},
	} {
		if got := MustParse(c.in).Human(); got != c.want {
			t.Errorf("Human(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
