package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"48h", 48 * time.Hour},
		{"2h30m", 150 * time.Minute},
		{"90m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"2d", 48 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"0.5d", 12 * time.Hour},
		{" 3d ", 72 * time.Hour},
		{"36500d", 36500 * 24 * time.Hour},
		{"30s", 30 * time.Second},
		{"-5h", -5 * time.Hour}, // Validate refuses it where it matters
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseDurationRefused(t *testing.T) {
	// Plain numbers are refused: "48" could be hours or seconds.
	for _, in := range []string{"48", "2", "1.5", "", "d", "abc", "-1d", "36501d", "NaNd", "INFd", "1h2d", "2 days", "2D"} {
		t.Run(in, func(t *testing.T) {
			got, err := ParseDuration(in)
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an error", in, got)
			}
			if !strings.Contains(err.Error(), "is not a duration (try 48h, 90m, 2d)") {
				t.Errorf("error %q does not say how to write a duration", err)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		var d Duration
		if err := json.Unmarshal([]byte(`"2d"`), &d); err != nil || d.D() != 48*time.Hour {
			t.Fatalf(`"2d" = %v, %v`, d.D(), err)
		}
		b := mustJSON(t, d)
		if string(b) != `"48h0m0s"` {
			t.Errorf("marshalled as %s, want \"48h0m0s\"", b)
		}
		var again Duration
		if err := json.Unmarshal(b, &again); err != nil || again != d {
			t.Errorf("round trip = %v, %v", again.D(), err)
		}
	})
	for _, in := range []string{`48`, `1.5`, `true`, `"48"`, `null`} {
		t.Run("refuses "+in, func(t *testing.T) {
			d := Duration(time.Hour)
			if err := json.Unmarshal([]byte(in), &d); err == nil {
				t.Errorf("%s accepted as %v", in, d.D())
			}
		})
	}
}

func TestDeadlineJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want Deadline
		out  string
	}{
		{`"2026-12-01T18:00:00Z"`, Deadline{At: at}, `"2026-12-01T18:00:00Z"`},
		{`"2026-12-01T19:00:00+01:00"`, Deadline{At: at}, `"2026-12-01T18:00:00Z"`},
		{`"2026-12-01T18:00:00.25Z"`, Deadline{At: at.Add(250 * time.Millisecond)}, `"2026-12-01T18:00:00.25Z"`},
		{`"36h"`, Deadline{Within: 36 * time.Hour}, `"36h0m0s"`},
		{`"2d"`, Deadline{Within: 48 * time.Hour}, `"48h0m0s"`},
		{`" 12h "`, Deadline{Within: 12 * time.Hour}, `"12h0m0s"`},
		{`""`, Deadline{}, `""`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Deadline
			if err := json.Unmarshal([]byte(tt.in), &d); err != nil {
				t.Fatal(err)
			}
			if !d.At.Equal(tt.want.At) || d.Within != tt.want.Within || d.At.Location() != time.UTC {
				t.Fatalf("%s = %+v, want %+v", tt.in, d, tt.want)
			}
			b := mustJSON(t, d)
			if string(b) != tt.out {
				t.Errorf("marshalled as %s, want %s", b, tt.out)
			}
			var again Deadline
			if err := json.Unmarshal(b, &again); err != nil || !again.At.Equal(d.At) || again.Within != d.Within {
				t.Errorf("round trip through %s = %+v, %v; want %+v", b, again, err, d)
			}
		})
	}
	// Each would read back as no deadline at all.
	for in, want := range map[string]string{
		`"0001-01-01T00:00:00Z"`:      "the zero time is not a deadline; leave deadline out for none",
		`"0001-01-01T01:00:00+01:00"`: "the zero time is not a deadline",
		`"0s"`:                        `must be positive, not "0s"; leave deadline out for none`,
		`"0d"`:                        `must be positive, not "0d"`,
		`"-1h"`:                       `must be positive, not "-1h"`,
	} {
		t.Run("refuses "+in, func(t *testing.T) {
			var d Deadline
			if err := json.Unmarshal([]byte(in), &d); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error = %v, want %q", err, want)
			}
		})
	}
	for _, in := range []string{`12`, `"tomorrow"`, `"12"`, `"2026-12-01"`, `{}`} {
		t.Run("refuses "+in, func(t *testing.T) {
			var d Deadline
			err := json.Unmarshal([]byte(in), &d)
			if err == nil || !strings.Contains(err.Error(), "is not a deadline: give a time (2026-12-01T18:00:00Z) or a duration (36h)") {
				t.Errorf("error = %v", err)
			}
		})
	}
}

func TestDeadlineResolve(t *testing.T) {
	submitted := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	at := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		d      Deadline
		want   time.Time
		isZero bool
	}{
		{"absolute time ignores submission", Deadline{At: at}, at, false},
		{"duration counts from submission", Deadline{Within: 36 * time.Hour}, submitted.Add(36 * time.Hour), false},
		{"none", Deadline{}, time.Time{}, true},
		{"negative duration is none", Deadline{Within: -time.Hour}, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Resolve(submitted); !got.Equal(tt.want) {
				t.Errorf("Resolve = %v, want %v", got, tt.want)
			}
			if tt.d.IsZero() != tt.isZero {
				t.Errorf("IsZero = %v, want %v", tt.d.IsZero(), tt.isZero)
			}
		})
	}
	t.Run("from a parsed spec", func(t *testing.T) {
		s := mustParse(t, yamlSpec(map[string]string{"deadline": "12h"}))
		if got := s.Deadline.Resolve(submitted); !got.Equal(submitted.Add(12 * time.Hour)) {
			t.Errorf("deadline 12h resolves to %v", got)
		}
		none := mustParse(t, yamlSpec(nil))
		if !none.Deadline.IsZero() || !none.Deadline.Resolve(submitted).IsZero() {
			t.Errorf("spec without deadline has %+v", none.Deadline)
		}
		if b := mustJSON(t, none); strings.Contains(string(b), "deadline") {
			t.Errorf("spec without deadline writes one: %s", b)
		}
	})
}
