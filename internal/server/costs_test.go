package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/ledger"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// costSpec is a spot job of one team, on nodes nodes, that checkpoints.
func costSpec(team string, nodes int) []byte {
	return fmt.Appendf(nil, `api_version: spotwise/v1
name: %s-train
team: %s
command: [train]
resources: {gpus_per_node: 1, nodes: %d, accelerators: [A100, H100, L4, A10G]}
work: 3h on A100
deadline: 48h
purchase: spot
checkpoint: {duration: 1m, size_gb: 1}
`, team, team, nodes)
}

// ledgerOf reads a ledger subject's entries.
func ledgerOf(t *testing.T, bus *events.Bus, subject string) []ledger.Entry {
	t.Helper()
	es, _, garbled, err := ledger.Read(context.Background(), bus, subject)
	if err != nil || garbled > 0 {
		t.Fatalf("reading the ledger: %v (%d garbled)", err, garbled)
	}
	return es
}

// jobLedger reads a job's entries, on its subject or sealed.
func jobLedger(t *testing.T, bus *events.Bus, id string) []ledger.Entry {
	t.Helper()
	es, garbled, err := ledger.ReadJob(context.Background(), bus, id)
	if err != nil || garbled > 0 {
		t.Fatalf("reading the ledger of %s: %v (%d garbled)", id, err, garbled)
	}
	return es
}

var total = ledger.Sum

