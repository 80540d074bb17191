package simulate

import (
	"bufio"
	"fmt"
	"html"
	"io"

	"github.com/spotwise/spotwise/bidding"
)

// Timeline is one run of each policy from the same start, for a plot.
type Timeline struct {
	Start    int
	Policies []string
	Runs     []Outcome // with Timeline set, one per policy
}

// Timelines replays the job from one start through every policy of the
// report, keeping what each ran on at every tick.
func (m *Market) Timelines(job Job, r *Report, k, history int) (*Timeline, error) {
	if k < 0 || k >= len(r.Starts) {
		return nil, fmt.Errorf("run %d: there are %d", k, len(r.Starts))
	}
	t, err := m.Ticks(job)
	if err != nil {
		return nil, err
	}
	start := r.Starts[k]
	from := 0
	if history >= 0 {
		from = start - history
	}
	past := m.Observe(from, start)
	tl := &Timeline{Start: start}
	for _, s := range r.Policies {
		var out Outcome
		if s.Name == PolicyOptimal {
			if out, err = m.Optimal(t, start, true); err != nil {
				return nil, err
			}
		} else {
			p, err := bidding.NewPolicy(s.Name)
			if err != nil {
				return nil, err
			}
			out = m.Run(p, t, start, past, true)
		}
		tl.Policies = append(tl.Policies, s.Name)
		tl.Runs = append(tl.Runs, out)
	}
	return tl, nil
}

// The plot's colours: on-demand, idle, changeover, and one per zone.
var (
	colOnDemand   = "#d9534f"
	colIdle       = "#eeeeee"
	colChangeover = "#f0ad4e"
	colZones      = []string{"#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#393b79"}
)

func zoneColour(z int) string { return colZones[z%len(colZones)] }

// WritePlot draws the report as an SVG: mean cost per policy as bars
// (with p50 and p90 marks), then the timeline of one run: the zones'
// capacity and what each policy ran on, tick by tick.
func (m *Market) WritePlot(w io.Writer, r *Report, tl *Timeline) error {
	const (
		width   = 960
		left    = 150
		right   = 30
		barH    = 22
		rowH    = 16
		padding = 14
	)
	b := bufio.NewWriter(w)
	plotW := float64(width - left - right)
	nPol := len(r.Policies)
	barsTop := 50
	barsH := nPol * (barH + 6)
	tlTop := barsTop + barsH + 60
	nRows := 0
	if tl != nil {
		nRows = len(m.Zones) + len(tl.Policies)
	}
	height := tlTop + nRows*(rowH+4) + 70
	if tl == nil {
		height = barsTop + barsH + 40
	}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">Cost per run (%d runs, %d node(s))</text>`+"\n", padding, len(r.Starts), m.Nodes)

	var top float64
	for _, s := range r.Policies {
		top = max(top, s.P90Cost.Dollars(), s.MeanCost.Dollars())
	}
	if top <= 0 {
		top = 1
	}
	barsW := plotW - 340 // the rest holds the figures
	x := func(v float64) float64 { return float64(left) + barsW*v/top }
	for i, s := range r.Policies {
		y := barsTop + i*(barH+6)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH-6, html.EscapeString(s.Name))
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#4a7fb5"/>`+"\n", left, y, x(s.MeanCost.Dollars())-float64(left), barH)
		for _, p := range []float64{s.P50Cost.Dollars(), s.P90Cost.Dollars()} {
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black" stroke-width="2"/>`+"\n", x(p), x(p), y+3, y+barH-3)
		}
		label := fmt.Sprintf("mean $%.2f  p50 $%.2f  p90 $%.2f", s.MeanCost.Dollars(), s.P50Cost.Dollars(), s.P90Cost.Dollars())
		if s.Ratio > 0 {
			label += fmt.Sprintf("  (%.3fx optimal)", s.Ratio)
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%d" fill="#222">%s</text>`+"\n", float64(left)+barsW+12, y+barH-7, html.EscapeString(label))
	}
	if tl == nil {
		fmt.Fprintln(b, `</svg>`)
		return b.Flush()
	}

	ticks := r.Job.Deadline
	for _, o := range tl.Runs {
		ticks = max(ticks, len(o.Timeline))
	}
	tx := func(i int) float64 { return float64(left) + plotW*float64(i)/float64(ticks) }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="15" font-weight="bold">One run: start tick %d (%s ticks)</text>`+"\n", padding, tlTop-24, tl.Start, m.Step)
	row := tlTop
	for z, name := range m.Zones {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, row+rowH-3, html.EscapeString(name))
		for i := 0; i < ticks; {
			j := i
			for j < ticks && m.Available(z, tl.Start+j) == m.Available(z, tl.Start+i) {
				j++
			}
			if m.Available(z, tl.Start+i) {
				fmt.Fprintf(b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" opacity="0.45"/>`+"\n", tx(i), row, tx(j)-tx(i), rowH, zoneColour(z))
			}
			i = j
		}
		row += rowH + 4
	}
	for k, name := range tl.Policies {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" font-weight="bold">%s</text>`+"\n", left-8, row+rowH-3, html.EscapeString(name))
		slots := tl.Runs[k].Timeline
		for i := 0; i < len(slots); {
			j := i
			for j < len(slots) && slots[j] == slots[i] {
				j++
			}
			fmt.Fprintf(b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"/>`+"\n", tx(i), row, tx(j)-tx(i), rowH, slotColour(slots[i]))
			i = j
		}
		row += rowH + 4
	}
	dl := tx(r.Job.Deadline)
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black" stroke-dasharray="4 3"/>`+"\n", dl, dl, tlTop-6, row)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="end">deadline</text>`+"\n", dl-3, tlTop-8)
	legend := []struct{ name, colour string }{{"spot (zone colour)", zoneColour(0)}, {"on-demand", colOnDemand}, {"changeover", colChangeover}, {"idle", colIdle}}
	lx := left
	for _, l := range legend {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s" stroke="#999"/><text x="%d" y="%d">%s</text>`+"\n", lx, row+14, l.colour, lx+16, row+24, l.name)
		lx += 170
	}
	fmt.Fprintln(b, `</svg>`)
	return b.Flush()
}

func slotColour(s Slot) string {
	switch {
	case s.Changeover:
		return colChangeover
	case s.Choice.Kind == bidding.RunOnDemand:
		return colOnDemand
	case s.Choice.Kind == bidding.RunSpot:
		return zoneColour(s.Choice.Zone)
	}
	return colIdle
}
