package awsfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// priceList is the Price List's state; its own lock, taken after the
// Cloud's if both are.
type priceList struct {
	mu      sync.Mutex
	docs    map[string][]priceDoc // region/instance type -> products
	down    bool                  // answer 500 InternalErrorException
	calls   int
	filters []map[string]string
}

// priceDoc is one product document; operation is set for the ones
// SetOnDemandPrice wrote, so it can replace them.
type priceDoc struct{ operation, doc string }

func (p *priceList) init() { p.docs = map[string][]priceDoc{} }

// SetOnDemandPrice sets the Linux on-demand hourly price of a type in a
// region (usd a decimal string, "1.006"): the Price List answers with a
// product document of the shape GetProducts returns, replacing the one a
// previous call set.
func (c *Cloud) SetOnDemandPrice(region, instanceType, usd string) {
	p := &c.pricing
	p.mu.Lock()
	defer p.mu.Unlock()
	key := region + "/" + instanceType
	p.docs[key] = slices.DeleteFunc(p.docs[key], func(d priceDoc) bool { return d.operation == "RunInstances" })
	p.docs[key] = append(p.docs[key], priceDoc{"RunInstances", PriceDocument(instanceType, region, "RunInstances", usd)})
}

// AddPriceDocument adds a raw product document to the answers for a type
// in a region (another operation's product, a garbled one).
func (c *Cloud) AddPriceDocument(region, instanceType, doc string) {
	p := &c.pricing
	p.mu.Lock()
	defer p.mu.Unlock()
	p.docs[region+"/"+instanceType] = append(p.docs[region+"/"+instanceType], priceDoc{doc: doc})
}

// SetPricingDown makes the Price List answer 500 InternalErrorException
// (true) or answer again (false).
func (c *Cloud) SetPricingDown(down bool) {
	c.pricing.mu.Lock()
	defer c.pricing.mu.Unlock()
	c.pricing.down = down
}

// PricingCalls counts the Price List requests.
func (c *Cloud) PricingCalls() int {
	c.pricing.mu.Lock()
	defer c.pricing.mu.Unlock()
	return c.pricing.calls
}

// PricingFilters lists each GetProducts call's TERM_MATCH filters (field
// -> value), oldest first.
func (c *Cloud) PricingFilters() []map[string]string {
	c.pricing.mu.Lock()
	defer c.pricing.mu.Unlock()
	out := make([]map[string]string, len(c.pricing.filters))
	for i, f := range c.pricing.filters {
		out[i] = maps.Clone(f)
	}
	return out
}

// servePricing answers awsJson1_1: POST / with X-Amz-Target
// AWSPriceListService.GetProducts, the price list as JSON documents in
// strings, paged.
func (c *Cloud) servePricing(w http.ResponseWriter, r *http.Request) {
	p := &c.pricing
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "AWSPriceListService.GetProducts" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"UnknownOperationException","message":"unknown operation"}`)
		return
	}
	if p.down {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"__type":"InternalErrorException","Message":"An internal error occurred"}`)
		return
	}
	var req struct {
		ServiceCode string
		Filters     []struct{ Type, Field, Value string }
		NextToken   string
		MaxResults  int
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ServiceCode != "AmazonEC2" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"InvalidParameterException","Message":"bad request"}`)
		return
	}
	flt := map[string]string{}
	for _, fl := range req.Filters {
		flt[fl.Field] = fl.Value
	}
	p.filters = append(p.filters, flt)
	var docs []string
	for _, d := range p.docs[flt["regionCode"]+"/"+flt["instanceType"]] {
		docs = append(docs, d.doc)
	}
	size := c.pageSize
	if req.MaxResults > 0 {
		size = min(size, req.MaxResults)
	}
	start, _ := strconv.Atoi(req.NextToken)
	start = min(max(start, 0), len(docs))
	end := min(start+size, len(docs))
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": append([]string{}, docs[start:end]...)}
	if end < len(docs) {
		out["NextToken"] = strconv.Itoa(end)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// PriceDocument is a Price List product document in the shape GetProducts
// returns: abridged attributes, an OnDemand term with the hourly price and
// a Reserved term that must be ignored. operation "RunInstances" is plain
// Linux; others ("RunInstances:0004", Linux with SQL Web) are products a
// reader must skip.
func PriceDocument(instanceType, region, operation, usd string) string {
	sum := sha256.Sum256([]byte(instanceType + "/" + region + "/" + operation))
	sku := strings.ToUpper(hex.EncodeToString(sum[:]))[:16]
	return fmt.Sprintf(`{"product":{"productFamily":"Compute Instance","attributes":{"enhancedNetworkingSupported":"Yes",
"memory":"61 GiB","vcpu":"8","capacitystatus":"Used","locationType":"AWS Region","storage":"EBS only","instanceFamily":"GPU instance",
"operatingSystem":"Linux","regionCode":%[2]q,"physicalProcessor":"Intel Xeon E5-2686 v4 (Broadwell)","networkPerformance":"Up to 10 Gigabit",
"servicename":"Amazon Elastic Compute Cloud","gpuMemory":"16 GiB","instanceType":%[1]q,"tenancy":"Shared","usagetype":"BoxUsage:%[1]s",
"servicecode":"AmazonEC2","licenseModel":"No License required","currentGeneration":"Yes","preInstalledSw":"NA","marketoption":"OnDemand",
"operation":%[3]q,"availabilityzone":"NA","gpu":"1"},"sku":%[5]q},"serviceCode":"AmazonEC2",
"terms":{"OnDemand":{"%[5]s.JRTCKXETXF":{"priceDimensions":{"%[5]s.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","endRange":"Inf",
"description":"$%[4]s per On Demand Linux %[1]s Instance Hour","appliesTo":[],"rateCode":"%[5]s.JRTCKXETXF.6YS6EN2CT7","beginRange":"0",
"pricePerUnit":{"USD":%[4]q}}},"sku":%[5]q,"effectiveDate":"2025-06-01T00:00:00Z","offerTermCode":"JRTCKXETXF","termAttributes":{}}},
"Reserved":{"%[5]s.38NPMPTW36":{"priceDimensions":{"%[5]s.38NPMPTW36.2TG2D8R56U":{"unit":"Quantity","description":"Upfront Fee",
"pricePerUnit":{"USD":"11000"}},"%[5]s.38NPMPTW36.6YS6EN2CT7":{"unit":"Hrs","description":"Linux/UNIX (Amazon VPC), %[1]s reserved instance applied",
"pricePerUnit":{"USD":"0.0010000000"}}},"sku":%[5]q,"effectiveDate":"2025-06-01T00:00:00Z","offerTermCode":"38NPMPTW36",
"termAttributes":{"LeaseContractLength":"3yr","OfferingClass":"standard","PurchaseOption":"Partial Upfront"}}}},
"version":"20250601000000","publicationDate":"2025-06-01T00:00:00Z"}`, instanceType, region, operation, usd, sku)
}
