package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

// CostReport is a GET /v1/costs answer as a client reads it: the spend
// series, and the overhead (spend that belongs to no job: orphan
// instances, teardown, reserved hours left idle) in all and per group.
// A server that does not report overhead yet leaves it zero.
type CostReport struct {
	CostSeries
	Overhead money.Micros      `json:"overhead_usd"`
	Groups   []CostReportGroup `json:"groups"`
}

// CostReportGroup is one group of a CostReport.
type CostReportGroup struct {
	CostGroup
	Overhead money.Micros `json:"overhead_usd"`
}

// Series is the report's spend series, without the overhead figures.
func (r *CostReport) Series() *CostSeries {
	s := r.CostSeries
	s.Groups = make([]CostGroup, len(r.Groups))
	for i, g := range r.Groups {
		s.Groups[i] = g.CostGroup
	}
	return &s
}

// CostEntryList is a GET /v1/costs/entries answer: the ledger entries
// whose charge period overlaps the period asked, whole, as recorded.
type CostEntryList struct {
	From    time.Time      `json:"from"`
	To      time.Time      `json:"to"`
	Entries []ledger.Entry `json:"entries"`
}

// Costs reads spend per group over a period (GET /v1/costs). Zero fields
// of q are left to the server (the last 24 hours of its clock, hourly,
// by team); lastHours > 0 with a zero q.From asks for the hours up to
// q.To or, without one, up to the server's now, which a client cannot
// know when the server runs a simulated clock.
func (c *Client) Costs(ctx context.Context, q CostQuery, lastHours int) (*CostReport, error) {
	v := url.Values{}
	set := func(k, x string) {
		if x != "" {
			v.Set(k, x)
		}
	}
	set("group_by", q.GroupBy)
	set("team", q.Team)
	if !q.From.IsZero() {
		set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.Bucket > 0 {
		set("bucket", q.Bucket.String())
	}
	if lastHours > 0 && q.From.IsZero() {
		set("hours", strconv.Itoa(lastHours))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/costs?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var r CostReport
	_, err = c.do(req, &r)
	return &r, err
}

// CostEntries reads the ledger entries of a period (GET
// /v1/costs/entries), of one team and one job when they are given.
func (c *Client) CostEntries(ctx context.Context, from, to time.Time, team, job string) (*CostEntryList, error) {
	v := url.Values{}
	v.Set("from", from.UTC().Format(time.RFC3339Nano))
	v.Set("to", to.UTC().Format(time.RFC3339Nano))
	if team != "" {
		v.Set("team", team)
	}
	if job != "" {
		v.Set("job", job)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/costs/entries?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var l CostEntryList
	_, err = c.do(req, &l)
	return &l, err
}
