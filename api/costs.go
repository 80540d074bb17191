package api

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unique"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// spendSegment is a stretch of time one instance (or, for an attempt whose
// instances are not known yet, all its nodes) was billed at one price.
// Cutting a segment at bucket edges keeps its total exact: each bucket
// gets cost(from, edge) - cost(from, previous edge), which telescopes to
// what the job is billed for the segment.
type spendSegment struct {
	from time.Time
	// to is zero while the segment is open: it runs to the time asked.
	to     time.Time
	hourly money.Micros
	// lump is billed at from as a whole (the part of a job's cost whose
	// attempts the record no longer lists in detail).
	lump money.Micros
	// where the capacity was: the keys costs are grouped by.
	provider, region, purchase, gpu string
}

// cost is what the segment bills from its start up to t.
func (g spendSegment) cost(t time.Time) money.Micros {
	if t.Before(g.from) {
		return 0
	}
	if g.lump != 0 {
		return g.lump
	}
	if !g.to.IsZero() && t.After(g.to) {
		t = g.to
	}
	return g.hourly.ForDuration(t.Sub(g.from))
}

// spendOf cuts a job's cost into segments, as job.Record.CostAt bills it:
// every instance span from its start to its provider's end (else the
// attempt's end or release), at the price it was charged.
func spendOf(r *job.Record) []spendSegment {
	var out []spendSegment
	var detailed money.Micros
	first := time.Time{}
	add := func(a *job.Attempt, live bool) {
		p := a.Placement
		seg := spendSegment{provider: intern(p.Provider), region: intern(p.Region), purchase: intern(p.Purchase), gpu: intern(p.GPU)}
		end := time.Time{} // open
		if !live {
			end = a.EndedAt
		}
		if a.Released() && (end.IsZero() || a.ReleasedAt.Before(end)) {
			end = a.ReleasedAt
		}
		if len(a.Spans) == 0 {
			if a.LaunchedAt.IsZero() {
				return
			}
			seg.from, seg.to, seg.hourly = a.LaunchedAt, end, p.HourlyCost()
			if !live && !end.IsZero() && !end.After(seg.from) {
				return
			}
			out = append(out, seg)
			if !live {
				detailed += seg.cost(end)
			}
			if first.IsZero() || seg.from.Before(first) {
				first = seg.from
			}
			return
		}
		for _, sp := range a.Spans {
			s := seg
			s.from, s.to, s.hourly = sp.From, sp.To, p.PricePerHour
			if sp.Price != 0 {
				s.hourly = sp.Price
			}
			if s.to.IsZero() {
				s.to = end
			}
			if !s.to.IsZero() && !s.to.After(s.from) {
				continue
			}
			out = append(out, s)
			if !live {
				detailed += s.cost(s.to)
			}
			if first.IsZero() || s.from.Before(first) {
				first = s.from
			}
		}
	}
	for i := range r.Status.Attempts {
		add(&r.Status.Attempts[i], false)
	}
	for _, a := range []*job.Attempt{r.Status.Previous, r.Status.Current} {
		if a != nil {
			add(a, true)
		}
	}
	// Attempts the record has let go of (it keeps the latest few) are in
	// EndedCost but not listed: bill them at the first listed one.
	if rest := r.Status.EndedCost - detailed; rest != 0 {
		at := first
		if at.IsZero() {
			at = r.Status.SubmittedAt
		}
		out = append(out, spendSegment{from: at, lump: rest})
	}
	return out
}

func intern(s string) string { return unique.Make(s).Value() }

// CostGroups are what costs can be grouped by.
var CostGroups = []string{"team", "provider", "purchase", "region", "gpu"}

// CostQuery asks for spend over time.
type CostQuery struct {
	// GroupBy is one of CostGroups (default team).
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
	Jobs   int          `json:"jobs"`
	// Savings are the groups' savings together (see CostGroup).
	Savings money.Micros `json:"savings_usd"`
	Note    string       `json:"note,omitempty"`
	byKey   map[string]int
}

// CostGroup is one group's spend, and the savings of its jobs that
// finished in the period: their on-demand baseline for the work they did
// (see JobView.SavingsUSD) and what they cost, whenever it was spent.
type CostGroup struct {
	Key      string         `json:"key"`
	Total    money.Micros   `json:"total_usd"`
	Series   []money.Micros `json:"series"`
	Finished int            `json:"finished_jobs"`
	Baseline money.Micros   `json:"baseline_usd"`
	Savings  money.Micros   `json:"savings_usd"`
}

// maxBuckets bounds a series.
const maxBuckets = 2000

