package notices

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
)

// scheduledEventsAPI is the Scheduled Events API version spoken.
const scheduledEventsAPI = "2020-07-01"

// azureIMDS is the Azure instance metadata service's link-local address.
const azureIMDS = "http://169.254.169.254"

// AzureOption configures an Azure notice source.
type AzureOption func(*azureOptions)

type azureOptions struct {
	endpoint, vmName string
	client           *http.Client
	clk              clock.Clock
	log              *zap.Logger
	fast, slow       time.Duration
}

// WithAzureEndpoint sets the instance metadata service's base URL
// (default http://169.254.169.254; tests use a local server).
func WithAzureEndpoint(u string) AzureOption {
	return func(o *azureOptions) { o.endpoint = strings.TrimRight(u, "/") }
}

// WithAzureVMName sets the VM whose events are reported (default: the name
// IMDS gives for this VM). spotwise names the VM in the agent's
// --instance flag.
func WithAzureVMName(name string) AzureOption { return func(o *azureOptions) { o.vmName = name } }

// WithAzurePolling sets how often Scheduled Events are polled while an
// event of this VM is pending (default 1s) and otherwise (default 2s: a
// Spot eviction gives 30 s, and every second of it counts; the metadata
// service is local and cheap).
func WithAzurePolling(pending, idle time.Duration) AzureOption {
	return func(o *azureOptions) { o.fast, o.slow = pending, idle }
}

// WithAzureClock sets the clock the polls are timed by (default: the wall
// clock).
func WithAzureClock(c clock.Clock) AzureOption { return func(o *azureOptions) { o.clk = c } }

// WithAzureLogger sets the logger (default: none).
func WithAzureLogger(l *zap.Logger) AzureOption { return func(o *azureOptions) { o.log = l } }

// WithAzureHTTPClient sets the HTTP client of the metadata requests
// (default: one that never goes through a proxy).
func WithAzureHTTPClient(c *http.Client) AzureOption { return func(o *azureOptions) { o.client = c } }

// Azure tells the agent on an Azure VM about its own VM's fate from Azure
// Scheduled Events: a Spot eviction (Preempt, about 30 s ahead) as a
// spot-interruption notice, and Terminate, Reboot, Redeploy and Freeze as
// maintenance notices, each with the event's NotBefore as the
// deadline. Each event is reported once (by EventId); its notice's Ack
// approves the event (StartRequests), letting Azure go ahead once the
// checkpoint is stored. It implements agent.NoticeSource.
type Azure struct {
	base, vmName string
	client       *http.Client
	clk          clock.Clock
	log          *zap.Logger
	fast, slow   time.Duration

	mu   sync.Mutex
	seen map[string]bool
}

var _ agent.NoticeSource = (*Azure)(nil)

