package ledger

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

var (
	moneyFormat    = regexp.MustCompile(`^-?[0-9]+\.[0-9]{6}$`)
	decimalFormat  = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	integerFormat  = regexp.MustCompile(`^-?[0-9]+$`)
	dateTimeFormat = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
)

// columnRule says what a column's value must look like: never null
// (required), a format, or one of the allowed values.
type columnRule struct {
	required bool
	format   *regexp.Regexp
	allowed  []string
	json     bool
}

// focusRules are the FOCUS constraints on each column the export writes
// (and on spotwise's own). A column without a rule fails the test.
var focusRules = map[string]columnRule{
	"AvailabilityZone":           {},
	"BilledCost":                 {required: true, format: moneyFormat},
	"BillingCurrency":            {required: true, allowed: []string{"USD"}},
	"BillingPeriodStart":         {required: true, format: dateTimeFormat},
	"BillingPeriodEnd":           {required: true, format: dateTimeFormat},
	"ChargeCategory":             {required: true, allowed: []string{"Usage", "Purchase", "Tax", "Credit", "Adjustment"}},
	"ChargeClass":                {allowed: []string{"Correction"}},
	"ChargeDescription":          {required: true},
	"ChargeFrequency":            {required: true, allowed: []string{"One-Time", "Recurring", "Usage-Based"}},
	"ChargePeriodStart":          {required: true, format: dateTimeFormat},
	"ChargePeriodEnd":            {required: true, format: dateTimeFormat},
	"CommitmentDiscountCategory": {allowed: []string{"Spend", "Usage"}},
	"CommitmentDiscountId":       {},
	"CommitmentDiscountName":     {},
	"CommitmentDiscountStatus":   {allowed: []string{"Used", "Unused"}},
	"CommitmentDiscountType":     {},
	"ConsumedQuantity":           {format: decimalFormat},
	"ConsumedUnit":               {},
	"ContractedCost":             {required: true, format: moneyFormat},
	"EffectiveCost":              {required: true, format: moneyFormat},
	"InvoiceIssuerName":          {required: true},
	"ListCost":                   {required: true, format: moneyFormat},
	"PricingCategory":            {required: true, allowed: []string{"Standard", "Dynamic", "Committed", "Other"}},
	"PricingQuantity":            {required: true, format: decimalFormat},
	"PricingUnit":                {required: true},
	"ProviderName":               {required: true},
	"PublisherName":              {required: true},
	"RegionId":                   {required: true},
	"RegionName":                 {required: true},
	"ResourceId":                 {},
	"ResourceName":               {},
	"ResourceType":               {},
	"ServiceCategory":            {required: true, allowed: []string{"Compute", "Networking", "Storage"}},
	"ServiceName":                {required: true},
	"SkuId":                      {required: true},
	"Tags":                       {required: true, json: true},
	"x_EntryId":                  {required: true},
	"x_Reverses":                 {},
	"x_Kind":                     {required: true, allowed: []string{"usage", "transfer", "storage", "overhead"}},
	"x_Category":                 {},
	"x_JobId":                    {},
	"x_JobName":                  {},
	"x_Team":                     {},
	"x_Attempt":                  {format: integerFormat},
	"x_PurchaseOption":           {allowed: []string{"spot", "on-demand", "reserved"}},
	"x_GPU":                      {},
	"x_GPUCount":                 {format: integerFormat},
	"x_PricePerHour":             {format: moneyFormat},
	"x_OnDemandEquivalentCost":   {required: true, format: moneyFormat},
	"x_InterruptionCount":        {required: true, allowed: []string{"-1", "0", "1"}},
	"x_RecordedAt":               {format: dateTimeFormat},
}

