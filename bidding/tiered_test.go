package bidding

import (
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// seedsTiered is the seeds' tiered price: the first 100 hours at $3.5/h,
// then $2.8/h.
func seedsTiered(t *testing.T) Tiered {
	t.Helper()
	tr, err := TwoTier(100*time.Hour, money.MustParse("3.5"), money.MustParse("2.8"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTieredCost(t *testing.T) {
	tr := seedsTiered(t)
	h := time.Hour
	tests := []struct {
		name      string
		used, run time.Duration
		want      string
	}{
		{"inside the first tier", 0, 50 * h, "175"},
		{"up to the boundary exactly", 0, 100 * h, "350"},
		{"across the boundary", 90 * h, 20 * h, "63"}, // 10 h x 3.5 + 10 h x 2.8
		{"just past the boundary", 0, 100*h + 30*time.Minute, "351.4"},
		{"after the boundary", 150 * h, 10 * h, "28"},
		{"starting at the boundary", 100 * h, h, "2.8"},
		{"one second each side", 100*h - time.Second, 2 * time.Second, "0.00175"},
		{"nothing", 40 * h, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tr.Cost(tt.used, tt.run); got != money.MustParse(tt.want) {
				t.Errorf("Cost(%v, %v) = %s, want $%s", tt.used, tt.run, got.Decimal(), tt.want)
			}
		})
	}
	t.Run("a run split in two costs the same as in one", func(t *testing.T) {
		for _, cut := range []time.Duration{time.Minute, 7 * h, 10 * h, 13*h + 17*time.Second} {
			whole := tr.Cost(90*h, 20*h)
			parts := tr.Cost(90*h, cut) + tr.Cost(90*h+cut, 20*h-cut)
			if d := whole - parts; d < -1 || d > 1 {
				t.Errorf("cut at %v: %s whole, %s in parts", cut, whole, parts)
			}
		}
	})
	t.Run("price of the next hour", func(t *testing.T) {
		if a, b := tr.PriceAt(99*h), tr.PriceAt(100*h); a != money.MustParse("3.5") || b != money.MustParse("2.8") {
			t.Errorf("PriceAt 99h = %s, 100h = %s", a, b)
		}
	})
	t.Run("nodes count as instance-time", func(t *testing.T) {
		est := tr.CostToFinish(t0, 90*h, 2, 0, 10*h)
		if est.Cost != money.MustParse("63") || !est.Finish.Equal(t0.Add(10*h)) {
			t.Errorf("2 nodes for 10 h from 90 h used: %+v", est)
		}
	})
}

func TestTieredThreeTiers(t *testing.T) {
	tr, err := NewTiered(Tier{Until: 10 * time.Hour, Price: money.MustParse("4")},
		Tier{Until: 20 * time.Hour, Price: money.MustParse("3")}, Tier{Price: money.MustParse("2")})
	if err != nil {
		t.Fatal(err)
	}
	// 5 h at 4 + 10 h at 3 + 5 h at 2
	if got := tr.Cost(5*time.Hour, 20*time.Hour); got != money.MustParse("60") {
		t.Errorf("cost = %s, want $60", got)
	}
}

func TestTieredInvalid(t *testing.T) {
	p := money.MustParse("1")
	bad := [][]Tier{
		nil,
		{{Until: time.Hour, Price: p}}, // the last tier must not end
		{{Until: time.Hour, Price: p}, {Until: time.Hour, Price: p}, {Price: p}}, // not increasing
		{{Until: 0, Price: p}, {Price: p}},                                       // a first tier of nothing
		{{Price: -p}},
	}
	for _, tiers := range bad {
		if _, err := NewTiered(tiers...); err == nil {
			t.Errorf("NewTiered(%v) accepted", tiers)
		}
	}
}
