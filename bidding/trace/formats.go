package trace

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

// jsonFile is the wire form of a JSON trace. Numbers stay text until they
// are checked, so a price never passes through a float.
type jsonFile struct {
	Metadata *struct {
		GapSeconds    json.Number `json:"gap_seconds"`
		OnDemandPrice json.Number `json:"on_demand_price"`
		Region        string      `json:"region"`
	} `json:"metadata"`
	Data   []json.Number `json:"data"`
	Prices []json.Number `json:"prices"`
}

// ParseJSON reads a trace in the JSON format (see the package comment).
// The name and source are left for the caller.
func ParseJSON(r io.Reader) (Trace, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var f jsonFile
	if err := dec.Decode(&f); err != nil {
		return Trace{}, fmt.Errorf("not a JSON trace: %w", err)
	}
	if f.Metadata == nil || f.Metadata.GapSeconds == "" {
		return Trace{}, errors.New("metadata.gap_seconds is missing")
	}
	step, err := seconds(string(f.Metadata.GapSeconds))
	if err != nil {
		return Trace{}, fmt.Errorf("metadata.gap_seconds: %w", err)
	}
	if f.Data == nil {
		return Trace{}, errors.New("data is missing")
	}
	t := Trace{Step: step, Avail: make([]int, len(f.Data)), Region: strings.TrimSpace(f.Metadata.Region)}
	if f.Metadata.OnDemandPrice != "" {
		if t.OnDemand, err = price(string(f.Metadata.OnDemandPrice)); err != nil || t.OnDemand <= 0 {
			return Trace{}, fmt.Errorf("metadata.on_demand_price %s: want a positive price", f.Metadata.OnDemandPrice)
		}
	}
	for i, n := range f.Data {
		if t.Avail[i], err = count(string(n)); err != nil {
			return Trace{}, fmt.Errorf("data[%d]: %w", i, err)
		}
	}
	if f.Prices != nil {
		t.Prices = make([]money.Micros, len(f.Prices))
		for i, n := range f.Prices {
			if t.Prices[i], err = price(string(n)); err != nil {
				return Trace{}, fmt.Errorf("prices[%d]: %w", i, err)
			}
		}
	}
	if err := t.validate(); err != nil {
		return Trace{}, err
	}
	return t, nil
}

// CSV column names.
const (
	colTime     = "time_seconds"
	colAvail    = "available"
	colPrice    = "price_usd_per_hour"
	colOnDemand = "ondemand_usd_per_hour"
)

// csvColumns finds the optional columns after time_seconds,available:
// their indexes, -1 when absent.
func csvColumns(header []string) (price, onDemand int, err error) {
	price, onDemand = -1, -1
	bad := len(header) < 2 || header[0] != colTime || header[1] != colAvail
	for i := 2; i < len(header) && !bad; i++ {
		switch {
		case header[i] == colPrice && price < 0:
			price = i
		case header[i] == colOnDemand && onDemand < 0:
			onDemand = i
		default:
			bad = true
		}
	}
	if bad {
		return 0, 0, fmt.Errorf("line 1: header %q, want %s,%s[,%s][,%s]", strings.Join(header, ","), colTime, colAvail, colPrice, colOnDemand)
	}
	return price, onDemand, nil
}

