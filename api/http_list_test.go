package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// listHTTP lists through the HTTP API with a raw query string.
func (e *env) listHTTP(query string) api.JobList {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v1/jobs?"+query, nil, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v1/jobs?%s: %d %s", query, r.status, r.body)
	}
	var l api.JobList
	r.decode(e.t, &l)
	return l
}

func TestHTTPListFilters(t *testing.T) {
	e := newEnv(t)
	// Oldest first; the clock moves so every job has its own time.
	mk := func(b *specBuilder) string {
		e.clk.Advance(time.Second)
		return e.submit(b)
	}
	a := mk(spec().Name("bert-base").Team("nlp"))
	b := mk(spec().Name("resnet50").Team("vision"))
	c := mk(spec().Name("bert-large").Team("nlp"))
	d := mk(spec().Name("vit").Team("vision"))
	f := mk(spec().Name("llama").Team("nlp"))
	for _, id := range []string{b, d} {
		if _, err := e.svc.Cancel(asOp(t.Context()), id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	e.setRecord(f, func(r *job.Record) { r.Status.State = job.Running })
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if l := e.list(api.Query{States: []job.State{job.Running}}); len(l.Jobs) != 1 {
			return fmt.Errorf("the index has not seen %s running", f)
		}
		return nil
	})

	cases := []struct {
		name  string
		query string
		want  []string
	}{
		{"everything, newest first", "", []string{f, d, c, b, a}},
		{"one state", "state=queued", []string{c, a}},
		{"states comma separated", "state=queued,cancelled", []string{d, c, b, a}},
		{"states repeated", "state=queued&state=cancelled", []string{d, c, b, a}},
		{"states in upper case", "state=CANCELLED", []string{d, b}},
		{"empty state", "state=", []string{f, d, c, b, a}},
		{"team", "team=nlp", []string{f, c, a}},
		{"unknown team", "team=nobody", []string{}},
		{"name part", "name=bert", []string{c, a}},
		{"team and state", "team=vision&state=cancelled", []string{d, b}},
		{"team, state and name", "team=nlp&state=queued&name=large", []string{c}},
		{"limit", "limit=2", []string{f, d}},
		{"after", "after=" + c, []string{b, a}},
		{"after the oldest", "after=" + a, []string{}},
		{"after an unknown but well-formed id", "after=" + job.NewID(t0.Add(3500*time.Millisecond)), []string{c, b, a}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := e.listHTTP(tc.query)
			if l.Jobs == nil {
				t.Fatal("jobs is null, want a list")
			}
			if got := ids(l.Jobs); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("summaries", func(t *testing.T) {
		l := e.listHTTP("name=vit")
		if len(l.Jobs) != 1 {
			t.Fatalf("got %v", ids(l.Jobs))
		}
		s := l.Jobs[0]
		if s.Name != "vit" || s.Team != "vision" || s.State != job.Cancelled || s.Priority != 100 || !s.SubmittedAt.Equal(t0.Add(4*time.Second)) {
			t.Errorf("summary %+v", s)
		}
	})
}

func TestHTTPListRefused(t *testing.T) {
	e := newEnv(t)
	e.submit(spec())
	cases := []struct {
		name  string
		query string
	}{
		{"limit zero", "limit=0"},
		{"limit too big", "limit=1001"},
		{"limit negative", "limit=-5"},
		{"limit not a number", "limit=x"},
		{"unknown state", "state=done"},
		{"one unknown state among known", "state=queued,sleeping"},
		{"after not an id", "after=page-2"},
		{"after upper case", "after=j-ABC"},
		{"after an unknown keyed id", "after=" + job.IDForKey("vision", "never-used")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(http.MethodGet, "/v1/jobs?"+tc.query, nil, nil)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.status, r.body)
			}
			if ae := r.apiError(t); ae.Code != api.CodeInvalidRequest || ae.Message == "" {
				t.Errorf("error %+v, want %s with a message", ae, api.CodeInvalidRequest)
			}
		})
	}
}

