package bidding

import (
	"math"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// riskIn is the seeds' BERT job on an A100 machine: 2 h of work, 2 min to
// boot, 2 min checkpoints.
func riskIn(rate float64) RiskInput {
	return RiskInput{
		Now: t0, PricePerHour: money.MustParse("12"), Nodes: 1,
		Startup: 2 * time.Minute, Runtime: 2 * time.Hour,
		InterruptionsPerHour: rate,
		Checkpoint:           Checkpointing{Time: 2 * time.Minute},
		Provider:             "aws", Region: "us-east-1",
	}
}

func TestRiskZeroRateIsTheSchedulersEstimate(t *testing.T) {
	in := riskIn(0)
	got := ExpectedCost(in)
	want := CostToFinish(t0, in.PricePerHour, 1, in.Startup, in.Runtime)
	if got.Estimate != want || got.Base != want || got.RiskCost != 0 {
		t.Errorf("rate 0: %+v\nwant %+v", got.Estimate, want)
	}
	if got.Interruptions != 0 || got.PAny != 0 || got.Loss != 0 || got.Checkpoints != 0 || got.Interval != MaxCheckpointInterval {
		t.Errorf("rate 0: %+v", got)
	}
	// Spot and on-demand are the same sum when nothing is taken away.
	if got.Cost != money.MustParse("24.4") {
		t.Errorf("2 h 2 min at $12/h = %s, want $24.40", got.Cost)
	}
}

func TestRiskHigherRateCostsMore(t *testing.T) {
	prev := ExpectedCost(riskIn(0))
	for _, rate := range []float64{1e-4, 1e-3, 0.01, 0.1, 0.5} {
		got := ExpectedCost(riskIn(rate))
		if got.Cost <= prev.Cost || got.Runtime < prev.Runtime || got.Interruptions <= prev.Interruptions || got.PAny <= prev.PAny {
			t.Errorf("rate %v: cost %s, runtime %v, %v interruptions, P %v; not above the lower rate's %s, %v, %v, %v",
				rate, got.Cost, got.Runtime, got.Interruptions, got.PAny, prev.Cost, prev.Runtime, prev.Interruptions, prev.PAny)
		}
		if got.RiskCost != got.Cost-got.Base.Cost || got.Base != prev.Base {
			t.Errorf("rate %v: risk cost %s of %s over base %s", rate, got.RiskCost, got.Cost, got.Base.Cost)
		}
		prev = got
	}
}

func TestRiskCheckpointsReduceLoss(t *testing.T) {
	in := riskIn(0.05)
	in.Runtime = 10 * time.Hour
	yd := ExpectedCost(in)
	none := in
	none.Checkpoint.Disabled = true
	noCk := ExpectedCost(none)
	rare := in
	rare.Checkpoint.Interval = 5 * time.Hour
	rareCk := ExpectedCost(rare)
	if yd.Interval != CheckpointInterval(2*time.Minute, 0.05) || yd.Checkpoints == 0 {
		t.Errorf("Young/Daly: interval %v, %d checkpoints", yd.Interval, yd.Checkpoints)
	}
	if !(yd.Loss < rareCk.Loss && rareCk.Loss < noCk.Loss) {
		t.Errorf("loss per interruption: Young/Daly %v, every 5 h %v, none %v", yd.Loss, rareCk.Loss, noCk.Loss)
	}
	if !(yd.Cost < rareCk.Cost && rareCk.Cost < noCk.Cost) {
		t.Errorf("expected cost: Young/Daly %s, every 5 h %s, none %s", yd.Cost, rareCk.Cost, noCk.Cost)
	}
	// Checkpointing far too often costs more than the optimum too.
	often := in
	often.Checkpoint.Interval = MinCheckpointInterval / 2
	if c := ExpectedCost(often); c.Cost <= yd.Cost {
		t.Errorf("every 5 min: %s, Young/Daly %s", c.Cost, yd.Cost)
	}
	if noCk.Interval != 0 || noCk.Checkpoints != 0 {
		t.Errorf("no checkpoints: %+v", noCk)
	}
}

// TestRiskByHand checks the model against numbers worked out by hand.
func TestRiskByHand(t *testing.T) {
	t.Run("no checkpoints: (1/λ)(e^(λW) - 1)", func(t *testing.T) {
		// λ = 0.1/h, W = 10 h, no changeover: 10 h x (e - 1) = 17.18 h,
		// e - 1 = 1.718 interruptions, P(any) = 1 - 1/e.
		in := RiskInput{Now: t0, PricePerHour: money.MustParse("1"), Nodes: 1, Runtime: 10 * time.Hour,
			InterruptionsPerHour: 0.1, Checkpoint: Checkpointing{Disabled: true}}
		got := ExpectedCost(in)
		if want := 10 * (math.E - 1); math.Abs(got.Runtime.Hours()-want) > 1e-3 {
			t.Errorf("runtime %v, want %.4f h", got.Runtime, want)
		}
		if math.Abs(got.Interruptions-(math.E-1)) > 1e-9 || math.Abs(got.PAny-(1-1/math.E)) > 1e-9 {
			t.Errorf("interruptions %v, P(any) %v", got.Interruptions, got.PAny)
		}
		// $1/h for the expected hours, to the second.
		if want := money.MustParse("1").ForDuration(got.Runtime); got.Cost != want {
			t.Errorf("cost %s, want %s", got.Cost, want)
		}
	})
	t.Run("small rates: λ x runtime interruptions, each losing half an interval and the changeover", func(t *testing.T) {
		// λ = 0.001/h over 10 h of work, checkpoints of 1 min every hour,
		// changeover 3 min: 9 writes, 10 h 9 min exposed, so about 0.01015
		// interruptions, each losing about (60 + 1)/2 + 3 = 33.5 min.
		in := RiskInput{Now: t0, PricePerHour: money.MustParse("1"), Nodes: 1, Runtime: 10 * time.Hour, Startup: 3 * time.Minute,
			InterruptionsPerHour: 0.001, Checkpoint: Checkpointing{Time: time.Minute, Interval: time.Hour}}
		got := ExpectedCost(in)
		if got.Checkpoints != 9 {
			t.Errorf("checkpoints %d, want 9", got.Checkpoints)
		}
		if n := 0.001 * (10 + 9.0/60); math.Abs(got.Interruptions-n)/n > 0.01 {
			t.Errorf("interruptions %v, want about %v", got.Interruptions, n)
		}
		if want := 33.5 * float64(time.Minute); math.Abs(float64(got.Loss)-want)/want > 0.01 {
			t.Errorf("loss %v, want about 33.5 min", got.Loss)
		}
	})
}

func TestRiskMultiNode(t *testing.T) {
	one := riskIn(0.01)
	four := one
	four.Nodes = 4
	a, b := ExpectedCost(one), ExpectedCost(four)
	if b.Rate != 4*a.Rate {
		t.Errorf("job rate %v on 4 nodes, %v on 1", b.Rate, a.Rate)
	}
	steady := 2 * time.Hour
	if b.Checkpoints > 0 {
		steady += time.Duration(b.Checkpoints) * 2 * time.Minute
	}
	if want := 1 - math.Exp(-0.04*steady.Hours()); math.Abs(b.PAny-want) > 1e-9 {
		t.Errorf("P(any) on 4 nodes = %v, want %v", b.PAny, want)
	}
	if b.Cost <= 4*a.Cost-4 {
		t.Errorf("4 nodes: %s, 1 node: %s; 4 nodes should cost more than 4x", b.Cost, a.Cost)
	}
}

func TestRiskRestartElsewhereMovesTheCheckpoint(t *testing.T) {
	in := riskIn(0.05)
	in.Checkpoint.SizeGB = 100
	here := ExpectedCost(in)
	other := in
	other.RestartProvider, other.RestartRegion = "gcp", "us-central1"
	moved := ExpectedCost(other)
	// Each restart moves 100 GB out of AWS at $0.09/GB.
	if want := scaleByFloat(money.MustParse("9"), moved.Interruptions); moved.Transfers != want || want == 0 {
		t.Errorf("transfers %s, want %s", moved.Transfers, want)
	}
	if here.Transfers != 0 || moved.Cost <= here.Cost || moved.Loss <= here.Loss {
		t.Errorf("restart here: %s (loss %v); elsewhere: %s (loss %v)", here.Cost, here.Loss, moved.Cost, moved.Loss)
	}
	// The checkpoint's storage is counted while the job runs.
	if want := StorageCost(ObjectStoragePerGBMonth, 100, here.Startup+here.Runtime); here.Storage != want || want == 0 {
		t.Errorf("storage %s, want %s", here.Storage, want)
	}
}

func TestRiskExtremes(t *testing.T) {
	in := riskIn(1e6)
	in.Checkpoint.Disabled = true
	got := ExpectedCost(in)
	if got.Runtime != math.MaxInt64 || got.Cost <= 0 {
		t.Errorf("certain interruption without checkpoints: %+v; want forever and dear", got.Estimate)
	}
	for _, nan := range []float64{math.NaN(), -1} {
		if got := ExpectedCost(riskIn(nan)); got.Cost != got.Base.Cost {
			t.Errorf("rate %v: %s, base %s", nan, got.Cost, got.Base.Cost)
		}
	}
}

func TestRiskPriors(t *testing.T) {
	// 7.5% of instances a month = -ln(0.925)/730 per hour.
	r, ok := BucketRate("5-10%")
	if want := -math.Log(0.925) / 730; !ok || math.Abs(r-want) > 1e-15 {
		t.Errorf("5-10%% bucket = %v, want %v", r, want)
	}
	prev := 0.0
	for _, b := range AdvisorBuckets {
		r, ok := BucketRate(b.Label)
		if !ok || r <= prev {
			t.Errorf("bucket %s = %v, not above the band below (%v)", b.Label, r, prev)
		}
		// Back to a monthly share: the middle of the band.
		if pct := -math.Expm1(-r*HoursPerMonth) * 100; math.Abs(pct-(b.Lo+b.Hi)/2) > 1e-9 {
			t.Errorf("bucket %s is %v%% a month", b.Label, pct)
		}
		prev = r
	}
	if _, ok := BucketRate("30%"); ok {
		t.Error("unknown bucket accepted")
	}
	if PriorRate("aws", providers.OnDemand) != OnDemandRate || PriorRate("aws", providers.Reserved) != OnDemandRate {
		t.Error("on-demand and reserved priors should be OnDemandRate")
	}
	aws, gcp := PriorRate("aws", providers.Spot), PriorRate("gcp", providers.Spot)
	if aws != r5to10()+OnDemandRate || gcp <= aws || aws <= OnDemandRate {
		t.Errorf("spot priors: aws %v, gcp %v", aws, gcp)
	}
}

func r5to10() float64 { r, _ := BucketRate("5-10%"); return r }

func TestRiskBlendRate(t *testing.T) {
	prior := 1e-4
	tests := []struct {
		name               string
		interruptions, hrs float64
		want               float64
	}{
		{"nothing observed: the prior", 0, 0, prior},
		{"as many hours as the prior's weight: halfway", 2, 1000, (0.1 + 2) / 2000},
		{"long and quiet: towards zero", 0, 9000, 0.1 / 10000},
		{"lots of data: the observed rate", 5000, 1e7, (0.1 + 5000) / (1e7 + 1000)},
		{"nonsense counts as nothing", -3, 10, prior},
		{"NaN counts as nothing", math.NaN(), 10, prior},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BlendRate(prior, DefaultPriorHours, tt.interruptions, tt.hrs)
			if math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("BlendRate = %v, want %v", got, tt.want)
			}
		})
	}
	if got := BlendRate(prior, 0, 3, 100); got != 0.03 {
		t.Errorf("no prior weight: %v, want the observed 0.03", got)
	}
	if got := BlendRate(prior, 0, 0, 0); got != prior {
		t.Errorf("no weight, no data: %v", got)
	}
}