// ParseCSV reads a trace in our CSV format (see the package comment).
func ParseCSV(r io.Reader) (Trace, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return Trace{}, errors.New("empty CSV: want the header " + colTime + "," + colAvail + "[," + colPrice + "][," + colOnDemand + "]")
	}
	if err != nil {
		return Trace{}, fmt.Errorf("not a CSV trace: %w", err)
	}
	for i := range header {
		header[i] = strings.ToLower(strings.TrimSpace(header[i]))
	}
	priceCol, odCol, err := csvColumns(header)
	if err != nil {
		return Trace{}, err
	}
	var t Trace
	var times []float64
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return Trace{}, fmt.Errorf("line %d: %w", line, err)
		}
		if len(rec) != len(header) {
			return Trace{}, fmt.Errorf("line %d: %d fields, want %d (%s)", line, len(rec), len(header), strings.Join(header, ","))
		}
		ts, err := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
		if err != nil || math.IsNaN(ts) || math.IsInf(ts, 0) {
			return Trace{}, fmt.Errorf("line %d: %s %q is not a number", line, colTime, rec[0])
		}
		n, err := count(strings.TrimSpace(rec[1]))
		if err != nil {
			return Trace{}, fmt.Errorf("line %d: %s: %w", line, colAvail, err)
		}
		if priceCol >= 0 {
			p, err := price(strings.TrimSpace(rec[priceCol]))
			if err != nil {
				return Trace{}, fmt.Errorf("line %d: %s: %w", line, colPrice, err)
			}
			t.Prices = append(t.Prices, p)
		}
		if odCol >= 0 {
			// One on-demand price per zone: the model bills on-demand at a
			// fixed price, so a column that changes is refused, not averaged.
			p, err := price(strings.TrimSpace(rec[odCol]))
			if err != nil || p <= 0 {
				return Trace{}, fmt.Errorf("line %d: %s %q: want a positive price", line, colOnDemand, rec[odCol])
			}
			if t.OnDemand != 0 && p != t.OnDemand {
				return Trace{}, fmt.Errorf("line %d: %s %s differs from the first row's %s (one on-demand price per zone)", line, colOnDemand, p, t.OnDemand)
			}
			t.OnDemand = p
		}
		if k := len(times); k >= 2 {
			// Every row one step after the first, within a millisecond, so
			// that a missing row is caught rather than silently shifting
			// the rest of the trace.
			want := times[0] + float64(k)*(times[1]-times[0])
			if math.Abs(ts-want) > 1e-3 {
				return Trace{}, fmt.Errorf("line %d: %s %v, want %v (one step of %vs after the previous row)", line, colTime, ts, want, times[1]-times[0])
			}
		}
		times = append(times, ts)
		t.Avail = append(t.Avail, n)
	}
	if len(times) < 2 {
		return Trace{}, fmt.Errorf("%d data rows: at least two are needed to know the step", len(times))
	}
	gap := times[1] - times[0]
	if gap <= 0 {
		return Trace{}, fmt.Errorf("line 3: %s does not grow (step %vs)", colTime, gap)
	}
	t.Step = time.Duration(math.Round(gap * float64(time.Second)))
	if err := t.validate(); err != nil {
		return Trace{}, err
	}
	return t, nil
}

// seconds reads a positive number of seconds.
func seconds(s string) (time.Duration, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number of seconds", s)
	}
	if v <= 0 || v > 1e9 {
		return 0, fmt.Errorf("%s seconds is not a usable step", s)
	}
	return time.Duration(math.Round(v * float64(time.Second))), nil
}

// count reads a count of available instances: a whole number, 0 or more
// (1.0 reads as 1).
func count(s string) (int, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a count of instances", s)
	}
	if v < 0 || v != math.Trunc(v) || v > 1e6 {
		return 0, fmt.Errorf("%s is not a count of instances (a whole number, 0 or more)", s)
	}
	return int(v), nil
}

// price reads a price in USD per hour. Measured prices come with any
// number of decimals (17.529215999999998, a float's printout): they are
// rounded half up to the micro-dollar, from the text, never through a
// float.
func price(s string) (money.Micros, error) {
	if strings.ContainsAny(s, "eE") {
		return 0, fmt.Errorf("%q: write prices as plain decimals", s)
	}
	s = strings.TrimSpace(s)
	up := false
	if whole, frac, ok := strings.Cut(s, "."); ok && len(frac) > 6 {
		for _, c := range frac[6:] {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("%q is not an amount", s)
			}
		}
		up = frac[6] >= '5'
		s = whole + "." + frac[:6]
	}
	p, err := money.Parse(s)
	if err != nil {
		return 0, err
	}
	if p < 0 || strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%s is negative", s)
	}
	if up {
		p++
	}
	return p, nil
}
