package server

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/providers"
)

// cronLogger adapts zap to cron's logger.
type cronLogger struct{ l *zap.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug(msg, zap.Any("details", kv)) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Warn(msg, zap.Error(err), zap.Any("details", kv))
}

// startRefresh republishes every provider's full offer book on a cron
// schedule, on top of the change events the feeds send: a scheduler that
// missed an update, or a prices stream past its retention, is brought back
// in step within one period. It returns when ctx ends.
func (s *Server) startRefresh(ctx context.Context, spec string, cloud providers.Provider, source string) error {
	c := cron.New(cron.WithLocation(time.UTC), cron.WithLogger(cronLogger{s.log}),
		cron.WithChain(cron.Recover(cronLogger{s.log}), cron.SkipIfStillRunning(cronLogger{s.log})))
	if _, err := c.AddFunc(spec, func() { s.publishOffers(ctx, cloud, source) }); err != nil {
		return err
	}
	c.Start()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		<-c.Stop().Done()
	}()
	return nil
}

// publishOffers publishes one OffersUpdated per provider region.
func (s *Server) publishOffers(ctx context.Context, cloud providers.Provider, source string) {
	offers, err := cloud.Offers(ctx)
	if err != nil {
		s.log.Warn("refreshing offers", zap.String("provider", cloud.Name()), zap.Error(err))
		return
	}
	type key struct{ provider, region string }
	byRegion := map[key][]providers.Offer{}
	for _, o := range offers {
		k := key{o.Provider, o.Region}
		byRegion[k] = append(byRegion[k], o)
	}
	for k, os := range byRegion {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.bus.Publish(pctx, events.PricesSubject(k.provider, k.region), &events.OffersUpdated{Provider: k.provider, Region: k.region, Offers: os, Source: source})
		cancel()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("publishing offers", zap.String("provider", k.provider), zap.String("region", k.region), zap.Error(err))
		}
	}
	s.log.Debug("offers refreshed", zap.String("provider", cloud.Name()), zap.Int("offers", len(offers)), zap.Int("regions", len(byRegion)))
}
