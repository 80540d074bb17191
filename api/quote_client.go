package api

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Quote asks the server for a quote of a job spec (POST /v1/quote), made
// over its clock, offer book and learned rates; the answer (the report
// `spotwise quote -o json` prints) is decoded into into. months and
// runsPerMonth describe a job that comes back (0: a one-off).
func (c *Client) Quote(ctx context.Context, spec []byte, contentType string, months int, runsPerMonth float64, into any) error {
	v := url.Values{}
	if months > 0 {
		v.Set("months", strconv.Itoa(months))
	}
	if runsPerMonth > 0 && runsPerMonth != 1 {
		v.Set("runs_per_month", strconv.FormatFloat(runsPerMonth, 'g', -1, 64))
	}
	u := c.Base + "/v1/quote"
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(spec))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	_, err = c.do(req, into)
	return err
}

// GetJSON reads one of the server's other GET endpoints (/v1/status,
// /v1/instances) into into.
func (c *Client) GetJSON(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	_, err = c.do(req, into)
	return err
}
