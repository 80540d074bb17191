package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/money"
)

// svgBar is a bar of the chart as a reader of the file finds it.
type svgBar struct {
	group, start   string
	usd            money.Micros
	y, height      float64
	x, width       float64
	color, tooltip string
}

// readSVG parses a chart: it must be well-formed XML with an <svg> root;
// it returns the bars and the legend's keys.
func readSVG(t *testing.T, b []byte) (bars []svgBar, legend []string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var stack []xml.StartElement
	var cur *svgBar
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not XML: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			stack = append(stack, el)
			attr := func(name string) string {
				for _, a := range el.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			num := func(name string) float64 {
				v, err := strconv.ParseFloat(attr(name), 64)
				if err != nil {
					t.Fatalf("%s %s=%q: %v", el.Name.Local, name, attr(name), err)
				}
				return v
			}
			if el.Name.Local == "rect" && attr("class") == "bar" {
				usd, err := money.Parse(attr("data-usd"))
				if err != nil {
					t.Fatal(err)
				}
				bars = append(bars, svgBar{group: attr("data-group"), start: attr("data-start"), usd: usd,
					x: num("x"), y: num("y"), width: num("width"), height: num("height"), color: attr("fill")})
				cur = &bars[len(bars)-1]
			}
		case xml.EndElement:
			if el.Name.Local == "rect" {
				cur = nil
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				continue
			}
			top := stack[len(stack)-1]
			if top.Name.Local == "title" && cur != nil {
				cur.tooltip += string(el)
			}
			if top.Name.Local == "text" && slices.ContainsFunc(top.Attr, func(a xml.Attr) bool { return a.Name.Local == "class" && a.Value == "legend-key" }) {
				legend = append(legend, string(el))
			}
		}
	}
	if root != "svg" {
		t.Fatalf("the root element is %q, not svg", root)
	}
	return bars, legend
}

// series builds a CostSeries of hourly buckets from 06:00.
func series(groups ...api.CostGroup) *api.CostSeries {
	from := time.Date(2031, 3, 14, 6, 0, 0, 0, time.UTC)
	s := &api.CostSeries{GroupBy: "team", From: from, Bucket: "1h0m0s", Groups: groups}
	n := 0
	for _, g := range groups {
		n = max(n, len(g.Series))
		s.Total += g.Total
	}
	for i := range n {
		s.Starts = append(s.Starts, from.Add(time.Duration(i)*time.Hour))
	}
	s.To = from.Add(time.Duration(n) * time.Hour)
	return s
}

func group(key string, series ...money.Micros) api.CostGroup {
	g := api.CostGroup{Key: key, Series: series}
	for _, v := range series {
		g.Total += v
	}
	return g
}

// The chart has a bar for each group's spend in each bucket where it
// spent, sized by what it spent, each group in the legend; the same
// series always draws the same file.
func TestCostsSVG(t *testing.T) {
	tests := []struct {
		name   string
		s      *api.CostSeries
		legend []string
	}{
		{"two teams", series(group("vision", 10*money.Dollar, 20*money.Dollar, 0, 5*money.Dollar), group("nlp", 0, 4*money.Dollar, 6*money.Dollar, 1)), []string{"vision", "nlp"}},
		{"a key to escape", series(group(`<R&D> "lab"`, 123_456, 0, 7_000_000)), []string{`<R&D> "lab"`}},
		{"a reversal below zero", series(group("vision", 3*money.Dollar, -2*money.Dollar), group("nlp", 1*money.Dollar, 1*money.Dollar)), []string{"vision", "nlp"}},
		{"nothing spent", series(), nil},
		{"many groups", series(func() []api.CostGroup {
			var gs []api.CostGroup
			for i := range 13 {
				gs = append(gs, group(fmt.Sprintf("team-%02d", i), money.Micros(13-i)*money.Dollar, money.Dollar))
			}
			return gs
		}()...), []string{"team-00", "team-01", "team-02", "team-03", "team-04", "team-05", "team-06", "team-07", "team-08", "team-09", "3 others"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b bytes.Buffer
			if err := writeCostsSVG(&a, tt.s); err != nil {
				t.Fatal(err)
			}
			if err := writeCostsSVG(&b, tt.s); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("the same series drew two different files")
			}
			bars, legend := readSVG(t, a.Bytes())
			if !slices.Equal(legend, tt.legend) {
				t.Errorf("legend %q, want %q", legend, tt.legend)
			}
			// What the bars say they hold: every non-zero figure of
			// the groups drawn one by one, the others summed.
			want := map[string]money.Micros{}
			for i, g := range tt.s.Groups {
				key := g.Key
				if i >= svgMaxGroups {
					key = tt.legend[len(tt.legend)-1]
				}
				for b, v := range g.Series {
					want[key+"@"+tt.s.Starts[b].Format(time.RFC3339)] += v
				}
			}
			nonZero := 0
			for _, v := range want {
				if v != 0 {
					nonZero++
				}
			}
			if len(bars) != nonZero {
				t.Errorf("%d bars, want one per non-zero figure: %d", len(bars), nonZero)
			}
			// Bars are sized by spend: height per dollar is the same
			// for every bar, and a bar below zero sits below the axis.
			// Measured on the tallest bar, where rounding matters least.
			var perDollar, tallest float64
			for _, bar := range bars {
				if bar.height > tallest {
					tallest, perDollar = bar.height, bar.height/math.Abs(bar.usd.Dollars())
				}
			}
			colors := map[string]string{}
			for _, bar := range bars {
				k := bar.group + "@" + bar.start
				if want[k] != bar.usd {
					t.Errorf("bar %s holds %s, the series %s", k, bar.usd, want[k])
				}
				if bar.height < 0 || bar.width <= 0 {
					t.Errorf("bar %s is %gx%g", k, bar.width, bar.height)
				}
				if want := perDollar * math.Abs(bar.usd.Dollars()); math.Abs(bar.height-want) > 0.02 {
					t.Errorf("bar %s of %s is %g high, want %g (%g per dollar)", k, bar.usd, bar.height, want, perDollar)
				}
				if c, ok := colors[bar.group]; ok && c != bar.color {
					t.Errorf("group %s drawn in %s and %s", bar.group, c, bar.color)
				}
				colors[bar.group] = bar.color
				if bar.tooltip == "" {
					t.Errorf("bar %s has no tooltip", k)
				}
			}
			if len(colors) != len(tt.legend) && len(bars) > 0 {
				t.Errorf("%d colours for %d groups", len(colors), len(tt.legend))
			}
		})
	}
}

// Bars of one bucket stack: each starts where the one before ends.
func TestCostsSVGStacks(t *testing.T) {
	var buf bytes.Buffer
	if err := writeCostsSVG(&buf, series(group("a", 2*money.Dollar), group("b", 3*money.Dollar), group("c", -1*money.Dollar))); err != nil {
		t.Fatal(err)
	}
	bars, _ := readSVG(t, buf.Bytes())
	if len(bars) != 3 {
		t.Fatalf("%d bars", len(bars))
	}
	a, b, c := bars[0], bars[1], bars[2]
	if math.Abs(a.y-(b.y+b.height)) > 0.01 {
		t.Errorf("b (%g..%g) does not sit on a (%g..%g)", b.y, b.y+b.height, a.y, a.y+a.height)
	}
	if math.Abs(c.y-(a.y+a.height)) > 0.01 {
		t.Errorf("c (%g..%g), below zero, does not hang from a's base (%g)", c.y, c.y+c.height, a.y+a.height)
	}
}
