package money

import (
	"testing"
	"time"
)

func TestSegmentsCutAtPriceChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	p := func(s string) Micros { return MustParse(s) }
	tests := []struct {
		name     string
		from, to time.Time
		price    Micros
		changes  []PriceChange
		want     []Segment
		billed   Micros
	}{
		{"no change", at(0), at(60), p("6.01"), nil, []Segment{{at(0), at(60), p("6.01")}}, p("6.01")},
		{"three prices, as p4d in us-east-2c", at(0), at(90), p("6.01"),
			[]PriceChange{{at(30), p("5.68")}, {at(60), p("5.49")}},
			[]Segment{{at(0), at(30), p("6.01")}, {at(30), at(60), p("5.68")}, {at(60), at(90), p("5.49")}},
			p("3.005") + p("2.84") + p("2.745")},
		{"a change before the start sets the price", at(10), at(40), p("1"),
			[]PriceChange{{at(5), p("2")}, {at(30), p("4")}},
			[]Segment{{at(10), at(30), p("2")}, {at(30), at(40), p("4")}}, p("0.666667") + p("0.666667")},
		{"changes at or after the end are not reached", at(0), at(30), p("1"),
			[]PriceChange{{at(30), p("9")}, {at(45), p("8")}},
			[]Segment{{at(0), at(30), p("1")}}, p("0.5")},
		{"a change to the same price does not cut", at(0), at(60), p("1"),
			[]PriceChange{{at(20), p("1")}}, []Segment{{at(0), at(60), p("1")}}, p("1")},
		{"an empty period bills nothing", at(5), at(5), p("1"), nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Segments(tt.from, tt.to, tt.price, tt.changes)
			if len(got) != len(tt.want) {
				t.Fatalf("segments = %v, want %v", got, tt.want)
			}
			for i := range got {
				if !got[i].From.Equal(tt.want[i].From) || !got[i].To.Equal(tt.want[i].To) || got[i].Price != tt.want[i].Price {
					t.Errorf("segment %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
			if b := Billed(tt.from, tt.to, tt.price, tt.changes); b != tt.billed {
				t.Errorf("billed %s, want %s", b, tt.billed)
			}
		})
	}
}
