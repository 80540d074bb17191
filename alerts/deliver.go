package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// maxRetryAfter caps how long a receiver's Retry-After can hold a webhook's
// queue.
const maxRetryAfter = 5 * time.Minute

// StatusError is a webhook's answer other than 2xx.
type StatusError struct {
	Code int
	// RetryAfter is the receiver's Retry-After, if it sent one.
	RetryAfter time.Duration
	// Body is the start of the answer, with the webhook's secrets
	// redacted.
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("HTTP %d", e.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body)
}

// IsRetryable reports whether a failed delivery may succeed if tried
// again: network errors (anything but a StatusError), 5xx and 429.
func IsRetryable(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return err != nil
	}
	return se.Code == http.StatusTooManyRequests || se.Code >= 500
}

// deliver sends one alert, retrying as the policy allows. It returns when
// the alert is delivered, given up on, or ctx ends.
func (s *sink) deliver(ctx context.Context, it item) {
	body, err := s.render(it)
	if err != nil {
		s.failed.Add(1)
		s.log.Error("cannot render alert", append(alertFields(it), zap.Error(err))...)
		return
	}
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, body)
		if err == nil {
			s.sent.Add(1)
			s.log.Debug("alert delivered", append(alertFields(it), zap.Int("attempt", attempt))...)
			return
		}
		if ctx.Err() != nil {
			return
		}
		fields := append(alertFields(it), zap.Int("attempt", attempt), zap.String("error", s.redact(err.Error())))
		if !IsRetryable(err) || attempt >= s.retry.MaxAttempts {
			s.failed.Add(1)
			s.log.Warn("giving up on an alert", fields...)
			return
		}
		wait := s.backoff(attempt, err)
		s.retried.Add(1)
		s.log.Debug("alert delivery failed; will retry", append(fields, zap.Duration("retry_in", wait))...)
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// backoff is how long to wait before attempt+1: the receiver's Retry-After
// if it gave one, else exponential from Initial up to Max, with "equal
// jitter" (half fixed, half random) so that servers retrying the same
// receiver spread out.
func (s *sink) backoff(attempt int, err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return min(se.RetryAfter, maxRetryAfter)
	}
	d := s.retry.Initial << min(attempt-1, 30)
	if d <= 0 || d > s.retry.Max {
		d = s.retry.Max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// post makes one attempt. Errors never carry the URL.
func (s *sink) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.w.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.w.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("building the request failed")
	}
	req.Header = s.headers.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		// A *url.Error quotes the whole URL, secret path and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s: %w", s.w.Timeout, err)
		}
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &StatusError{
		Code:       resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		Body:       s.redact(strings.TrimSpace(strings.ToValidUTF8(string(snippet), ""))),
	}
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(min(secs, int(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now))
	}
	return 0
}

// newHTTPClient is the client webhooks are called with when none is given:
// no redirects (a webhook that redirects is misconfigured, and following
// one would send the alert, and its headers, somewhere else).
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// redactor returns a function that removes a webhook's secrets from a
// string: its URL and the URL's path, query and password, and its header
// values. It is applied to every error and answer before it is logged.
func redactor(w Webhook) func(string) string {
	var secrets []string
	add := func(s string) {
		// Very short values would redact ordinary words; they are not
		// credentials anyway.
		if len(s) >= 6 {
			secrets = append(secrets, s)
		}
	}
	add(w.URL)
	if u, err := url.Parse(w.URL); err == nil {
		add(u.Path)
		add(u.EscapedPath())
		add(u.RawQuery)
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		add(u.User.Username())
	}
	for k, v := range w.Headers {
		if !strings.EqualFold(k, "Content-Type") {
			add(v)
			// "Bearer <token>": the token alone may be echoed.
			if _, tok, ok := strings.Cut(v, " "); ok {
				add(tok)
			}
		}
	}
	if len(secrets) == 0 {
		return func(s string) string { return s }
	}
	// Longest first, so a secret is redacted whole before any part of it.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}
	return strings.NewReplacer(pairs...).Replace
}
