package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Costs reads spend per group over a period (GET /v1/costs). Zero fields
// of q are left to the server (the last 24 hours of its clock, hourly,
// by team); lastHours > 0 with a zero q.From asks for the hours up to
// q.To or, without one, up to the server's now, which a client cannot
// know when the server runs a simulated clock.
func (c *Client) Costs(ctx context.Context, q CostQuery, lastHours int) (*CostSeries, error) {
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
	var r CostSeries
	_, err = c.do(req, &r)
	return &r, err
}

// CostEntries reads the ledger entries of a period (GET
// /v1/costs/entries), of one team and one job when they are given.
func (c *Client) CostEntries(ctx context.Context, from, to time.Time, team, job string) (*CostEntries, error) {
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
	var l CostEntries
	_, err = c.do(req, &l)
	return &l, err
}