func TestHTTPListPages(t *testing.T) {
	e := newEnv(t)
	const n = 250
	want := make([]string, n)
	for i := range n {
		e.clk.Advance(time.Millisecond)
		want[n-1-i] = e.submit(spec().Name(fmt.Sprintf("job-%03d", i)))
	}
	for _, limit := range []int{1, 7, 100, 250, 1000} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			var got []string
			after, pages := "", 0
			for {
				q := url.Values{"limit": {fmt.Sprint(limit)}}
				if after != "" {
					q.Set("after", after)
				}
				l := e.listHTTP(q.Encode())
				pages++
				if len(l.Jobs) > limit {
					t.Fatalf("page of %d jobs, limit %d", len(l.Jobs), limit)
				}
				got = append(got, ids(l.Jobs)...)
				if l.Next == "" {
					break
				}
				if l.Next != l.Jobs[len(l.Jobs)-1].ID {
					t.Fatalf("next %s is not the page's last job", l.Next)
				}
				after = l.Next
				if pages > n+1 {
					t.Fatal("paging does not end")
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("paged %d jobs, want all %d newest first with no duplicates or gaps", len(got), n)
			}
			if wantPages := (n + limit - 1) / limit; pages != wantPages {
				t.Errorf("%d pages, want %d (no empty last page)", pages, wantPages)
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		l := e.listHTTP("")
		if len(l.Jobs) != 100 || l.Next != want[99] {
			t.Errorf("default page: %d jobs, next %q; want 100 and %s", len(l.Jobs), l.Next, want[99])
		}
	})
	t.Run("client ListAll", func(t *testing.T) {
		all, err := e.client.ListAll(t.Context(), api.Query{}, 0)
		if err != nil || !slices.Equal(ids(all), want) {
			t.Fatalf("ListAll: %d jobs, %v; want all %d", len(all), err, n)
		}
		some, err := e.client.ListAll(t.Context(), api.Query{Name: "job-1"}, 30)
		if err != nil || len(some) != 30 || some[0].Name != "job-199" {
			t.Fatalf("ListAll(name job-1, max 30) = %d jobs from %v, %v", len(some), ids(some[:min(1, len(some))]), err)
		}
	})
	t.Run("filtered pages", func(t *testing.T) {
		// Jobs 100..199 match "job-1"; page through them 30 at a time.
		var got []string
		q := api.Query{Name: "job-1", Limit: 30}
		for {
			l, err := e.client.List(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(l.Jobs)...)
			if l.Next == "" {
				break
			}
			q.After = l.Next
		}
		if !slices.Equal(got, want[50:150]) {
			t.Errorf("filtered paging returned %d jobs, want jobs 199 down to 100", len(got))
		}
	})
}

// A job submitted later is listed first, whether or not it came with an
// idempotency key.
func TestListNewestFirstWithIdempotencyKeys(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i, key := range []string{"", "k-1", "", "k-2", ""} {
		e.clk.Advance(time.Second)
		res, err := e.svc.Submit(asOp(t.Context()), spec().Name(fmt.Sprintf("job-%d", i)).YAML(), key, "test")
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{res.Job.ID}, want...)
	}
	if got := ids(e.list(api.Query{}).Jobs); !slices.Equal(got, want) {
		t.Fatalf("listing %v, want newest first %v", got, want)
	}
	// Paging one at a time visits the same order.
	var got []string
	q := api.Query{Limit: 1}
	for {
		l := e.list(q)
		got = append(got, ids(l.Jobs)...)
		if l.Next == "" {
			break
		}
		q.After = l.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
}

// What a client wrote, it reads back at once: a listing right after a
// submission or a cancellation shows it.
func TestListReadsItsOwnWrites(t *testing.T) {
	e := newEnv(t)
	for i := range 20 {
		e.clk.Advance(time.Millisecond)
		v, _, err := e.client.Submit(t.Context(), spec().Name(fmt.Sprintf("j%d", i)).YAML(), "application/yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		l, err := e.client.List(t.Context(), api.Query{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Jobs) == 0 || l.Jobs[0].ID != v.ID {
			t.Fatalf("listing right after submitting %s shows %v", v.ID, ids(l.Jobs))
		}
		if _, err := e.client.Cancel(t.Context(), v.ID, ""); err != nil {
			t.Fatal(err)
		}
		l, err = e.client.List(t.Context(), api.Query{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if l.Jobs[0].State != job.Cancelled {
			t.Fatalf("listing right after cancelling %s shows it %s", v.ID, l.Jobs[0].State)
		}
	}
}

func TestListCostOfRunningJobGrowsWithClock(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	launched := e.clk.Now()
	e.setRecord(id, func(r *job.Record) {
		r.Status.State = job.Running
		r.Status.Attempt = 1
		r.Status.EndedCost = money.USD(1, 500_000)
		r.Status.Current = &job.Attempt{N: 1, LaunchKey: job.LaunchKey(id, 1), PlacedAt: launched, LaunchedAt: launched,
			Placement: job.Placement{Provider: "aws", Region: "us-east-1", InstanceType: "p3.2xlarge", GPU: "V100", GPUs: 1, Nodes: 2, Purchase: "spot", PricePerHour: money.USD(3, 0)}}
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if l := e.list(api.Query{}); l.Jobs[0].State != job.Running {
			return fmt.Errorf("listing shows %s", l.Jobs[0].State)
		}
		return nil
	})
	cases := []struct {
		after time.Duration
		want  money.Micros
	}{
		{0, money.USD(1, 500_000)},
		{30 * time.Minute, money.USD(4, 500_000)}, // $1.50 ended + 2 nodes x $3 x 0.5 h
		{90 * time.Minute, money.USD(10, 500_000)},
	}
	for _, tc := range cases {
		t.Run(tc.after.String(), func(t *testing.T) {
			e.clk.Set(launched.Add(tc.after))
			l := e.listHTTP("")
			s := l.Jobs[0]
			if s.CostUSD != tc.want {
				t.Errorf("listed cost_usd %s, want %s", s.CostUSD, tc.want)
			}
			if s.Placement == nil || s.Placement.InstanceType != "p3.2xlarge" {
				t.Errorf("listed placement %+v, want the running attempt's", s.Placement)
			}
			v, err := e.client.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if v.CostUSD != tc.want {
				t.Errorf("job cost_usd %s, want %s like the listing", v.CostUSD, tc.want)
			}
		})
	}
}
