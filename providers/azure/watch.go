package azure

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// retryPricesAfter is how soon prices are read again after a region fell
// back to the catalog, whatever the schedule says.
const retryPricesAfter = 10 * time.Minute

// Watch sends sink one EventOffers per region (the region's full offer
// list), then, until ctx ends:
//   - an EventOffers per region after every price refresh (on the
//     prices_refresh schedule, and 10 minutes after a refresh that fell
//     back to the catalog), when an offer is marked without capacity, when
//     such a mark expires, and when a reserved instance starts or ends;
//   - instance events from polling the VMs every poll_interval of the
//     clock: EventInstanceRunning when a VM is running, and
//     EventInstanceTerminated when one of ours is deleted, deallocated or
//     stopped (reason "evicted" for a Spot VM spotwise did not terminate,
//     "terminated by spotwise", "deleted", "deallocated" or "stopped"
//     otherwise), EventInstanceFailed when a creation fails.
//
// Transitions found by Instances or Terminate are sent too. sink is
// called from Watch's goroutine, one event at a time. A failed poll or
// price read is logged and tried again on the next tick; Watch returns nil
// when ctx ends.
func (p *Provider) Watch(ctx context.Context, sink func(providers.Event)) error {
	w := p.watchers.Open()
	defer p.watchers.Close(w)
	if err := p.ensurePrices(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	p.mu.Lock()
	now := p.clk.Now()
	for _, r := range p.cfg.Regions {
		w.Push(providers.Event{Kind: providers.EventOffers, Provider: Name, Region: r, Time: now, Offers: p.regionOffersLocked(r, now)})
	}
	fellBack := p.anyCatalogLocked()
	p.mu.Unlock()

	refresh := p.clk.NewTimer(p.untilRefresh(now, fellBack))
	defer refresh.Stop()
	poll := p.clk.NewTimer(p.cfg.PollInterval.D())
	defer poll.Stop()
	for {
		w.Deliver(ctx, sink)
		select {
		case <-ctx.Done():
			return nil
		case <-w.Ready():
		case <-refresh.C():
			fb, err := p.refreshPrices(ctx, false)
			if err != nil && ctx.Err() == nil {
				p.log.Warn("refreshing prices", zap.Error(err))
			}
			refresh.Reset(p.untilRefresh(p.clk.Now(), fb))
		case <-poll.C():
			if err := p.syncInstances(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("polling VMs", zap.Error(err))
			}
			p.mu.Lock()
			p.expireMarksLocked(p.clk.Now())
			p.mu.Unlock()
			poll.Reset(p.cfg.PollInterval.D())
		}
	}
}

// untilRefresh is how long until prices are read again.
func (p *Provider) untilRefresh(now time.Time, fellBack bool) time.Duration {
	d := p.sched.Next(now).Sub(now)
	if fellBack && d > retryPricesAfter {
		d = retryPricesAfter
	}
	return max(d, time.Second)
}

func (p *Provider) anyCatalogLocked() bool {
	for _, s := range p.sources {
		if s == SourceCatalog {
			return true
		}
	}
	return false
}

// expireMarksLocked drops expired capacity marks and sends the regions
// they were in again.
func (p *Provider) expireMarksLocked(now time.Time) {
	var expired []capacityMark
	for key, m := range p.noCap {
		if !now.Before(m.until) {
			delete(p.noCap, key)
			expired = append(expired, m)
		}
	}
	for _, r := range p.cfg.Regions {
		if slices.ContainsFunc(expired, func(m capacityMark) bool { return m.covers(r) }) {
			p.emitOffersLocked(r, now)
		}
	}
}

// emitLocked queues an event for every watcher, each with its own copy.
func (p *Provider) emitLocked(e providers.Event) { p.watchers.Emit(e) }

// emitOffersLocked sends watchers a region's offers as sold now.
func (p *Provider) emitOffersLocked(region string, now time.Time) {
	if p.watchers.Len() == 0 {
		return
	}
	p.emitLocked(providers.Event{Kind: providers.EventOffers, Provider: Name, Region: region, Time: now,
		Offers: p.regionOffersLocked(region, now)})
}
