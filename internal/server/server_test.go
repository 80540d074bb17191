package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
)

// testConfig runs the simulated world at 3600x: a 2-hour job takes two
// seconds.
func testConfig(dir string) Config {
	cfg := Defaults()
	cfg.DataDir = dir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS.Listen = ""
	cfg.Sim.Speed = 3600
	cfg.Scheduler.ReconcileInterval = job.Duration(time.Second)
	// Jobs stay where they are placed unless a test moves them: at 3600x
	// an hour of stay passes in a second.
	cfg.Scheduler.Arbitrage.Enabled = false
	return cfg
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg, eventstest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// clientOf is an API client of s with its operator token.
func clientOf(s *Server) *api.Client {
	c := api.NewClient(s.HTTPAddr())
	c.Token = s.OperatorToken()
	return c
}

// opRequest sends a NATS API request with s's operator token.
func opRequest(ctx context.Context, s *Server, subject string, data []byte) ([]byte, error) {
	return s.Bus().RequestWithHeader(ctx, subject, data, map[string]string{"Authorization": "Bearer " + s.OperatorToken()})
}

// asOperator is a context for calling the API service directly.
func asOperator(ctx context.Context) context.Context {
	return auth.WithPrincipal(ctx, auth.System("test"))
}

func example(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitState(t *testing.T, c *api.Client, id string, want job.State, timeout time.Duration) *api.JobView {
	t.Helper()
	var v *api.JobView
	testutil.CheckFor(t, timeout, 50*time.Millisecond, func() error {
		var err error
		v, err = c.Get(context.Background(), id)
		if err != nil {
			return err
		}
		if v.State != want {
			return fmt.Errorf("job %s is %s (%s), want %s", id, v.State, v.Message, want)
		}
		return nil
	})
	return v
}

func kinds(v *api.JobView) []string {
	var out []string
	for _, e := range v.Events {
		out = append(out, e.Kind)
	}
	return out
}

func TestJobRunsToSuccessOverHTTP(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	c := clientOf(s)
	ctx := context.Background()
	v, created, err := c.Submit(ctx, example(t, "bert-finetune.yaml"), "application/yaml", "")
	if err != nil || !created {
		t.Fatalf("submit: %v (created %v)", err, created)
	}
	if v.State != job.Queued || !job.ValidID(v.ID) {
		t.Fatalf("submitted job = %+v", v)
	}
	done := waitState(t, c, v.ID, job.Succeeded, 60*time.Second)
	// The attempt closes (and is billed) once its capacity is gone, a
	// moment after the job succeeds; its history follows its record.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var err error
		if done, err = c.Get(ctx, v.ID); err != nil {
			return err
		}
		if len(done.Attempts) == 0 || done.Current != nil || done.Previous != nil {
			return errors.New("the attempt is not closed yet")
		}
		if !slices.Contains(kinds(done), events.KindSucceeded) {
			return fmt.Errorf("history %v lacks %q yet", kinds(done), events.KindSucceeded)
		}
		return nil
	})
	p := done.Placement
	if p == nil || p.Provider == "" || p.InstanceType == "" || p.PricePerHour <= 0 {
		t.Fatalf("placement = %+v", p)
	}
	// 6 h on V100 must not run on V100s: A100 and H100 finish it for less.
	if strings.HasPrefix(p.GPU, "V100") {
		t.Errorf("placed on %s (%s): the cheapest to finish is not the cheapest per hour", p.InstanceType, p.GPU)
	}
	if done.CostUSD <= 0 || done.Progress != 1 || done.FinishedAt == nil {
		t.Errorf("finished job = cost %s, progress %v, finished %v", done.CostUSD, done.Progress, done.FinishedAt)
	}
	if !done.FinishedAt.Before(*done.DeadlineAt) {
		t.Errorf("finished %s after the deadline %s", done.FinishedAt, done.DeadlineAt)
	}
	for _, k := range []string{events.KindQueued, events.KindPlacing, events.KindLaunched, events.KindRunning, events.KindSucceeded} {
		if !slices.Contains(kinds(done), k) {
			t.Errorf("history %v lacks %q", kinds(done), k)
		}
	}
	// Billing: the instance is released, and the job costs what the cloud
	// charges for it: its price from its launch to the end the cloud
	// reports, teardown included.
	var charged money.Micros
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		insts, _ := s.Cloud().Instances(ctx)
		charged = 0
		for _, in := range insts {
			if in.JobID != v.ID {
				continue
			}
			if !in.State.Ended() {
				return fmt.Errorf("instance %s still %s", in.ID, in.State)
			}
			charged += in.Bill(in.EndedAt)
		}
		return nil
	})
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var err error
		if done, err = c.Get(ctx, v.ID); err != nil {
			return err
		}
		// The simulated cloud may preempt the job: every attempt's
		// instances count, and the job's cost is theirs, its checkpoint's
		// carrying to another region and its storage.
		var attempts, transfers money.Micros
		for _, a := range done.Attempts {
			attempts += a.Cost
			transfers += a.Transfer + a.DataTransfer
		}
		if charged == 0 || attempts != charged+transfers || done.CostUSD != attempts+done.StorageUSD {
			return fmt.Errorf("cost = %s (attempts %s: transfers %s; storage %s), the cloud charged %s; history %v",
				done.CostUSD, attempts, transfers, done.StorageUSD, charged, kinds(done))
		}
		return nil
	})
	list, err := c.List(ctx, api.Query{})
	if err != nil || len(list.Jobs) != 1 || list.Jobs[0].State != job.Succeeded || list.Jobs[0].CostUSD != done.CostUSD {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

func TestJobRunsToSuccessOverNATS(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := json.Marshal(api.SubmitRequest{Spec: mustJSON(string(example(t, "resnet50-spot.yaml"))), IdempotencyKey: "resnet-1"})
	b, err := opRequest(ctx, s, events.SubjectSubmit, req)
	if err != nil {
		t.Fatal(err)
	}
	var rep api.Reply
	if err := json.Unmarshal(b, &rep); err != nil || rep.Error != nil || rep.Job == nil || !rep.Created {
		t.Fatalf("reply %s: %v", b, err)
	}
	id := rep.Job.ID
	// A retry with the same key finds the same job.
	b, _ = opRequest(ctx, s, events.SubjectSubmit, req)
	var again api.Reply
	if err := json.Unmarshal(b, &again); err != nil || again.Job == nil || again.Job.ID != id || again.Created {
		t.Fatalf("retried submission: %s", b)
	}
	c := clientOf(s)
	done := waitState(t, c, id, job.Succeeded, 60*time.Second)
	if done.Placement.Purchase != string(providers.Spot) {
		t.Errorf("spot-only job ran on %s", done.Placement.Purchase)
	}
	get, _ := json.Marshal(api.JobRequest{ID: id})
	b, err = opRequest(ctx, s, events.SubjectGet, get)
	if err != nil {
		t.Fatal(err)
	}
	var got api.Reply
	if err := json.Unmarshal(b, &got); err != nil || got.Job == nil || got.Job.State != job.Succeeded {
		t.Fatalf("get over NATS: %s", b)
	}
}

func mustJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func TestCancelReleasesCapacity(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Sim.Speed = 60 // slow enough to catch it running
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx := context.Background()
	v, _, err := c.Submit(ctx, example(t, "llm-pretrain.yaml"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, v.ID, job.Running, 30*time.Second)
	cv, err := c.Cancel(ctx, v.ID, "wrong dataset")
	if err != nil || cv.State != job.Cancelled {
		t.Fatalf("cancel: %+v, %v", cv, err)
	}
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		insts, _ := s.Cloud().Instances(ctx)
		n := 0
		for _, in := range insts {
			if in.JobID == v.ID {
				n++
				if !in.State.Ended() {
					return fmt.Errorf("instance %s still %s", in.ID, in.State)
				}
			}
		}
		if n != 4 {
			return fmt.Errorf("job had %d instances, want 4 (one per node)", n)
		}
		return nil
	})
	// Cancelling again is harmless. Once the attempt is closed (the
	// instances are gone) the cost is final, and it never went down.
	again, err := c.Cancel(ctx, v.ID, "")
	if err != nil || again.State != job.Cancelled {
		t.Fatalf("second cancel: %v", err)
	}
	var final *api.JobView
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		final, err = c.Get(ctx, v.ID)
		if err != nil {
			return err
		}
		if len(final.Attempts) == 0 {
			return errors.New("attempt not closed yet")
		}
		return nil
	})
	if final.CostUSD < again.CostUSD || final.CostUSD < cv.CostUSD || final.CostUSD <= 0 {
		t.Fatalf("cost went from %s at cancel to %s when closed: %+v", cv.CostUSD, final.CostUSD, final.Attempts)
	}
	time.Sleep(200 * time.Millisecond)
	later, _ := c.Get(ctx, v.ID)
	if later.CostUSD != final.CostUSD {
		t.Fatalf("cost kept growing after the attempt closed: %s then %s", final.CostUSD, later.CostUSD)
	}
}

