package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spotwise/spotwise/auth"
)

// Client talks to a spotwise server over HTTP; the CLI uses it.
type Client struct {
	Base string
	HTTP *http.Client
	// Token is sent as "Authorization: Bearer <token>" (an API token or
	// an OIDC ID token).
	Token string
}

// NewClient returns a client for a server address ("127.0.0.1:8080" or a
// full URL).
func NewClient(server string) *Client {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	return &Client{Base: strings.TrimRight(server, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Submit sends a spec file's bytes; contentType is application/yaml or
// application/json.
func (c *Client) Submit(ctx context.Context, spec []byte, contentType, idempotencyKey string) (*JobView, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/v1/jobs", bytes.NewReader(spec))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", contentType)
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	var v JobView
	status, err := c.do(req, &v)
	if err != nil {
		return nil, false, err
	}
	return &v, status == http.StatusCreated, nil
}

// Get fetches one job.
func (c *Client) Get(ctx context.Context, id string) (*JobView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	var v JobView
	_, err = c.do(req, &v)
	return &v, err
}

// Cancel cancels one job.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*JobView, error) {
	u := c.Base + "/v1/jobs/" + url.PathEscape(id)
	if reason != "" {
		u += "?reason=" + url.QueryEscape(reason)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return nil, err
	}
	var v JobView
	_, err = c.do(req, &v)
	return &v, err
}

// List fetches one page of jobs.
func (c *Client) List(ctx context.Context, q Query) (*JobList, error) {
	v := url.Values{}
	for _, s := range q.States {
		v.Add("state", string(s))
	}
	if q.Team != "" {
		v.Set("team", q.Team)
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/jobs?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var l JobList
	_, err = c.do(req, &l)
	return &l, err
}

// ListAll follows the pages of a listing up to max jobs (0 = all).
func (c *Client) ListAll(ctx context.Context, q Query, max int) ([]Summary, error) {
	out := []Summary{}
	for {
		if max > 0 {
			q.Limit = min(1000, max-len(out))
		} else {
			q.Limit = 1000
		}
		page, err := c.List(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Jobs...)
		if page.Next == "" || (max > 0 && len(out) >= max) {
			return out, nil
		}
		q.After = page.Next
	}
}

func (c *Client) do(req *http.Request, into any) (int, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w at %s (is `spotwise server` running? set --server or SPOTWISE_SERVER): %w", ErrUnreachable, c.Base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
			eb.Error.Status = resp.StatusCode
			return resp.StatusCode, eb.Error
		}
		return resp.StatusCode, fmt.Errorf("server answered %s", resp.Status)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return resp.StatusCode, fmt.Errorf("reading server answer: %w", err)
	}
	return resp.StatusCode, nil
}

// CreateToken makes an API token; the answer holds it, shown this once.
func (c *Client) CreateToken(ctx context.Context, r TokenRequest) (*CreatedToken, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/v1/tokens", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var v CreatedToken
	_, err = c.do(req, &v)
	return &v, err
}

// ListTokens lists a team's tokens ("" for the caller's own team, or, for
// an operator, every token).
func (c *Client) ListTokens(ctx context.Context, team string) (*TokenList, error) {
	u := c.Base + "/v1/tokens"
	if team != "" {
		u += "?team=" + url.QueryEscape(team)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	var v TokenList
	_, err = c.do(req, &v)
	return &v, err
}

// RevokeToken ends a token at once.
func (c *Client) RevokeToken(ctx context.Context, id string) (*auth.Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.Base+"/v1/tokens/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	var v auth.Token
	_, err = c.do(req, &v)
	return &v, err
}

// ListAudit reads audit records (team "" for the caller's team or, for an
// operator, everything; since as "24h" or an RFC 3339 time).
func (c *Client) ListAudit(ctx context.Context, team, target, since string, limit int) (*AuditList, error) {
	v := url.Values{}
	for k, x := range map[string]string{"team": team, "target": target, "since": since} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/audit?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var l AuditList
	_, err = c.do(req, &l)
	return &l, err
}
