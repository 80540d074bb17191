package ledger

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/spotwise/spotwise/money"
)

// csvColumn is a column of the plain export: an entry field by its JSON
// name, and how it is written.
type csvColumn struct {
	name  string
	value func(e *Entry) string
}

// csvColumns are the entry's own fields, one column each, named as in
// JSON: money as exact decimals, times RFC 3339 UTC, labels a JSON
// object.
var csvColumns = []csvColumn{
	{"id", func(e *Entry) string { return e.ID }},
	{"kind", func(e *Entry) string { return string(e.Kind) }},
	{"category", func(e *Entry) string { return e.Category }},
	{"reverses", func(e *Entry) string { return e.Reverses }},
	{"start", func(e *Entry) string { return e.Start.UTC().Format(time.RFC3339Nano) }},
	{"end", func(e *Entry) string { return e.End.UTC().Format(time.RFC3339Nano) }},
	{"price_per_hour", func(e *Entry) string { return optMoney(e.PricePerHour) }},
	{"quantity", func(e *Entry) string { return quantity(e.Quantity) }},
	{"unit", func(e *Entry) string { return e.Unit }},
	{"cost", func(e *Entry) string { return e.Cost.Decimal() }},
	{"list_cost", func(e *Entry) string { return e.ListCost.Decimal() }},
	{"provider", func(e *Entry) string { return e.Provider }},
	{"region", func(e *Entry) string { return e.Region }},
	{"zone", func(e *Entry) string { return e.Zone }},
	{"instance_type", func(e *Entry) string { return e.InstanceType }},
	{"purchase_option", func(e *Entry) string { return e.Purchase }},
	{"gpu", func(e *Entry) string { return e.GPU }},
	{"gpus", func(e *Entry) string { return optInt(e.GPUs) }},
	{"instance", func(e *Entry) string { return e.Instance }},
	{"reservation", func(e *Entry) string { return e.Reservation }},
	{"job_id", func(e *Entry) string { return e.JobID }},
	{"job_name", func(e *Entry) string { return e.JobName }},
	{"attempt", func(e *Entry) string { return optInt(e.Attempt) }},
	{"team", func(e *Entry) string { return e.Team }},
	{"labels", func(e *Entry) string {
		if len(e.Labels) == 0 {
			return ""
		}
		b, _ := json.Marshal(e.Labels) // a map of strings always marshals
		return string(b)
	}},
	{"interrupted", func(e *Entry) string { return strconv.FormatBool(e.Interrupted) }},
	{"recorded_at", func(e *Entry) string {
		if e.RecordedAt.IsZero() {
			return ""
		}
		return e.RecordedAt.UTC().Format(time.RFC3339Nano)
	}},
}

// CSVColumns are the plain export's columns, in order.
func CSVColumns() []string {
	out := make([]string, len(csvColumns))
	for i, c := range csvColumns {
		out[i] = c.name
	}
	return out
}

// WriteCSV writes entries as they are recorded, one row each after a
// header row, for a spreadsheet; WriteFOCUS is the export for finance
// tools.
func WriteCSV(w io.Writer, entries []Entry) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns()); err != nil {
		return err
	}
	row := make([]string, len(csvColumns))
	for i := range entries {
		for j, c := range csvColumns {
			row[j] = c.value(&entries[i])
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func optMoney(m money.Micros) string {
	if m == 0 {
		return ""
	}
	return m.Decimal()
}

func optInt(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
