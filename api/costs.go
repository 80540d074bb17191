package api

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/internal/idmap"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

// spendSegment is a charge as the reports cut it: a ledger row, or an
// open charge of a job still running. Cutting a segment at bucket edges by
// differences of cost keeps its total exact: the buckets' figures
// telescope to what the segment bills.
type spendSegment struct {
	from time.Time
	// to is zero while the segment is open: it runs to the time asked.
	to     time.Time
	hourly money.Micros
	// total is what a closed segment bills in all.
	total money.Micros
	dims  *ledger.Dims
	// job is whose it is: empty for overhead that belongs to no job.
	job string
}

// cost is what the segment bills from its start up to t.
func (g spendSegment) cost(t time.Time) money.Micros {
	if g.to.IsZero() {
		if !t.After(g.from) {
			return 0
		}
		return g.hourly.ForDuration(t.Sub(g.from))
	}
	r := ledger.Row{Start: g.from, End: g.to, Price: g.hourly, Cost: g.total}
	return r.CostUpTo(t)
}

// openOf is what a job's record bills that the ledger does not hold yet:
// its charges still running (see ledger.Running).
func openOf(r *job.Record) []spendSegment {
	running := ledger.Running(r)
	out := make([]spendSegment, 0, len(running))
	for _, e := range running {
		g := spendSegment{from: e.Start, to: e.End, hourly: e.PricePerHour, dims: ledger.DimsOf(&e), job: e.JobID}
		if !g.to.IsZero() {
			if !g.to.After(g.from) {
				continue
			}
			g.total = g.hourly.ForDuration(g.to.Sub(g.from))
		}
		out = append(out, g)
	}
	return out
}

// CostGroups are what costs can be grouped by; a report may group by
// several at once ("team,provider").
var CostGroups = []string{"team", "provider", "purchase", "region", "gpu", "job", "kind", "category"}

// CostQuery asks for spend over time.
type CostQuery struct {
	// GroupBy is one of CostGroups, or several joined by commas (default
	// team).
	GroupBy string
	// From and To bound the period; Bucket is the width of each step.
	From, To time.Time
	Bucket   time.Duration
	// Team keeps one team's spend.
	Team string
}