// Costs returns what the jobs the caller may see cost in a period, per
// group and bucket. A figure is what the jobs were billed, as each job's
// cost_usd: a running job's spend grows to now.
func (s *Service) Costs(ctx context.Context, q CostQuery) (*CostSeries, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Can(auth.ReadJobs, q.Team) {
		if q.Team != "" {
			return nil, errForbidden(p, "read the costs of team "+q.Team)
		}
		q.Team = p.Team
	}
	if q.GroupBy == "" {
		q.GroupBy = "team"
	}
	if !slices.Contains(CostGroups, q.GroupBy) {
		return nil, errBadRequest("group_by: %q is not one of %v", q.GroupBy, CostGroups)
	}
	now := s.clock.Now()
	if q.To.IsZero() {
		q.To = now
	}
	if q.Bucket <= 0 {
		q.Bucket = time.Hour
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-24 * time.Hour)
	}
	if !q.From.Before(q.To) {
		return nil, errBadRequest("from must be before to")
	}
	n := int((q.To.Sub(q.From) + q.Bucket - 1) / q.Bucket)
	if n > maxBuckets {
		return nil, errBadRequest("the period holds %d buckets of %s; at most %d (use a wider bucket)", n, q.Bucket, maxBuckets)
	}
	out := &CostSeries{GroupBy: q.GroupBy, From: q.From, To: q.To, Bucket: q.Bucket.String(), Groups: []CostGroup{}, byKey: map[string]int{}}
	for i := range n {
		out.Starts = append(out.Starts, q.From.Add(time.Duration(i)*q.Bucket))
	}
	s.ix.mu.RLock()
	for _, e := range s.ix.order {
		if q.Team != "" && e.sum.Team != q.Team {
			continue
		}
		counted := false
		for _, g := range e.spend {
			counted = out.add(q, g, e.sum.Team, n, now) || counted
		}
		if counted {
			out.Jobs++
		}
		out.saved(q, e, n, now)
	}
	s.ix.mu.RUnlock()
	slices.SortFunc(out.Groups, func(a, b CostGroup) int {
		if a.Total != b.Total {
			return cmp.Compare(b.Total, a.Total)
		}
		return cmp.Compare(a.Key, b.Key)
	})
	out.byKey = nil
	return out, nil
}

// add spreads what a segment billed within the period over the buckets;
// it reports whether the segment billed anything there.
func (c *CostSeries) add(q CostQuery, g spendSegment, team string, n int, now time.Time) bool {
	from, to := maxTime(g.from, q.From), q.To
	if g.lump == 0 {
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
	grp := c.group(c.keyOf(q.GroupBy, g, team), n)
	billed := false
	put := func(b int, v money.Micros) {
		if v != 0 {
			grp.Series[b] += v
			grp.Total += v
			c.Total += v
			billed = true
		}
	}
	first := min(n-1, int(from.Sub(q.From)/q.Bucket))
	if g.lump != 0 {
		put(first, g.lump)
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
func (c *CostSeries) saved(q CostQuery, e *entry, n int, now time.Time) {
	if e.baseline <= 0 || e.finishedAt.IsZero() || e.finishedAt.Before(q.From) || !e.finishedAt.Before(q.To) {
		return
	}
	var cost money.Micros
	for _, g := range e.spend {
		cost += g.cost(now)
	}
	var last spendSegment
	if p := e.sum.Placement; p != nil {
		last = spendSegment{provider: p.Provider, region: p.Region, purchase: p.Purchase, gpu: p.GPU}
	}
	grp := c.group(c.keyOf(q.GroupBy, last, e.sum.Team), n)
	sv := savings(e.baseline, e.sum.Progress, cost)
	grp.Finished++
	grp.Baseline += sv + cost
	grp.Savings += sv
	c.Savings += sv
}

func (c *CostSeries) keyOf(groupBy string, g spendSegment, team string) string {
	key := map[string]string{"team": team, "provider": g.provider, "purchase": g.purchase, "region": g.region, "gpu": g.gpu}[groupBy]
	if key == "" {
		return "(none)"
	}
	return key
}

func (c *CostSeries) group(key string, n int) *CostGroup {
	i, ok := c.byKey[key]
	if !ok {
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
	for _, f := range []struct {
		name string
		to   *time.Time
	}{{"from", &cq.From}, {"to", &cq.To}} {
		if v := q.Get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeError(w, errBadRequest("%s: %q is not an RFC 3339 time (2026-12-03T10:00:00Z)", f.name, v))
				return
			}
			*f.to = t
		}
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