// NewAzure returns a poller of the VM's Scheduled Events.
func NewAzure(opts ...AzureOption) *Azure {
	o := azureOptions{clk: clock.Real{}, log: zap.NewNop(), endpoint: azureIMDS, fast: time.Second, slow: 2 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	client := o.client
	if client == nil {
		// IMDS is link-local: never through a proxy.
		client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	return &Azure{base: o.endpoint, vmName: o.vmName, client: client, clk: o.clk,
		log: o.log.With(zap.String("provider", "azure")), fast: o.fast, slow: o.slow, seen: map[string]bool{}}
}

// scheduledEvent is one event of the Scheduled Events document.
type scheduledEvent struct {
	EventID      string   `json:"EventId"`
	EventType    string   `json:"EventType"`
	ResourceType string   `json:"ResourceType"`
	Resources    []string `json:"Resources"`
	EventStatus  string   `json:"EventStatus"`
	NotBefore    string   `json:"NotBefore"`
	Description  string   `json:"Description"`
	EventSource  string   `json:"EventSource"`
}

type scheduledEventsDoc struct {
	DocumentIncarnation int              `json:"DocumentIncarnation"`
	Events              []scheduledEvent `json:"Events"`
}

// noticeKind maps an event type to a notice kind ("" for one the agent
// need not act on).
func noticeKind(eventType string) string {
	switch eventType {
	case "Preempt":
		return string(providers.EventSpotInterruption)
	case "Terminate", "Reboot", "Redeploy", "Freeze":
		return string(providers.EventMaintenance)
	}
	return ""
}

// Watch polls until ctx ends, calling fn for each new event of this VM. A
// failed poll is logged and tried again; Watch returns nil when ctx ends.
func (s *Azure) Watch(ctx context.Context, fn func(agent.Notice)) error {
	name := s.vmName
	for name == "" {
		n, err := s.computeName(ctx)
		if err == nil {
			name = n
			break
		}
		s.log.Warn("reading this VM's name from IMDS", zap.Error(err))
		if !sleep(ctx, s.clk, s.slow) {
			return nil
		}
	}
	for {
		pending, err := s.poll(ctx, name, fn)
		if err != nil && ctx.Err() == nil {
			s.log.Debug("polling scheduled events", zap.Error(err))
		}
		wait := s.slow
		if pending {
			wait = s.fast
		}
		if !sleep(ctx, s.clk, wait) {
			return nil
		}
	}
}

// poll reads the events once, reporting new ones of this VM; pending says
// one of this VM's events is still listed.
func (s *Azure) poll(ctx context.Context, name string, fn func(agent.Notice)) (pending bool, err error) {
	body, err := s.do(ctx, http.MethodGet, s.eventsURL(), nil)
	if err != nil {
		return false, err
	}
	var doc scheduledEventsDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return false, fmt.Errorf("decoding scheduled events: %w", err)
	}
	for _, e := range doc.Events {
		kind := noticeKind(e.EventType)
		if kind == "" || e.EventID == "" || !concerns(e, name) {
			continue
		}
		pending = true
		s.mu.Lock()
		seen := s.seen[e.EventID]
		s.seen[e.EventID] = true
		s.mu.Unlock()
		if seen {
			continue
		}
		deadline := s.clk.Now()
		if t, err := http.ParseTime(e.NotBefore); err == nil {
			deadline = t
		}
		s.log.Info("scheduled event", zap.String("event", e.EventType), zap.String("id", e.EventID),
			zap.String("status", e.EventStatus), zap.Time("not_before", deadline))
		fn(agent.Notice{Kind: kind, Deadline: deadline, Ack: s.acker(e.EventID)})
	}
	return pending, nil
}

// concerns reports whether an event is about the named VM.
func concerns(e scheduledEvent, name string) bool {
	if e.ResourceType != "" && e.ResourceType != "VirtualMachine" {
		return false
	}
	for _, r := range e.Resources {
		if strings.EqualFold(r, name) {
			return true
		}
	}
	return false
}

// acker approves an event early: Azure starts it once asked, instead of
// waiting for NotBefore.
func (s *Azure) acker(id string) func(context.Context) error {
	return func(ctx context.Context) error {
		body, err := json.Marshal(map[string][]map[string]string{"StartRequests": {{"EventId": id}}})
		if err != nil {
			return err
		}
		if _, err := s.do(ctx, http.MethodPost, s.eventsURL(), body); err != nil {
			return fmt.Errorf("approving scheduled event %s: %w", id, err)
		}
		s.log.Info("scheduled event approved", zap.String("id", id))
		return nil
	}
}

func (s *Azure) eventsURL() string {
	return s.base + "/metadata/scheduledevents?api-version=" + scheduledEventsAPI
}

// computeName asks IMDS for this VM's name.
func (s *Azure) computeName(ctx context.Context) (string, error) {
	b, err := s.do(ctx, http.MethodGet, s.base+"/metadata/instance/compute/name?api-version=2021-02-01&format=text", nil)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// do makes one IMDS request. The first Scheduled Events request of a VM
// can take a while (the service starts on demand), so the timeout is long.
func (s *Azure) do(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: HTTP %d", method, u, resp.StatusCode)
	}
	return b, nil
}