// Two teams' jobs, one preempted and one moved off for maintenance, and an
// instance no job owns: every job's ledger entries add up to what its
// record bills, which is what the simulated cloud charges for its
// instances, price segment by price segment; the orphan is overhead; the
// cost report by team adds up to the cloud's whole bill; the ledger
// rebuilt from the jobs' records is the same; the spend metric says so.
func TestCostLedgerAddsUpToTheCloudsBill(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Retention.Interval = job.Duration(time.Second) // the sealer's rounds
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx := context.Background()
	start := s.Clock().Now().Add(-time.Hour)
	var ids []string
	for _, spec := range [][]byte{costSpec("nlp", 2), costSpec("vision", 1)} {
		v, _, err := c.Submit(ctx, spec, "application/yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	nlp, vision := ids[0], ids[1]
	waitState(t, c, nlp, job.Running, 60*time.Second)
	waitState(t, c, vision, job.Running, 60*time.Second)
	if _, err := s.Cloud().PreemptJob(nlp); err != nil {
		t.Fatal(err)
	}
	insts, _ := s.Cloud().Instances(ctx)
	for _, in := range insts {
		if in.JobID == vision && !in.State.Ended() {
			// Two price moves while it runs, so that it is billed across
			// three prices whatever the walk does (near its floor a spot
			// price sits still for hours). The walk stays under on-demand,
			// and a spot price is at least a quarter of it: ten and eleven
			// times the launch price are prices the walk never has.
			offer := providers.OfferID(in.Provider, in.Region, in.Zone, in.InstanceType, in.Purchase)
			for _, p := range []money.Micros{in.Price * 10, in.Price * 11, 0} {
				if err := s.Cloud().SetPrice(offer, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Cloud().Maintenance(in.ID, 10*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	offers, _ := s.Cloud().Offers(ctx)
	var stray []providers.Instance
	for _, o := range offers {
		if o.Purchase == providers.Spot && o.Available > 0 && o.GPU == "A10G" {
			var err error
			if stray, err = s.Cloud().Launch(ctx, providers.LaunchRequest{IdempotencyKey: "stray-1", Offer: o, Count: 1}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if len(stray) != 1 {
		t.Fatal("no offer to launch a stray instance on")
	}
	for _, id := range ids {
		waitState(t, c, id, job.Succeeded, 120*time.Second)
	}

	// Settled: every instance ended, every attempt closed, and the
	// ledger holds every charge.
	var recs []*job.Record
	var bill map[string]money.Micros // by job, "" for the stray
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		all, _ := s.Cloud().Instances(ctx)
		bill = map[string]money.Micros{}
		for _, in := range all {
			if !in.State.Ended() {
				return fmt.Errorf("instance %s of %q still %s", in.ID, in.JobID, in.State)
			}
			bill[in.JobID] += in.Bill(in.EndedAt)
		}
		recs = recs[:0]
		for _, id := range ids {
			r, _, err := s.Bus().Jobs().Get(ctx, id)
			if err != nil {
				return err
			}
			if r.Status.Current != nil || r.Status.Previous != nil {
				return fmt.Errorf("job %s still holds an attempt", id)
			}
			if got := total(jobLedger(t, s.Bus(), id)); got != r.CostAt(s.Clock().Now()) {
				return fmt.Errorf("job %s: the ledger holds %s, the record bills %s", id, got, r.CostAt(s.Clock().Now()))
			}
			recs = append(recs, r)
		}
		if o := ledgerOf(t, s.Bus(), events.LedgerOverheadSubject("overhead/"+stray[0].ID)); len(o) != 1 {
			return fmt.Errorf("the stray's overhead: %d entries", len(o))
		}
		return nil
	})
	perTeam := map[string]money.Micros{}
	segments := 0
	var transfers money.Micros // egress, which the simulated cloud does not bill
	var teardown money.Micros
	for _, r := range recs {
		cost := r.CostAt(s.Clock().Now())
		moved := r.StorageAt(s.Clock().Now()) // object storage, which the simulated cloud does not bill either
		for _, a := range r.Status.Attempts {
			moved += a.Transfer
		}
		transfers += moved
		if cost-moved != bill[r.ID] || cost <= 0 {
			t.Errorf("job %s (%s) is billed %s (%s of it for carrying and storing its checkpoint), the cloud charged %s for its instances", r.ID, r.Spec.Team, cost, moved, bill[r.ID])
		}
		if r.Status.Attempt < 2 {
			t.Errorf("job %s ran %d attempt(s); the test preempts or moves it", r.ID, r.Status.Attempt)
		}
		perTeam[r.Spec.Team] += cost
		// Rebuilt from the record, the charges in force are the ledger's.
		kept := ledger.Fold(jobLedger(t, s.Bus(), r.ID))
		for _, e := range kept {
			if e.Category == ledger.OverheadTeardown {
				teardown += e.Cost // the job's instances shutting down after it ended
			}
		}
		closed, open := ledger.Charges(r, s.Clock().Now())
		if len(open) != 0 || len(closed) != len(kept) {
			t.Errorf("job %s: %d charges rebuilt (%d open), %d in the ledger", r.ID, len(closed), len(open), len(kept))
		}
		for _, e := range closed {
			k, ok := kept[e.ID]
			if !ok || !k.Start.Equal(e.Start) || !k.End.Equal(e.End) || k.Cost != e.Cost || k.PricePerHour != e.PricePerHour {
				t.Errorf("job %s: rebuilt %s %s..%s %s, the ledger has %+v", r.ID, e.ID, e.Start, e.End, e.Cost, k)
			}
		}
		byInstance := map[string]int{}
		for _, e := range closed {
			byInstance[e.Instance]++
		}
		for _, n := range byInstance {
			segments = max(segments, n)
		}
	}
	if segments < 3 {
		t.Errorf("no instance ran across three prices (at most %d segments): the prices set did not start segments of their own?", segments)
	}

	// The report by team: each team's total is its jobs', the overhead is
	// the stray's, and together they are the cloud's whole bill.
	var series api.CostSeries
	q := fmt.Sprintf("/v1/costs?group_by=team&from=%s&to=%s&bucket=1h", start.Format(time.RFC3339), s.Clock().Now().Add(time.Hour).Format(time.RFC3339))
	getJSON(t, s, q, &series)
	var cloud money.Micros
	for _, b := range bill {
		cloud += b
	}
	if series.Total != cloud+transfers || series.Overhead != bill[""]+teardown {
		t.Errorf("report: total %s (overhead %s), the cloud billed %s (%s for the stray, %s of the jobs' for teardown) and the checkpoints' transfers cost %s",
			series.Total, series.Overhead, cloud, bill[""], teardown, transfers)
	}
	for _, g := range series.Groups {
		want := perTeam[g.Key]
		if g.Key == "(overhead)" {
			want = bill[""]
		}
		if g.Total != want {
			t.Errorf("team %s: %s in the report, %s billed", g.Key, g.Total, want)
		}
	}
	if len(series.Groups) != 3 {
		t.Errorf("groups %+v, want nlp, vision and (overhead)", series.Groups)
	}
	var entries api.CostEntries
	getJSON(t, s, "/v1/costs/entries?job="+nlp+"&from="+start.Format(time.RFC3339), &entries)
	if len(entries.Entries) == 0 || entries.Entries[0].JobName != "nlp-train" || entries.Entries[0].Team != "nlp" || entries.Entries[0].RecordedAt.IsZero() {
		t.Errorf("entries of %s: %+v", nlp, entries.Entries)
	}
	interrupted := false
	for _, e := range entries.Entries {
		interrupted = interrupted || e.Interrupted
	}
	if !interrupted {
		t.Error("no entry of the preempted job says its attempt was interrupted")
	}
	metrics := getText(t, s, "/metrics")
	if !strings.Contains(metrics, `spotwise_spend_usd_total{provider="`) || !strings.Contains(metrics, `team="vision"`) {
		t.Errorf("no spend metric by team:\n%s", grepLines(metrics, "spotwise_spend"))
	}

	// An hour of the scheduler's clock after the jobs finished, their
	// charges are sealed: their own subjects go, and the report is the
	// same, from the server's view that saw them before and from a view
	// that reads only the seals.
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		left, _, err := s.Bus().LedgerJobs(ctx, 0)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if slices.Contains(left, id) {
				return fmt.Errorf("job %s's charges are still on its own subject", id)
			}
		}
		return nil
	})
	// The scheduling server says how many it sealed and how many are
	// left on their own subjects.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		m := getText(t, s, "/metrics")
		var sealed, left, written float64
		behind := -1.0
		for _, l := range strings.Split(m, "\n") {
			fmt.Sscanf(l, "spotwise_ledger_sealed_jobs_total %g", &sealed)
			fmt.Sscanf(l, "spotwise_ledger_unsealed_jobs %g", &left)
			fmt.Sscanf(l, "spotwise_ledger_writer_revision %g", &written)
			fmt.Sscanf(l, "spotwise_ledger_writer_behind_revisions %g", &behind)
		}
		// The store is quiet: the writer has every version.
		if sealed < float64(len(ids)) || !strings.Contains(m, "\nspotwise_ledger_unsealed_jobs ") || written <= 0 || behind != 0 {
			return fmt.Errorf("the metrics say %v jobs sealed, %v left, the writer at %v, %v behind:\n%s", sealed, left, written, behind, grepLines(m, "spotwise_ledger"))
		}
		return nil
	})
	var again api.CostSeries
	getJSON(t, s, q, &again)
	if again.Total != series.Total || again.Overhead != series.Overhead {
		t.Errorf("once sealed, the report says %s (overhead %s), before %s (%s)", again.Total, again.Overhead, series.Total, series.Overhead)
	}
	fresh := ledger.NewView(eventstest.Logger(t)).KeepJobTotals()
	stop, err := fresh.Follow(ctx, s.Bus())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	<-fresh.Ready()
	for _, r := range recs {
		if got, want := fresh.JobTotal(r.ID), r.CostAt(s.Clock().Now()); got != want {
			t.Errorf("job %s: a view of the sealed ledger bills %s, the record %s", r.ID, got, want)
		}
	}
}

func getJSON(t *testing.T, s *Server, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, s, path)), v); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, s *Server, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// pendingFor waits until a queued job's pending reasons hold one of code
// whose message says every one of says.
func pendingFor(t *testing.T, c *api.Client, id, code string, says ...string) {
	t.Helper()
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		v, err := c.Get(context.Background(), id)
		if err != nil {
			return err
		}
		if v.State != job.Queued {
			return fmt.Errorf("job %s is %s, want queued", id, v.State)
		}
	reasons:
		for _, r := range v.PendingReasons {
			if r.Code != code {
				continue
			}
			for _, s := range says {
				if !strings.Contains(r.Message, s) {
					continue reasons
				}
			}
			return nil
		}
		return fmt.Errorf("pending reasons %+v lack %s saying %q", v.PendingReasons, code, says)
	})
}

