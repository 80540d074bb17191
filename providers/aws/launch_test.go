package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

func decodeUserData(t *testing.T, b64 string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("user data is not base64: %v", err)
	}
	return string(raw)
}

func TestLaunchSpotThroughAnInstantFleet(t *testing.T) {
	h := newHarness(t)
	o := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
	req := launchReq(o, "j-7f3a-a2", 2)
	req.MaxPrice = usd("1.50")
	insts, err := h.p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 {
		t.Fatalf("%d instances", len(insts))
	}
	for i, in := range insts {
		if in.Node != i || in.State != providers.InstancePending || in.Purchase != providers.Spot || in.Price != usd("0.9181") ||
			in.JobID != "j-7f3a" || in.Attempt != 2 || in.IdempotencyKey != "j-7f3a-a2" || in.Zone != "us-east-1a" ||
			in.InstanceType != "p3.2xlarge" || !in.LaunchedAt.Equal(t0) || !strings.HasPrefix(in.ID, "i-") {
			t.Errorf("instance %d: %+v", i, in)
		}
	}
	f := h.lastForm("CreateFleet")
	token := clientToken("j-7f3a-a2")
	for k, want := range map[string]string{
		"Type":        "instant",
		"ClientToken": token,
		"TargetCapacitySpecification.DefaultTargetCapacityType":       "spot",
		"TargetCapacitySpecification.TotalTargetCapacity":             "2",
		"SpotOptions.MinTargetCapacity":                               "2",
		"LaunchTemplateConfigs.1.Overrides.1.InstanceType":            "p3.2xlarge",
		"LaunchTemplateConfigs.1.Overrides.1.SubnetId":                "subnet-0a1a2b3c4d5e6f701",
		"LaunchTemplateConfigs.1.Overrides.1.MaxPrice":                "1.500000",
		"LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version": "$Latest",
	} {
		if got := f.Get(k); got != want {
			t.Errorf("CreateFleet %s = %q, want %q", k, got, want)
		}
	}
	if len(token) > 64 {
		t.Errorf("client token %q is longer than 64", token)
	}
	l := h.lastLaunch()
	if l.Market != awsfake.MarketSpot || l.Zone != "us-east-1a" || l.InstanceType != "p3.2xlarge" || l.MaxPrice != "1.500000" ||
		l.ClientToken != token || !slices.Equal(l.InstanceIDs, []string{insts[0].ID, insts[1].ID}) {
		t.Errorf("EC2 saw the launch as %+v", l)
	}
	tags := l.Tags
	for k, want := range map[string]string{TagJob: "j-7f3a", TagAttempt: "2", TagLaunchKey: "j-7f3a-a2", TagName: "bert-large-finetune",
		TagTeam: "nlp", TagPrice: "0.918100", TagPurchase: "spot", "Name": "spotwise bert-large-finetune a2"} {
		if tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, tags[k], want)
		}
	}
	script := l.UserData
	if decodeUserData(t, f.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateSpecificationUserData")) != script {
		t.Error("the fleet does not carry the launch's own user data")
	}
	for _, want := range []string{"#!/bin/bash", "--job 'j-7f3a'", "--attempt 2", "--notices aws", `--instance "$instance"`, "--region 'us-east-1'",
		"--nats-url 'nats://nats.internal:4222'", "--nats-creds '/etc/spotwise/agent.creds'", "--checkpoints 's3://ckpt/spotwise'"} {
		if !strings.Contains(script, want) {
			t.Errorf("user data lacks %q:\n%s", want, script)
		}
	}
	// The region's launch template: IMDSv2 only, made once.
	lt := h.lastForm("CreateLaunchTemplate")
	if lt.Get("LaunchTemplateData.MetadataOptions.HttpTokens") != "required" || lt.Get("LaunchTemplateData.ImageId") != "ami-0abcdef1234567890" ||
		lt.Get("LaunchTemplateData.IamInstanceProfile.Name") != "spotwise-node" || lt.Get("LaunchTemplateData.SecurityGroupId.1") != "sg-0123456789abcdef0" {
		t.Errorf("launch template: %v", lt)
	}
	if f.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName") != lt.Get("LaunchTemplateName") {
		t.Error("the fleet does not use the region's launch template")
	}
	if _, err := h.p.Launch(context.Background(), launchReq(o, "j-8b2c-a1", 1)); err != nil {
		t.Fatal(err)
	}
	if n := h.cloud.Calls("CreateLaunchTemplate"); n != 1 {
		t.Errorf("%d CreateLaunchTemplate calls, want 1 (reused)", n)
	}
}

