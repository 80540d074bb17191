package ledger

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

// FOCUSVersion is the version of the FinOps Open Cost and Usage
// Specification the export follows.
const FOCUSVersion = "1.2"

// The export speaks FOCUS's vocabulary: these are its allowed values.
const (
	focusUsage      = "Usage"      // ChargeCategory of every ledger entry
	focusCorrection = "Correction" // ChargeClass of a correction to an earlier month
	focusStandard   = "Standard"   // PricingCategory: on-demand
	focusDynamic    = "Dynamic"    // PricingCategory: spot, priced by the provider as it goes
	focusCommitted  = "Committed"  // PricingCategory: reserved
	focusOther      = "Other"
)

// focusPart is one row of the export: an entry, or the part of it that
// falls in one calendar month. An entry across a month's end is cut there,
// so that every row's charge period lies in its billing period; its money
// is cut in proportion to time, the parts adding up to the entry exactly.
type focusPart struct {
	e          *Entry
	start, end time.Time
	cost, list money.Micros
	quantity   float64
	// billing is the first instant of the row's billing month.
	billing time.Time
	// correction is set on a reversal recorded after the month it
	// corrects: the row is billed in the month it was recorded.
	correction bool
}

// focusColumn is a column of the export and how a row's value is made
// ("" is null).
type focusColumn struct {
	name  string
	value func(p *focusPart) string
}

