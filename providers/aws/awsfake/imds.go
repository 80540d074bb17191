package awsfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Metadata paths (under /latest/meta-data/) the IMDS setters write.
const (
	PathInstanceAction = "spot/instance-action"
	PathRebalance      = "events/recommendations/rebalance"
	PathMaintenance    = "events/maintenance/scheduled"
)

// IMDS is one instance's metadata service (IMDSv2) on a loopback server:
// PUT /latest/api/token issues a session token for the TTL asked; GETs
// under /latest/meta-data/ need a token it issued (401 otherwise) and
// answer 404 where there is nothing, as EC2's does before any notice.
type IMDS struct {
	srv *httptest.Server

	mu      sync.Mutex
	tokens  map[string]bool
	puts    int
	ttls    []string
	gets    int
	refused int               // GETs refused for a bad token
	paths   map[string]string // meta-data path -> body
}

// StartIMDS starts a metadata service with nothing announced.
func StartIMDS() *IMDS {
	m := &IMDS{tokens: map[string]bool{}, paths: map[string]string{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// StartIMDS starts the metadata service of one of the fake's instances,
// answering its identity (instance-id, instance-type,
// placement/availability-zone, placement/region, instance-life-cycle).
func (c *Cloud) StartIMDS(instanceID string) *IMDS {
	m := StartIMDS()
	m.Set("instance-id", instanceID)
	if in, ok := c.Instance(instanceID); ok {
		life := "on-demand"
		if in.Market == MarketSpot {
			life = "spot"
		}
		m.Set("instance-type", in.InstanceType)
		m.Set("placement/availability-zone", in.Zone)
		m.Set("placement/region", in.Region)
		m.Set("instance-life-cycle", life)
	}
	return m
}

// URL is the service's base URL (the SDK's IMDS endpoint, the agent's
// AWS_EC2_METADATA_SERVICE_ENDPOINT).
func (m *IMDS) URL() string { return m.srv.URL }

// Close stops the service.
func (m *IMDS) Close() { m.srv.Close() }

// Set makes a meta-data path answer body; "" makes it 404 again.
func (m *IMDS) Set(path, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if body == "" {
		delete(m.paths, path)
		return
	}
	m.paths[path] = body
}

// SetSpotInstanceAction announces a spot interruption: action
// ("terminate", "stop" or "hibernate") at the given time, as
// spot/instance-action says it two minutes ahead. An empty action clears
// it.
func (m *IMDS) SetSpotInstanceAction(action string, at time.Time) {
	if action == "" {
		m.Set(PathInstanceAction, "")
		return
	}
	m.Set(PathInstanceAction, mustJSON(map[string]string{"action": action, "time": at.UTC().Format(time.RFC3339)}))
}

// SetRebalance announces a rebalance recommendation noticed at the given
// time; a zero time clears it.
func (m *IMDS) SetRebalance(at time.Time) {
	if at.IsZero() {
		m.Set(PathRebalance, "")
		return
	}
	m.Set(PathRebalance, mustJSON(map[string]string{"noticeTime": at.UTC().Format(time.RFC3339)}))
}

// MaintenanceEvent is one entry of events/maintenance/scheduled.
type MaintenanceEvent struct {
	Code        string // "system-reboot", "instance-retirement", ...
	Description string
	EventID     string
	State       string // "active", "completed" or "canceled"; default active
	NotBefore   time.Time
	NotAfter    time.Time // optional
}

// SetMaintenance sets the scheduled maintenance events; none clears them.
func (m *IMDS) SetMaintenance(events ...MaintenanceEvent) {
	if len(events) == 0 {
		m.Set(PathMaintenance, "")
		return
	}
	const layout = "2 Jan 2006 15:04:05 GMT"
	out := make([]map[string]string, len(events))
	for i, e := range events {
		out[i] = map[string]string{"Code": e.Code, "Description": e.Description,
			"EventId": cmpOr(e.EventID, fmt.Sprintf("instance-event-%017x", i+1)), "State": cmpOr(e.State, "active"),
			"NotBefore": e.NotBefore.UTC().Format(layout)}
		if !e.NotAfter.IsZero() {
			out[i]["NotAfter"] = e.NotAfter.UTC().Format(layout)
		}
	}
	m.Set(PathMaintenance, mustJSON(out))
}

// RotateTokens invalidates every token issued so far, as when tokens
// expire.
func (m *IMDS) RotateTokens() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens = map[string]bool{}
}

// Counts says how many tokens were issued, GETs answered and GETs refused
// for a bad token.
func (m *IMDS) Counts() (puts, gets, refused int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts, m.gets, m.refused
}

// TokenTTLs lists the TTLs (seconds) tokens were asked for.
func (m *IMDS) TokenTTLs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ttls...)
}

func (m *IMDS) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.URL.Path == "/latest/api/token" {
		ttl := r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds")
		if r.Method != http.MethodPut || ttl == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		m.puts++
		m.ttls = append(m.ttls, ttl)
		tok := fmt.Sprintf("AQAEAFake-token-%d==", m.puts)
		m.tokens[tok] = true
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", ttl)
		fmt.Fprint(w, tok)
		return
	}
	if !m.tokens[r.Header.Get("X-Aws-Ec2-Metadata-Token")] {
		m.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	m.gets++
	body, ok := m.paths[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
	if !ok {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<?xml version="1.0" encoding="iso-8859-1"?><title>404 - Not Found</title>`)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, body)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps and slices of strings always marshal
	}
	return string(b)
}
