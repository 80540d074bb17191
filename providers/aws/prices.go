package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/money"
)

// Price sources PriceSource reports per region.
const (
	SourceLive    = "live"
	SourceCatalog = "catalog"
)

// zoneType keys a spot price.
type zoneType struct{ zone, instanceType string }

// onDemandPrices and spotPrices are what one refresh of a region read.
type onDemandPrices map[string]money.Micros // instance type -> price

type spotPrices map[zoneType]money.Micros

// pricingConcurrency bounds parallel GetProducts calls (one per type).
const pricingConcurrency = 4

// fetchOnDemand reads the on-demand Linux price of every type in a region
// from the Price List API. Types the API has no product for are left out;
// an API error fails the whole refresh (the caller falls back to the
// catalog rather than hammering an API that is down).
func (p *Provider) fetchOnDemand(ctx context.Context, region string, types []string) (onDemandPrices, error) {
	out := onDemandPrices{}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, pricingConcurrency)
	for _, t := range types {
		sem <- struct{}{}
		if ctx.Err() != nil { // a call failed: stop asking an API that is down
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			price, ok, err := p.onDemandPrice(ctx, region, t)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && firstErr == nil:
				firstErr = err
				cancel()
			case ok:
				out[t] = price
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = parent.Err()
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

func (p *Provider) onDemandPrice(ctx context.Context, region, instanceType string) (money.Micros, bool, error) {
	in := &pricing.GetProductsInput{
		ServiceCode:   awssdk.String("AmazonEC2"),
		FormatVersion: awssdk.String("aws_v1"),
		Filters: []pricingtypes.Filter{
			termMatch("instanceType", instanceType),
			termMatch("regionCode", region),
			termMatch("operatingSystem", "Linux"),
			termMatch("tenancy", "Shared"),
			termMatch("preInstalledSw", "NA"),
			termMatch("capacitystatus", "Used"),
		},
	}
	var docs []string
	pg := pricing.NewGetProductsPaginator(p.pricing, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("pricing %s in %s: %w", instanceType, region, err)
		}
		docs = append(docs, page.PriceList...)
	}
	price, ok, err := parseOnDemand(docs, instanceType)
	if err != nil {
		return 0, false, fmt.Errorf("pricing %s in %s: %w", instanceType, region, err)
	}
	return price, ok, nil
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: awssdk.String(field), Value: awssdk.String(value)}
}

// priceListDoc is the part of a Price List product document read here.
type priceListDoc struct {
	Product struct {
		SKU        string            `json:"sku"`
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// parseOnDemand picks the hourly USD on-demand price of instanceType from
// Price List documents. Products of other operations (Linux with SQL
// Server, ...) and zero rows are skipped; if several remain, the lowest
// wins so the answer does not depend on the order of the documents.
func parseOnDemand(docs []string, instanceType string) (money.Micros, bool, error) {
	var found []money.Micros
	for i, raw := range docs {
		var d priceListDoc
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			return 0, false, fmt.Errorf("price list document %d: %w", i, err)
		}
		attr := d.Product.Attributes
		if attr["instanceType"] != instanceType {
			continue
		}
		if op := attr["operation"]; op != "" && op != "RunInstances" {
			continue
		}
		for _, term := range d.Terms.OnDemand {
			for _, dim := range term.PriceDimensions {
				usd, ok := dim.PricePerUnit["USD"]
				if !ok || !strings.HasPrefix(dim.Unit, "Hr") {
					continue
				}
				m, err := parseUSD(usd)
				if err != nil {
					return 0, false, fmt.Errorf("product %s: %w", d.Product.SKU, err)
				}
				if m > 0 {
					found = append(found, m)
				}
			}
		}
	}
	if len(found) == 0 {
		return 0, false, nil
	}
	return slices.Min(found), true, nil
}

// parseUSD reads a Price List amount ("3.0600000000") exactly. Digits past
// the sixth decimal are rounded half up, in integers: prices are never a
// float here.
func parseUSD(s string) (money.Micros, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	frac = strings.TrimRight(frac, "0")
	roundUp := false
	if len(frac) > 6 {
		for _, c := range frac[6:] {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("money: %q is not an amount", s)
			}
		}
		roundUp = frac[6] >= '5'
		frac = frac[:6]
	}
	text := whole
	if frac != "" {
		text += "." + frac
	}
	m, err := money.Parse(text)
	if err != nil {
		return 0, err
	}
	if roundUp {
		m++
	}
	return m, nil
}

// fetchSpot reads the current Linux spot price of the types in every zone
// of a region: the newest entry per zone and type over every page of the
// history since now (the API includes the price in effect at the start),
// and since when each has been in force.
func (p *Provider) fetchSpot(ctx context.Context, region string, types []string, now time.Time) (spotPrices, map[zoneType]time.Time, error) {
	if len(types) == 0 {
		return spotPrices{}, nil, nil
	}
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           awssdk.Time(now),
		MaxResults:          awssdk.Int32(1000),
	}
	for _, t := range types {
		in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(t))
	}
	type entry struct {
		price money.Micros
		at    time.Time
	}
	latest := map[zoneType]entry{}
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2[region], in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("spot price history in %s: %w", region, err)
		}
		for _, sp := range page.SpotPriceHistory {
			if sp.ProductDescription != "" && sp.ProductDescription != ec2types.RIProductDescription("Linux/UNIX") {
				continue
			}
			k := zoneType{awssdk.ToString(sp.AvailabilityZone), string(sp.InstanceType)}
			price, err := parseUSD(awssdk.ToString(sp.SpotPrice))
			if err != nil {
				p.log.Warn("skipping an unreadable spot price", zap.String("region", region), zap.String("zone", k.zone),
					zap.String("instance_type", k.instanceType), zap.Error(err))
				continue
			}
			at := awssdk.ToTime(sp.Timestamp)
			if e, ok := latest[k]; !ok || at.After(e.at) {
				latest[k] = entry{price, at}
			}
		}
	}
	out, since := spotPrices{}, make(map[zoneType]time.Time, len(latest))
	for k, e := range latest {
		out[k], since[k] = e.price, e.at
	}
	return out, since, nil
}

// PriceSource says, per region refreshed so far, where its prices come
// from: "live" when both the Price List API and the spot price history
// answered at the last refresh, "catalog" when the bundled catalog stood
// in for either.
func (p *Provider) PriceSource() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for name, rs := range p.regions {
		if s := rs.source(); s != "" {
			out[name] = s
		}
	}
	return out
}

// noteSource logs a region's price source when it changes; called with mu
// held after a refresh.
func (p *Provider) noteSourceLocked(region string, rs *regionState) {
	s := rs.source()
	if s == rs.logged {
		return
	}
	rs.logged = s
	fields := []zap.Field{zap.String("region", region), zap.String("source", s)}
	if rs.odErr != nil {
		fields = append(fields, zap.NamedError("on_demand_error", rs.odErr))
	}
	if rs.spotErr != nil {
		fields = append(fields, zap.NamedError("spot_error", rs.spotErr))
	}
	if s == SourceCatalog {
		p.log.Info("prices come from the bundled catalog: the AWS price APIs did not answer", fields...)
		return
	}
	p.log.Info("prices come from the AWS price APIs", fields...)
}
