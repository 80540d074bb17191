package sim

import (
	"context"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// A spot instance is billed each price segment at its own price: across
// three prices set by hand (scaled from p4d spot going $6.01 -> $5.68 -> $5.49 in one
// run), and across the walk's steps, which the cloud records however late
// it catches up, and after a restart.
func TestSpotInstanceIsBilledPerPriceSegment(t *testing.T) {
	e := newEnv(t)
	e.setAvailable(awsSmallSp, 5)
	p1, p2, p3 := money.MustParse("0.601"), money.MustParse("0.568"), money.MustParse("0.549")
	if err := e.cloud.SetPrice(awsSmallSp, p1); err != nil {
		t.Fatal(err)
	}
	in := e.launch(awsSmallSp, "pinned", 1)[0]
	e.clk.Advance(25 * time.Minute)
	if err := e.cloud.SetPrice(awsSmallSp, p2); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(20 * time.Minute)
	if err := e.cloud.SetPrice(awsSmallSp, p3); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(15 * time.Minute)
	if err := e.cloud.Terminate(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	got := e.instance(in.ID)
	want := []money.PriceChange{{At: t0.Add(25 * time.Minute), Price: p2}, {At: t0.Add(45 * time.Minute), Price: p3}}
	if len(got.PriceChanges) != len(want) {
		t.Fatalf("price changes %v, want %v", got.PriceChanges, want)
	}
	for i := range want {
		if !got.PriceChanges[i].At.Equal(want[i].At) || got.PriceChanges[i].Price != want[i].Price {
			t.Errorf("change %d = %v, want %v", i, got.PriceChanges[i], want[i])
		}
	}
	bill := p1.ForDuration(25*time.Minute) + p2.ForDuration(20*time.Minute) + p3.ForDuration(15*time.Minute)
	if b := got.Bill(e.clk.Now()); b != bill {
		t.Errorf("bill %s, want %s (flat at the launch price it would be %s)", b.Decimal(), bill.Decimal(), p1.Decimal())
	}
	if err := e.cloud.SetPrice(awsSmallSp, 0); err != nil {
		t.Fatal(err)
	}

	// The walk: every step the instance lived through whose price differs
	// from the last is a change, at the step's start, recorded even when
	// the cloud is not called for several steps.
	walk := e.launch(awsSmallSp, "walk", 1)[0]
	o := e.cloud.offers[awsSmallSp]
	e.clk.Advance(7*defaultPriceInterval + time.Minute)
	mid := e.instance(walk.ID)
	e.cloud = e.start() // a restart: the changes so far are worked out again
	e.clk.Advance(3 * defaultPriceInterval)
	if err := e.cloud.Terminate(context.Background(), walk.ID); err != nil {
		t.Fatal(err)
	}
	ended := e.instance(walk.ID)
	var expect []money.PriceChange
	last := walk.Price
	for s := stepAt(walk.LaunchedAt, defaultPriceInterval) + 1; stepStart(s, defaultPriceInterval).Before(ended.EndedAt); s++ {
		if p := spotPrice(o.walk, o.centre, o.static.OnDemandPrice, s); p != last {
			expect = append(expect, money.PriceChange{At: stepStart(s, defaultPriceInterval), Price: p})
			last = p
		}
	}
	if len(expect) < 5 {
		t.Fatalf("the walk changed the price %d times in 10 steps; the test needs more", len(expect))
	}
	if len(ended.PriceChanges) != len(expect) {
		t.Fatalf("%d price changes recorded, want %d: %v", len(ended.PriceChanges), len(expect), ended.PriceChanges)
	}
	for i := range expect {
		if !ended.PriceChanges[i].At.Equal(expect[i].At) || ended.PriceChanges[i].Price != expect[i].Price {
			t.Errorf("change %d = %v, want %v", i, ended.PriceChanges[i], expect[i])
		}
	}
	if len(mid.PriceChanges) == 0 || len(mid.PriceChanges) >= len(expect) {
		t.Errorf("a listing mid-run shows %d changes; want those so far (some, fewer than %d)", len(mid.PriceChanges), len(expect))
	}
	if b, flat := ended.Bill(e.clk.Now()), walk.Price.ForDuration(ended.EndedAt.Sub(walk.LaunchedAt)); b == flat {
		t.Errorf("bill %s equals the flat launch-price bill", b.Decimal())
	}
	if ended.Purchase != providers.Spot {
		t.Fatalf("purchase %s", ended.Purchase)
	}
}