// The teams of the server's config are held to their limits: a team at
// its GPU quota waits with reason quota while it holds its GPU; a team
// whose next job would go past its hard monthly budget waits with reason
// budget, naming the budget, what the team spent (from the cost ledger)
// and the job's expected cost.
func TestTeamLimitsOfTheConfigHoldPlacements(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Teams = map[string]TeamConfig{
		"vision": {Quota: QuotaConfig{GPUs: 1}},
		"nlp":    {Budget: BudgetConfig{MonthlyUSD: "0.50", Hard: true}},
	}
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx := context.Background()
	submit := func(spec []byte) string {
		v, _, err := c.Submit(ctx, spec, "application/yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	first := submit(costSpec("vision", 1))
	waitState(t, c, first, job.Running, 60*time.Second)
	second := submit(costSpec("vision", 1))
	pendingFor(t, c, second, "quota", "1 GPU")
	held := submit(costSpec("nlp", 1))
	pendingFor(t, c, held, "budget", "$0.50", "spent so far", "expected to cost")
	var budgets struct{ Budgets []api.BudgetStatus }
	getJSON(t, s, "/v1/budgets", &budgets)
	if b := budgets.Budgets; len(b) != 1 || b[0].Team != "nlp" || b[0].Budget != money.MustParse("0.50") || !b[0].Hard || b[0].Spent != 0 {
		t.Errorf("budgets %+v, want nlp's $0.50, hard, nothing spent", b)
	}
	// The first job done, the second takes its GPU.
	waitState(t, c, first, job.Succeeded, 120*time.Second)
	waitState(t, c, second, job.Running, 60*time.Second)
}

// A reservation's hours left idle are overhead in the ledger: one entry
// per reservation and hour once the hour is over, each costing the idle
// slots' share of what the reservation is paid, and the report counts
// them as overhead.
func TestReservedIdleHoursAreOverheadInTheLedger(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Sim.Speed = 60
	start := time.Now().Add(-3*time.Hour - 30*time.Minute).UTC().Truncate(time.Second)
	cfg.Reservations = []ReservationConfig{{ID: "r-idle", Provider: "aws", Region: "us-east-1", InstanceType: "g4dn.xlarge", Count: 2,
		Start: configText(start.Format(time.RFC3339)), Term: "30d", PricePerHour: "0.30"}}
	s := startServer(t, cfg)
	res := providers.Reservation{ID: "r-idle", Count: 2, Start: start, End: start.Add(30 * 24 * time.Hour), Price: money.MustParse("0.30")}
	first := start.Truncate(time.Hour)
	var entries []ledger.Entry
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		var list api.CostEntries
		getJSON(t, s, "/v1/costs/entries?from="+first.Format(time.RFC3339), &list)
		entries = entries[:0]
		for _, e := range list.Entries {
			if e.Category == ledger.OverheadReservedIdle {
				entries = append(entries, e)
			}
		}
		if len(entries) < 3 {
			return fmt.Errorf("%d hours of idle reservation in the ledger, want the 3 over since %s", len(entries), start)
		}
		return nil
	})
	var sum money.Micros
	for i, e := range entries {
		hour := first.Add(time.Duration(i) * time.Hour)
		want := res.Usage(nil, hour.Add(time.Hour)).Idle - res.Usage(nil, hour).Idle
		if e.ID != "reserved-idle/r-idle/"+hour.Format(time.RFC3339) || e.Cost != want || e.Reservation != "r-idle" || e.Kind != ledger.Overhead {
			t.Errorf("hour %d: %+v, want %s of idle slots", i, e, want)
		}
		sum += e.Cost
	}
	if full := money.MustParse("0.60"); entries[1].Cost != full {
		t.Errorf("a whole idle hour of 2 slots at $0.30 costs %s, want %s", entries[1].Cost, full)
	}
	var series api.CostSeries
	getJSON(t, s, "/v1/costs?group_by=kind&from="+first.Format(time.RFC3339)+"&to="+first.Add(time.Duration(len(entries))*time.Hour).Format(time.RFC3339), &series)
	if series.Overhead != sum || series.Total != sum {
		t.Errorf("the report's overhead %s (total %s), the ledger's idle hours %s", series.Overhead, series.Total, sum)
	}
}
