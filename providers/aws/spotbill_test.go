package aws

import (
	"context"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// A spot instance carries the changes of its zone's spot price since its
// launch, as the spot price history dates them, and is billed per price
// segment: the refreshes that read the history note each price once; an
// on-demand instance carries none.
func TestSpotInstanceCarriesItsPriceChanges(t *testing.T) {
	h := newHarness(t)
	spot := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
	insts, err := h.p.Launch(context.Background(), launchReq(spot, "j-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	od := h.offer("us-east-1a", "p3.2xlarge", providers.OnDemand)
	if _, err := h.p.Launch(context.Background(), launchReq(od, "j-7f3a-a3", 1)); err != nil {
		t.Fatal(err)
	}
	// Three prices over the next hour, each read by a refresh after it.
	for _, c := range []struct {
		usd string
		at  time.Duration
	}{{"0.850000", 20 * time.Minute}, {"0.850000", 25 * time.Minute}, {"0.990000", 40 * time.Minute}} {
		h.cloud.SetSpotPrice("us-east-1a", "p3.2xlarge", c.usd, t0.Add(c.at))
		h.clk.Set(t0.Add(c.at + 11*time.Minute))
		h.offers()
	}
	listed, err := h.p.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []money.PriceChange{{At: t0.Add(20 * time.Minute), Price: usd("0.85")}, {At: t0.Add(40 * time.Minute), Price: usd("0.99")}}
	for _, in := range listed {
		switch in.ID {
		case insts[0].ID:
			if len(in.PriceChanges) != len(want) {
				t.Fatalf("spot instance's price changes %+v, want %+v", in.PriceChanges, want)
			}
			for i := range want {
				if !in.PriceChanges[i].At.Equal(want[i].At) || in.PriceChanges[i].Price != want[i].Price {
					t.Errorf("change %d = %+v, want %+v", i, in.PriceChanges[i], want[i])
				}
			}
			end := t0.Add(time.Hour)
			bill := usd("0.9181").ForDuration(20*time.Minute) + usd("0.85").ForDuration(20*time.Minute) + usd("0.99").ForDuration(20*time.Minute)
			if got := in.Bill(end); got != bill {
				t.Errorf("billed %s for the hour, want %s", got, bill)
			}
		default:
			if in.PriceChanges != nil {
				t.Errorf("on-demand instance %s carries price changes %+v", in.ID, in.PriceChanges)
			}
		}
	}
}
