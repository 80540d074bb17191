package api

import (
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// The market keeps the newest offers of each region and, per offer, the
// changes of its price or capacity (not the repeats, not an older update
// arriving late), at most pricePoints of them.
func TestMarketKeepsNewestOffersAndPriceChanges(t *testing.T) {
	m := newMarket()
	at := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	offer := func(price int64, avail int, when time.Time) providers.Offer {
		return providers.Offer{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p4d.24xlarge", GPU: "A100", GPUs: 8,
			Purchase: providers.Spot, Price: money.Micros(price), Available: avail, UpdatedAt: when}
	}
	update := func(os ...providers.Offer) *events.OffersUpdated {
		return &events.OffersUpdated{Provider: "aws", Region: "us-east-1", Offers: os, Source: "sim"}
	}
	m.apply(update(offer(5_000_000, 3, at)), at)
	m.apply(update(offer(5_000_000, 3, at.Add(time.Minute))), at.Add(time.Minute)) // no change
	m.apply(update(offer(4_800_000, 3, at.Add(2*time.Minute))), at.Add(2*time.Minute))
	m.apply(update(offer(9_999_999, 1, at.Add(-time.Minute))), at.Add(-time.Minute)) // late
	key := offerKey(offer(0, 0, at))
	h, ok := m.prices(key)
	if !ok || len(h.Points) != 2 || h.Points[0].Price != 5_000_000 || h.Points[1].Price != 4_800_000 {
		t.Fatalf("price history %+v", h.Points)
	}
	for i := range pricePoints + 10 {
		t := at.Add(time.Duration(10+i) * time.Minute)
		m.apply(update(offer(int64(1_000_000+i), 2, t)), t)
	}
	if h, _ := m.prices(key); len(h.Points) != pricePoints || h.Points[len(h.Points)-1].Price != money.Micros(int64(1_000_000+pricePoints+9)) {
		t.Errorf("after many changes: %d points, last %+v", len(h.Points), h.Points[len(h.Points)-1])
	}
	for _, q := range []struct {
		q    MarketQuery
		want int
	}{{MarketQuery{}, 1}, {MarketQuery{GPU: "a100"}, 1}, {MarketQuery{Purchase: "on-demand"}, 0}, {MarketQuery{Region: "eu-west-1"}, 0}} {
		if got := len(m.list(q.q).Offers); got != q.want {
			t.Errorf("list %+v: %d offers, want %d", q.q, got, q.want)
		}
	}
}

// The listing's provider filter and search (name, or ID prefix).
func TestListFiltersByProviderAndSearch(t *testing.T) {
	ix := newIndex()
	ids := []string{job.NewID(base), job.NewID(base.Add(time.Second)), job.NewID(base.Add(2 * time.Second))}
	names := []string{"resnet-sweep", "bert-tune", "resnet-eval"}
	provs := []string{"aws", "azure", ""}
	for i, id := range ids {
		r := rec(id, base.Add(time.Duration(i)*time.Second), job.Running)
		r.Spec.Name = names[i]
		if provs[i] != "" {
			r.Status.Current = &job.Attempt{N: 1, Placement: job.Placement{Provider: provs[i]}}
		}
		ix.apply(events.JobChange{ID: id, Revision: uint64(i + 1), Record: r})
	}
	for _, c := range []struct {
		q    Query
		want []string
	}{
		{Query{Provider: "aws"}, []string{ids[0]}},
		{Query{Search: "resnet"}, []string{ids[2], ids[0]}},
		{Query{Search: ids[1][:20]}, []string{ids[1]}},
		{Query{Search: "resnet", Provider: "azure"}, nil},
	} {
		if got := listed(t, ix, c.q); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
	}
}
