package aws

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

func TestInterruptionQueue(t *testing.T) {
	type step struct {
		// body is the message; nil sends the previous step's again.
		body  func(c *awsfake.Cloud, inst, stranger string) string
		state string // the fake's state for the instance before the message
		code  string
	}
	warning := func(at time.Time) func(*awsfake.Cloud, string, string) string {
		return func(c *awsfake.Cloud, i, _ string) string { return c.SpotInterruptionWarning(i, at) }
	}
	change := func(state string, at time.Time) func(*awsfake.Cloud, string, string) string {
		return func(c *awsfake.Cloud, i, _ string) string { return c.StateChange(i, state, at) }
	}
	raw := func(body string) func(*awsfake.Cloud, string, string) string {
		return func(*awsfake.Cloud, string, string) string { return body }
	}
	retirement := time.Date(2025, 6, 7, 15, 10, 9, 0, time.UTC)
	tests := []struct {
		name        string
		steps       []step
		wantKind    providers.EventKind // "" for no event
		wantCount   int
		wantState   providers.InstanceState
		wantReason  string
		wantDead    time.Time
		wantGarbled int64
	}{
		{name: "spot interruption warning", wantKind: providers.EventSpotInterruption, wantCount: 1,
			steps:    []step{{body: warning(t0.Add(5 * time.Minute))}},
			wantDead: t0.Add(7 * time.Minute), wantReason: "spot interruption warning (terminate)"},
		{name: "the same warning delivered twice reports once", wantKind: providers.EventSpotInterruption, wantCount: 1,
			steps: []step{{body: warning(t0.Add(5 * time.Minute))}, {}}, wantDead: t0.Add(7 * time.Minute)},
		{name: "rebalance recommendation", wantKind: providers.EventRebalance, wantCount: 1,
			steps: []step{{body: func(c *awsfake.Cloud, i, _ string) string { return c.RebalanceRecommendation(i, t0.Add(3*time.Minute)) }}}},
		{name: "running", wantKind: providers.EventInstanceRunning, wantCount: 1, wantState: providers.InstanceRunning,
			steps: []step{{body: change("running", t0.Add(90*time.Second)), state: "running"}}},
		{name: "pending says nothing new", steps: []step{{body: change("pending", t0.Add(time.Second))}}},
		{name: "reclaimed after a warning: terminated once", wantKind: providers.EventInstanceTerminated, wantCount: 1,
			wantState: providers.InstanceTerminated, wantReason: ReasonSpotReclaim,
			steps: []step{
				{body: warning(t0.Add(5 * time.Minute))},
				{body: change("shutting-down", t0.Add(7*time.Minute)), state: "shutting-down"},
				{body: change("terminated", t0.Add(8*time.Minute)), state: "terminated"},
			}},
		{name: "hardware failure while starting", wantKind: providers.EventInstanceFailed, wantCount: 1, wantState: providers.InstanceFailed,
			wantReason: "Server.InternalError: Internal error on launch",
			steps:      []step{{body: change("terminated", t0.Add(time.Minute)), state: "terminated", code: "Server.InternalError"}}},
		{name: "scheduled retirement", wantKind: providers.EventMaintenance, wantCount: 1, wantReason: "scheduled change: AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
			steps:    []step{{body: func(c *awsfake.Cloud, i, _ string) string { return c.HealthScheduledChange(i, "", retirement) }}},
			wantDead: retirement},
		{name: "an instance spotwise did not launch is dropped",
			steps: []step{
				{body: func(c *awsfake.Cloud, _, s string) string { return c.SpotInterruptionWarning(s, t0.Add(5*time.Minute)) }},
				{body: func(c *awsfake.Cloud, _, _ string) string {
					return c.SpotInterruptionWarning("i-0fffffffffffffff0", t0.Add(5*time.Minute))
				}},
			}},
		{name: "a garbled message is deleted and counted", wantGarbled: 2,
			steps: []step{
				{body: raw(`{"detail-type": "EC2 Spot Instance Interruption Warning", "detail": 42`)},
				{body: raw(`{"id":"ev-12","detail-type":"EC2 Spot Instance Interruption Warning","time":"2025-06-01T12:05:00Z","detail":{}}`)},
			}},
		{name: "other event kinds are ignored", steps: []step{{body: raw(
			`{"version":"0","id":"ev-13","detail-type":"EC2 AMI State Change","source":"aws.ec2","time":"2025-06-01T12:00:00Z","region":"us-east-1","detail":{"State":"available"}}`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			insts, err := h.p.Launch(context.Background(), launchReq(h.offer("us-east-1a", "p3.2xlarge", providers.Spot), "j-7f3a-a2", 1))
			if err != nil {
				t.Fatal(err)
			}
			inst := insts[0]
			stranger := h.cloud.AddInstance(awsfake.Instance{Zone: "us-east-1a", InstanceType: "p3.2xlarge", Market: awsfake.MarketSpot,
				Tags: map[string]string{"Name": "not spotwise"}})
			w := h.watch()
			var body string
			for _, s := range tt.steps {
				if s.state != "" {
					h.setState(inst.ID, s.state, s.code)
				}
				if s.body != nil {
					body = s.body(h.cloud, inst.ID, stranger)
				}
				id := h.cloud.Send(body)
				testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
					if !slices.Contains(h.cloud.Deleted(), id) {
						return fmt.Errorf("message %s not deleted", id)
					}
					return nil
				})
			}
			if tt.wantKind != "" {
				w.waitFor(t, string(tt.wantKind), func(e providers.Event) bool { return e.Kind == tt.wantKind })
			}
			h.cloud.SendRebalanceRecommendation("i-0fffffffffffffff0", t0) // a sentinel: everything before it was handled
			testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
				if len(h.cloud.Deleted()) < len(tt.steps)+1 {
					return fmt.Errorf("sentinel not handled")
				}
				return nil
			})
			got := w.allBut(providers.EventOffers)
			if tt.wantKind == providers.EventInstanceTerminated {
				got = w.all(tt.wantKind) // the warning before it is reported too
			}
			if len(got) != tt.wantCount {
				t.Fatalf("%d events, want %d: %+v", len(got), tt.wantCount, got)
			}
			if tt.wantCount > 0 {
				e := got[0]
				if e.Kind != tt.wantKind || e.Provider != "aws" || e.Region != "us-east-1" || e.Instance == nil ||
					e.Instance.ID != inst.ID || e.Instance.JobID != "j-7f3a" || e.Instance.IdempotencyKey != "j-7f3a-a2" || e.Instance.Attempt != 2 {
					t.Errorf("event %+v (instance %+v)", e, e.Instance)
				}
				if !e.Deadline.Equal(tt.wantDead) {
					t.Errorf("deadline %s, want %s", e.Deadline, tt.wantDead)
				}
				if tt.wantState != "" && e.Instance.State != tt.wantState {
					t.Errorf("instance state %s, want %s", e.Instance.State, tt.wantState)
				}
				if tt.wantReason != "" && e.Reason != tt.wantReason {
					t.Errorf("reason %q, want %q", e.Reason, tt.wantReason)
				}
			}
			if got := h.p.GarbledMessages(); got != tt.wantGarbled {
				t.Errorf("%d garbled messages, want %d", got, tt.wantGarbled)
			}
		})
	}
}