// checkRow checks one row against every column's rule and FOCUS's rules
// between columns.
func checkRow(row map[string]string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for col, v := range row {
		r, ok := focusRules[col]
		switch {
		case !ok:
			bad("column %s has no rule", col)
		case v == "":
			if r.required {
				bad("%s is null", col)
			}
		case r.format != nil && !r.format.MatchString(v):
			bad("%s = %q is not well-formed", col, v)
		case r.allowed != nil && !slices.Contains(r.allowed, v):
			bad("%s = %q is not one of %v", col, v, r.allowed)
		case r.json:
			var m map[string]any
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				bad("%s = %q is not a JSON object: %v", col, v, err)
			}
		}
	}
	times := map[string]time.Time{}
	for _, c := range []string{"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"} {
		times[c], _ = time.Parse(time.RFC3339, row[c])
	}
	bs, be := times["BillingPeriodStart"], times["BillingPeriodEnd"]
	if bs.Day() != 1 || bs.Hour() != 0 || !be.Equal(bs.AddDate(0, 1, 0)) {
		bad("billing period %s..%s is not a calendar month", bs, be)
	}
	cs, ce := times["ChargePeriodStart"], times["ChargePeriodEnd"]
	if ce.Before(cs) {
		bad("charge period %s..%s runs backwards", cs, ce)
	}
	// A charge lies in its billing period, unless it corrects an
	// earlier one.
	inside := !cs.Before(bs) && !ce.After(be)
	if correction := row["ChargeClass"] == "Correction"; inside == correction {
		bad("charge period %s..%s, billing period %s..%s, charge class %q", cs, ce, bs, be, row["ChargeClass"])
	}
	commitment := row["CommitmentDiscountId"] != ""
	for _, c := range []string{"CommitmentDiscountCategory", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType"} {
		if (row[c] != "") != commitment {
			bad("%s = %q with CommitmentDiscountId %q", c, row[c], row["CommitmentDiscountId"])
		}
	}
	if commitment != (row["PricingCategory"] == "Committed") {
		bad("PricingCategory %s with CommitmentDiscountId %q", row["PricingCategory"], row["CommitmentDiscountId"])
	}
	unused := row["CommitmentDiscountStatus"] == "Unused"
	if (row["ConsumedQuantity"] == "") != unused || (row["ConsumedUnit"] == "") != unused {
		bad("consumed %q %q with commitment status %q", row["ConsumedQuantity"], row["ConsumedUnit"], row["CommitmentDiscountStatus"])
	}
	if (row["ResourceId"] == "") != (row["ResourceType"] == "") || (row["ResourceId"] == "") != (row["ResourceName"] == "") {
		bad("resource %q named %q of type %q", row["ResourceId"], row["ResourceName"], row["ResourceType"])
	}
	if row["BilledCost"] != row["EffectiveCost"] {
		bad("billed %s, effective %s: nothing is amortized", row["BilledCost"], row["EffectiveCost"])
	}
	return errs
}

// readFOCUS writes entries as FOCUS and reads the file back as rows of
// column -> value, checking every row has every column.
func readFOCUS(t *testing.T, entries ...Entry) []map[string]string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFOCUS(&buf, entries); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("the export is not CSV: %v", err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], FOCUSColumns()) {
		t.Fatalf("header %v, want %v", recs[0], FOCUSColumns())
	}
	var out []map[string]string
	for i, rec := range recs[1:] {
		if len(rec) != len(recs[0]) {
			t.Fatalf("row %d has %d columns, the header %d", i+1, len(rec), len(recs[0]))
		}
		row := map[string]string{}
		for j, v := range rec {
			row[recs[0][j]] = v
		}
		out = append(out, row)
	}
	return out
}