// CostSeries is spend over time, one series per group.
type CostSeries struct {
	GroupBy string    `json:"group_by"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Bucket  string    `json:"bucket"`
	// Starts are the buckets' start times; each series has one figure per
	// bucket.
	Starts []time.Time  `json:"starts"`
	Groups []CostGroup  `json:"groups"`
	Total  money.Micros `json:"total_usd"`
	// Overhead is the part of Total that belongs to no job (orphan
	// instances, reserved hours left idle).
	Overhead money.Micros `json:"overhead_usd"`
	Jobs     int          `json:"jobs"`
	// Savings are the groups' savings together (see CostGroup).
	Savings money.Micros `json:"savings_usd"`
	Note    string       `json:"note,omitempty"`
	byKey   map[string]int
	keys    []string
}

// CostGroup is one group's spend, and the savings of its jobs that
// finished in the period: their on-demand baseline for the work they did
// (see JobView.SavingsUSD) and what they cost, whenever it was spent.
type CostGroup struct {
	Key      string         `json:"key"`
	Total    money.Micros   `json:"total_usd"`
	Overhead money.Micros   `json:"overhead_usd"`
	Series   []money.Micros `json:"series"`
	Finished int            `json:"finished_jobs"`
	Baseline money.Micros   `json:"baseline_usd"`
	Savings  money.Micros   `json:"savings_usd"`
}

// maxBuckets bounds a series.
const maxBuckets = 2000

// WithLedger gives the service the ledger the cost reports read.
func (s *Service) WithLedger(v *ledger.View) *Service {
	s.ledger = v
	return s
}

// Costs returns what the jobs the caller may see cost in a period, per
// group and bucket, from the ledger, with what the jobs still running
// have run up since (so a running job's spend grows to now), and, for a
// caller who may see every team, the overhead that belongs to no job.
func (s *Service) Costs(ctx context.Context, q CostQuery) (*CostSeries, error) {
	var allTeams bool
	var err error
	if q.Team, allTeams, err = s.costScope(ctx, q.Team, &q.From, &q.To); err != nil {
		return nil, err
	}
	keys, err := costKeys(q.GroupBy)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	if q.Bucket <= 0 {
		q.Bucket = time.Hour
	}
	n := int((q.To.Sub(q.From) + q.Bucket - 1) / q.Bucket)
	if n > maxBuckets {
		return nil, errBadRequest("the period holds %d buckets of %s; at most %d (use a wider bucket)", n, q.Bucket, maxBuckets)
	}
	out := &CostSeries{GroupBy: strings.Join(keys, ","), From: q.From, To: q.To, Bucket: q.Bucket.String(), Groups: []CostGroup{},
		byKey: map[string]int{}, keys: keys}
	for i := range n {
		out.Starts = append(out.Starts, q.From.Add(time.Duration(i)*q.Bucket))
	}
	jobs := map[string]bool{}
	if s.ledger != nil {
		s.ledger.Each(q.From, q.To, func(r *ledger.Row) bool {
			if (q.Team != "" || !allTeams) && r.Team != q.Team || r.JobID == "" && !allTeams {
				return true
			}
			g := spendSegment{from: r.Start, to: r.End, hourly: r.Price, total: r.Cost, dims: r.Dims, job: r.JobID}
			if out.add(q, g, n, now) && r.JobID != "" && !jobs[r.JobID] {
				jobs[strings.Clone(r.JobID)] = true // the row's strings are its own only for the call
			}
			return true
		})
	} else {
		out.Note = "the ledger is not open: only what running jobs have run up is shown"
	}
	s.ix.walk(false, 0, idmap.Key{}, func(e *entry) bool {
		if q.Team != "" && e.teamName() != q.Team {
			return true
		}
		for _, g := range s.ix.open(e) {
			if out.add(q, g, n, now) {
				jobs[e.id()] = true
			}
		}
		out.saved(q, s, e, n, now)
		return true
	})
	out.Jobs = len(jobs)
	slices.SortFunc(out.Groups, func(a, b CostGroup) int {
		if a.Total != b.Total {
			return cmp.Compare(b.Total, a.Total)
		}
		return cmp.Compare(a.Key, b.Key)
	})
	out.byKey = nil
	return out, nil
}

// costScope is whose costs a caller asking for team's may read: that
// team's, else the caller's own team's, and all teams' (overhead
// included) for one who may read every team's; it fills in the period's
// defaults (the 24 hours up to now) and checks it.
func (s *Service) costScope(ctx context.Context, team string, from, to *time.Time) (string, bool, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return "", false, err
	}
	if !p.Can(auth.ReadJobs, team) {
		if team != "" {
			return "", false, errForbidden(p, "read the costs of team "+team)
		}
		team = p.Team
	}
	if to.IsZero() {
		*to = s.clock.Now()
	}
	if from.IsZero() {
		*from = to.Add(-24 * time.Hour)
	}
	if !from.Before(*to) {
		return "", false, errBadRequest("from must be before to")
	}
	return team, team == "" && p.Can(auth.ReadJobs, ""), nil
}

// costKeys reads a group_by: one or more of CostGroups, by commas.
func costKeys(groupBy string) ([]string, error) {
	if groupBy == "" {
		return []string{"team"}, nil
	}
	var keys []string
	for k := range strings.SplitSeq(groupBy, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(CostGroups, k) {
			return nil, errBadRequest("group_by: %q is not one of %v", k, CostGroups)
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// add spreads what a segment billed within the period over the buckets;
// it reports whether the segment billed anything there.
func (c *CostSeries) add(q CostQuery, g spendSegment, n int, now time.Time) bool {
	from, to := maxTime(g.from, q.From), q.To
	if g.to.IsZero() || g.to.After(g.from) {
		end := now
		if !g.to.IsZero() && g.to.Before(end) {
			end = g.to
		}
		if end.Before(to) {
			to = end
		}
		if !from.Before(to) {
			return false
		}
	} else if g.from.Before(q.From) || !g.from.Before(q.To) {
		return false
	}
	grp := c.group(c.keyOf(g.dims, g.job, ""), n)
	overhead := g.dims.Kind == ledger.Overhead
	billed := false
	put := func(b int, v money.Micros) {
		if v != 0 {
			grp.Series[b] += v
			grp.Total += v
			c.Total += v
			if overhead {
				grp.Overhead += v
				c.Overhead += v
			}
			billed = true
		}
	}
	first := min(n-1, int(from.Sub(q.From)/q.Bucket))
	if !g.to.IsZero() && !g.to.After(g.from) {
		put(first, g.total) // a one-off charge
		return billed
	}
	lo := from
	for b := first; b < n && lo.Before(to); b++ {
		hi := q.From.Add(time.Duration(b+1) * q.Bucket)
		if hi.After(to) {
			hi = to
		}
		put(b, g.cost(hi)-g.cost(lo))
		lo = hi
	}
	return billed
}

// saved counts the savings of a job that finished in the period, under
// its team or where it last ran.
func (c *CostSeries) saved(q CostQuery, s *Service, e *entry, n int, now time.Time) {
	fin := e.finishedAt()
	if e.baseline <= 0 || fin.IsZero() || fin.Before(q.From) || !fin.Before(q.To) {
		return
	}
	cost := s.ix.costAt(e, now)
	team := e.teamName()
	last := ledger.Dims{Team: team}
	if p := e.lastPlacement(); p != nil {
		last.Provider, last.Region, last.Purchase, last.GPU = p.Provider, p.Region, p.Purchase, p.GPU
	}
	id := ""
	if slices.Contains(c.keys, "job") {
		id = e.id()
	}
	grp := c.group(c.keyOf(&last, id, team), n)
	sv := savings(e.baseline, e.progress, cost)
	grp.Finished++
	grp.Baseline += sv + cost
	grp.Savings += sv
	c.Savings += sv
}

// keyOf is a group's key: the dimensions grouped by, joined by "/".
func (c *CostSeries) keyOf(d *ledger.Dims, jobID, team string) string {
	parts := make([]string, len(c.keys))
	for i, k := range c.keys {
		v := map[string]string{"team": d.Team, "provider": d.Provider, "purchase": d.Purchase, "region": d.Region,
			"gpu": d.GPU, "job": jobID, "kind": string(d.Kind), "category": d.Category}[k]
		if k == "team" && v == "" {
			v = team
		}
		if v == "" {
			v = "(none)"
			if d.Kind == ledger.Overhead && (k == "team" || k == "job") {
				v = "(overhead)"
			}
		}
		parts[i] = v
	}
	return strings.Join(parts, "/")
}

func (c *CostSeries) group(key string, n int) *CostGroup {
	i, ok := c.byKey[key]
	if !ok {
		key = strings.Clone(key) // it may be a ledger row's, which is its own only for the call
		i = len(c.Groups)
		c.byKey[key] = i
		c.Groups = append(c.Groups, CostGroup{Key: key, Series: make([]money.Micros, n)})
	}
	return &c.Groups[i]
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// httpCosts serves GET /v1/costs.
func (s *Service) httpCosts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cq := CostQuery{GroupBy: q.Get("group_by"), Team: q.Get("team")}
	if err := parseTimes(q, &cq.From, &cq.To); err != nil {
		writeError(w, err)
		return
	}
	if v := q.Get("bucket"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			writeError(w, errBadRequest("bucket: %q is not a duration of a minute or more (1h, 24h)", v))
			return
		}
		cq.Bucket = d
	}
	if v := q.Get("hours"); v != "" && cq.From.IsZero() {
		h, err := strconv.Atoi(v)
		if err != nil || h < 1 || h > 24*366 {
			writeError(w, errBadRequest("hours: %q is not a number of hours from 1 to 8784", v))
			return
		}
		to := cq.To
		if to.IsZero() {
			to = s.clock.Now()
		}
		cq.From, cq.To = to.Add(-time.Duration(h)*time.Hour), to
	}
	res, err := s.Costs(r.Context(), cq)
	respond(w, http.StatusOK, res, err)
}

// parseTimes reads a query's from and to (RFC 3339).
func parseTimes(q url.Values, from, to *time.Time) *Error {
	for _, f := range []struct {
		name string
		to   *time.Time
	}{{"from", from}, {"to", to}} {
		if v := q.Get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return errBadRequest("%s: %q is not an RFC 3339 time (2026-12-03T10:00:00Z)", f.name, v)
			}
			*f.to = t
		}
	}
	return nil
}

// TeamSpend is what a team's jobs have cost from since (the start of a
// calendar month, UTC) to now: the ledger's charges of the month, and what
// its running jobs have run up since that the ledger does not hold yet.
// The scheduler weighs it against the team's budget.
func (s *Service) TeamSpend(team string, since time.Time) money.Micros {
	var spent money.Micros
	if s.ledger != nil {
		spent = s.ledger.MonthSpend(team, since)
	}
	now := s.clock.Now()
	if since.After(now) {
		return spent
	}
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	for e := range s.ix.growing {
		if e.teamName() != team {
			continue
		}
		for _, g := range s.ix.open(e) {
			spent += g.cost(now) - g.cost(since)
		}
	}
	return spent
}