// A checkpoint that fits in the provider's notice is taken at the notice:
// an interruption then costs the checkpoint and the changeover, no work.
// One that does not fit (Azure's and GCP's 30 s against a 2-minute
// checkpoint) loses the work since the last periodic checkpoint, as with
// no notice at all, and says so.
func TestRiskNoticeWindow(t *testing.T) {
	none := ExpectedCost(riskIn(0.1))
	cases := []struct {
		name          string
		window        time.Duration
		saved, short  bool
		cheaperThanNo bool
	}{
		{"AWS spot: 2 min for a 2 min checkpoint", 2 * time.Minute, true, false, true},
		{"Azure spot: 30 s for a 2 min checkpoint", 30 * time.Second, false, true, false},
		{"no notice", 0, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := riskIn(0.1)
			in.NoticeWindow = c.window
			got := ExpectedCost(in)
			if got.SavedAtNotice != c.saved || got.ShortNotice != c.short {
				t.Fatalf("saved at notice %v, short notice %v; want %v, %v", got.SavedAtNotice, got.ShortNotice, c.saved, c.short)
			}
			if c.saved {
				if want := in.Checkpoint.Time + in.Startup; got.Loss != want {
					t.Errorf("loss per interruption %s, want the checkpoint and the changeover (%s)", got.Loss, want)
				}
				if got.Cost >= none.Cost || got.Interruptions <= 0 {
					t.Errorf("cost %s with the checkpoint at the notice, %s without: should be cheaper", got.Cost, none.Cost)
				}
				return
			}
			if got.Cost != none.Cost || got.Loss != none.Loss {
				t.Errorf("cost %s, loss %s; want as with no notice: %s, %s", got.Cost, got.Loss, none.Cost, none.Loss)
			}
		})
	}
	t.Run("a job that cannot checkpoint loses its work either way", func(t *testing.T) {
		in := riskIn(0.1)
		in.Checkpoint.Disabled = true
		in.NoticeWindow = 2 * time.Minute
		if got := ExpectedCost(in); got.SavedAtNotice || got.ShortNotice {
			t.Errorf("saved %v, short %v for a job that cannot checkpoint", got.SavedAtNotice, got.ShortNotice)
		}
	})
}