// Every kind of entry makes rows with every column FOCUS asks for, each
// well-formed, and says what a finance tool needs to tell them apart.
func TestFOCUSRowsOfEveryKindOfEntry(t *testing.T) {
	april := time.Date(2031, 4, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		entry Entry
		// want are the values of some columns ("" for null).
		want map[string]string
	}{
		{"spot usage of an interrupted attempt", usage(interrupted), map[string]string{
			"ChargeCategory": "Usage", "ChargeClass": "", "PricingCategory": "Dynamic", "ServiceCategory": "Compute",
			"ServiceName": "Amazon Elastic Compute Cloud", "ProviderName": "AWS",
			"BilledCost": "8.520002", "EffectiveCost": "8.520002", "ContractedCost": "8.520002", "ListCost": "49.159200",
			"x_OnDemandEquivalentCost": "49.159200", "PricingQuantity": "1.5", "PricingUnit": "Hours", "ConsumedQuantity": "1.5",
			"ResourceId": "i-0abc", "ResourceType": "Virtual Machine", "ResourceName": "bert, large attempt 2", "SkuId": "p4d.24xlarge",
			"RegionId": "us-east-2", "AvailabilityZone": "us-east-2c", "CommitmentDiscountId": "", "CommitmentDiscountStatus": "",
			"ChargePeriodStart": "2031-03-14T09:00:00Z", "ChargePeriodEnd": "2031-03-14T10:30:00Z",
			"BillingPeriodStart": "2031-03-01T00:00:00Z", "BillingPeriodEnd": "2031-04-01T00:00:00Z",
			"x_JobId": "j-1", "x_Team": "vision", "x_Attempt": "2", "x_InterruptionCount": "1", "x_EntryId": "j-1/a2/i-0abc/1",
			"Tags": `{"cost-center":"4711","project":"llm","spotwise/job":"j-1","spotwise/job-name":"bert, large","spotwise/team":"vision"}`,
		}},
		{"on-demand usage", usage(onDemand), map[string]string{
			"PricingCategory": "Standard", "BilledCost": "49.159200", "ListCost": "49.159200", "ContractedCost": "49.159200",
			"x_InterruptionCount": "0", "x_Attempt": "3", "ResourceId": "i-0def", "CommitmentDiscountId": "",
		}},
		{"reserved usage", usage(reservedUse), map[string]string{
			"PricingCategory": "Committed", "BilledCost": "29.495520", "EffectiveCost": "29.495520", "ContractedCost": "49.159200",
			"CommitmentDiscountId": "cr-0123", "CommitmentDiscountName": "cr-0123", "CommitmentDiscountStatus": "Used",
			"CommitmentDiscountCategory": "Usage", "CommitmentDiscountType": "Reservation", "ConsumedQuantity": "1.5",
			"x_Team": "nlp", "x_JobId": "j-2",
		}},
		{"an orphan instance", usage(orphan), map[string]string{
			"ChargeCategory": "Usage", "PricingCategory": "Standard", "ServiceCategory": "Compute", "BilledCost": "49.159200",
			"ResourceId": "i-0orp", "ResourceType": "Virtual Machine", "x_JobId": "", "x_Team": "", "x_Attempt": "",
			"x_Kind": "overhead", "x_Category": "orphan", "Tags": "{}", "ConsumedQuantity": "1.5",
		}},
		{"a reservation's idle hours", usage(idle), map[string]string{
			"PricingCategory": "Committed", "CommitmentDiscountId": "cr-0123", "CommitmentDiscountStatus": "Unused",
			"ConsumedQuantity": "", "ConsumedUnit": "", "PricingQuantity": "1.5", "BilledCost": "29.495520", "ContractedCost": "29.495520",
			"ResourceId": "cr-0123", "ResourceType": "Capacity Reservation", "x_Kind": "overhead", "x_Category": "reserved-idle", "x_JobId": "",
		}},
		{"a checkpoint carried to another region", usage(transfer), map[string]string{
			"ServiceCategory": "Networking", "ServiceName": "AWS Data Transfer", "PricingCategory": "Standard",
			"PricingQuantity": "12.5", "PricingUnit": "GB", "BilledCost": "0.250000", "ResourceId": "j-1/checkpoint",
			"ResourceType": "Data Transfer", "SkuId": "transfer/checkpoint", "AvailabilityZone": "",
			"ChargePeriodStart": "2031-03-14T09:00:00Z", "ChargePeriodEnd": "2031-03-14T09:00:00Z", "x_InterruptionCount": "0",
		}},
		{"a job's dataset read in another region", usage(dataset), map[string]string{
			"ChargeCategory": "Usage", "ServiceCategory": "Networking", "ServiceName": "AWS Data Transfer", "PricingCategory": "Standard",
			"ProviderName": "AWS", "RegionId": "us-east-1", "AvailabilityZone": "",
			"PricingQuantity": "500", "PricingUnit": "GB", "ConsumedQuantity": "500", "BilledCost": "10.000000", "ListCost": "10.000000",
			"ResourceId": "j-1/dataset", "ResourceName": "bert, large dataset", "ResourceType": "Data Transfer", "SkuId": "transfer/dataset",
			"ChargeDescription": "dataset egress (data transfer) of 500 GB out of aws us-east-1 for job bert, large attempt 3",
			"x_Kind":            "transfer", "x_Category": "dataset", "x_Attempt": "3", "x_EntryId": "j-1/a3/dataset", "x_InterruptionCount": "0",
		}},
		{"checkpoint storage", usage(storage), map[string]string{
			"ServiceCategory": "Storage", "ServiceName": "Amazon Simple Storage Service", "PricingUnit": "GB-Month",
			"PricingQuantity": "0.25", "BilledCost": "0.005750", "ResourceType": "Checkpoint",
		}},
		{"usage without a recorded quantity is its hours", usage(func(e *Entry) { e.Quantity, e.Unit = 0, "" }), map[string]string{
			"PricingQuantity": "1.5", "PricingUnit": "Hours", "ConsumedQuantity": "1.5", "ConsumedUnit": "Hours",
		}},
		{"a reversal in the same month", usage(interrupted, reversed(t0.Add(2*time.Hour))), map[string]string{
			"ChargeCategory": "Usage", "ChargeClass": "", "BilledCost": "-8.520002", "ListCost": "-49.159200",
			"PricingQuantity": "-1.5", "x_Reverses": "j-1/a2/i-0abc/1", "x_EntryId": "j-1/a2/i-0abc/1~r",
			"x_InterruptionCount": "-1", "BillingPeriodStart": "2031-03-01T00:00:00Z", "PricingCategory": "Dynamic",
		}},
		{"a reversal of a month already closed", usage(reservedUse, reversed(april)), map[string]string{
			"ChargeClass": "Correction", "BilledCost": "-29.495520", "ContractedCost": "-49.159200",
			"ChargePeriodStart": "2031-03-14T09:00:00Z", "BillingPeriodStart": "2031-04-01T00:00:00Z",
			"BillingPeriodEnd": "2031-05-01T00:00:00Z", "CommitmentDiscountStatus": "Used", "x_RecordedAt": "2031-04-02T10:00:00Z",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := readFOCUS(t, tt.entry)
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			row := rows[0]
			for _, err := range checkRow(row) {
				t.Error(err)
			}
			for col, want := range tt.want {
				if _, ok := row[col]; !ok {
					t.Errorf("no column %s", col)
				}
				if row[col] != want {
					t.Errorf("%s = %q, want %q", col, row[col], want)
				}
			}
			if d := row["ChargeDescription"]; !strings.Contains(d, tt.entry.ID) && !strings.Contains(d, cmpOr(tt.entry.Instance, tt.entry.Reservation, tt.entry.JobName)) {
				t.Errorf("description %q names neither the entry nor what it charges for", d)
			}
		})
	}
}

