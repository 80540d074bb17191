package job

import (
	"strings"
	"testing"
	"time"
)

func TestNewID(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	t.Run("valid", func(t *testing.T) {
		id := NewID(now)
		if !ValidID(id) || len(id) != 28 || !strings.HasPrefix(id, "j-") {
			t.Errorf("NewID = %q: want a valid ID of 28 characters starting j-", id)
		}
	})
	t.Run("unique", func(t *testing.T) {
		const n = 100_000
		seen := make(map[string]bool, n)
		for range n {
			id := NewID(now) // same millisecond: only the random bits differ
			if seen[id] {
				t.Fatalf("NewID repeated %q", id)
			}
			seen[id] = true
		}
	})
	t.Run("time-ordered", func(t *testing.T) {
		at, prev := now, NewID(now)
		for _, step := range []time.Duration{time.Millisecond, time.Second, time.Hour, 24 * time.Hour, 5 * 365 * 24 * time.Hour} {
			for range 200 {
				at = at.Add(step)
				id := NewID(at)
				if id <= prev {
					t.Fatalf("NewID(%v) = %q does not sort after the earlier %q", at, id, prev)
				}
				prev = id
			}
		}
	})
	t.Run("carries the millisecond", func(t *testing.T) {
		// The first 10 characters are the 48-bit millisecond timestamp.
		for _, at := range []time.Time{now, now.Add(time.Millisecond), time.UnixMilli(1<<48 - 1)} {
			id := NewID(at)
			var ms int64
			for _, c := range id[2:12] {
				ms = ms<<5 | int64(strings.IndexRune(crockford, c))
			}
			if ms != at.UnixMilli() {
				t.Errorf("NewID(%v) = %q encodes %d ms, want %d", at, id, ms, at.UnixMilli())
			}
		}
	})
}

func TestIDForKeyIn(t *testing.T) {
	a := IDForKeyIn("nlp", "submit-42", 20000)
	if !ValidID(a) || len(a) != 28 || !strings.HasPrefix(a, "j-k") {
		t.Errorf("IDForKeyIn = %q: want a valid ID of 28 characters starting j-k", a)
	}
	if b := IDForKeyIn("nlp", "submit-42", 20000); b != a {
		t.Errorf("IDForKeyIn not deterministic: %q then %q", a, b)
	}
	for name, other := range map[string]string{
		"next period":   IDForKeyIn("nlp", "submit-42", 20001),
		"no period":     IDForKey("nlp", "submit-42"),
		"other key":     IDForKeyIn("nlp", "submit-43", 20000),
		"boundary move": IDForKeyIn("nlp-", "submit-42"[1:], 20000),
		"key as period": IDForKeyIn("nlp", "submit-4", 220000),
	} {
		if other == a {
			t.Errorf("%s: the same ID %q", name, a)
		}
	}
	day := time.Date(2031, 3, 14, 0, 0, 0, 0, time.UTC)
	if KeyPeriodOf(day) != KeyPeriodOf(day.Add(KeyPeriod-time.Second)) || KeyPeriodOf(day) == KeyPeriodOf(day.Add(-time.Second)) {
		t.Errorf("periods do not run midnight to midnight UTC")
	}
}

func TestIDForKey(t *testing.T) {
	a := IDForKey("nlp", "submit-42")
	if !ValidID(a) || len(a) != 28 || !strings.HasPrefix(a, "j-k") {
		t.Errorf("IDForKey = %q: want a valid ID of 28 characters starting j-k", a)
	}
	if b := IDForKey("nlp", "submit-42"); b != a {
		t.Errorf("IDForKey not deterministic: %q then %q", a, b)
	}
	others := map[string]string{
		"other key":     IDForKey("nlp", "submit-43"),
		"other team":    IDForKey("vision", "submit-42"),
		"swapped":       IDForKey("submit-42", "nlp"),
		"boundary move": IDForKey("nlp-", "submit-42"[1:]),
		"empty team":    IDForKey("", "nlpsubmit-42"),
	}
	for name, id := range others {
		if id == a {
			t.Errorf("%s gives the same ID %q", name, id)
		}
		if !ValidID(id) {
			t.Errorf("%s gives an invalid ID %q", name, id)
		}
	}
	// A derived ID never looks like a generated one: NewID's first digit
	// holds the top 3 bits of the time, never 'k'.
	if id := NewID(time.UnixMilli(1<<48 - 1)); strings.HasPrefix(id, "j-k") {
		t.Errorf("NewID = %q shares IDForKey's prefix", id)
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"j-01jdqv3g0a8k6m2x4y7z9b1c5e", true},
		{"j-k", true},
		{"j-", false},
		{"j", false},
		{"", false},
		{"../x", false},
		{"j-../x", false},
		{"j-abc.def", false},
		{"j-ABC", false},
		{"J-abc", false},
		{"x-abc", false},
		{"j-abc/def", false},
		{"j-abc def", false},
		{"j-abc*", false},
		{"j-abc>", false},
		{"j-iloU", false}, // not in Crockford's alphabet
		{"j-" + strings.Repeat("a", 62), true},
		{"j-" + strings.Repeat("a", 63), false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if got := ValidID(tt.id); got != tt.want {
				t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}
