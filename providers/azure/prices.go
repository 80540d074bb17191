package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// maxPricePages bounds one region's read of the Retail Prices API (100
// items a page); a feed that pages on and on is broken, not big.
const maxPricePages = 200

// retailItem is one row of the Azure Retail Prices API. Prices are kept as
// the JSON number's text and parsed exactly.
type retailItem struct {
	CurrencyCode         string      `json:"currencyCode"`
	RetailPrice          json.Number `json:"retailPrice"`
	ArmRegionName        string      `json:"armRegionName"`
	ArmSkuName           string      `json:"armSkuName"`
	SkuName              string      `json:"skuName"`
	ProductName          string      `json:"productName"`
	ServiceName          string      `json:"serviceName"`
	UnitOfMeasure        string      `json:"unitOfMeasure"`
	Type                 string      `json:"type"`
	ReservationTerm      string      `json:"reservationTerm"`
	IsPrimaryMeterRegion bool        `json:"isPrimaryMeterRegion"`
	EffectiveStartDate   string      `json:"effectiveStartDate"`
}

type retailPage struct {
	Items        []retailItem `json:"Items"`
	NextPageLink string       `json:"NextPageLink"`
}

// sizePrices is what one VM size costs in one region, per instance-hour.
type sizePrices struct {
	OnDemand money.Micros
	Spot     money.Micros // zero: no Spot meter, Spot is not sold
	Reserved map[providers.Term]money.Micros
}

// regionPrices maps a VM size (armSkuName) to its prices.
type regionPrices map[string]*sizePrices

// retailPrices reads the Retail Prices API through an azcore pipeline, so
// throttling (429 with Retry-After) and server errors are retried with the
// same bounded policy as ARM calls.
type retailPrices struct {
	base string
	pl   runtime.Pipeline
}

// region reads every Linux pay-as-you-go, Spot and reservation price of the
// given VM sizes in region.
func (c *retailPrices) region(ctx context.Context, region string, sizes []string) (regionPrices, error) {
	base, err := url.Parse(c.base)
	if err != nil {
		return nil, fmt.Errorf("retail prices endpoint: %w", err)
	}
	clauses := make([]string, len(sizes))
	for i, s := range sizes {
		clauses[i] = "armSkuName eq '" + s + "'"
	}
	filter := fmt.Sprintf("serviceName eq 'Virtual Machines' and armRegionName eq '%s' and (%s)", region, strings.Join(clauses, " or "))
	// Written as the API documents it ($filter, not %24filter), spaces
	// as %20.
	u := *base
	u.RawQuery = "currencyCode='USD'&$filter=" + strings.ReplaceAll(url.QueryEscape(filter), "+", "%20")
	next := u.String()

	// Sizes are matched without regard to case (the feed has written
	// some in lower case) and reported under the configured name.
	wanted := map[string]string{}
	for _, s := range sizes {
		wanted[strings.ToLower(s)] = s
	}
	pick := map[priceKey]candidate{}
	for page := 0; next != ""; page++ {
		if page == maxPricePages {
			return nil, fmt.Errorf("retail prices for %s: more than %d pages", region, maxPricePages)
		}
		p, err := c.page(ctx, next)
		if err != nil {
			return nil, fmt.Errorf("retail prices for %s: %w", region, err)
		}
		for _, it := range p.Items {
			size, ok := wanted[strings.ToLower(it.ArmSkuName)]
			if !ok || !strings.EqualFold(it.ArmRegionName, region) {
				continue
			}
			if k, cand, ok := classify(it); ok {
				k.size = size
				if old, seen := pick[k]; !seen || cand.better(old) {
					pick[k] = cand
				}
			}
		}
		next = ""
		if p.NextPageLink != "" {
			nu, err := url.Parse(p.NextPageLink)
			if err != nil || nu.Hostname() != base.Hostname() {
				return nil, fmt.Errorf("retail prices for %s: next page link %q is not on %s", region, p.NextPageLink, base.Hostname())
			}
			next = p.NextPageLink
		}
	}
	out := regionPrices{}
	for k, c := range pick {
		sp := out[k.size]
		if sp == nil {
			sp = &sizePrices{}
			out[k.size] = sp
		}
		switch {
		case k.term != "":
			if sp.Reserved == nil {
				sp.Reserved = map[providers.Term]money.Micros{}
			}
			sp.Reserved[k.term] = c.price
		case k.spot:
			sp.Spot = c.price
		default:
			sp.OnDemand = c.price
		}
	}
	return out, nil
}