func cmpOr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// An entry across a month's end is billed in both months: two rows,
// each in its month, adding up to the entry to the micro-dollar.
func TestFOCUSCutsAnEntryAtTheMonthsEnd(t *testing.T) {
	for _, e := range []Entry{usage(acrossMonth), usage(reservedUse, acrossMonth), usage(acrossMonth, reversed(time.Date(2031, 4, 1, 5, 0, 0, 0, time.UTC)))} {
		t.Run(e.ID, func(t *testing.T) {
			rows := readFOCUS(t, e)
			if len(rows) != 2 {
				t.Fatalf("%d rows, want 2", len(rows))
			}
			wantPeriods := [][2]string{{"2031-03-31T23:00:00Z", "2031-04-01T00:00:00Z"}, {"2031-04-01T00:00:00Z", "2031-04-01T01:30:00Z"}}
			var billed, list money.Micros
			var hours float64
			for i, row := range rows {
				for _, err := range checkRow(row) {
					t.Errorf("row %d: %v", i, err)
				}
				if got := [2]string{row["ChargePeriodStart"], row["ChargePeriodEnd"]}; got != wantPeriods[i] {
					t.Errorf("row %d: charge period %v, want %v", i, got, wantPeriods[i])
				}
				billed += money.MustParse(row["BilledCost"])
				list += money.MustParse(row["ListCost"])
				var q float64
				fmt.Sscan(row["PricingQuantity"], &q)
				hours += q
			}
			if billed != e.Cost || list != e.ListCost {
				t.Errorf("rows bill %s (list %s), the entry %s (list %s)", billed, list, e.Cost, e.ListCost)
			}
			if want := e.Quantity; hours < want-1e-9 || hours > want+1e-9 {
				t.Errorf("rows count %g hours, the entry %g", hours, want)
			}
			// The reversal, recorded in April, corrects March's row
			// and not April's.
			if e.Reverses != "" && (rows[0]["ChargeClass"] != "Correction" || rows[1]["ChargeClass"] != "") {
				t.Errorf("charge classes %q, %q", rows[0]["ChargeClass"], rows[1]["ChargeClass"])
			}
		})
	}
}

// A whole ledger's export bills what its entries cost, and a garbled
// entry is refused by name rather than written.
func TestWriteFOCUS(t *testing.T) {
	entries := []Entry{usage(interrupted), usage(onDemand), usage(reservedUse), usage(orphan), usage(idle), usage(transfer), usage(dataset), usage(storage),
		usage(interrupted, reversed(t0.Add(3*time.Hour))), usage(acrossMonth)}
	rows := readFOCUS(t, entries...)
	var want, got money.Micros
	for _, e := range entries {
		want += e.Cost
	}
	for _, r := range rows {
		got += money.MustParse(r["BilledCost"])
	}
	if len(rows) != len(entries)+1 || got != want {
		t.Errorf("%d rows billing %s; want %d rows billing %s", len(rows), got, len(entries)+1, want)
	}

	bad := usage(func(e *Entry) { e.ID, e.End = "j-9/a1/i-9/1", e.Start.Add(-time.Hour) })
	err := WriteFOCUS(&bytes.Buffer{}, []Entry{usage(), bad})
	if err == nil || !strings.Contains(err.Error(), "j-9/a1/i-9/1") {
		t.Errorf("a garbled entry: %v", err)
	}
}
