package api

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// pricePoints is how many price changes of an offer the market keeps.
const pricePoints = 240

// market is the offers the price feed last published, per provider
// region, with each offer's recent prices: what the dashboard's market
// page shows. It follows the prices stream from the newest message of
// each region.
type market struct {
	mu      sync.RWMutex
	regions map[string]*events.OffersUpdated // by provider/region
	history map[string][]pricePoint          // by offer key
	updated time.Time
}

// PricePoint is an offer's price and capacity at a time.
type PricePoint struct {
	Time      time.Time    `json:"time"`
	Price     money.Micros `json:"price_per_hour"`
	Available int          `json:"available"`
}

// pricePoint is a PricePoint as the market keeps it: 2,000 offers of 240
// points each are half a million of them.
type pricePoint struct {
	at        int64 // Unix nanoseconds
	price     money.Micros
	available int32
}

func (p pricePoint) view() PricePoint {
	return PricePoint{Time: time.Unix(0, p.at).UTC(), Price: p.price, Available: int(p.available)}
}

// MarketOffer is an offer as the market page lists it.
type MarketOffer struct {
	Key string `json:"key"`
	providers.Offer
	Source string `json:"source"`
}

// Market is the offers on sale now.
type Market struct {
	Offers    []MarketOffer `json:"offers"`
	UpdatedAt time.Time     `json:"updated_at,omitzero"`
}

// PriceHistory is one offer's recent prices, oldest first.
type PriceHistory struct {
	Key    string       `json:"key"`
	Points []PricePoint `json:"points"`
}

func newMarket() *market {
	return &market{regions: map[string]*events.OffersUpdated{}, history: map[string][]pricePoint{}}
}

// offerKey names an offer across price updates.
func offerKey(o providers.Offer) string {
	return strings.Join([]string{o.Provider, o.Region, o.Zone, o.InstanceType, string(o.Purchase)}, "/")
}

func (m *market) start(ctx context.Context, bus *events.Bus) (stop func(), err error) {
	return bus.Read(ctx, events.StreamPrices, []string{"spotwise.prices.>"}, true, func(_ context.Context, msg events.Message) error {
		u, ok := msg.Payload.(*events.OffersUpdated)
		if !ok {
			return nil
		}
		m.apply(u, msg.Envelope.Time)
		return nil
	})
}

func (m *market) apply(u *events.OffersUpdated, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.regions[u.Provider+"/"+u.Region] = u
	if at.After(m.updated) {
		m.updated = at
	}
	for _, o := range u.Offers {
		k := offerKey(o)
		t := o.UpdatedAt
		if t.IsZero() {
			t = at
		}
		h := m.history[k]
		if n := len(h); n > 0 {
			last := h[n-1]
			if t.UnixNano() <= last.at || (last.price == o.Price && int(last.available) == o.Available) {
				continue // no change, or an older update
			}
		}
		if len(h) == pricePoints {
			h = slices.Delete(h, 0, 1)
		}
		m.history[k] = append(h, pricePoint{at: t.UnixNano(), price: o.Price, available: int32(min(max(o.Available, math.MinInt32), math.MaxInt32))})
	}
}

// MarketQuery filters the market.
type MarketQuery struct {
	Provider, Region, GPU, Purchase string
}

func (m *market) list(q MarketQuery) *Market {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := &Market{Offers: []MarketOffer{}, UpdatedAt: m.updated}
	for _, u := range m.regions {
		for _, o := range u.Offers {
			if q.Provider != "" && o.Provider != q.Provider || q.Region != "" && o.Region != q.Region ||
				q.GPU != "" && !strings.EqualFold(o.GPU, q.GPU) || q.Purchase != "" && string(o.Purchase) != q.Purchase {
				continue
			}
			out.Offers = append(out.Offers, MarketOffer{Key: offerKey(o), Offer: o, Source: u.Source})
		}
	}
	slices.SortFunc(out.Offers, func(a, b MarketOffer) int {
		if c := strings.Compare(a.GPU, b.GPU); c != 0 {
			return c
		}
		if a.Price != b.Price {
			return int(a.Price - b.Price)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

func (m *market) prices(key string) (PriceHistory, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.history[key]
	var points []PricePoint
	for _, p := range h {
		points = append(points, p.view())
	}
	return PriceHistory{Key: key, Points: points}, ok
}

// signedIn refuses a request without a principal: the market and alerts
// hold no team's data, but they are not for anyone on the network.
func (s *Service) signedIn(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	p, err := s.principal(r.Context())
	if err != nil {
		writeError(w, asError(err))
		return p, false
	}
	return p, true
}

// httpMarket serves GET /v1/market.
func (s *Service) httpMarket(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.signedIn(w, r); !ok {
		return
	}
	q := r.URL.Query()
	writeJSON(w, http.StatusOK, s.market.list(MarketQuery{Provider: q.Get("provider"), Region: q.Get("region"), GPU: q.Get("gpu"), Purchase: q.Get("purchase")}))
}

// httpPrices serves GET /v1/market/prices?key=...
func (s *Service) httpPrices(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.signedIn(w, r); !ok {
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		writeError(w, errBadRequest("key: name an offer (the key the market lists it with)"))
		return
	}
	h, ok := s.market.prices(key)
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no offer " + strconv.Quote(key) + " in the market"})
		return
	}
	writeJSON(w, http.StatusOK, h)
}
