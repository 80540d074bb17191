package azurefake

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// pricePageSize is how many rows one page of the Retail Prices API holds
// (100 at Azure): small, so a client's paging is exercised.
const pricePageSize = 4

// PriceKind is which meter a retail price row is.
type PriceKind string

// Price kinds.
const (
	Consumption   PriceKind = "consumption"    // pay as you go, per hour
	Spot          PriceKind = "spot"           // the "<size> Spot" meter, per hour
	LowPriority   PriceKind = "low-priority"   // Batch's legacy "<size> Low Priority" meter, per hour
	Reservation1Y PriceKind = "reservation-1y" // a 1-year reservation, the whole term's price
	Reservation3Y PriceKind = "reservation-3y" // a 3-year reservation, the whole term's price
)

// PriceRow is one row of the Retail Prices API, as it writes it. Prices are
// the JSON numbers' literal text.
type PriceRow struct {
	CurrencyCode         string      `json:"currencyCode"`
	TierMinimumUnits     float64     `json:"tierMinimumUnits"`
	ReservationTerm      string      `json:"reservationTerm,omitempty"`
	RetailPrice          json.Number `json:"retailPrice"`
	UnitPrice            json.Number `json:"unitPrice"`
	ArmRegionName        string      `json:"armRegionName"`
	Location             string      `json:"location"`
	EffectiveStartDate   string      `json:"effectiveStartDate"`
	MeterID              string      `json:"meterId"`
	MeterName            string      `json:"meterName"`
	ProductID            string      `json:"productId"`
	SkuID                string      `json:"skuId"`
	ProductName          string      `json:"productName"`
	SkuName              string      `json:"skuName"`
	ServiceName          string      `json:"serviceName"`
	ServiceID            string      `json:"serviceId"`
	ServiceFamily        string      `json:"serviceFamily"`
	UnitOfMeasure        string      `json:"unitOfMeasure"`
	Type                 string      `json:"type"`
	IsPrimaryMeterRegion bool        `json:"isPrimaryMeterRegion"`
	ArmSkuName           string      `json:"armSkuName"`
}

var (
	numberRE   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
	regionRE   = regexp.MustCompile(`armRegionName eq '([^']*)'`)
	skuRE      = regexp.MustCompile(`armSkuName eq '([^']*)'`)
	locationOf = map[string]string{"eastus": "US East", "eastus2": "US East 2", "westus2": "US West 2", "westus3": "US West 3",
		"southcentralus": "US South Central", "westeurope": "EU West", "northeurope": "EU North", "uksouth": "UK South"}
)

// NewPriceRow is the Linux row Azure publishes for a VM size's meter in a
// region: usd is the retail price as the API writes it, an hourly price
// for Consumption, Spot and LowPriority, the whole term's for the
// reservations. Tweak the row (ProductName with " Windows", Type
// "DevTestConsumption", IsPrimaryMeterRegion false, ...) and add it with
// AddPriceRow. It panics on an unknown kind or a usd that is not a number.
func NewPriceRow(region, vmSize string, kind PriceKind, usd string) PriceRow {
	if !numberRE.MatchString(usd) {
		panic(fmt.Sprintf("azurefake: price %q is not a JSON number", usd))
	}
	// Standard_NC24ads_A100_v4 -> "NC24ads A100 v4", series "NCads A100 v4".
	sku := strings.ReplaceAll(strings.TrimPrefix(vmSize, "Standard_"), "_", " ")
	first, rest, _ := strings.Cut(sku, " ")
	series := strings.TrimSpace(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, first) + " " + rest)
	r := PriceRow{
		CurrencyCode: "USD", RetailPrice: json.Number(usd), UnitPrice: json.Number(usd),
		ArmRegionName: region, Location: locationOf[region], EffectiveStartDate: "2024-08-01T00:00:00Z",
		ProductID: "DZH318Z0BQ4L", SkuID: "DZH318Z0BQ4L/00B4", ProductName: "Virtual Machines " + series + " Series",
		SkuName: sku, ServiceName: "Virtual Machines", ServiceID: "DZH313Z7MMC8", ServiceFamily: "Compute",
		UnitOfMeasure: "1 Hour", Type: "Consumption", IsPrimaryMeterRegion: true, ArmSkuName: vmSize,
	}
	if r.Location == "" {
		r.Location = region
	}
	switch kind {
	case Consumption:
	case Spot:
		r.SkuName += " Spot"
	case LowPriority:
		r.SkuName += " Low Priority"
	case Reservation1Y, Reservation3Y:
		r.Type, r.ReservationTerm = "Reservation", "1 Year"
		if kind == Reservation3Y {
			r.ReservationTerm = "3 Years"
		}
	default:
		panic(fmt.Sprintf("azurefake: unknown price kind %q", kind))
	}
	r.MeterName = r.SkuName
	sum := sha256.Sum256([]byte(strings.Join([]string{region, vmSize, r.SkuName, r.Type, r.ReservationTerm}, "|")))
	r.MeterID = fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	return r
}

