package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
)

// The client asks GET /v1/costs what the CLI's flags say and reads the
// answer exactly: period, bucket, grouping, team, the server's own hours.
func TestClientCosts(t *testing.T) {
	e := newEnv(t)
	running := func(team, provider string, price money.Micros) {
		id := e.submit(spec().Team(team))
		e.setRecord(id, func(r *job.Record) {
			r.Status.State = job.Running
			r.Status.Current = &job.Attempt{N: 1, LaunchedAt: t0.Add(-90 * time.Minute),
				Placement: job.Placement{Provider: provider, Region: "us-east-1", Zone: "us-east-1a", GPU: "A100", Purchase: "spot", PricePerHour: price, Nodes: 1}}
		})
	}
	running("vision", "aws", 2_000_000)
	running("nlp", "azure", 1_000_001)
	vision, nlp := money.Micros(3_000_000), money.Micros(1_000_001).ForDuration(90*time.Minute)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		r, err := e.client.Costs(t.Context(), api.CostQuery{}, 0)
		if err != nil {
			return err
		}
		if r.Total != vision+nlp {
			return fmt.Errorf("total %s, want %s", r.Total, vision+nlp)
		}
		return nil
	})

	tests := []struct {
		name      string
		client    *api.Client
		q         api.CostQuery
		lastHours int
		from, to  time.Time
		buckets   int
		want      map[string]money.Micros
		wantCode  int
	}{
		{name: "the server's defaults", q: api.CostQuery{}, from: t0.Add(-24 * time.Hour), to: t0, buckets: 24,
			want: map[string]money.Micros{"vision": vision, "nlp": nlp}},
		{name: "the last hour of the server's clock, by provider", q: api.CostQuery{GroupBy: "provider"}, lastHours: 1,
			from: t0.Add(-time.Hour), to: t0, buckets: 1, want: map[string]money.Micros{"aws": 2_000_000, "azure": 1_000_001}},
		{name: "a period in half hours, one team", q: api.CostQuery{From: t0.Add(-2 * time.Hour), To: t0.Add(-30 * time.Minute), Bucket: 30 * time.Minute, Team: "nlp"},
			from: t0.Add(-2 * time.Hour), to: t0.Add(-30 * time.Minute), buckets: 3, want: map[string]money.Micros{"nlp": money.Micros(1_000_001).ForDuration(time.Hour)}},
		{name: "hours do not override a period", q: api.CostQuery{From: t0.Add(-3 * time.Hour), To: t0}, lastHours: 1,
			from: t0.Add(-3 * time.Hour), to: t0, buckets: 3, want: map[string]money.Micros{"vision": vision, "nlp": nlp}},
		{name: "a team's own token", client: e.as("nlp", auth.Viewer), q: api.CostQuery{}, from: t0.Add(-24 * time.Hour), to: t0, buckets: 24,
			want: map[string]money.Micros{"nlp": nlp}},
		{name: "another team's costs", client: e.as("nlp", auth.Viewer), q: api.CostQuery{Team: "vision"}, wantCode: http.StatusForbidden},
		{name: "an unknown grouping", q: api.CostQuery{GroupBy: "colour"}, wantCode: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.client
			if c == nil {
				c = e.client
			}
			r, err := c.Costs(t.Context(), tt.q, tt.lastHours)
			if tt.wantCode != 0 {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Status != tt.wantCode {
					t.Fatalf("error %v, want status %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !r.From.Equal(tt.from) || !r.To.Equal(tt.to) || len(r.Starts) != tt.buckets {
				t.Errorf("period %s..%s in %d buckets, want %s..%s in %d", r.From, r.To, len(r.Starts), tt.from, tt.to, tt.buckets)
			}
			got := map[string]money.Micros{}
			for _, g := range r.Groups {
				got[g.Key] = g.Total
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("spend %v, want %v", got, tt.want)
			}
		})
	}
}

// The client reads GET /v1/costs/entries as the ledger's wire format
// has it, asking for the period, team and job it was given. (The server
// side is checked where it is served.)
func TestClientCostEntries(t *testing.T) {
	from, to := t0.Add(-24*time.Hour), t0.Add(1500*time.Millisecond)
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("job") == "nope" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid_request","message":"job: \"nope\" is not a job id"}}`)
			return
		}
		fmt.Fprintf(w, `{"from":%q,"to":%q,"entries":[{"id":"j-1/a1/i-1/1","kind":"usage","start":"2031-03-14T07:00:00Z","end":"2031-03-14T08:30:00Z",
			"price_per_hour":5.680001,"quantity":1.5,"unit":"Hours","cost":8.520002,"list_cost":"49.1592","provider":"aws","zone":"us-east-2c",
			"purchase_option":"spot","job_id":"j-1","attempt":1,"team":"vision","interrupted":true,"recorded_at":"2031-03-14T08:31:00Z"}]}`,
			r.URL.Query().Get("from"), r.URL.Query().Get("to"))
	}))
	t.Cleanup(srv.Close)
	c := api.NewClient(srv.URL)
	c.Token = "tok"

	l, err := c.CostEntries(t.Context(), from, to, "vision", "j-1")
	if err != nil {
		t.Fatal(err)
	}
	want := "/v1/costs/entries?from=2031-03-13T09%3A00%3A00Z&job=j-1&team=vision&to=2031-03-14T09%3A00%3A01.5Z Bearer tok"
	if len(asked) != 1 || asked[0] != want {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if !l.From.Equal(from) || !l.To.Equal(to) || len(l.Entries) != 1 {
		t.Fatalf("answer %+v", l)
	}
	got := l.Entries[0]
	if got.Cost != 8_520_002 || got.ListCost != 49_159_200 || got.PricePerHour != 5_680_001 || got.Kind != ledger.Usage || !got.Interrupted || got.Check() != nil {
		t.Errorf("entry read as %+v (%v)", got, got.Check())
	}

	_, err = c.CostEntries(t.Context(), from, to, "", "nope")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "nope") {
		t.Errorf("a refused query: %v", err)
	}
}