func TestUnplaceableJobStaysQueuedWithReasons(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	c := clientOf(s)
	v, _, err := c.Submit(context.Background(), example(t, "too-cheap.yaml"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		got, err := c.Get(context.Background(), v.ID)
		if err != nil {
			return err
		}
		if got.State != job.Queued {
			return fmt.Errorf("state %s, want queued", got.State)
		}
		for _, r := range got.PendingReasons {
			if r.Code == "max-price" && r.Offers > 0 && strings.Contains(r.Message, "$5.00/h") {
				return nil
			}
		}
		return fmt.Errorf("pending reasons %+v lack max-price", got.PendingReasons)
	})
}

func TestMalformedSpecsAreRejectedAndNothingIsStored(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	c := clientOf(s)
	ctx := context.Background()
	cases := []struct {
		name, body, code, field string
	}{
		{"not yaml", "name: [unclosed", api.CodeInvalidSpec, ""},
		{"unknown field", "name: x\ncommand: [a]\nresources: {gpus: 8}\nwork: 1h on V100", api.CodeInvalidSpec, "resources.gpus"},
		{"bad type", "name: x\ncommand: [a]\nresources: {gpus_per_node: eight}\nwork: 1h on V100", api.CodeInvalidSpec, "resources.gpus_per_node"},
		{"unknown gpu", "name: x\ncommand: [a]\nresources: {gpus_per_node: 1, accelerators: [V1000]}\nwork: 1h on V100", api.CodeInvalidSpec, "resources.accelerators[0]"},
		{"no work", "name: x\ncommand: [a]\nresources: {gpus_per_node: 1}", api.CodeInvalidSpec, "work"},
		{"deadline in the past", "name: x\ncommand: [a]\nresources: {gpus_per_node: 1}\nwork: 1h on V100\ndeadline: 2001-01-01T00:00:00Z", api.CodeInvalidSpec, "deadline"},
		{"empty", "", api.CodeInvalidSpec, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := c.Submit(ctx, []byte(tc.body), "application/yaml", "")
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != 400 {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if tc.field != "" && !slices.ContainsFunc(ae.Fields, func(f job.FieldError) bool { return f.Field == tc.field }) {
				t.Fatalf("fields %+v do not name %s", ae.Fields, tc.field)
			}
		})
	}
	list, err := c.List(ctx, api.Query{})
	if err != nil || len(list.Jobs) != 0 {
		t.Fatalf("rejected specs left jobs behind: %+v, %v", list, err)
	}
}

