package bidding

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// table is a throughput table with round figures, for exact results.
type table map[string]float64

func (tt table) RelativeThroughput(gpu, class string) (float64, bool) {
	v, ok := tt[gpu+"/"+class]
	return v, ok
}

func TestRuntimeWithCatalog(t *testing.T) {
	cat := catalog.Default()
	t.Run("BERT: 6h on V100 is about 2h on A100", func(t *testing.T) {
		got, err := Runtime(cat, 6*time.Hour, "V100", "A100-40GB", catalog.ClassTrainMixed)
		if err != nil {
			t.Fatal(err)
		}
		if got < 100*time.Minute || got > 150*time.Minute {
			t.Errorf("6h on V100 = %v on A100-40GB, want about 2h", got)
		}
		// And exactly what the catalog's figures say, to the second.
		g, _ := cat.GPU("A100-40GB")
		want := time.Duration(float64(6*time.Hour) / g.Throughput.TrainMixed)
		if d := got - want; d < 0 || d >= time.Second {
			t.Errorf("runtime %v, catalog figure %v gives %v", got, g.Throughput.TrainMixed, want)
		}
	})
	t.Run("family name reads as its first variant", func(t *testing.T) {
		fam, err1 := Runtime(cat, 6*time.Hour, "V100", "A100", catalog.ClassTrainMixed)
		exact, err2 := Runtime(cat, 6*time.Hour, "V100", "A100-40GB", catalog.ClassTrainMixed)
		if err1 != nil || err2 != nil || fam != exact {
			t.Errorf("A100 = %v, %v; A100-40GB = %v, %v", fam, err1, exact, err2)
		}
	})
	t.Run("same GPU takes the same time", func(t *testing.T) {
		for _, class := range catalog.Classes {
			got, err := Runtime(cat, 90*time.Minute, "T4", "T4", class)
			if err != nil || got != 90*time.Minute {
				t.Errorf("%s: 90m on T4 = %v, %v on T4", class, got, err)
			}
		}
	})
	t.Run("slower and faster", func(t *testing.T) {
		t4, _ := Runtime(cat, time.Hour, "V100", "T4", catalog.ClassTrainMixed)
		h100, _ := Runtime(cat, time.Hour, "V100", "H100", catalog.ClassTrainMixed)
		if t4 <= time.Hour || h100 >= time.Hour {
			t.Errorf("1h on V100: %v on T4 (slower), %v on H100 (faster)", t4, h100)
		}
	})
	t.Run("class matters", func(t *testing.T) {
		mixed, _ := Runtime(cat, time.Hour, "V100", "A100-80GB", catalog.ClassTrainMixed)
		fp32, _ := Runtime(cat, time.Hour, "V100", "A100-80GB", catalog.ClassTrainFP32)
		if mixed == fp32 {
			t.Errorf("mixed and fp32 runtimes are both %v", mixed)
		}
	})
	errs := []struct {
		name, ref, gpu, want string
	}{
		{"unknown GPU", "V100", "B300", `no throughput figure for GPU "B300"`},
		{"unknown reference GPU", "V101", "A100", `no throughput figure for reference GPU "V101"`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Runtime(cat, time.Hour, tt.ref, tt.gpu, catalog.ClassTrainMixed)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Runtime = %v, %v; want error %q", got, err, tt.want)
			}
		})
	}
}

