// Package trace loads measured spot-availability traces for `spotwise
// simulate`: one file per zone, a sample per fixed time step.
//
// Two formats are read, chosen by the file's extension.
//
// JSON (.json), the format of the public "Can't Be Late" traces:
//
//	{"metadata": {"gap_seconds": 195, "on_demand_price": 3.06, "region": "us-east-1"},
//	 "data": [1, 1, 0, ...], "prices": [0.918, ...]}
//
// gap_seconds is the step between two samples. data holds, per step, how
// many instances were available: 1 or 0 for one-node files, a count for
// N-node files. prices is optional: the spot price in USD per instance-hour
// at each step, as many as data. on_demand_price (the zone's on-demand USD
// per instance-hour) and region are optional.
//
// CSV (.csv), ours:
//
//	# us-east-1a, p3.2xlarge
//	time_seconds,available,price_usd_per_hour,ondemand_usd_per_hour
//	0,1,0.9731,3.06
//	195,1,0.9731,3.06
//	390,0,0.9731,3.06
//
// The header is required; the price and on-demand columns are optional
// (when present, every row has one; the on-demand price is the same on
// every row). time_seconds starts anywhere and grows by the same
// step on every row (the step is the first difference; at least two rows);
// available is the count of instances available, 1 or 0 for one node;
// prices are plain decimals, rounded half up to the micro-dollar. Lines
// starting with # are comments.
//
// A zone's region is the file's metadata.region, or its name without the
// last letter and a trailing "-" (RegionOf). Spot prices kept apart from
// the availability, one file per zone, are joined with JoinPrices.
//
// A folder stands for every .json and .csv file directly in it, in name
// order. A trace is named by its zone: the file name up to the first "_"
// (us-east-1a_v100_1.json is us-east-1a); when two loaded files would share
// a name, both keep their whole base name instead.
//
// This package does I/O so that package bidding does not have to.
package trace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Trace is the measured spot availability of one zone.
type Trace struct {
	// Name is the zone ("us-east-1a").
	Name string
	// Source is the file it was read from.
	Source string
	// Step is the time between two samples.
	Step time.Duration
	// Avail is, per step, how many instances were available.
	Avail []int
	// Prices is, per step, the spot price per instance-hour; nil when the
	// file carries none.
	Prices []money.Micros
	// OnDemand is the zone's on-demand price per instance-hour; 0 when
	// the file does not say (the simulation's default applies).
	OnDemand money.Micros
	// Region is the zone's region as the file states it; "" means the
	// one its name implies (see RegionOf).
	Region string
}

// RegionOf is the region of a trace: as its file states it, or else the
// zone's name without its last letter and a trailing "-" (us-east-1a is
// in us-east-1, europe-west1-c in europe-west1). A name that does not end
// in a letter is its own region.
func (t Trace) RegionOf() string {
	if t.Region != "" {
		return t.Region
	}
	return ZoneRegion(t.Name)
}

// ZoneRegion is the region a zone's name implies: the name without its
// last letter and then a trailing "-".
func ZoneRegion(zone string) string {
	if n := len(zone); n > 1 {
		if c := zone[n-1]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return strings.TrimSuffix(zone[:n-1], "-")
		}
	}
	return zone
}

// Len is the number of samples.
func (t Trace) Len() int { return len(t.Avail) }

// Max is the largest count of available instances seen.
func (t Trace) Max() int {
	if len(t.Avail) == 0 {
		return 0
	}
	return slices.Max(t.Avail)
}

// Exts are the file extensions Load reads.
var Exts = []string{".json", ".csv"}

// Load reads the traces at each path; a folder stands for every trace file
// directly in it. At least one trace is returned, or an error naming the
// file and the problem.
func Load(paths ...string) ([]Trace, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		found, err := traceFiles(p)
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return nil, errors.New("trace: no trace files given")
	}
	out := make([]Trace, 0, len(files))
	for _, f := range files {
		t, err := LoadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	uniqueNames(out)
	return out, nil
}

// traceFiles lists the trace files directly in dir, in name order.
func traceFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() && slices.Contains(Exts, strings.ToLower(filepath.Ext(e.Name()))) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("trace: folder %s holds no .json or .csv trace files", dir)
	}
	return files, nil
}

// LoadFile reads one trace file, JSON or CSV by its extension.
func LoadFile(path string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	var t Trace
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		t, err = ParseJSON(f)
	case ".csv":
		t, err = ParseCSV(f)
	default:
		return Trace{}, fmt.Errorf("trace %s: unknown format %q (want .json or .csv)", path, ext)
	}
	if err != nil {
		return Trace{}, fmt.Errorf("trace %s: %w", path, err)
	}
	t.Name, t.Source = zoneName(path), path
	return t, nil
}

// zoneName is the zone part of a trace file name: up to the first "_".
func zoneName(path string) string {
	base := baseName(path)
	if zone, _, ok := strings.Cut(base, "_"); ok && zone != "" {
		return zone
	}
	return base
}

func baseName(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// uniqueNames gives traces that share a zone name their whole base name,
// so that every name in a report is one file.
func uniqueNames(ts []Trace) {
	count := map[string]int{}
	for _, t := range ts {
		count[t.Name]++
	}
	for i := range ts {
		if count[ts[i].Name] > 1 {
			ts[i].Name = baseName(ts[i].Source)
		}
	}
}

// validate checks what both formats share.
func (t *Trace) validate() error {
	if t.Step <= 0 {
		return fmt.Errorf("step %v is not positive", t.Step)
	}
	if len(t.Avail) == 0 {
		return errors.New("no samples")
	}
	for i, v := range t.Avail {
		if v < 0 {
			return fmt.Errorf("sample %d: %d is not a count of instances", i, v)
		}
	}
	if t.Prices != nil {
		if len(t.Prices) != len(t.Avail) {
			return fmt.Errorf("%d prices for %d samples", len(t.Prices), len(t.Avail))
		}
		for i, p := range t.Prices {
			if p < 0 {
				return fmt.Errorf("price %d: %s is negative", i, p)
			}
		}
	}
	return nil
}
