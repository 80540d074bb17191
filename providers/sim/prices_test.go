package sim

import (
	"context"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// spotPrices is every spot offer's price, by offer ID.
func spotPrices(t *testing.T, c *Cloud) map[string]money.Micros {
	t.Helper()
	offers, err := c.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]money.Micros{}
	for _, o := range offers {
		if o.Purchase == providers.Spot {
			out[o.ID()] = o.Price
		}
	}
	return out
}

func samePrices(a, b map[string]money.Micros) bool {
	if len(a) != len(b) {
		return false
	}
	for id, p := range a {
		if b[id] != p {
			return false
		}
	}
	return true
}

func TestPricesDeterministic(t *testing.T) {
	for _, steps := range []int{0, 1, 7, 100} {
		t.Run(time.Duration(steps).String(), func(t *testing.T) {
			clouds := map[int64][2]*Cloud{}
			for _, seed := range []int64{1, 2} {
				var pair [2]*Cloud
				for i := range pair {
					clk := clock.NewFake(t0)
					c, err := New(context.Background(), Options{Catalog: testCatalog(t), Clock: clk, Seed: seed})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(c.Close)
					// One clock jumps, the other walks every step: the
					// prices depend on the step, not on the path.
					if i == 0 {
						clk.Advance(time.Duration(steps) * defaultPriceInterval)
					} else {
						for range steps {
							clk.Advance(defaultPriceInterval)
						}
					}
					pair[i] = c
				}
				clouds[seed] = pair
			}
			a, b := spotPrices(t, clouds[1][0]), spotPrices(t, clouds[1][1])
			if !samePrices(a, b) {
				t.Errorf("same seed, different prices:\n%v\n%v", a, b)
			}
			if samePrices(a, spotPrices(t, clouds[2][0])) {
				t.Errorf("seeds 1 and 2 give the same prices")
			}
			oa, ob := mustOffers(t, clouds[1][0]), mustOffers(t, clouds[1][1])
			for i := range oa {
				if oa[i] != ob[i] {
					t.Fatalf("same seed, different offers:\n%+v\n%+v", oa[i], ob[i])
				}
			}
		})
	}
}

func mustOffers(t *testing.T, c *Cloud) []providers.Offer {
	t.Helper()
	o, err := c.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestPricesMoveEachStep(t *testing.T) {
	e := newEnv(t)
	prev := spotPrices(t, e.cloud)
	for step := range 5 {
		e.clk.Advance(defaultPriceInterval - time.Second)
		if got := spotPrices(t, e.cloud); !samePrices(got, prev) {
			t.Fatalf("step %d: prices moved before the interval was over", step)
		}
		e.clk.Advance(time.Second)
		got := spotPrices(t, e.cloud)
		moved := 0
		for id, p := range got {
			if p != prev[id] {
				moved++
			}
		}
		if moved < len(got)/2 {
			t.Errorf("step %d: only %d of %d spot prices moved", step, moved, len(got))
		}
		prev = got
	}
}

func TestSpotPriceBounds(t *testing.T) {
	od := money.MustParse("10")
	tests := []struct {
		name   string
		centre money.Micros
	}{
		{"typical", money.MustParse("3.5")},
		{"at the floor", money.MustParse("2.5")},
		{"below the floor", money.MustParse("0.5")},
		{"at on-demand", od},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := od.Scale(25, 100), od.Scale(95, 100)
			centre := clampSpot(tt.centre, od)
			for seed := range int64(5) {
				h := seeded(seed, "walk", tt.name)
				prev := spotPrice(h, centre, od, -1)
				var moves int64
				for step := range int64(1000) {
					p := spotPrice(h, centre, od, step)
					if p < lo || p > hi {
						t.Fatalf("seed %d step %d: %s outside [%s, %s]", seed, step, p, lo, hi)
					}
					// A step moves a few percent of the centre at most.
					d := p - prev
					if d < 0 {
						d = -d
					}
					if d > centre.Scale(9, 100) {
						t.Fatalf("seed %d step %d: moved %s from %s", seed, step, d, prev)
					}
					moves += int64(d)
					prev = p
				}
				if tt.name == "typical" && (moves == 0 || money.Micros(moves/1000) > centre.Scale(5, 100)) {
					t.Errorf("seed %d: mean move %s per step", seed, money.Micros(moves/1000))
				}
			}
		})
	}
}

func TestStepAt(t *testing.T) {
	iv := 10 * time.Minute
	tests := []struct {
		at   time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(599, 0), 0},
		{time.Unix(600, 0), 1},
		{time.Unix(-1, 0), -1},
		{time.Unix(-600, 0), -1},
		{time.Unix(-601, 0), -2},
	}
	for _, tt := range tests {
		if got := stepAt(tt.at, iv); got != tt.want {
			t.Errorf("stepAt(%d) = %d, want %d", tt.at.Unix(), got, tt.want)
		}
		if s := stepStart(tt.want, iv); s.After(tt.at) || !stepStart(tt.want+1, iv).After(tt.at) {
			t.Errorf("step %d [%s, %s) does not contain %s", tt.want, s, stepStart(tt.want+1, iv), tt.at)
		}
	}
}