func TestRuntime(t *testing.T) {
	tab := table{
		"ref/c": 1, "fast/c": 3, "slow/c": 0.5, "seven/c": 7,
		"zero/c": 0, "neg/c": -1, "nan/c": math.NaN(), "inf/c": math.Inf(1),
	}
	tests := []struct {
		ref, gpu string
		d, want  time.Duration
		err      string
	}{
		{"ref", "fast", time.Hour, 20 * time.Minute, ""},
		{"ref", "slow", time.Hour, 2 * time.Hour, ""},
		{"fast", "ref", time.Hour, 3 * time.Hour, ""},
		{"ref", "seven", time.Hour, 515 * time.Second, ""}, // 514.29s rounds up
		{"ref", "missing", time.Hour, 0, `GPU "missing"`},
		{"missing", "ref", time.Hour, 0, `reference GPU "missing"`},
		{"ref", "zero", time.Hour, 0, `GPU "zero"`},
		{"neg", "ref", time.Hour, 0, `reference GPU "neg"`},
		{"ref", "nan", time.Hour, 0, `GPU "nan"`},
		{"inf", "ref", time.Hour, 0, `reference GPU "inf"`},
	}
	for _, tt := range tests {
		t.Run(tt.ref+"->"+tt.gpu, func(t *testing.T) {
			got, err := Runtime(tab, tt.d, tt.ref, tt.gpu, "c")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Runtime = %v, %v; want an error naming %s", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Runtime = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestScaleDuration(t *testing.T) {
	tests := []struct {
		name   string
		d      time.Duration
		factor float64
		want   time.Duration
	}{
		{"identity", 90 * time.Minute, 1, 90 * time.Minute},
		{"a third", time.Hour, 1.0 / 3, 20 * time.Minute},
		{"rounds up to the second", 10 * time.Second, 0.33, 4 * time.Second},
		{"a nanosecond is a second", time.Nanosecond, 1, time.Second},
		{"whole seconds stay", 7 * time.Second, 2, 14 * time.Second},
		{"zero duration", 0, 5, 0},
		{"zero factor", time.Hour, 0, 0},
		{"half done", 6 * time.Hour, 0.5, 3 * time.Hour},
		{"overflow saturates", math.MaxInt64 / 2, 3, math.MaxInt64},
		{"largest saturates", math.MaxInt64, 1, math.MaxInt64},
		{"infinite factor saturates", time.Second, math.Inf(1), math.MaxInt64},
		// Just below 2^63 as a float: rounding up to the second must not
		// wrap around to a negative duration.
		{"rounding at the top saturates", 1 << 62, 2 - 1.0/(1<<51), math.MaxInt64},
		{"NaN factor reads as forever", time.Hour, math.NaN(), math.MaxInt64},
		{"negative rounds up toward zero", -1500 * time.Millisecond, 1, -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ScaleDuration(tt.d, tt.factor); got != tt.want {
				t.Errorf("ScaleDuration(%v, %v) = %v, want %v", tt.d, tt.factor, got, tt.want)
			}
		})
	}
}

func TestCostToFinish(t *testing.T) {
	tests := []struct {
		name             string
		price            money.Micros
		nodes            int
		startup, runtime time.Duration
		want             money.Micros
	}{
		{"$3.06/h x 2 nodes x 90 min", money.MustParse("3.06"), 2, 10 * time.Minute, 80 * time.Minute, money.MustParse("9.18")},
		{"startup is billed", money.MustParse("1.00"), 1, time.Hour, 0, money.MustParse("1.00")},
		{"8 x V100 for 6h", money.MustParse("24.48"), 1, 0, 6 * time.Hour, money.MustParse("146.88")},
		{"4 nodes of $32.77 for 64h 10m", money.MustParse("32.77"), 4, 10 * time.Minute, 64 * time.Hour, money.MustParse("8410.966667")}, // 131.08 x 64.1666... = 8410.9666666
		{"zero nodes read as one", money.MustParse("2.50"), 0, 0, 2 * time.Hour, money.MustParse("5.00")},
		{"rounded once, not per node", money.MustParse("1.00"), 2, 0, time.Second, 556}, // 2 x 277.78, not 2 x 278
		{"free", 0, 8, time.Minute, time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := CostToFinish(t0, tt.price, tt.nodes, tt.startup, tt.runtime)
			if e.Cost != tt.want {
				t.Errorf("cost = %s, want %s", e.Cost, tt.want)
			}
			if e.Startup != tt.startup || e.Runtime != tt.runtime || !e.Finish.Equal(t0.Add(tt.startup+tt.runtime)) {
				t.Errorf("startup, runtime, finish = %v, %v, %v", e.Startup, e.Runtime, e.Finish)
			}
		})
	}
	t.Run("endless runtime is endlessly dear", func(t *testing.T) {
		// A runtime saturated by ScaleDuration plus a startup must not
		// wrap into a cheap job that is already done.
		runtime := ScaleDuration(math.MaxInt64/2, 3)
		e := CostToFinish(t0, money.MustParse("3.06"), 2, 5*time.Minute, runtime)
		if e.Cost <= 0 || !e.Finish.After(t0.Add(100*365*24*time.Hour)) {
			t.Errorf("cost %s, finish %v for a saturated runtime", e.Cost, e.Finish)
		}
		if MeetsDeadline(e, t0.Add(24*time.Hour)) {
			t.Error("a saturated runtime meets a 24h deadline")
		}
	})
}

func TestMeetsDeadline(t *testing.T) {
	finish := t0.Add(90 * time.Minute)
	e := Estimate{Finish: finish}
	tests := []struct {
		name     string
		deadline time.Time
		want     bool
	}{
		{"no deadline", time.Time{}, true},
		{"finish before", finish.Add(time.Minute), true},
		{"finish exactly at the deadline", finish, true},
		{"a nanosecond late", finish.Add(-time.Nanosecond), false},
		{"an hour late", finish.Add(-time.Hour), false},
		{"same instant, other zone", finish.In(time.FixedZone("CET", 3600)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MeetsDeadline(e, tt.deadline); got != tt.want {
				t.Errorf("MeetsDeadline(finish %v, deadline %v) = %v, want %v", finish, tt.deadline, got, tt.want)
			}
		})
	}
}

func TestAllows(t *testing.T) {
	tests := []struct {
		policy                  string
		spot, onDemand, reserve bool
	}{
		{PolicySpot, true, false, false},
		{PolicyOnDemand, false, true, true},
		{PolicyAuto, true, true, true},
		{"", true, true, true}, // unset reads as auto
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			got := [3]bool{Allows(tt.policy, providers.Spot), Allows(tt.policy, providers.OnDemand), Allows(tt.policy, providers.Reserved)}
			if want := [3]bool{tt.spot, tt.onDemand, tt.reserve}; got != want {
				t.Errorf("allows spot, on-demand, reserved = %v, want %v", got, want)
			}
		})
	}
	t.Run("policies match the job spec's words", func(t *testing.T) {
		// The spec says "spot", "on-demand", "auto"; the policies must be
		// the same words or a job's rule is silently ignored.
		for _, p := range []string{PolicySpot, PolicyOnDemand, PolicyAuto} {
			if p != strings.ToLower(p) || strings.TrimSpace(p) != p {
				t.Errorf("policy %q is not a spec word", p)
			}
		}
		if PolicySpot != string(providers.Spot) || PolicyOnDemand != string(providers.OnDemand) {
			t.Errorf("policies %q, %q differ from purchase options %q, %q", PolicySpot, PolicyOnDemand, providers.Spot, providers.OnDemand)
		}
	})
}