// focusColumns are the export's columns, in order: FOCUS's, then
// spotwise's own (x_).
var focusColumns = []focusColumn{
	{"AvailabilityZone", func(p *focusPart) string { return p.e.Zone }},
	{"BilledCost", func(p *focusPart) string { return p.cost.Decimal() }},
	{"BillingCurrency", func(*focusPart) string { return "USD" }},
	{"BillingPeriodStart", func(p *focusPart) string { return stamp(p.billing) }},
	{"BillingPeriodEnd", func(p *focusPart) string { return stamp(p.billing.AddDate(0, 1, 0)) }},
	{"ChargeCategory", func(*focusPart) string { return focusUsage }},
	{"ChargeClass", func(p *focusPart) string {
		if p.correction {
			return focusCorrection
		}
		return ""
	}},
	{"ChargeDescription", func(p *focusPart) string { return describe(p.e) }},
	{"ChargeFrequency", func(*focusPart) string { return "Usage-Based" }},
	{"ChargePeriodStart", func(p *focusPart) string { return stamp(p.start) }},
	{"ChargePeriodEnd", func(p *focusPart) string { return stamp(p.end) }},
	{"CommitmentDiscountCategory", func(p *focusPart) string { return ifReserved(p.e, "Usage") }},
	{"CommitmentDiscountId", func(p *focusPart) string { return ifReserved(p.e, commitmentID(p.e)) }},
	{"CommitmentDiscountName", func(p *focusPart) string { return ifReserved(p.e, commitmentID(p.e)) }},
	{"CommitmentDiscountStatus", func(p *focusPart) string {
		if reservedIdle(p.e) {
			return "Unused"
		}
		return ifReserved(p.e, "Used")
	}},
	{"CommitmentDiscountType", func(p *focusPart) string { return ifReserved(p.e, "Reservation") }},
	// A reservation's idle hours are not consumption: FOCUS leaves the
	// quantity consumed null for the unused part of a commitment.
	{"ConsumedQuantity", func(p *focusPart) string {
		if reservedIdle(p.e) {
			return ""
		}
		return quantity(p.quantity)
	}},
	{"ConsumedUnit", func(p *focusPart) string {
		if reservedIdle(p.e) {
			return ""
		}
		return unitOf(p.e)
	}},
	// What the capacity costs without a commitment: for reserved usage,
	// the on-demand list price (the commitment is what brings it down to
	// the effective cost); otherwise what was billed (spotwise knows of
	// no negotiated discounts).
	{"ContractedCost", func(p *focusPart) string {
		if reserved(p.e) && !reservedIdle(p.e) {
			return p.list.Decimal()
		}
		return p.cost.Decimal()
	}},
	// Reservations are billed by the hour as they are used (no upfront
	// payment to amortize): the effective cost is the billed cost.
	{"EffectiveCost", func(p *focusPart) string { return p.cost.Decimal() }},
	{"InvoiceIssuerName", func(p *focusPart) string { return providerName(p.e.Provider) }},
	{"ListCost", func(p *focusPart) string { return p.list.Decimal() }},
	{"PricingCategory", func(p *focusPart) string { return pricingCategory(p.e) }},
	{"PricingQuantity", func(p *focusPart) string { return quantity(p.quantity) }},
	{"PricingUnit", func(p *focusPart) string { return unitOf(p.e) }},
	{"ProviderName", func(p *focusPart) string { return providerName(p.e.Provider) }},
	{"PublisherName", func(p *focusPart) string { return providerName(p.e.Provider) }},
	{"RegionId", func(p *focusPart) string { return p.e.Region }},
	{"RegionName", func(p *focusPart) string { return p.e.Region }},
	{"ResourceId", func(p *focusPart) string { return resourceID(p.e) }},
	{"ResourceName", func(p *focusPart) string { return resourceName(p.e) }},
	{"ResourceType", func(p *focusPart) string { return resourceType(p.e) }},
	{"ServiceCategory", func(p *focusPart) string { return serviceCategory(p.e) }},
	{"ServiceName", func(p *focusPart) string { return serviceName(p.e) }},
	{"SkuId", func(p *focusPart) string { return skuID(p.e) }},
	{"Tags", func(p *focusPart) string { return tags(p.e) }},
	{"x_EntryId", func(p *focusPart) string { return p.e.ID }},
	{"x_Reverses", func(p *focusPart) string { return p.e.Reverses }},
	{"x_Kind", func(p *focusPart) string { return string(p.e.Kind) }},
	{"x_Category", func(p *focusPart) string { return p.e.Category }},
	{"x_JobId", func(p *focusPart) string { return p.e.JobID }},
	{"x_JobName", func(p *focusPart) string { return p.e.JobName }},
	{"x_Team", func(p *focusPart) string { return p.e.Team }},
	{"x_Attempt", func(p *focusPart) string {
		if p.e.JobID == "" {
			return ""
		}
		return strconv.Itoa(p.e.Attempt)
	}},
	{"x_PurchaseOption", func(p *focusPart) string { return p.e.Purchase }},
	{"x_GPU", func(p *focusPart) string { return p.e.GPU }},
	{"x_GPUCount", func(p *focusPart) string {
		if p.e.GPUs == 0 {
			return ""
		}
		return strconv.Itoa(p.e.GPUs)
	}},
	{"x_PricePerHour", func(p *focusPart) string {
		if p.e.PricePerHour == 0 {
			return ""
		}
		return p.e.PricePerHour.Decimal()
	}},
	{"x_OnDemandEquivalentCost", func(p *focusPart) string { return p.list.Decimal() }},
	// An interrupted attempt's usage counts 1 (its reversal -1, so that
	// a corrected entry is counted once).
	{"x_InterruptionCount", func(p *focusPart) string {
		switch {
		case !p.e.Interrupted || p.e.Kind != Usage:
			return "0"
		case p.e.Reverses != "":
			return "-1"
		}
		return "1"
	}},
	{"x_RecordedAt", func(p *focusPart) string {
		if p.e.RecordedAt.IsZero() {
			return ""
		}
		return stamp(p.e.RecordedAt)
	}},
}

// FOCUSColumns are the names of the export's columns, in order.
func FOCUSColumns() []string {
	out := make([]string, len(focusColumns))
	for i, c := range focusColumns {
		out[i] = c.name
	}
	return out
}

// FOCUSRows are an entry's rows in the export, one per calendar month
// (UTC) its charge period touches, each a value per FOCUSColumns ("" for
// null). An entry that does not pass Check has none: the error says why.
func FOCUSRows(e *Entry) ([][]string, error) {
	if err := e.Check(); err != nil {
		return nil, err
	}
	parts := focusParts(e)
	rows := make([][]string, len(parts))
	for i := range parts {
		row := make([]string, len(focusColumns))
		for j, c := range focusColumns {
			row[j] = c.value(&parts[i])
		}
		rows[i] = row
	}
	return rows, nil
}

