package server

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
	"github.com/spotwise/spotwise/providers/sim"
)

// FuzzSimControl sends hostile requests over the bus to the simulated
// cloud's control handler, with spot and on-demand instances of two jobs
// running and one ended: every request is answered with a reply whose
// error, if any, says what is wrong; a request that does not name exactly
// one target, or names an unknown action, is refused; what a reply names
// are instances of the target it was asked about.
//
//	go test -run '^$' -fuzz FuzzSimControl -fuzztime 1m -fuzzminimizetime 10x ./internal/server/
func FuzzSimControl(f *testing.F) {
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	bus, err := events.Open(ctx, events.Config{Embedded: events.EmbeddedOptions{DataDir: f.TempDir()}}, "fuzz", clk, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(bus.Close)
	cloud, err := sim.New(ctx, sim.Options{Catalog: catalog.Default(), Clock: clk, Seed: 7, Store: bus.SimStore(), Providers: []string{"aws"},
		Regions: []string{"us-east-1"}, Interruptions: &sim.Interruptions{}, Log: zap.NewNop()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(cloud.Close)
	offers, err := cloud.Offers(ctx)
	if err != nil {
		f.Fatal(err)
	}
	pick := func(p providers.PurchaseOption) providers.Offer {
		for _, o := range offers {
			if o.Purchase == p && o.GPU == "T4" && o.GPUs == 1 {
				return o
			}
		}
		f.Fatalf("no %s T4 offer", p)
		return providers.Offer{}
	}
	jobs := []string{job.NewID(clk.Now()), job.NewID(clk.Now()), job.NewID(clk.Now())}
	launch := func(id string, o providers.Offer, nodes int) []providers.Instance {
		insts, err := cloud.Launch(ctx, providers.LaunchRequest{IdempotencyKey: job.LaunchKey(id, 1), Offer: o, Count: nodes, JobID: id, Attempt: 1})
		if err != nil {
			f.Fatal(err)
		}
		return insts
	}
	spot := launch(jobs[0], pick(providers.Spot), 2)
	launch(jobs[1], pick(providers.OnDemand), 1)
	ended := launch(jobs[2], pick(providers.Spot), 1)
	clk.Advance(10 * time.Minute)
	if err := cloud.Terminate(ctx, ended[0].ID); err != nil {
		f.Fatal(err)
	}
	stop, err := bus.Serve(SubjectSimControl, (&Server{}).simControl(cloud))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(stop)

	for _, action := range []string{"", "preempt", "rebalance", "maintenance", "explode"} {
		for _, target := range []string{`"job":"` + jobs[0] + `"`, `"job":"` + jobs[2] + `"`, `"job":"j-00000000000000000000000000"`,
			`"instance":"` + spot[0].ID + `"`, `"instance":"` + ended[0].ID + `"`, `"instance":"i-nope"`, `"zone":"` + spot[0].Zone + `"`,
			`"zone":"nowhere"`, `"job":"` + jobs[1] + `","zone":"x"`, `"job":""`} {
			f.Add([]byte(`{"action":"` + action + `",` + target + `,"in":"2h"}`))
		}
	}
	for _, s := range []string{`{"action":"maintenance","instance":"` + spot[1].ID + `","in":"-5h"}`,
		`{"action":"maintenance","instance":"` + spot[1].ID + `","in":"2562047h"}`,
		`{"action":"maintenance","instance":"` + spot[1].ID + `","in":99999999999999999999}`,
		`{"action":"maintenance","job":"` + jobs[1] + `","in":"1ns"}`,
		`{"action":"preempt","instance":"` + strings.Repeat("i", 100000) + `"}`,
		`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`,
		`{`, ``, `null`, `[]`, `"preempt"`, "\xff"} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		b, err := bus.Request(rctx, SubjectSimControl, data)
		if err != nil {
			t.Fatalf("not answered: %v", err)
		}
		var reply SimReply
		if err := json.Unmarshal(b, &reply); err != nil || reply.Instances == nil {
			t.Fatalf("reply %q: %v", b, err)
		}
		var req SimRequest
		if err := json.Unmarshal(data, &req); err != nil {
			if !strings.HasPrefix(reply.Error, "request: ") {
				t.Fatalf("a request that does not decode (%v) answered %q", err, b)
			}
			return
		}
		targets := 0
		for _, v := range []string{req.Job, req.Instance, req.Zone} {
			if v != "" {
				targets++
			}
		}
		known := slices.Contains([]string{"", "preempt", "rebalance", "maintenance"}, req.Action)
		switch {
		case targets != 1 || !known:
			if reply.Error == "" {
				t.Fatalf("request %+v (%d targets) answered %q, want an error", req, targets, b)
			}
			return
		case reply.Error != "":
			if len(reply.Instances) != 0 {
				t.Fatalf("an error (%s) naming instances %v", reply.Error, reply.Instances)
			}
			return
		}
		insts, err := cloud.Instances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]providers.Instance{}
		for _, in := range insts {
			byID[in.ID] = in
		}
		for _, id := range reply.Instances {
			in, ok := byID[id]
			switch {
			case !ok:
				t.Fatalf("%+v answered with %s, which the cloud does not know", req, id)
			case req.Job != "" && in.JobID != req.Job:
				t.Fatalf("%+v answered with %s, an instance of %s", req, id, in.JobID)
			case req.Zone != "" && (in.Zone != req.Zone || in.Purchase != providers.Spot):
				t.Fatalf("a storm in %s answered with %s (%s %s)", req.Zone, id, in.Zone, in.Purchase)
			case req.Instance != "" && id != req.Instance:
				t.Fatalf("%+v answered with %s", req, id)
			}
		}
	})
}
