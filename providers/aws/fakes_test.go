package aws

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePricing is a local Price List endpoint speaking awsJson1_1: POST /
// with X-Amz-Target AWSPriceListService.GetProducts, the price list as
// JSON documents in strings, one document per page to exercise paging.
type fakePricing struct {
	srv *httptest.Server

	mu      sync.Mutex
	docs    map[string][]string // instanceType/region -> documents
	down    bool                // answer 500 InternalErrorException
	calls   int
	filters []map[string]string
}

func newFakePricing(t *testing.T) *fakePricing {
	f := &fakePricing{docs: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePricing) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *fakePricing) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakePricing) add(instanceType, region string, docs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[instanceType+"/"+region] = append(f.docs[instanceType+"/"+region], docs...)
}

func (f *fakePricing) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "AWSPriceListService.GetProducts" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"UnknownOperationException","message":"unknown operation"}`)
		return
	}
	if f.down {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"__type":"InternalErrorException","Message":"An internal error occurred"}`)
		return
	}
	var req struct {
		ServiceCode string
		Filters     []struct{ Type, Field, Value string }
		NextToken   string
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
	f.filters = append(f.filters, flt)
	docs := f.docs[flt["instanceType"]+"/"+flt["regionCode"]]
	page, _ := strconv.Atoi(req.NextToken)
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": []string{}}
	if page < len(docs) {
		out["PriceList"] = []string{docs[page]}
	}
	if page+1 < len(docs) {
		out["NextToken"] = strconv.Itoa(page + 1)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// priceDoc is a Price List product document in the shape GetProducts
// returns (abridged attributes, an OnDemand term and a Reserved one that
// must be ignored).
func priceDoc(instanceType, region, operation, usd string) string {
	sku := strings.ToUpper(hex.EncodeToString([]byte(instanceType + region + operation)))[:16]
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

// fakeSQS is a local SQS endpoint speaking AWS JSON 1.0 (X-Amz-Target
// AmazonSQS.ReceiveMessage / AmazonSQS.DeleteMessage). A receive with
// nothing queued waits briefly, like a short long poll.
type fakeSQS struct {
	srv *httptest.Server

	mu       sync.Mutex
	queue    []fakeMessage
	inflight map[string]fakeMessage // receipt handle -> message
	deleted  []string               // message IDs
	received int
	next     int
	failNext []int // HTTP statuses for the next receives
	arrived  chan struct{}
}

type fakeMessage struct {
	id, body string
	receives int
}

func newFakeSQS(t *testing.T) *fakeSQS {
	f := &fakeSQS{inflight: map[string]fakeMessage{}, arrived: make(chan struct{}, 1)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSQS) send(body string) string {
	f.mu.Lock()
	f.next++
	id := fmt.Sprintf("5fea7756-0ea4-451a-a703-%012d", f.next)
	f.queue = append(f.queue, fakeMessage{id: id, body: body})
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	return id
}

func (f *fakeSQS) deletedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

func (f *fakeSQS) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	var req struct {
		QueueUrl            string
		MaxNumberOfMessages int
		ReceiptHandle       string
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.QueueUrl == "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#InvalidAddress","message":"The address is not valid."}`)
		return
	}
	switch r.Header.Get("X-Amz-Target") {
	case "AmazonSQS.ReceiveMessage":
		f.receive(w, r, req.MaxNumberOfMessages)
	case "AmazonSQS.DeleteMessage":
		f.mu.Lock()
		m, ok := f.inflight[req.ReceiptHandle]
		delete(f.inflight, req.ReceiptHandle)
		if ok {
			f.deleted = append(f.deleted, m.id)
		}
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#ReceiptHandleIsInvalid","message":"The input receipt handle is invalid."}`)
			return
		}
		fmt.Fprint(w, `{}`)
	default:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#UnsupportedOperation","message":"unsupported"}`)
	}
}

func (f *fakeSQS) receive(w http.ResponseWriter, r *http.Request, limit int) {
	f.mu.Lock()
	f.received++
	if len(f.failNext) > 0 {
		status := f.failNext[0]
		f.failNext = f.failNext[1:]
		f.mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#ServiceUnavailable","message":"Service Unavailable"}`)
		return
	}
	empty := len(f.queue) == 0
	f.mu.Unlock()
	if empty {
		select {
		case <-f.arrived:
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	limit = min(max(limit, 1), 10)
	var msgs []map[string]any
	for len(f.queue) > 0 && len(msgs) < limit {
		m := f.queue[0]
		f.queue = f.queue[1:]
		m.receives++
		handle := fmt.Sprintf("AQEB%s-%d", m.id, m.receives)
		f.inflight[handle] = m
		sum := md5.Sum([]byte(m.body))
		msgs = append(msgs, map[string]any{"MessageId": m.id, "ReceiptHandle": handle, "MD5OfBody": hex.EncodeToString(sum[:]),
			"Body": m.body, "Attributes": map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)}})
	}
	out := map[string]any{}
	if len(msgs) > 0 {
		out["Messages"] = msgs
	}
	_ = json.NewEncoder(w).Encode(out)
}

// fakeIMDS is a local instance metadata service (IMDSv2): PUT
// /latest/api/token issues a token for the TTL asked, GETs under
// /latest/meta-data/ need a valid token (401 otherwise) and answer 404
// where there is nothing.
type fakeIMDS struct {
	srv *httptest.Server

	mu      sync.Mutex
	tokens  map[string]bool
	puts    int
	ttls    []string
	gets    int
	paths   map[string]string // meta-data path -> body
	refused int               // GETs refused for a bad token
}

func newFakeIMDS(t *testing.T) *fakeIMDS {
	f := &fakeIMDS{tokens: map[string]bool{}, paths: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIMDS) set(path, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if body == "" {
		delete(f.paths, path)
		return
	}
	f.paths[path] = body
}

// rotate invalidates every token issued so far.
func (f *fakeIMDS) rotate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = map[string]bool{}
}

func (f *fakeIMDS) counts() (puts, gets, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.puts, f.gets, f.refused
}

func (f *fakeIMDS) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/latest/api/token" {
		ttl := r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds")
		if r.Method != http.MethodPut || ttl == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.puts++
		f.ttls = append(f.ttls, ttl)
		tok := fmt.Sprintf("AQAEAFake-token-%d==", f.puts)
		f.tokens[tok] = true
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", ttl)
		fmt.Fprint(w, tok)
		return
	}
	if !f.tokens[r.Header.Get("X-Aws-Ec2-Metadata-Token")] {
		f.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.gets++
	body, ok := f.paths[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
	if !ok {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<?xml version="1.0" encoding="iso-8859-1"?><title>404 - Not Found</title>`)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, body)
}

// redeliver puts every received, undeleted message back on the queue, as
// SQS does when their visibility timeout passes.
func (f *fakeSQS) redeliver() {
	f.mu.Lock()
	for h, m := range f.inflight {
		delete(f.inflight, h)
		f.queue = append(f.queue, m)
	}
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
}

func (f *fakeSQS) inflightCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inflight)
}