func TestLaunchRequests(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		purchase providers.PurchaseOption
		maxPrice string
		action   string
		want     map[string]string
		absent   []string
	}{
		{name: "on-demand fleet", method: LaunchFleet, purchase: providers.OnDemand, action: "CreateFleet",
			want: map[string]string{"TargetCapacitySpecification.DefaultTargetCapacityType": "on-demand",
				"TargetCapacitySpecification.OnDemandTargetCapacity": "2", "OnDemandOptions.MinTargetCapacity": "2",
				"OnDemandOptions.SingleAvailabilityZone": "true"},
			absent: []string{"LaunchTemplateConfigs.1.Overrides.1.MaxPrice", "SpotOptions.MinTargetCapacity"}},
		{name: "spot fleet without a max price is capped at on-demand", method: LaunchFleet, purchase: providers.Spot, action: "CreateFleet",
			want: map[string]string{"LaunchTemplateConfigs.1.Overrides.1.MaxPrice": "3.060000", "SpotOptions.InstanceInterruptionBehavior": "terminate"}},
		{name: "on-demand run-instances", method: LaunchRunInstances, purchase: providers.OnDemand, action: "RunInstances",
			want: map[string]string{"MinCount": "2", "MaxCount": "2", "ImageId": "ami-0abcdef1234567890", "InstanceType": "p3.2xlarge",
				"SubnetId": "subnet-0a1a2b3c4d5e6f701", "SecurityGroupId.1": "sg-0123456789abcdef0", "IamInstanceProfile.Name": "spotwise-node",
				"KeyName": "ops", "MetadataOptions.HttpTokens": "required", "InstanceInitiatedShutdownBehavior": "terminate",
				"TagSpecification.1.ResourceType": "instance", "TagSpecification.2.ResourceType": "volume"},
			absent: []string{"InstanceMarketOptions.MarketType"}},
		{name: "spot run-instances with a max price", method: LaunchRunInstances, purchase: providers.Spot, maxPrice: "2.25", action: "RunInstances",
			want: map[string]string{"InstanceMarketOptions.MarketType": "spot", "InstanceMarketOptions.SpotOptions.MaxPrice": "2.250000",
				"InstanceMarketOptions.SpotOptions.SpotInstanceType": "one-time"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.LaunchMethod = tt.method })
			o := h.offer("us-east-1a", "p3.2xlarge", tt.purchase)
			req := launchReq(o, "j-7f3a-a2", 2)
			if tt.maxPrice != "" {
				req.MaxPrice = usd(tt.maxPrice)
			}
			insts, err := h.p.Launch(context.Background(), req)
			if err != nil || len(insts) != 2 {
				t.Fatalf("launch: %v, %d instances", err, len(insts))
			}
			f := h.lastForm(tt.action)
			if f.Get("ClientToken") != clientToken("j-7f3a-a2") {
				t.Errorf("client token %q", f.Get("ClientToken"))
			}
			for k, want := range tt.want {
				if got := f.Get(k); got != want {
					t.Errorf("%s %s = %q, want %q", tt.action, k, got, want)
				}
			}
			for _, k := range tt.absent {
				if f.Has(k) {
					t.Errorf("%s has %s = %q", tt.action, k, f.Get(k))
				}
			}
			l := h.lastLaunch()
			if l.Action != tt.action || !strings.Contains(l.UserData, "--job 'j-7f3a'") {
				t.Errorf("%s's user data does not name the job:\n%s", l.Action, l.UserData)
			}
			if l.Tags[TagLaunchKey] != "j-7f3a-a2" || l.Tags[TagJob] != "j-7f3a" {
				t.Errorf("tags %v", l.Tags)
			}
		})
	}
}