func (w *watchLog) allBut(kind providers.EventKind) []providers.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []providers.Event
	for _, e := range w.events {
		if e.Kind != kind {
			out = append(out, e)
		}
	}
	return out
}

func TestWatchPollsPendingInstances(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SQSQueueURL = "" })
	insts, err := h.p.Launch(context.Background(), launchReq(h.offer("us-east-1a", "p3.2xlarge", providers.OnDemand), "j-7f3a-a2", 2))
	if err != nil {
		t.Fatal(err)
	}
	w := h.watch()
	h.setState(insts[1].ID, "running", "")
	waitTimers(t, h, 2) // the refresh loop and the poll
	h.clk.Advance(time.Minute)
	e := w.waitFor(t, "running", func(e providers.Event) bool { return e.Kind == providers.EventInstanceRunning })
	if e.Instance.ID != insts[1].ID || e.Instance.Node != 1 || e.Instance.State != providers.InstanceRunning ||
		!e.Instance.RunningAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("event instance %+v", e.Instance)
	}
	// Another round reports nothing twice; the other node's start is reported.
	h.setState(insts[0].ID, "running", "")
	waitTimers(t, h, 2)
	h.clk.Advance(time.Minute)
	w.waitFor(t, "node 0 running", func(e providers.Event) bool {
		return e.Kind == providers.EventInstanceRunning && e.Instance.ID == insts[0].ID
	})
	if n := len(w.all(providers.EventInstanceRunning)); n != 2 {
		t.Errorf("%d running events, want 2", n)
	}
	if h.logs.FilterMessageSnippet("no sqs_queue_url").Len() != 1 {
		t.Error("running without a queue was not logged")
	}
}

