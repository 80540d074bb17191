package notices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
)

// IMDS paths polled for notices (under /latest/meta-data/).
const (
	pathInstanceAction = "spot/instance-action"
	pathRebalance      = "events/recommendations/rebalance"
	pathMaintenance    = "events/maintenance/scheduled"
)

// DefaultEC2Interval is how often EC2 polls. EC2 gives two minutes'
// notice, so a few seconds' delay costs little of it.
const DefaultEC2Interval = 5 * time.Second

// EC2 is the agent's view of its own EC2 instance's fate from the instance
// metadata service (IMDSv2): the spot instance-action (a spot interruption
// with its time), the rebalance recommendation and scheduled maintenance.
// It implements agent.NoticeSource.
type EC2 struct {
	client   *imds.Client
	clk      clock.Clock
	log      *zap.Logger
	interval time.Duration
}

// EC2Option configures an EC2 notice source.
type EC2Option func(*ec2Options)

type ec2Options struct {
	endpoint string
	clk      clock.Clock
	log      *zap.Logger
	interval time.Duration
	backoff  time.Duration // longest retry backoff; 0 keeps the SDK's 1s
}

// WithEC2Endpoint sets the metadata service's base URL (default
// http://169.254.169.254; tests use a local server).
func WithEC2Endpoint(url string) EC2Option { return func(o *ec2Options) { o.endpoint = url } }

// WithEC2Interval sets the poll interval (default 5s).
func WithEC2Interval(d time.Duration) EC2Option { return func(o *ec2Options) { o.interval = d } }

// WithEC2Clock sets the clock the polls are timed by.
func WithEC2Clock(c clock.Clock) EC2Option { return func(o *ec2Options) { o.clk = c } }

// WithEC2Logger sets the logger.
func WithEC2Logger(l *zap.Logger) EC2Option { return func(o *ec2Options) { o.log = l } }

// NewEC2 returns a poller of the EC2 instance's metadata. It uses the
// SDK's IMDS client, which fetches a session token with PUT
// /latest/api/token, sends it with every GET and fetches a new one when it
// expires or is refused; falling back to IMDSv1 is off.
func NewEC2(opts ...EC2Option) *EC2 {
	o := ec2Options{clk: clock.Real{}, log: zap.NewNop(), interval: DefaultEC2Interval}
	for _, opt := range opts {
		opt(&o)
	}
	io := imds.Options{Endpoint: o.endpoint, EnableFallback: awssdk.FalseTernary, ClientEnableState: imds.ClientEnabled}
	if o.backoff > 0 {
		io.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), o.backoff)
		io.DisableDefaultMaxBackoff = true
	}
	client := imds.New(io)
	return &EC2{client: client, clk: o.clk, log: o.log, interval: o.interval}
}

var _ agent.NoticeSource = (*EC2)(nil)

// Watch polls until ctx ends and calls fn once for each new notice: a
// spot instance-action (Kind spot-interruption, Deadline its time), a
// rebalance recommendation (Kind rebalance, no deadline), an active
// scheduled maintenance event (Kind maintenance, Deadline its start). A
// poll that fails is logged and tried again at the next one.
func (n *EC2) Watch(ctx context.Context, fn func(agent.Notice)) error {
	seen := map[string]bool{}
	for {
		for _, nt := range n.poll(ctx) {
			key := nt.Kind + "@" + nt.Deadline.UTC().Format(time.RFC3339Nano)
			if nt.Kind == string(providers.EventRebalance) {
				key = nt.Kind // one recommendation per instance life
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			fn(nt)
		}
		if !sleep(ctx, n.clk, n.interval) {
			return nil
		}
	}
}

// poll reads every notice path once.
func (n *EC2) poll(ctx context.Context) []agent.Notice {
	var out []agent.Notice
	if body, ok := n.get(ctx, pathInstanceAction); ok {
		var a struct {
			Action string `json:"action"`
			Time   string `json:"time"`
		}
		if t, err := parseIMDSTime(body, &a, func() string { return a.Time }); err == nil {
			out = append(out, agent.Notice{Kind: string(providers.EventSpotInterruption), Deadline: t})
		} else {
			n.log.Warn("unreadable spot instance-action", zap.Error(err))
		}
	}
	if body, ok := n.get(ctx, pathRebalance); ok {
		var r struct {
			NoticeTime string `json:"noticeTime"`
		}
		if _, err := parseIMDSTime(body, &r, func() string { return r.NoticeTime }); err == nil {
			out = append(out, agent.Notice{Kind: string(providers.EventRebalance)})
		} else {
			n.log.Warn("unreadable rebalance recommendation", zap.Error(err))
		}
	}
	if body, ok := n.get(ctx, pathMaintenance); ok {
		var events []struct {
			Code      string `json:"Code"`
			State     string `json:"State"`
			NotBefore string `json:"NotBefore"`
		}
		if err := json.Unmarshal(body, &events); err != nil {
			n.log.Warn("unreadable scheduled maintenance", zap.Error(err))
		}
		for _, e := range events {
			if e.State != "active" {
				continue
			}
			t, err := time.Parse("2 Jan 2006 15:04:05 MST", e.NotBefore)
			if err != nil {
				n.log.Warn("unreadable maintenance time", zap.String("code", e.Code), zap.Error(err))
				continue
			}
			out = append(out, agent.Notice{Kind: string(providers.EventMaintenance), Deadline: t.UTC()})
		}
	}
	return out
}

// get fetches a metadata path; false when there is nothing there (404,
// the normal answer) or the fetch failed.
func (n *EC2) get(ctx context.Context, path string) ([]byte, bool) {
	out, err := n.client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var status interface{ HTTPStatusCode() int }
		if !(errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound) && ctx.Err() == nil {
			n.log.Warn("reading instance metadata", zap.String("path", path), zap.Error(err))
		}
		return nil, false
	}
	defer out.Content.Close()
	body, err := io.ReadAll(io.LimitReader(out.Content, 64<<10))
	if err != nil {
		return nil, false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, false
	}
	return body, true
}

// parseIMDSTime decodes body into v and parses the RFC 3339 time field()
// reads from it.
func parseIMDSTime(body []byte, v any, field func() string) (time.Time, error) {
	if err := json.Unmarshal(body, v); err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, field())
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", field(), err)
	}
	return t.UTC(), nil
}
