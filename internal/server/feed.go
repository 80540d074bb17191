package server

import (
	"context"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/providers"
)

// runFeed publishes everything a provider reports to the bus until ctx
// ends: offer lists to the prices stream, instance changes to the
// instances stream, notices to the interruptions stream, each as
// events.FeedMessage maps it. source names the feed in the events ("sim",
// "live", "catalog").
//
// A publish that fails is logged and skipped: the scheduler's
// reconciliation lists instances directly, so a lost event delays a
// reaction, it does not lose a job.
func runFeed(ctx context.Context, bus *events.Bus, p providers.Provider, source string, log *zap.Logger) error {
	log = log.With(zap.String("provider", p.Name()))
	return p.Watch(ctx, func(ev providers.Event) {
		subject, payload, id, ok := events.FeedMessage(ev, source)
		if !ok {
			log.Warn("dropping provider event of unknown kind", zap.String("event", string(ev.Kind)))
			return
		}
		// Asynchronous: a storm of notices must not queue behind each
		// other's acknowledgements.
		bus.PublishAsync(subject, payload, func(err error) {
			if ctx.Err() == nil {
				log.Warn("publishing provider event", zap.String("event", string(ev.Kind)), zap.Error(err))
			}
		}, events.WithID(id))
	})
}