func (c *retailPrices) page(ctx context.Context, u string) (*retailPage, error) {
	req, err := runtime.NewRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("Accept", "application/json")
	resp, err := c.pl.Do(req)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, wrap("reading retail prices", runtime.NewResponseError(resp))
	}
	defer resp.Body.Close()
	var p retailPage
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decoding retail prices: %w", err)
	}
	return &p, nil
}

// priceKey is one price of a size: on-demand, spot, or a reservation term.
type priceKey struct {
	size string
	spot bool
	term providers.Term
}

// candidate is a row that could give a price; when the feed has several
// rows for the same price (secondary meter regions, old and new effective
// dates), the primary meter region wins, then the latest effective date,
// then the lower price.
type candidate struct {
	price   money.Micros
	primary bool
	start   string // RFC 3339, compares as text
}

func (c candidate) better(old candidate) bool {
	if c.primary != old.primary {
		return c.primary
	}
	if c.start != old.start {
		return c.start > old.start
	}
	return c.price < old.price
}

// classify reads one row. Skipped: Windows (and other licensed OS)
// products, Low Priority meters (Batch's legacy priority; a Spot VM is
// billed on the Spot meter), dev/test and non-hourly consumption meters,
// prices not in US dollars, and rows whose price does not parse.
func classify(it retailItem) (priceKey, candidate, bool) {
	if it.CurrencyCode != "" && it.CurrencyCode != "USD" {
		return priceKey{}, candidate{}, false
	}
	if strings.Contains(it.ProductName, "Windows") || strings.HasSuffix(it.SkuName, " Low Priority") {
		return priceKey{}, candidate{}, false
	}
	var k priceKey
	hours := int64(1)
	switch it.Type {
	case "Consumption":
		if it.UnitOfMeasure != "1 Hour" {
			return priceKey{}, candidate{}, false
		}
		k.spot = strings.HasSuffix(it.SkuName, " Spot")
	case "Reservation":
		// The API labels reservation rows "1 Hour" but prices them for
		// the whole term, paid up front.
		term, err := providers.ParseTerm(it.ReservationTerm)
		if err != nil {
			return priceKey{}, candidate{}, false
		}
		k.term, hours = term, term.Hours()
	default:
		return priceKey{}, candidate{}, false
	}
	p, err := parseUSD(it.RetailPrice.String(), hours)
	if err != nil || p <= 0 {
		return priceKey{}, candidate{}, false
	}
	return k, candidate{price: p, primary: it.IsPrimaryMeterRegion, start: it.EffectiveStartDate}, true
}

// parseUSD reads a decimal dollar amount as the API writes it (0.062699,
// 150263, 5.6E-05) and divides it by hours, exactly, rounding once, half
// away from zero, to a micro-dollar. No float is involved.
func parseUSD(s string, hours int64) (money.Micros, error) {
	if hours <= 0 {
		return 0, errors.New("parseUSD: hours must be positive")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("price %q is not a decimal number", s)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("price %q is negative", s)
	}
	r.Mul(r, big.NewRat(int64(money.Dollar), hours))
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	// Round half up (the value is not negative): 2*rem >= denominator.
	if rem.Lsh(rem, 1).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("price %q is too large", s)
	}
	return money.Micros(q.Int64()), nil
}
