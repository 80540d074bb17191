package aws

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// Watch sends sink one EventOffers per region (its full offer list), then,
// until ctx ends: one EventOffers per region after every scheduled price
// refresh and when an offer is marked unavailable (and again when the mark
// runs out); EventInstanceRunning, EventInstanceTerminated and
// EventInstanceFailed for spotwise's instances (from the EventBridge
// state-change events on the SQS queue, and from polling instances still
// pending); EventSpotInterruption (deadline: the warning's time plus two
// minutes), EventRebalance and EventMaintenance (deadline: the scheduled
// change's start) from the queue. Each transition and notice is reported
// once. sink is called from Watch's goroutine, one event at a time.
//
// While any Watch runs, the provider refreshes prices on its schedules,
// consumes the queue and polls pending instances; several Watch calls
// share that work and each gets every event. A failing queue or API is
// logged and retried with backoff: Watch returns nil when ctx ends.
func (p *Provider) Watch(ctx context.Context, sink func(providers.Event)) error {
	p.refreshDue(ctx)
	now := p.clk.Now()
	p.mu.Lock()
	w := p.watchers.Open()
	for _, r := range p.cfg.Regions {
		w.Push(providers.Event{Kind: providers.EventOffers, Provider: ProviderName, Region: r.Name, Time: now,
			Offers: p.regionOffersLocked(r.Name, now)})
	}
	if p.bgStop == nil {
		p.startBackgroundLocked()
	}
	p.mu.Unlock()
	defer p.unwatch(w)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Ready():
		}
		w.Deliver(ctx, sink)
	}
}

func (p *Provider) unwatch(w *providers.EventQueue) {
	p.mu.Lock()
	var stop context.CancelFunc
	var done chan struct{}
	if p.watchers.Close(w) == 0 && p.bgStop != nil {
		stop, done = p.bgStop, p.bgDone
		p.bgStop, p.bgDone = nil, nil
	}
	p.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// startBackgroundLocked starts the refresh loop, the pending-instance poll
// and the SQS consumer; called with mu held.
func (p *Provider) startBackgroundLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.bgStop, p.bgDone = cancel, done
	loops := []func(context.Context){p.refreshLoop, p.pollLoop}
	if p.sqs != nil {
		loops = append(loops, p.consume)
	} else {
		p.log.Warn("no sqs_queue_url: spot interruption warnings reach jobs only through their agents' IMDS poll")
	}
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
}

// emit queues an event for every watcher, each with its own copy.
func (p *Provider) emit(e providers.Event) { p.watchers.Emit(e) }

// emitRegion reports a region's current offers.
func (p *Provider) emitRegion(region string) {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watchers.Len() == 0 {
		return
	}
	p.watchers.Emit(providers.Event{Kind: providers.EventOffers, Provider: ProviderName, Region: region, Time: now,
		Offers: p.regionOffersLocked(region, now)})
}

// sleep waits d on the provider's clock; false when ctx ended first.
func (p *Provider) sleep(ctx context.Context, d time.Duration) bool {
	t := p.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// refreshLoop refreshes prices when the schedules say and reports each
// refreshed region.
func (p *Provider) refreshLoop(ctx context.Context) {
	for {
		now := p.clk.Now()
		p.mu.Lock()
		var next time.Time
		for _, rs := range p.regions {
			for _, t := range []time.Time{p.spotSched.Next(rs.spotAt), p.odSched.Next(rs.typesAt)} {
				if next.IsZero() || t.Before(next) {
					next = t
				}
			}
		}
		p.mu.Unlock()
		if !p.sleep(ctx, max(next.Sub(now), 0)) {
			return
		}
		for _, region := range p.refreshDue(ctx) {
			p.emitRegion(region)
		}
	}
}

// pollLoop describes the instances still pending, so that they are
// reported running (or failed) even when no EventBridge event arrives.
func (p *Provider) pollLoop(ctx context.Context) {
	for p.sleep(ctx, p.pollEvery) {
		p.mu.Lock()
		byRegion := map[string][]string{}
		for id, t := range p.known {
			pending := t.reported == providers.InstancePending || t.reported == "" && t.inst.State == providers.InstancePending
			if pending && t.inst.Region != "" {
				byRegion[t.inst.Region] = append(byRegion[t.inst.Region], id)
			}
		}
		p.mu.Unlock()
		for region, ids := range byRegion {
			if p.ec2[region] == nil {
				continue
			}
			slices.Sort(ids)
			insts, err := p.describe(ctx, region, &ec2.DescribeInstancesInput{InstanceIds: ids})
			if err != nil {
				if ctx.Err() == nil && !IsNotFound(err) { // not found: not visible yet, next round
					p.log.Warn("polling pending instances", zap.String("region", region), zap.Error(err))
				}
				continue
			}
			now := p.clk.Now()
			for _, in := range insts {
				p.transition(in, now)
			}
		}
	}
}

// transition reports an instance's new state once: running after pending,
// ended (terminated or failed) after anything else. Stale or repeated
// states are recorded and not reported.
func (p *Provider) transition(in providers.Instance, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.known[in.ID]
	if t == nil {
		t = &tracked{}
		p.known[in.ID] = t
	}
	if t.inst.ID != "" && t.inst.IdempotencyKey == in.IdempotencyKey {
		in.Node = t.inst.Node // numbered by its whole launch, not by this describe
	}
	prev := t.reported
	var kind providers.EventKind
	switch {
	case in.State == providers.InstanceRunning && !prev.Ended() && prev != providers.InstanceRunning:
		kind = providers.EventInstanceRunning
		if in.RunningAt.IsZero() {
			in.RunningAt = at
		}
	case in.State == providers.InstanceFailed && !prev.Ended():
		kind = providers.EventInstanceFailed
	case in.State == providers.InstanceTerminated && !prev.Ended():
		kind = providers.EventInstanceTerminated
	}
	if in.State.Ended() && in.EndedAt.IsZero() {
		in.EndedAt = at
	}
	t.inst, t.touched = in, p.clk.Now()
	if kind == "" {
		return
	}
	t.reported = in.State
	p.watchers.Emit(providers.Event{Kind: kind, Provider: ProviderName, Region: in.Region, Time: at,
		Instance: &in, Reason: in.Reason})
}