// WriteFOCUS writes entries as a FOCUS CSV file: a header row, then every
// entry's rows, in the order given. A garbled entry stops it, named.
func WriteFOCUS(w io.Writer, entries []Entry) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(FOCUSColumns()); err != nil {
		return err
	}
	for i := range entries {
		rows, err := FOCUSRows(&entries[i])
		if err != nil {
			return err
		}
		if err := cw.WriteAll(rows); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// focusParts cuts an entry at the month boundaries in its period. Each
// part's money is the entry's up to the part's end less the entry's up to
// its start, in proportion to time: the parts add up to the entry to the
// micro-dollar.
func focusParts(e *Entry) []focusPart {
	start, end := e.Start.UTC(), e.End.UTC()
	whole := end.Sub(start)
	upTo := func(total money.Micros, t time.Time) money.Micros {
		if !t.Before(end) {
			return total
		}
		return total.Scale(int64(t.Sub(start)), int64(whole))
	}
	var out []focusPart
	for from := start; ; {
		to := monthOf(from).AddDate(0, 1, 0)
		if !to.Before(end) {
			to = end
		}
		p := focusPart{e: e, start: from, end: to,
			cost:     e.Cost,
			list:     e.ListCost,
			quantity: e.Quantity,
			billing:  monthOf(from),
		}
		if whole > 0 { // a one-off charge (no length) is one part
			p.cost = upTo(e.Cost, to) - upTo(e.Cost, from)
			p.list = upTo(e.ListCost, to) - upTo(e.ListCost, from)
			p.quantity = e.Quantity * float64(to.Sub(from)) / float64(whole)
		}
		if (e.Kind == Usage || e.Kind == Overhead) && e.Quantity == 0 && e.Unit == "" {
			// Instance time without a recorded quantity is its hours.
			p.quantity = to.Sub(from).Hours()
			if e.Reverses != "" {
				p.quantity = -p.quantity
			}
		}
		if e.Reverses != "" && !e.RecordedAt.IsZero() && monthOf(e.RecordedAt).After(p.billing) {
			p.billing, p.correction = monthOf(e.RecordedAt), true
		}
		out = append(out, p)
		if !to.Before(end) {
			return out
		}
		from = to
	}
}

// monthOf is the first instant of t's calendar month, in UTC.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func quantity(q float64) string { return strconv.FormatFloat(q, 'f', -1, 64) }

func reserved(e *Entry) bool {
	return e.Purchase == "reserved" || e.Reservation != "" || reservedIdle(e)
}

// commitmentID names the reservation: as recorded, else by what it
// reserves.
func commitmentID(e *Entry) string {
	return cmp.Or(e.Reservation, fmt.Sprintf("%s/%s/%s/reserved", e.Provider, e.Region, e.InstanceType))
}

func reservedIdle(e *Entry) bool { return e.Kind == Overhead && e.Category == OverheadReservedIdle }

// ifReserved is v for reserved capacity, else null.
func ifReserved(e *Entry, v string) string {
	if reserved(e) {
		return v
	}
	return ""
}

func pricingCategory(e *Entry) string {
	switch {
	case reserved(e):
		return focusCommitted
	case e.Purchase == "spot":
		return focusDynamic
	case e.Purchase == "on-demand" || e.Kind == Transfer || e.Kind == Storage:
		return focusStandard
	}
	return focusOther
}

func unitOf(e *Entry) string {
	if e.Unit != "" {
		return e.Unit
	}
	if e.Kind == Usage || e.Kind == Overhead {
		return "Hours"
	}
	return ""
}

// providerNames are the clouds by the names their own FOCUS exports give.
var providerNames = map[string]string{"aws": "AWS", "azure": "Microsoft", "gcp": "Google Cloud", "sim": "Simulated"}

func providerName(p string) string {
	if n, ok := providerNames[p]; ok {
		return n
	}
	if p == "" {
		return "spotwise"
	}
	return p
}

func serviceCategory(e *Entry) string {
	switch e.Kind {
	case Transfer:
		return "Networking"
	case Storage:
		return "Storage"
	}
	return "Compute"
}

// serviceNames are each cloud's service for a kind of charge.
var serviceNames = map[string]map[Kind]string{
	"aws":   {Usage: "Amazon Elastic Compute Cloud", Transfer: "AWS Data Transfer", Storage: "Amazon Simple Storage Service"},
	"azure": {Usage: "Virtual Machines", Transfer: "Bandwidth", Storage: "Storage"},
	"gcp":   {Usage: "Compute Engine", Transfer: "Cloud Networking", Storage: "Cloud Storage"},
}

func serviceName(e *Entry) string {
	kind := e.Kind
	if kind == Overhead {
		kind = Usage
	}
	if n := serviceNames[e.Provider][kind]; n != "" {
		return n
	}
	return map[Kind]string{Usage: "Compute", Transfer: "Data Transfer", Storage: "Storage"}[kind]
}

// resourceID is the instance charged for, the reservation left idle, or,
// for data, the job's checkpoint.
func resourceID(e *Entry) string {
	switch {
	case e.Instance != "":
		return e.Instance
	case reservedIdle(e):
		return commitmentID(e)
	case (e.Kind == Transfer || e.Kind == Storage) && e.JobID != "":
		return e.JobID + "/" + cmp.Or(e.Category, string(e.Kind))
	}
	return ""
}

func resourceName(e *Entry) string {
	if resourceID(e) == "" {
		return ""
	}
	switch {
	case e.JobID != "" && e.Kind == Usage:
		return fmt.Sprintf("%s attempt %d", cmp.Or(e.JobName, e.JobID), e.Attempt)
	case e.JobID != "":
		return fmt.Sprintf("%s %s", cmp.Or(e.JobName, e.JobID), cmp.Or(e.Category, string(e.Kind)))
	}
	return resourceID(e)
}

func resourceType(e *Entry) string {
	switch {
	case resourceID(e) == "":
		return ""
	case reservedIdle(e) && e.Instance == "":
		return "Capacity Reservation"
	case e.Kind == Usage || e.Kind == Overhead:
		return "Virtual Machine"
	case e.Kind == Transfer:
		return "Data Transfer"
	}
	return "Checkpoint"
}

func skuID(e *Entry) string {
	if e.InstanceType != "" {
		return e.InstanceType
	}
	return string(e.Kind) + "/" + cmp.Or(e.Category, cmp.Or(e.Unit, "unit"))
}

// tags are the job's labels as the job gave them, with spotwise's own
// under the spotwise/ prefix, as FOCUS asks of provider-defined tags.
func tags(e *Entry) string {
	t := make(map[string]string, len(e.Labels)+3)
	for k, v := range e.Labels {
		t[k] = v
	}
	for k, v := range map[string]string{"spotwise/team": e.Team, "spotwise/job": e.JobID, "spotwise/job-name": e.JobName} {
		if v != "" {
			t[k] = v
		}
	}
	b, _ := json.Marshal(t) // a map of strings always marshals; keys come out sorted
	return string(b)
}

// describe says what an entry charges for, in a line.
func describe(e *Entry) string {
	var b strings.Builder
	if e.Reverses != "" {
		fmt.Fprintf(&b, "Reversal of %s: ", e.Reverses)
	}
	where := strings.TrimSpace(fmt.Sprintf("%s %s", e.Provider, cmp.Or(e.Zone, e.Region)))
	switch {
	case e.Kind == Usage:
		fmt.Fprintf(&b, "instance %s (%s %s) in %s at %s/h", e.Instance, e.InstanceType, e.Purchase, where, e.PricePerHour)
		if e.JobID != "" {
			fmt.Fprintf(&b, " for job %s attempt %d", cmp.Or(e.JobName, e.JobID), e.Attempt)
		}
		if e.Interrupted {
			b.WriteString(", interrupted")
		}
	case reservedIdle(e):
		fmt.Fprintf(&b, "reservation %s idle in %s (%s)", commitmentID(e), where, e.InstanceType)
	case e.Kind == Overhead && e.Category == OverheadOrphan:
		fmt.Fprintf(&b, "orphan instance %s (%s %s in %s), owned by no job", e.Instance, e.InstanceType, e.Purchase, where)
	case e.Kind == Overhead:
		fmt.Fprintf(&b, "overhead %s: %s %s in %s", cmp.Or(e.Category, "for "+cmp.Or(e.JobName, e.JobID)), e.InstanceType, e.Purchase, where)
	case e.Kind == Transfer && e.Category == CategoryDataset:
		fmt.Fprintf(&b, "dataset egress (data transfer) of %s %s out of %s", quantity(e.Quantity), e.Unit, where)
		if e.JobID != "" {
			fmt.Fprintf(&b, " for job %s attempt %d", cmp.Or(e.JobName, e.JobID), e.Attempt)
		}
	default:
		fmt.Fprintf(&b, "%s %s of %s %s in %s", cmp.Or(e.Category, "data"), e.Kind, quantity(e.Quantity), e.Unit, where)
		if e.JobID != "" {
			fmt.Fprintf(&b, " for job %s", cmp.Or(e.JobName, e.JobID))
		}
	}
	return b.String()
}