func TestLaunchIsIdempotent(t *testing.T) {
	tests := []struct {
		name       string
		tagsLag    bool // DescribeInstances does not see the new instances yet
		wantFleets int
	}{
		{name: "a retry finds the instances by their launch-key tag", wantFleets: 1},
		{name: "a retry before the tags show sends the same client token", tagsLag: true, wantFleets: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.cloud.HideTags(tt.tagsLag)
			req := launchReq(h.offer("us-east-1b", "p3.2xlarge", providers.Spot), "j-7f3a-a2", 2)
			first, err := h.p.Launch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			again, err := h.p.Launch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			ids := func(is []providers.Instance) []string {
				var out []string
				for _, in := range is {
					out = append(out, in.ID)
				}
				return out
			}
			if !slices.Equal(ids(first), ids(again)) {
				t.Errorf("retry returned %v, first launch %v", ids(again), ids(first))
			}
			if again[1].Node != 1 || again[0].JobID != "j-7f3a" {
				t.Errorf("retry's instances: %+v", again)
			}
			if n := h.cloud.Calls("CreateFleet"); n != tt.wantFleets {
				t.Errorf("%d CreateFleet calls, want %d", n, tt.wantFleets)
			}
			if n := len(h.cloud.Launches()); n != 1 {
				t.Errorf("%d purchases, want 1", n)
			}
		})
	}
}

// TestLaunchWithoutCapacity launches where the fake account itself has
// nothing to give (an empty spot pool, a spot price above the max price):
// each way of launching reads it as a lack of capacity for the offer, and
// the offer reads so until the error's TTL runs out. TestLaunchOutcomes
// has every code EC2 sends.
func TestLaunchWithoutCapacity(t *testing.T) {
	// The zone's spot pool is empty: the fake answers as EC2 does.
	full := func(c *awsfake.Cloud) { c.SetCapacity("us-east-1a", "p3.2xlarge", awsfake.MarketSpot, 0) }
	tests := []struct {
		name     string
		method   string
		setup    func(c *awsfake.Cloud)
		maxPrice string
		code     string
		ttl      time.Duration
	}{
		{name: "fleet: the zone has no spot capacity", method: LaunchFleet, setup: full, code: "InsufficientInstanceCapacity", ttl: DefaultUnavailableFor},
		{name: "RunInstances: the zone has no spot capacity", method: LaunchRunInstances, setup: full, code: "InsufficientInstanceCapacity", ttl: DefaultUnavailableFor},
		{name: "fleet: max price below the spot price", method: LaunchFleet, maxPrice: "0.5", code: "SpotMaxPriceTooLow", ttl: time.Minute},
		{name: "RunInstances: max price below the spot price", method: LaunchRunInstances, maxPrice: "0.5", code: "SpotMaxPriceTooLow", ttl: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.LaunchMethod = tt.method })
			o := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
			if tt.setup != nil {
				tt.setup(h.cloud)
			}
			req := launchReq(o, "j-7f3a-a2", 1)
			if tt.maxPrice != "" {
				req.MaxPrice = usd(tt.maxPrice)
			}
			_, err := h.p.Launch(context.Background(), req)
			testutil.CheckOutcome(t, err, testutil.Outcome{Kind: testutil.Capacity, OfferID: o.ID(), Code: tt.code, Scope: providers.ScopeOffer, For: tt.ttl})
			if n := len(h.cloud.Launches()); n != 0 {
				t.Errorf("%d launches bought capacity", n)
			}
			after := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
			if after.Capacity != providers.CapacityNone || after.Available != 0 {
				t.Errorf("after the launch: capacity %q, available %d", after.Capacity, after.Available)
			}
			if other := h.offer("us-east-1a", "p3.2xlarge", providers.OnDemand); !other.HasCapacity(1) {
				t.Error("the on-demand offer was marked too")
			}
			h.clk.Advance(tt.ttl)
			if back := h.offer("us-east-1a", "p3.2xlarge", providers.Spot); !back.HasCapacity(1) || back.Available != -1 {
				t.Errorf("after the TTL: capacity %q, available %d", back.Capacity, back.Available)
			}
		})
	}
}