// TestWatchSeesInstancesBootByThemselves runs the fake as AWS behaves:
// instances boot and shut down by themselves and every state change comes
// on the queue. Each transition is reported once, at the time EC2 gave.
func TestWatchSeesInstancesBootByThemselves(t *testing.T) {
	h := newHarnessWith(t, []awsfake.Option{awsfake.WithBootDelay(30 * time.Second), awsfake.WithStateChangeEvents()})
	ctx := context.Background()
	insts, err := h.p.Launch(ctx, launchReq(h.offer("us-east-1a", "p3.2xlarge", providers.Spot), "j-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	id := insts[0].ID
	w := h.watch()
	h.clk.Advance(30 * time.Second) // booted; the poll (every minute) has not run
	e := w.waitFor(t, "running", func(e providers.Event) bool { return e.Kind == providers.EventInstanceRunning })
	if e.Instance.ID != id || !e.Time.Equal(t0.Add(30*time.Second)) || !e.Instance.RunningAt.Equal(t0.Add(30*time.Second)) {
		t.Errorf("running event %+v (instance %+v)", e, e.Instance)
	}
	if err := h.p.Terminate(ctx, id); err != nil {
		t.Fatal(err)
	}
	e = w.waitFor(t, "terminated", func(e providers.Event) bool { return e.Kind == providers.EventInstanceTerminated })
	if e.Instance.ID != id || e.Reason != ReasonTerminated {
		t.Errorf("terminated event %+v", e)
	}
	h.clk.Advance(30 * time.Second) // shutting-down -> terminated comes too
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if in, _ := h.cloud.Instance(id); in.State != "terminated" || h.cloud.InFlight() > 0 || len(h.cloud.Deleted()) < 4 {
			return fmt.Errorf("%s; %d messages deleted", in.State, len(h.cloud.Deleted()))
		}
		return nil
	})
	if n := len(w.all(providers.EventInstanceRunning)) + len(w.all(providers.EventInstanceTerminated)); n != 2 {
		t.Errorf("%d instance events, want 2: %+v", n, w.allBut(providers.EventOffers))
	}
}

func TestWatchRefreshesOnSchedule(t *testing.T) {
	h := newHarness(t)
	w := h.watch()
	first := w.all(providers.EventOffers)
	if len(first) != 1 || first[0].Region != "us-east-1" || len(first[0].Offers) == 0 {
		t.Fatalf("first offers: %+v", first)
	}
	pricing, spot := h.cloud.PricingCalls(), h.cloud.Calls("DescribeSpotPriceHistory")
	// The spot price moves; ten minutes later it is published.
	h.cloud.SetSpotPrice("us-east-1a", "p3.2xlarge", "1.111100", t0.Add(5*time.Minute))
	waitTimers(t, h, 2)
	h.clk.Advance(10 * time.Minute)
	e := w.waitFor(t, "refreshed offers", func(e providers.Event) bool {
		return e.Kind == providers.EventOffers && slices.ContainsFunc(e.Offers, func(o providers.Offer) bool {
			return o.Purchase == providers.Spot && o.Zone == "us-east-1a" && o.InstanceType == "p3.2xlarge" && o.Price == usd("1.1111")
		})
	})
	if !e.Time.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("event time %s", e.Time)
	}
	if h.cloud.PricingCalls() != pricing || h.cloud.Calls("DescribeSpotPriceHistory") == spot {
		t.Errorf("spot refresh: price list calls %d -> %d, spot history calls %d -> %d", pricing, h.cloud.PricingCalls(),
			spot, h.cloud.Calls("DescribeSpotPriceHistory"))
	}
	// A capacity error republishes the region with the offer empty, and
	// again when the mark runs out.
	o := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
	h.cloud.FailFleet(awsfake.FleetError{Code: "InsufficientInstanceCapacity", Message: "no capacity"})
	if _, err := h.p.Launch(context.Background(), launchReq(o, "j-7f3a-a2", 1)); !providers.IsInsufficientCapacity(err) {
		t.Fatalf("launch: %v", err)
	}
	offerIn := func(e providers.Event) (providers.Offer, bool) {
		i := slices.IndexFunc(e.Offers, func(x providers.Offer) bool { return x.ID() == o.ID() })
		if i < 0 {
			return providers.Offer{}, false
		}
		return e.Offers[i], true
	}
	w.waitFor(t, "offer marked unavailable", func(e providers.Event) bool {
		x, ok := offerIn(e)
		return e.Kind == providers.EventOffers && ok && x.Capacity == providers.CapacityNone
	})
	h.clk.Advance(DefaultUnavailableFor)
	w.waitFor(t, "offer back", func(e providers.Event) bool {
		x, ok := offerIn(e)
		return e.Kind == providers.EventOffers && ok && x.Capacity != providers.CapacityNone && !e.Time.Before(t0.Add(13*time.Minute))
	})
}