func TestSpotMaxPrice(t *testing.T) {
	offer := func(price, onDemand string) providers.Offer {
		o := providers.Offer{Purchase: providers.Spot, Price: money.MustParse(price)}
		if onDemand != "" {
			o.OnDemandPrice = money.MustParse(onDemand)
		}
		return o
	}
	tests := []struct {
		name   string
		jobMax string
		offer  providers.Offer
		want   string
	}{
		{"job cap below on-demand wins", "2.00", offer("0.90", "3.06"), "2.00"},
		{"job cap above on-demand is capped", "5.00", offer("0.90", "3.06"), "3.06"},
		{"job cap equal to on-demand", "3.06", offer("0.90", "3.06"), "3.06"},
		{"no job cap means on-demand", "0", offer("0.90", "3.06"), "3.06"},
		{"negative cap means on-demand", "-1", offer("0.90", "3.06"), "3.06"},
		{"job cap below the spot price still wins", "0.50", offer("0.90", "3.06"), "0.50"},
		{"no on-demand figure: the offer's price", "0", offer("0.90", ""), "0.90"},
		{"no on-demand figure, lower job cap", "0.60", offer("0.90", ""), "0.60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SpotMaxPrice(money.MustParse(tt.jobMax), tt.offer); got != money.MustParse(tt.want) {
				t.Errorf("SpotMaxPrice = %s, want $%s", got, tt.want)
			}
		})
	}
}
