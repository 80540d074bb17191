package azurefake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"
)

// imdsAPIVersions are the Scheduled Events API versions IMDS accepts.
var imdsAPIVersions = []string{"2017-11-01", "2019-01-01", "2019-08-01", "2020-07-01"}

// ScheduledEvents is one VM's instance metadata service, as far as
// Scheduled Events go: a loopback HTTP server answering
// GET /metadata/scheduledevents?api-version=... with the events document,
// taking POSTed StartRequests (approvals), and answering
// /metadata/instance/compute/name. Like IMDS it refuses requests without
// the "Metadata: true" header. Start one per simulated VM.
type ScheduledEvents struct {
	srv *httptest.Server

	mu          sync.Mutex
	computeName string
	incarnation int
	events      []*scheduledEvent
	acked       []string
	polls       int
	bad         int
}

// scheduledEvent is one event, as the document writes it.
type scheduledEvent struct {
	EventID           string   `json:"EventId"`
	EventStatus       string   `json:"EventStatus"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	NotBefore         string   `json:"NotBefore"`
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"`
	DurationInSeconds int      `json:"DurationInSeconds"`
}

// StartScheduledEvents starts a VM's metadata service with no events; its
// URL() is the agent's IMDS endpoint.
func StartScheduledEvents() *ScheduledEvents {
	s := &ScheduledEvents{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the service's base URL (http://127.0.0.1:port), where IMDS is
// http://169.254.169.254.
func (s *ScheduledEvents) URL() string { return s.srv.URL }

// Close stops the server.
func (s *ScheduledEvents) Close() { s.srv.Close() }

// SetComputeName sets the name /metadata/instance/compute/name answers
// (404 until set).
func (s *ScheduledEvents) SetComputeName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.computeName = name
}

// Preempt schedules the eviction of a Spot VM: a Preempt event (Azure gives
// about 30 seconds' notice) not before notBefore. It returns the event's
// ID.
func (s *ScheduledEvents) Preempt(vmName string, notBefore time.Time) string {
	return s.Schedule("Preempt", vmName, notBefore)
}

// Schedule adds an event of a type (Preempt, Terminate, Reboot, Redeploy,
// Freeze) for a VM, Scheduled, not before notBefore, and returns its ID.
// The document's incarnation moves on.
func (s *ScheduledEvents) Schedule(eventType, vmName string, notBefore time.Time) string {
	e := &scheduledEvent{
		EventID: newGUID(), EventStatus: "Scheduled", EventType: eventType, ResourceType: "VirtualMachine",
		Resources: []string{vmName}, NotBefore: notBefore.UTC().Format(http.TimeFormat),
		Description: descriptions[eventType], EventSource: "Platform", DurationInSeconds: -1,
	}
	if eventType == "Freeze" {
		e.DurationInSeconds = 9
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	s.incarnation++
	return e.EventID
}

var descriptions = map[string]string{
	"Preempt":   "Virtual machine is being evicted from Azure Spot capacity.",
	"Terminate": "Virtual machine is going to be deleted.",
	"Reboot":    "Virtual machine is going to be restarted as requested by authorized user.",
	"Redeploy":  "Virtual machine is going to be moved to another host for maintenance.",
	"Freeze":    "Host server is undergoing maintenance.",
}

// Complete ends an event: it leaves the document, as once Azure has
// carried it out.
func (s *ScheduledEvents) Complete(eventID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.events)
	s.events = slices.DeleteFunc(s.events, func(e *scheduledEvent) bool { return e.EventID == eventID })
	if len(s.events) != n {
		s.incarnation++
	}
}

// Acked returns the EventIds approved with StartRequests, in order.
func (s *ScheduledEvents) Acked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acked)
}

// Polls counts the GETs of the events document served.
func (s *ScheduledEvents) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// BadRequests counts the requests refused for want of the Metadata header
// or an api-version.
func (s *ScheduledEvents) BadRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bad
}

func (s *ScheduledEvents) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get("Metadata") != "true" {
		s.bad++
		imdsError(w, http.StatusBadRequest, "Bad request. Required metadata header not specified")
		return
	}
	version := r.URL.Query().Get("api-version")
	if version == "" || r.URL.Path == "/metadata/scheduledevents" && !slices.Contains(imdsAPIVersions, version) {
		s.bad++
		imdsError(w, http.StatusBadRequest, "Bad request. api-version was not specified in the request, or is not supported")
		return
	}
	switch {
	case r.URL.Path == "/metadata/instance/compute/name" && r.Method == http.MethodGet:
		if s.computeName == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, s.computeName)
	case r.URL.Path != "/metadata/scheduledevents":
		http.NotFound(w, r)
	case r.Method == http.MethodGet:
		s.polls++
		doc := struct {
			DocumentIncarnation int
			Events              []*scheduledEvent
		}{s.incarnation, s.events}
		if doc.Events == nil {
			doc.Events = []*scheduledEvent{}
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(doc)
	case r.Method == http.MethodPost:
		var body struct {
			StartRequests []struct {
				EventID string `json:"EventId"`
			}
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || len(body.StartRequests) == 0 {
			imdsError(w, http.StatusBadRequest, "Bad request. The body must hold StartRequests")
			return
		}
		for _, sr := range body.StartRequests {
			s.acked = append(s.acked, sr.EventID)
			for _, e := range s.events {
				if e.EventID == sr.EventID && e.EventStatus == "Scheduled" {
					e.EventStatus = "Started"
					s.incarnation++
				}
			}
		}
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func imdsError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