func TestLaunchRetriesThrottling(t *testing.T) {
	throttled := awsfake.Fault{Status: 503, Code: "RequestLimitExceeded"}
	h := newHarness(t)
	o := h.offer("us-east-1a", "p3.2xlarge", providers.OnDemand)
	h.cloud.FailEC2("DescribeInstances", awsfake.Fault{Status: 400, Code: "Throttling"})
	h.cloud.FailEC2("CreateFleet", throttled, throttled)
	start := time.Now()
	insts, err := h.p.Launch(context.Background(), launchReq(o, "j-7f3a-a2", 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || h.cloud.Calls("CreateFleet") != 3 || h.cloud.Calls("DescribeInstances") != 2 {
		t.Errorf("%d instances, %d CreateFleet and %d DescribeInstances calls", len(insts), h.cloud.Calls("CreateFleet"),
			h.cloud.Calls("DescribeInstances"))
	}
	if n := len(h.cloud.Launches()); n != 1 {
		t.Errorf("%d purchases", n)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("retries took %s", took)
	}
	// Throttled past the bounded attempts: an error, not a capacity problem.
	for range 4 {
		h.cloud.FailEC2("CreateFleet", throttled)
	}
	_, err = h.p.Launch(context.Background(), launchReq(o, "j-9d1e-a1", 1))
	if err == nil || providers.IsInsufficientCapacity(err) || errorCode(err) != "RequestLimitExceeded" {
		t.Errorf("after the retries: %v", err)
	}
}

func TestLaunchRefusesUnknownOffers(t *testing.T) {
	h := newHarness(t)
	o := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
	for name, mod := range map[string]func(*providers.Offer){
		"another provider":      func(o *providers.Offer) { o.Provider = "gcp" },
		"a region not set up":   func(o *providers.Offer) { o.Region = "eu-west-1" },
		"a zone without a type": func(o *providers.Offer) { o.Zone = "us-east-1c" },
	} {
		t.Run(name, func(t *testing.T) {
			bad := o
			mod(&bad)
			if _, err := h.p.Launch(context.Background(), launchReq(bad, "k", 1)); !errors.Is(err, providers.ErrUnknownOffer) {
				t.Errorf("got %v", err)
			}
		})
	}
	if _, err := h.p.Launch(context.Background(), launchReq(o, "", 1)); err == nil {
		t.Error("launched without a key")
	}
}

func TestReservedOffersAndLaunches(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Reservations = ReservationsConfig{IDs: []string{"cr-0a1b2c3d4e5f60718"}, Discover: true,
			Prices: map[string]money.Micros{"cr-0123456789abcdef0": usd("14.25")}}
	})
	for _, r := range []awsfake.Reservation{
		{ID: "cr-0123456789abcdef0", InstanceType: "p4d.24xlarge", Zone: "us-east-1a", Type: "capacity-block", Available: 2, Total: 2},
		{ID: "cr-0a1b2c3d4e5f60718", InstanceType: "p3.2xlarge", Zone: "us-east-1b", Available: 1, Total: 4},
		{ID: "cr-0fffffffffffffff0", InstanceType: "c5.large", Zone: "us-east-1a", Available: 9, Total: 9},
	} {
		h.cloud.AddReservation(r)
	}
	block := h.offer("us-east-1a", "p4d.24xlarge", providers.Reserved)
	if block.Price != 0 || block.Available != 2 || block.OnDemandPrice != usd("21.957642") || block.GPU != "A100-40GB" {
		t.Errorf("capacity block offer: %+v", block)
	}
	odcr := h.offer("us-east-1b", "p3.2xlarge", providers.Reserved)
	if odcr.Available != 1 {
		t.Errorf("reservation offer: %+v", odcr)
	}
	for _, o := range h.offers() {
		if o.InstanceType == "c5.large" {
			t.Errorf("offered %s", o.ID())
		}
	}
	tests := []struct {
		offer      providers.Offer
		count      int
		wantID     string
		wantMarket string
		wantICE    bool
		// wantPrice is what the instances bill per hour: the block's
		// configured price, the reservation's on-demand price.
		wantPrice money.Micros
	}{
		{offer: block, count: 2, wantID: "cr-0123456789abcdef0", wantMarket: "capacity-block", wantPrice: usd("14.25")},
		{offer: odcr, count: 1, wantID: "cr-0a1b2c3d4e5f60718", wantPrice: odcr.OnDemandPrice},
		{offer: odcr, count: 2, wantICE: true},
	}
	for i, tt := range tests {
		got, err := h.p.Launch(context.Background(), launchReq(tt.offer, "reserved-"+string(rune('a'+i)), tt.count))
		if tt.wantICE {
			if !providers.IsInsufficientCapacity(err) {
				t.Errorf("%d: got %v, want insufficient capacity", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		f := h.lastForm("RunInstances")
		if got := f.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"); got != tt.wantID {
			t.Errorf("%d: reservation %q, want %q", i, got, tt.wantID)
		}
		if got := f.Get("InstanceMarketOptions.MarketType"); got != tt.wantMarket {
			t.Errorf("%d: market type %q, want %q", i, got, tt.wantMarket)
		}
		if tt.wantPrice == 0 {
			t.Fatalf("%d: the case's price is unknown", i)
		}
		for _, in := range got {
			if in.Price != tt.wantPrice || in.Purchase != providers.Reserved {
				t.Errorf("%d: launched %s at %s (%s), want %s reserved", i, in.ID, in.Price, in.Purchase, tt.wantPrice)
			}
		}
	}
	// The instances listed again (as after a restart) bill the same.
	listed, err := h.p.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byRes := map[string]money.Micros{}
	for _, in := range listed {
		byRes[in.Reservation] = in.Price
	}
	if byRes["cr-0123456789abcdef0"] != usd("14.25") || byRes["cr-0a1b2c3d4e5f60718"] != odcr.OnDemandPrice {
		t.Errorf("listed reserved instances bill %v", byRes)
	}
	if n := h.cloud.Calls("CreateFleet"); n != 0 {
		t.Errorf("reserved launches went through CreateFleet %d times", n)
	}
	for _, r := range h.cloud.Reservations() {
		if r.ID != "cr-0fffffffffffffff0" && r.Available != 0 {
			t.Errorf("reservation %s has %d free after the launches", r.ID, r.Available)
		}
	}
	if l := h.cloud.Launches()[0]; l.Market != awsfake.MarketCapacityBlock || l.Reservation != "cr-0123456789abcdef0" {
		t.Errorf("the capacity block launch: %+v", l)
	}
}

func TestLaunchTemplateLifecycle(t *testing.T) {
	h := newHarness(t)
	o := h.offer("us-east-1a", "p3.2xlarge", providers.Spot)
	if _, err := h.p.Launch(context.Background(), launchReq(o, "k-1", 1)); err != nil {
		t.Fatal(err)
	}
	// Someone deletes the template: the next launch makes it again.
	h.cloud.DeleteLaunchTemplates()
	if _, err := h.p.Launch(context.Background(), launchReq(o, "k-2", 1)); err != nil {
		t.Fatal(err)
	}
	if n := h.cloud.Calls("CreateLaunchTemplate"); n != 2 {
		t.Errorf("%d CreateLaunchTemplate calls, want 2", n)
	}
	// A restarted provider finds the template there already.
	p2, err := New(context.Background(), h.cfg, WithAWSConfig(testAWSConfig()), WithClock(h.clk), WithRetry(2, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Launch(context.Background(), launchReq(o, "k-3", 1)); err != nil {
		t.Fatal(err)
	}
	if n := h.cloud.Calls("CreateLaunchTemplate"); n != 3 {
		t.Errorf("%d CreateLaunchTemplate calls, want 3", n)
	}
	// A changed image means a new template.
	h.cfg.Regions[0].AMI = "ami-0123456789abcdef0"
	p3, err := New(context.Background(), h.cfg, WithAWSConfig(testAWSConfig()), WithClock(h.clk), WithRetry(2, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p3.Launch(context.Background(), launchReq(o, "k-4", 1)); err != nil {
		t.Fatal(err)
	}
	if n := len(h.cloud.LaunchTemplates()); n != 2 {
		t.Errorf("%d templates, want 2", n)
	}
}
