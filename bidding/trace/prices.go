package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spotwise/spotwise/money"
)

// A price file holds one zone's measured spot prices apart from its
// availability (prices/aws-02-15-2023 in the shared traces):
//
//	{"metadata": {"gap_seconds": 195, "on_demand_price": 3.06}, "prices": [1.6703, ...]}
//
// tick i of the price file is tick i of the availability trace of the
// same file name. JoinPrices puts the two together. Its wire form is a
// JSON trace's without the data (jsonFile).

// JoinPrices gives each trace the spot prices (and the on-demand price
// and region, when stated) of the file with the same base name in dir.
// Every trace must have one, with the same step and at least as many
// ticks; a longer price file is cut to the trace.
func JoinPrices(ts []Trace, dir string) error {
	for i := range ts {
		path := filepath.Join(dir, filepath.Base(ts[i].Source))
		if !strings.EqualFold(filepath.Ext(path), ".json") {
			return fmt.Errorf("trace %s: prices are joined from .json files only", ts[i].Source)
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("prices for %s: %w", ts[i].Name, err)
		}
		err = joinFile(&ts[i], f)
		f.Close()
		if err != nil {
			return fmt.Errorf("prices %s: %w", path, err)
		}
	}
	return nil
}

func joinFile(t *Trace, r io.Reader) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var f jsonFile
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("not a JSON price file: %w", err)
	}
	if f.Metadata == nil || f.Metadata.GapSeconds == "" {
		return errors.New("metadata.gap_seconds is missing")
	}
	step, err := seconds(string(f.Metadata.GapSeconds))
	if err != nil {
		return fmt.Errorf("metadata.gap_seconds: %w", err)
	}
	if step != t.Step {
		return fmt.Errorf("step %v, the trace's is %v", step, t.Step)
	}
	if len(f.Prices) < t.Len() {
		return fmt.Errorf("%d prices for %d ticks", len(f.Prices), t.Len())
	}
	prices := make([]money.Micros, t.Len())
	for i := range prices {
		if prices[i], err = price(string(f.Prices[i])); err != nil {
			return fmt.Errorf("prices[%d]: %w", i, err)
		}
	}
	t.Prices = prices
	if f.Metadata.OnDemandPrice != "" {
		od, err := price(string(f.Metadata.OnDemandPrice))
		if err != nil || od <= 0 {
			return fmt.Errorf("metadata.on_demand_price %s: want a positive price", f.Metadata.OnDemandPrice)
		}
		t.OnDemand = od
	}
	if r := strings.TrimSpace(f.Metadata.Region); r != "" {
		t.Region = r
	}
	return nil
}
