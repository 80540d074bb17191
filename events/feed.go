package events

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// RunFeed publishes everything a provider reports to NATS until ctx ends:
// offer lists to the prices stream, instance changes to the instances
// stream, notices to the interruptions stream. source names the feed in
// the events ("sim", "live", "catalog").
//
// A publish that fails is logged and skipped: the scheduler's
// reconciliation lists instances directly, so a lost event delays a
// reaction, it does not lose a job.
func (b *Bus) RunFeed(ctx context.Context, p providers.Provider, source string) error {
	log := b.log.With(zap.String("provider", p.Name()))
	return p.Watch(ctx, func(ev providers.Event) {
		subject, payload, id := feedEvent(ev, source)
		if payload == nil {
			log.Warn("dropping provider event of unknown kind", zap.String("event", string(ev.Kind)))
			return
		}
		var opts []PublishOption
		if id != "" {
			opts = append(opts, WithID(id))
		}
		// Asynchronous: a storm of notices must not queue behind each
		// other's acknowledgements.
		b.PublishAsync(subject, payload, func(err error) {
			if ctx.Err() == nil {
				log.Warn("publishing provider event", zap.String("event", string(ev.Kind)), zap.Error(err))
			}
		}, opts...)
	})
}

// feedEvent maps a provider event to its subject, payload and
// de-duplication ID.
func feedEvent(ev providers.Event, source string) (string, Payload, string) {
	switch ev.Kind {
	case providers.EventOffers:
		return PricesSubject(ev.Provider, ev.Region), &OffersUpdated{Provider: ev.Provider, Region: ev.Region, Offers: ev.Offers, Source: source}, ""
	case providers.EventInstanceRunning, providers.EventInstanceTerminated, providers.EventInstanceFailed:
		if ev.Instance == nil {
			return "", nil, ""
		}
		in := *ev.Instance
		return InstancesSubject(in.Provider, in.Region), &InstanceChanged{Instance: in, Kind: ev.Kind, Reason: ev.Reason}, in.ID + "-" + string(ev.Kind)
	case providers.EventSpotInterruption, providers.EventRebalance, providers.EventMaintenance:
		if ev.Instance == nil {
			return "", nil, ""
		}
		in := *ev.Instance
		return InterruptionsSubject(in.Provider, in.Region), &Interruption{Kind: ev.Kind, Instance: in, Deadline: ev.Deadline, Reason: ev.Reason}, in.ID + "-" + string(ev.Kind) + "-" + ev.Deadline.UTC().Format(time.RFC3339)
	}
	return "", nil, ""
}
