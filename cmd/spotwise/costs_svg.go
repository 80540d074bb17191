package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/money"
)

// The chart's geometry, in SVG user units.
const (
	svgWidth   = 960
	svgHeight  = 480
	plotLeft   = 90
	plotTop    = 50
	plotWidth  = 640
	plotHeight = 360
	legendLeft = plotLeft + plotWidth + 30
	// svgMaxGroups are drawn each in its colour; the rest share one.
	svgMaxGroups = 10
)

// svgColors are the groups' colours, in order (Tableau 10, which stays
// distinct for colour-blind readers better than most).
var svgColors = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

const svgOthersColor = "#79706e"

// chartGroup is a group as drawn: its key, colour and series.
type chartGroup struct {
	key    string
	color  string
	total  money.Micros
	series []money.Micros
}

// chartGroups picks the groups to draw: the first svgMaxGroups (the
// report lists the biggest first) each in its colour, the rest summed as
// one.
func chartGroups(s *api.CostSeries) []chartGroup {
	var out []chartGroup
	var others *chartGroup
	for i, g := range s.Groups {
		if i < svgMaxGroups {
			out = append(out, chartGroup{key: g.Key, color: svgColors[i%len(svgColors)], total: g.Total, series: g.Series})
			continue
		}
		if others == nil {
			out = append(out, chartGroup{color: svgOthersColor, series: make([]money.Micros, len(s.Starts))})
			others = &out[len(out)-1]
		}
		others.total += g.Total
		for b := range min(len(g.Series), len(others.series)) {
			others.series[b] += g.Series[b]
		}
	}
	if others != nil {
		others.key = fmt.Sprintf("%d others", len(s.Groups)-svgMaxGroups)
	}
	return out
}

// niceStep is a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n steps.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// dollarTick writes a tick's amount with as many decimals as the step
// needs.
func dollarTick(v, step float64) string {
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	s := fmt.Sprintf("%.*f", dec, math.Abs(v))
	if v < 0 && s != fmt.Sprintf("%.*f", dec, 0.0) {
		return "-$" + s
	}
	return "$" + s
}

// writeCostsSVG draws spend over time as stacked bars, a bar per bucket
// and a colour per group (spend below zero, from reversals, stacks
// downwards), with dollar ticks, dates and a legend. The same series
// always makes the same bytes.
func writeCostsSVG(w io.Writer, s *api.CostSeries) error {
	groups := chartGroups(s)
	n := len(s.Starts)
	// The axis spans the highest stack above zero and the lowest below.
	hi, lo := 0.0, 0.0
	for b := range n {
		up, down := 0.0, 0.0
		for _, g := range groups {
			if b < len(g.series) {
				if v := g.series[b].Dollars(); v > 0 {
					up += v
				} else {
					down += v
				}
			}
		}
		hi, lo = math.Max(hi, up), math.Min(lo, down)
	}
	step := niceStep(hi-lo, 5)
	top, bottom := math.Ceil(hi/step)*step, math.Floor(lo/step)*step
	if top == bottom {
		top = bottom + step
	}
	y := func(v float64) float64 { return plotTop + (top-v)/(top-bottom)*plotHeight }

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	by := strings.ReplaceAll(s.GroupBy, ",", ", ")
	title := fmt.Sprintf("Spend per %s, %s", by, periodText(s.From, s.To, s.Bucket))
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, svgHeight, svgWidth, svgHeight)
	p("<title>%s</title>\n", esc(title))
	p(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	p(`<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))

	// Dollar ticks and grid lines.
	p(`<g class="y-axis" fill="#555555" text-anchor="end">` + "\n")
	for i := 0; ; i++ {
		v := bottom + float64(i)*step
		if v > top+step/1e6 {
			break
		}
		yy := y(v)
		p(`<line x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="#e5e5e5"/>`+"\n", plotLeft, yy, plotLeft+plotWidth, yy)
		p(`<text x="%d" y="%.2f" dy="4">%s</text>`+"\n", plotLeft-8, yy, dollarTick(v, step))
	}
	p("</g>\n")

	// The bars: for each bucket, each group's spend stacked on the
	// groups before it.
	slot := float64(plotWidth) / float64(max(n, 1))
	gap := 0.0
	if slot > 4 {
		gap = slot * 0.15
	}
	timeFormat := "2006-01-02 15:04"
	p(`<g class="bars">` + "\n")
	for i := range n {
		x := plotLeft + float64(i)*slot + gap/2
		up, down := 0.0, 0.0
		for _, g := range groups {
			if i >= len(g.series) || g.series[i] == 0 {
				continue
			}
			v := g.series[i].Dollars()
			var y0, y1 float64
			if v > 0 {
				y0, y1 = y(up+v), y(up)
				up += v
			} else {
				y0, y1 = y(down), y(down+v)
				down += v
			}
			p(`<rect class="bar" data-group="%s" data-start="%s" data-usd="%s" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"><title>%s, %s UTC: %s</title></rect>`+"\n",
				esc(g.key), s.Starts[i].UTC().Format(time.RFC3339), g.series[i].Decimal(), x, y0, slot-gap, y1-y0, g.color,
				esc(g.key), s.Starts[i].UTC().Format(timeFormat), g.series[i].Human())
		}
	}
	p("</g>\n")

	// The time axis: the zero line, and a date under about eight bars.
	p(`<line class="x-axis" x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="#333333"/>`+"\n", plotLeft, y(0), plotLeft+plotWidth, y(0))
	labelFormat := "01-02 15:04"
	if d, err := time.ParseDuration(s.Bucket); err == nil && d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		labelFormat = "2006-01-02"
	}
	every := max(1, (n+7)/8)
	p(`<g class="x-labels" fill="#555555" text-anchor="middle">` + "\n")
	for i := 0; i < n; i += every {
		x := plotLeft + float64(i)*slot + slot/2
		p(`<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#333333"/>`+"\n", x, plotTop+plotHeight, x, plotTop+plotHeight+5)
		p(`<text x="%.2f" y="%d">%s</text>`+"\n", x, plotTop+plotHeight+20, s.Starts[i].UTC().Format(labelFormat))
	}
	p(`<text x="%d" y="%d">UTC</text>`+"\n", plotLeft+plotWidth/2, plotTop+plotHeight+40)
	p("</g>\n")

	// The legend: each group's colour, key and spend in the period.
	p(`<g class="legend">` + "\n")
	p(`<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", legendLeft, plotTop, esc(by))
	for i, g := range groups {
		yy := plotTop + 20 + i*22
		p(`<rect x="%d" y="%d" width="14" height="14" fill="%s"/>`+"\n", legendLeft, yy-11, g.color)
		p(`<text class="legend-key" x="%d" y="%d">%s</text>`+"\n", legendLeft+20, yy, esc(g.key))
		p(`<text x="%d" y="%d" fill="#555555" text-anchor="end">%s</text>`+"\n", svgWidth-10, yy, g.total.Human())
	}
	if len(groups) == 0 {
		p(`<text x="%d" y="%d" fill="#555555">no spend in the period</text>`+"\n", legendLeft, plotTop+20)
	}
	p("</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// esc escapes text for XML.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