func TestGarbledEventsAreDroppedAndSchedulingGoesOn(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	ctx := context.Background()
	// Subjects nothing valid is published on, so each garbled message is
	// the one its consumer reads (the price book reads only the newest
	// message of each subject).
	garbage := map[string]string{
		"spotwise.prices.aws.nowhere-1":                 `{"v":1,"id":"x","type":"offers.updated","time":"2026-01-01T00:00:00Z","source":"evil","data":{"provider":"aws","region":"nowhere-1","offers":[{"provider":"aws","region":"nowhere-1","zone":"z","instance_type":"p","gpu":"","gpus":0,"purchase":"spot"}]}}`,
		"spotwise.instances.aws.us-east-1":              `not json at all`,
		"spotwise.agent.j-0123456789abcdefghjkmnpqrs.1": `{"v":9}`,
	}
	for subj, msg := range garbage {
		if err := s.Bus().PublishRaw(ctx, subj, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	c := clientOf(s)
	v, _, err := c.Submit(ctx, example(t, "eu-only.yaml"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	done := waitState(t, c, v.ID, job.Succeeded, 60*time.Second)
	if g := s.Bus().Garbled(); g < int64(len(garbage)) {
		t.Errorf("garbled counter = %d, want at least %d", g, len(garbage))
	}
	geo := map[string]bool{"eu": true, "uk": true}
	if !strings.HasPrefix(done.Placement.Region, "eu") && !strings.HasPrefix(done.Placement.Region, "europe") && !geo[done.Placement.Region] {
		t.Errorf("EU-only job ran in %s", done.Placement.Region)
	}
}

// A price book wiped by a bad update heals on the next scheduled refresh:
// a job that only fits the wiped region is placed once it is back.
func TestScheduledRefreshHealsTheOfferBook(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Sim.Regions = []string{"us-east-1", "eu-west-1"}
	cfg.Sim.PriceInterval = job.Duration(1000 * time.Hour) // no price moves
	cfg.Feeds.Refresh = "@every 1s"
	s := startServer(t, cfg)
	ctx := context.Background()
	// Wait for the book, then empty the us-east-1 part of it.
	time.Sleep(300 * time.Millisecond)
	for _, p := range []string{"aws", "gcp", "azure"} {
		if err := s.Bus().Publish(ctx, events.PricesSubject(p, "us-east-1"), &events.OffersUpdated{Provider: p, Region: "us-east-1", Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	c := clientOf(s)
	v, _, err := c.Submit(ctx, []byte("name: east\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\nplacement: {regions: [us-east-1]}\n"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		got, err := c.Get(ctx, v.ID)
		if err != nil {
			return err
		}
		if got.Placement == nil || got.Placement.Region != "us-east-1" {
			return fmt.Errorf("job %s, placement %+v", got.State, got.Placement)
		}
		return nil
	})
}

// Two servers share one NATS: both answer the API, one runs the cloud and
// schedules. When it stops, the other takes over and the running job
// carries on where it was, on the capacity it had.
func TestStandbyTakesOverRunningJobs(t *testing.T) {
	natsDir := t.TempDir()
	ns, err := events.StartEmbedded(events.EmbeddedOptions{DataDir: natsDir, Listen: "127.0.0.1:-1"}, eventstest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	mk := func(name string) Config {
		// A data dir of its own: the operator token file goes there.
		cfg := testConfig(t.TempDir())
		cfg.NATS.URL, cfg.NodeName, cfg.Sim.Speed = ns.ClientURL(), name, 600
		cfg.NATS.IdentityDir = events.IdentityDir(natsDir) // the NATS server's identity, shared as `spotwise nats init` does
		return cfg
	}
	a := startServer(t, mk("a"))
	b := startServer(t, mk("b"))
	if a.Cloud() == nil || b.Cloud() != nil {
		t.Fatalf("a should lead and b stand by (a cloud %v, b cloud %v)", a.Cloud() != nil, b.Cloud() != nil)
	}
	ctx := context.Background()
	cb := clientOf(b)
	v, _, err := cb.Submit(ctx, []byte("name: long\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 3h on T4\npurchase: on-demand\n"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		got, err := cb.Get(ctx, v.ID)
		if err != nil {
			return err
		}
		if got.State != job.Running || got.Progress < 0.1 {
			return fmt.Errorf("job %s at %.0f%%", got.State, got.Progress*100)
		}
		return nil
	})
	a.Close()
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if b.Cloud() == nil {
			return errors.New("b has not taken over")
		}
		return nil
	})
	done := waitState(t, cb, v.ID, job.Succeeded, 60*time.Second)
	if done.Attempt != 1 {
		t.Fatalf("the job ran %d times: the takeover lost its capacity (attempts %+v)", done.Attempt, done.Attempts)
	}
}

// A dry run prices and plans: it prints the offers per provider region
// with where the prices came from, and where each waiting job would go,
// and buys nothing.
func TestDryRunPricesAndPlansWithoutLaunching(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Sim.Regions = []string{"us-east-1", "eu-west-1"}
	// Two jobs wait in the store; no scheduler has run.
	bus := eventstest.OpenBus(t, dir, "", nil)
	svc := api.NewService(bus, nil, clock.Real{}, nil)
	ctx := context.Background()
	for _, f := range []string{"eu-only.yaml", "too-cheap.yaml"} {
		if _, err := svc.Submit(asOperator(ctx), example(t, f), "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	bus.Close()

	var out strings.Builder
	if err := DryRun(ctx, cfg, &out, eventstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"nothing will be launched", "aws", "eu-west-1", "us-east-1", "sim", "Plan for 2 waiting job(s)", "WOULD RUN ON", "spot", "not placed: 12 offers cost more than the max price"} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, text)
		}
	}
	// Nothing was bought.
	after := eventstest.OpenBus(t, dir, "", nil)
	keys, _ := after.SimStore().Keys(ctx)
	if len(keys) != 0 {
		t.Errorf("the dry run launched %d instances", len(keys))
	}
}

// One writer per data directory: a second server on the same one refuses
// to start, naming the process that holds it, and leaves the first
// untouched; once the first is gone, the directory is free again.
func TestSecondServerOnADataDirRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	first := startServer(t, testConfig(dir))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, testConfig(dir), eventstest.Logger(t))
	if err == nil {
		t.Fatal("a second server started on the same data directory")
	}
	if msg := err.Error(); !strings.Contains(msg, "in use by spotwise server pid "+fmt.Sprint(os.Getpid())) || !strings.Contains(msg, dir) {
		t.Fatalf("refusal %q does not name the directory and the process holding it", msg)
	}
	c := clientOf(first)
	if _, err := c.List(ctx, api.Query{}); err != nil {
		t.Fatalf("the first server stopped answering: %v", err)
	}
	first.Close()
	again := startServer(t, testConfig(dir))
	again.Close()
}
