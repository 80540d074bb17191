package ledger

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The plain export has a column for every field of an entry, and reads
// back to the very entries written, money and times exact.
func TestWriteCSVHoldsEveryFieldExactly(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[Entry]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	if cols := CSVColumns(); !slices.Equal(cols, fields) {
		t.Errorf("columns %v, the entry's fields %v", cols, fields)
	}

	nanos := usage(func(e *Entry) { e.Start = e.Start.Add(123456789); e.Cost = 1 })
	entries := []Entry{usage(interrupted), usage(reservedUse), usage(orphan), usage(idle), usage(transfer), usage(dataset), usage(storage),
		usage(interrupted, reversed(t0.Add(3*time.Hour))), nanos}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, entries); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v", err)
	}
	if len(recs) != len(entries)+1 {
		t.Fatalf("%d rows, want a header and %d", len(recs), len(entries))
	}
	numbers := map[string]bool{"quantity": true, "gpus": true, "attempt": true, "interrupted": true, "labels": true}
	for i, rec := range recs[1:] {
		// Each row as the entry's JSON: the same names, so it reads
		// back with the entry's own decoding.
		obj := map[string]json.RawMessage{}
		for j, v := range rec {
			if v == "" {
				continue
			}
			raw, _ := json.Marshal(v)
			if numbers[recs[0][j]] {
				raw = json.RawMessage(v)
			}
			obj[recs[0][j]] = raw
		}
		b, _ := json.Marshal(obj)
		var got Entry
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("row %d does not read back: %v\n%s", i+1, err, b)
		}
		want, _ := json.Marshal(entries[i])
		if back, _ := json.Marshal(got); !bytes.Equal(back, want) {
			t.Errorf("row %d reads back as\n%s\nwant\n%s", i+1, back, want)
		}
	}
}