func waitTimers(t *testing.T, h *harness, n int) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if got := h.clk.Timers(); got < n {
			return fmt.Errorf("%d timers waiting, want %d", got, n)
		}
		return nil
	})
}

func TestParseHealthTimes(t *testing.T) {
	for _, s := range []string{"Sat, 07 Jun 2025 15:10:09 GMT", "2025-06-07T15:10:09Z", "Sat, 7 Jun 2025 15:10:09 GMT"} {
		body := fmt.Sprintf(`{"id":"x","detail-type":"AWS Health Event","time":"2025-06-01T12:00:00Z","region":"us-east-1",
"detail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
"startTime":%q,"affectedEntities":[{"entityValue":"i-0123456789abcdef0"}]}}`, s)
		_, ns, err := parseMessage(body)
		if err != nil || len(ns) != 1 || !ns[0].deadline.Equal(time.Date(2025, 6, 7, 15, 10, 9, 0, time.UTC)) {
			t.Errorf("%q: %v %+v", s, err, ns)
		}
	}
	// Health events about other services or categories are not ours.
	_, ns, err := parseMessage(`{"id":"y","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"issue"}}`)
	if err != nil || len(ns) != 0 {
		t.Errorf("issue event: %v %+v", err, ns)
	}
	// An EventBridge event wrapped by SNS reads the same.
	c := awsfake.Start()
	defer c.Close()
	wrapped := fmt.Sprintf(`{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-east-1:123456789012:t","Message":%q}`,
		c.RebalanceRecommendation("i-0123456789abcdef0", t0))
	if _, ns, err := parseMessage(wrapped); err != nil || len(ns) != 1 || ns[0].kind != providers.EventRebalance {
		t.Errorf("SNS-wrapped: %v %+v", err, ns)
	}
}

func TestInterruptionQueueRetries(t *testing.T) {
	h := newHarness(t)
	insts, err := h.p.Launch(context.Background(), launchReq(h.offer("us-east-1a", "p3.2xlarge", providers.Spot), "j-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	// A restarted provider does not know the instance and must ask EC2.
	h.p, err = New(context.Background(), h.cfg, WithAWSConfig(testAWSConfig()), WithClock(h.clk),
		WithLogger(zap.New(h.core)), WithRetry(2, time.Millisecond), WithPollInterval(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The queue fails past the SDK's retries: the consumer backs off on
	// the clock and carries on.
	h.cloud.FailReceives(503, 503)
	w := h.watch()
	waitTimers(t, h, 3) // refresh, poll, and the consumer's backoff
	h.clk.Advance(time.Second)

	// EC2 cannot be asked about the instance: the message stays on the
	// queue and comes again.
	unavailable := awsfake.Fault{Status: 503, Code: "Unavailable"}
	h.cloud.FailEC2("DescribeInstances", unavailable, unavailable)
	id := h.cloud.SendSpotInterruptionWarning(insts[0].ID, t0.Add(5*time.Minute))
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.cloud.InFlight() != 1 || h.cloud.Calls("DescribeInstances") < 3 {
			return fmt.Errorf("message not tried yet")
		}
		return nil
	})
	if slices.Contains(h.cloud.Deleted(), id) || len(w.all(providers.EventSpotInterruption)) != 0 {
		t.Fatal("a message whose handling failed was deleted or reported")
	}
	h.cloud.Redeliver()
	e := w.waitFor(t, "the warning", func(e providers.Event) bool { return e.Kind == providers.EventSpotInterruption })
	if e.Instance.JobID != "j-7f3a" || e.Instance.IdempotencyKey != "j-7f3a-a2" || e.Instance.Node != 0 {
		t.Errorf("instance %+v", e.Instance)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if !slices.Contains(h.cloud.Deleted(), id) {
			return fmt.Errorf("not deleted")
		}
		return nil
	})
	if h.logs.FilterMessageSnippet("receiving from the interruption queue").Len() == 0 {
		t.Error("the failing queue was not logged")
	}
}