// SetPrice sets one price of a VM size in a region: the row NewPriceRow
// makes replaces any row of the same meter, or is added.
func (c *Cloud) SetPrice(region, vmSize string, kind PriceKind, usd string) {
	r := NewPriceRow(region, vmSize, kind, usd)
	ps := c.prices
	ps.mu.Lock()
	defer ps.mu.Unlock()
	key := strings.ToLower(region)
	rows := ps.rows[key]
	if i := slices.IndexFunc(rows, func(o PriceRow) bool { return sameMeter(o, r) }); i >= 0 {
		rows[i] = r
		return
	}
	ps.rows[key] = append(rows, r)
}

func sameMeter(a, b PriceRow) bool {
	return strings.EqualFold(a.ArmSkuName, b.ArmSkuName) && a.SkuName == b.SkuName && a.ProductName == b.ProductName &&
		a.Type == b.Type && a.ReservationTerm == b.ReservationTerm && a.IsPrimaryMeterRegion == b.IsPrimaryMeterRegion &&
		a.CurrencyCode == b.CurrencyCode
}

// AddPriceRow adds a row as given to its region's feed (r.ArmRegionName).
func (c *Cloud) AddPriceRow(r PriceRow) {
	ps := c.prices
	ps.mu.Lock()
	defer ps.mu.Unlock()
	key := strings.ToLower(r.ArmRegionName)
	ps.rows[key] = append(ps.rows[key], r)
}

// ClearPrices empties a region's feed.
func (c *Cloud) ClearPrices(region string) {
	ps := c.prices
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.rows, strings.ToLower(region))
}

// FailPrices answers every request for a region's prices with an HTTP
// status (0 serves it again).
func (c *Cloud) FailPrices(region string, status int) {
	ps := c.prices
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.fail[strings.ToLower(region)] = status
}

// ThrottlePrices answers the next n requests with 429 Too Many Requests
// and Retry-After: 0.
func (c *Cloud) ThrottlePrices(n int) {
	ps := c.prices
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.throttle = n
}

// PriceRequests returns the $filter of every first-page request, in
// order.
func (c *Cloud) PriceRequests() []string {
	ps := c.prices
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.requests)
}

// RetailPricesURL is the Retail Prices API's URL, for the provider's
// endpoints.retail_prices.
func (c *Cloud) RetailPricesURL() string { return c.prices.srv.URL + "/api/retail/prices" }

// priceServer is the Azure Retail Prices API on a loopback port.
type priceServer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	rows     map[string][]PriceRow // region (lower case) -> rows
	fail     map[string]int
	throttle int
	requests []string
}

func newPriceServer() *priceServer {
	ps := &priceServer{rows: map[string][]PriceRow{}, fail: map[string]int{}}
	ps.srv = httptest.NewServer(http.HandlerFunc(ps.serve))
	return ps
}

// serve answers a query as the API does: the rows its $filter selects
// (armRegionName, and armSkuName if named), pricePageSize at a time, with
// a NextPageLink carrying $skip.
func (ps *priceServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := q.Get("$filter")
	switch {
	case r.URL.Path != "/api/retail/prices" || r.Method != http.MethodGet:
		http.NotFound(w, r)
		return
	case q.Has("currencyCode") && q.Get("currencyCode") != "'USD'":
		writePriceError(w, http.StatusBadRequest, "azurefake serves USD prices only")
		return
	case !strings.Contains(filter, "serviceName eq 'Virtual Machines'"):
		writePriceError(w, http.StatusBadRequest, "azurefake serves $filter=serviceName eq 'Virtual Machines' ... only")
		return
	}
	region := ""
	if m := regionRE.FindStringSubmatch(filter); m != nil {
		region = strings.ToLower(m[1])
	}
	var skus []string
	for _, m := range skuRE.FindAllStringSubmatch(filter, -1) {
		skus = append(skus, strings.ToLower(m[1]))
	}
	skip, _ := strconv.Atoi(q.Get("$skip"))
	ps.mu.Lock()
	if skip == 0 {
		ps.requests = append(ps.requests, filter)
	}
	status, throttled := ps.fail[region], ps.throttle > 0
	if throttled {
		ps.throttle--
	}
	var rows []PriceRow
	for _, row := range ps.rows[region] {
		if len(skus) == 0 || slices.Contains(skus, strings.ToLower(row.ArmSkuName)) {
			rows = append(rows, row)
		}
	}
	ps.mu.Unlock()
	switch {
	case throttled:
		w.Header().Set("Retry-After", "0")
		writePriceError(w, http.StatusTooManyRequests, "Too many requests. Please retry after some time.")
		return
	case status != 0:
		writePriceError(w, status, http.StatusText(status))
		return
	}
	start := min(max(skip, 0), len(rows))
	end := min(start+pricePageSize, len(rows))
	page := struct {
		BillingCurrency    string
		CustomerEntityID   string `json:"CustomerEntityId"`
		CustomerEntityType string
		Items              []PriceRow
		NextPageLink       *string
		Count              int
	}{BillingCurrency: "USD", CustomerEntityID: "Default", CustomerEntityType: "Retail", Items: rows[start:end], Count: end - start}
	if page.Items == nil {
		page.Items = []PriceRow{}
	}
	if end < len(rows) {
		q.Set("$skip", strconv.Itoa(end))
		page.NextPageLink = ptr("http://" + r.Host + r.URL.Path + "?" + q.Encode())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(page)
}

func writePriceError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"Error": map[string]string{"Code": strconv.Itoa(status), "Message": msg}})
}
