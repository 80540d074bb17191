package api

import (
	"context"
	"net/http"
	"time"

	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
)

// maxCostEntries bounds one answer of GET /v1/costs/entries: a longer
// period is read in several (Truncated says so; ask again from the last
// entry's start).
const maxCostEntries = 100_000

// CostEntries are the ledger's entries in a period: every charge, as
// recorded, for export (FOCUS, CSV).
type CostEntries struct {
	From    time.Time      `json:"from"`
	To      time.Time      `json:"to"`
	Entries []ledger.Entry `json:"entries"`
	// Truncated: there were more than maxCostEntries.
	Truncated bool `json:"truncated,omitempty"`
}

// CostEntriesQuery asks for the ledger's entries of a period, of one team
// or one job if given.
type CostEntriesQuery struct {
	From, To time.Time
	Team     string
	JobID    string
}

// CostEntries returns the ledger's entries that bill something in the
// period and that the caller may see (overhead, which belongs to no job,
// to those who may see every team), each with its job's name and labels
// and whether its attempt was interrupted.
func (s *Service) CostEntries(ctx context.Context, q CostEntriesQuery) (*CostEntries, error) {
	var allTeams bool
	var err error
	if q.Team, allTeams, err = s.costScope(ctx, q.Team, &q.From, &q.To); err != nil {
		return nil, err
	}
	if s.ledger == nil {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the cost ledger is not open on this server"}
	}
	out := &CostEntries{From: q.From, To: q.To, Entries: []ledger.Entry{}}
	s.ledger.Each(q.From, q.To, func(r *ledger.Row) bool {
		switch {
		case q.Team != "" && r.Team != q.Team, r.JobID == "" && !allTeams, q.JobID != "" && r.JobID != q.JobID:
			return true
		case len(out.Entries) == maxCostEntries:
			out.Truncated = true
			return false
		}
		out.Entries = append(out.Entries, r.Entry())
		return true
	})
	// What the ledger keeps once per job, from the job's record.
	recs := map[string]*job.Record{}
	for i := range out.Entries {
		e := &out.Entries[i]
		if e.JobID == "" {
			continue
		}
		r, ok := recs[e.JobID]
		if !ok {
			r, _, _ = s.record(ctx, e.JobID) // a job removed since: its entries stay as recorded
			recs[e.JobID] = r
		}
		if r == nil {
			continue
		}
		e.JobName, e.Labels = r.Spec.Name, r.Spec.Labels
		e.Interrupted = interrupted(r, e.Attempt)
	}
	return out, nil
}

// interrupted reports whether a job's attempt n was taken back by its
// provider (preempted after a notice, or lost without one).
func interrupted(r *job.Record, n int) bool {
	for _, a := range r.Status.Attempts {
		if a.N == n {
			return a.Outcome == job.OutcomePreempted || a.Outcome == job.OutcomeLost
		}
	}
	return false
}

// httpCostEntries serves GET /v1/costs/entries.
func (s *Service) httpCostEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cq := CostEntriesQuery{Team: q.Get("team"), JobID: q.Get("job")}
	if err := parseTimes(q, &cq.From, &cq.To); err != nil {
		writeError(w, err)
		return
	}
	if cq.JobID != "" && !job.ValidID(cq.JobID) {
		writeError(w, errBadRequest("job: %q is not a job ID", cq.JobID))
		return
	}
	res, err := s.CostEntries(r.Context(), cq)
	respond(w, http.StatusOK, res, err)
}
