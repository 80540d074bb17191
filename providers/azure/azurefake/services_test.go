package azurefake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestScheduledEventsProtocol(t *testing.T) {
	s := StartScheduledEvents()
	defer s.Close()
	get := func(path string, header bool) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if header {
			req.Header.Set("Metadata", "true")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const events = "/metadata/scheduledevents?api-version=2020-07-01"
	if code, _ := get(events, false); code != http.StatusBadRequest {
		t.Fatalf("without Metadata: %d", code)
	}
	if code, _ := get("/metadata/scheduledevents?api-version=1999-01-01", true); code != http.StatusBadRequest {
		t.Fatalf("unknown api-version: %d", code)
	}
	if code, body := get(events, true); code != http.StatusOK || strings.TrimSpace(body) != `{"DocumentIncarnation":0,"Events":[]}` {
		t.Fatalf("empty document: %d %s", code, body)
	}
	notBefore := time.Date(2026, 3, 2, 9, 0, 30, 0, time.UTC)
	id := s.Preempt("vm-1", notBefore)
	var doc struct {
		DocumentIncarnation int
		Events              []scheduledEvent
	}
	_, body := get(events, true)
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	e := doc.Events[0]
	if doc.DocumentIncarnation != 1 || e.EventID != id || e.EventType != "Preempt" || e.EventStatus != "Scheduled" ||
		e.Resources[0] != "vm-1" || e.NotBefore != "Mon, 02 Mar 2026 09:00:30 GMT" || e.ResourceType != "VirtualMachine" {
		t.Fatalf("document %s", body)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+events, strings.NewReader(`{"StartRequests":[{"EventId":"`+id+`"}]}`))
	req.Header.Set("Metadata", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approval: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, body = get(events, true); !strings.Contains(body, `"EventStatus":"Started"`) || !strings.Contains(body, `"DocumentIncarnation":2`) {
		t.Fatalf("after approval: %s", body)
	}
	s.Complete(id)
	if _, body = get(events, true); strings.TrimSpace(body) != `{"DocumentIncarnation":3,"Events":[]}` {
		t.Fatalf("after completion: %s", body)
	}
	if a := s.Acked(); len(a) != 1 || a[0] != id || s.Polls() != 4 || s.BadRequests() != 2 {
		t.Fatalf("acked %v polls %d bad %d", a, s.Polls(), s.BadRequests())
	}
}

func TestRetailPrices(t *testing.T) {
	c := New()
	defer c.Close()
	c.SetPrice("eastus", "Standard_NC24ads_A100_v4", Consumption, "3.673")
	c.SetPrice("eastus", "Standard_NC24ads_A100_v4", Spot, "0.4444326")
	c.SetPrice("eastus", "Standard_NC24ads_A100_v4", Reservation3Y, "50000")
	c.SetPrice("eastus", "Standard_ND96asr_v4", Consumption, "27.197")
	c.SetPrice("eastus", "Standard_NC24ads_A100_v4", Consumption, "3.5") // replaces
	row := NewPriceRow("eastus", "Standard_NC24ads_A100_v4", LowPriority, "0.7")
	if row.SkuName != "NC24ads A100 v4 Low Priority" || row.ProductName != "Virtual Machines NCads A100 v4 Series" || row.Location != "US East" {
		t.Fatalf("row %+v", row)
	}
	c.AddPriceRow(row)
	read := func(u string) (items []PriceRow, next string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page struct {
			Items        []PriceRow
			NextPageLink string
		}
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		return page.Items, page.NextPageLink
	}
	filter := "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and (armSkuName eq 'Standard_NC24ads_A100_v4')"
	items, next := read(c.RetailPricesURL() + "?currencyCode='USD'&$filter=" + url.QueryEscape(filter))
	if len(items) != 4 || next != "" || items[0].RetailPrice != "3.5" || items[2].ReservationTerm != "3 Years" || items[2].Type != "Reservation" {
		t.Fatalf("items %+v next %q", items, next)
	}
	filter = "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus'"
	items, next = read(c.RetailPricesURL() + "?$filter=" + url.QueryEscape(filter))
	if len(items) != pricePageSize || next == "" {
		t.Fatalf("first page: %d items, next %q", len(items), next)
	}
	if items, next = read(next); len(items) != 1 || next != "" {
		t.Fatalf("second page: %d items, next %q", len(items), next)
	}
	if n := len(c.PriceRequests()); n != 2 {
		t.Fatalf("%d first-page requests", n)
	}
	c.FailPrices("eastus", http.StatusServiceUnavailable)
	if resp, err := http.Get(c.RetailPricesURL() + "?$filter=" + url.QueryEscape(filter)); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("failed region: %v %v", resp, err)
	}
}
