package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
)

// AlertView is an alert as the API lists it.
type AlertView struct {
	Time     time.Time         `json:"time"`
	Severity string            `json:"severity"`
	Kind     string            `json:"kind"`
	JobID    string            `json:"job_id,omitempty"`
	Team     string            `json:"team,omitempty"`
	Summary  string            `json:"summary"`
	Details  map[string]string `json:"details,omitempty"`
}

// AlertList is the newest alerts, newest first.
type AlertList struct {
	Alerts []AlertView `json:"alerts"`
}

// Alerts returns the newest alerts the caller may see (at most limit): a
// job's alerts to those who may read the job, the platform's to those who
// may observe it.
func (s *Service) Alerts(ctx context.Context, limit int) (*AlertList, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	var all []AlertView
	// Read more than asked: some may be other teams'.
	err = s.bus.Recent(ctx, events.StreamAlerts, "spotwise.alerts.>", limit*4, func(_ uint64, data []byte) {
		env, pl, err := events.Decode(data)
		if err != nil {
			return
		}
		a, ok := pl.(*events.Alert)
		if !ok {
			return
		}
		v := AlertView{Time: env.Time, Severity: a.Severity, Kind: a.Kind, JobID: a.JobID, Summary: a.Summary, Details: a.Details}
		if a.JobID != "" {
			v.Team = s.ix.team(a.JobID)
			if v.Team == "" {
				v.Team = a.Details["team"]
			}
			if v.Team == "" || !p.Can(auth.ReadJobs, v.Team) {
				return
			}
		} else if !p.Can(auth.Observe, "") {
			return
		}
		all = append(all, v)
	})
	if err != nil {
		return nil, errUnavailable(err)
	}
	out := &AlertList{Alerts: []AlertView{}}
	for i := len(all) - 1; i >= 0 && len(out.Alerts) < limit; i-- {
		out.Alerts = append(out.Alerts, all[i])
	}
	return out, nil
}

// team is a listed job's team ("" when the index does not know it).
func (ix *index) team(id string) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if e, ok := ix.get(id); ok && !e.deleted {
		return e.teamName()
	}
	return ""
}

// httpAlerts serves GET /v1/alerts.
func (s *Service) httpAlerts(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeError(w, errBadRequest("limit must be a number from 1 to 500"))
			return
		}
		limit = n
	}
	list, err := s.Alerts(r.Context(), limit)
	respond(w, http.StatusOK, list, err)
}
