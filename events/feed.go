package events

import (
	"time"

	"github.com/spotwise/spotwise/providers"
)

// FeedMessage is what a provider event becomes on the bus: its subject,
// its payload and its de-duplication ID ("" for none; WithID("") sets
// none). source names the feed in the events ("sim", "live", "catalog").
// ok is false for an event of a kind no stream carries, or an instance
// event without its instance.
//
// It only maps: the pump that watches a provider and publishes what this
// returns belongs to the composition root (internal/server).
func FeedMessage(ev providers.Event, source string) (subject string, p Payload, id string, ok bool) {
	switch ev.Kind {
	case providers.EventOffers:
		return PricesSubject(ev.Provider, ev.Region), &OffersUpdated{Provider: ev.Provider, Region: ev.Region, Offers: ev.Offers, Source: source}, "", true
	case providers.EventInstanceRunning, providers.EventInstanceTerminated, providers.EventInstanceFailed:
		if ev.Instance == nil {
			return "", nil, "", false
		}
		in := *ev.Instance
		return InstancesSubject(in.Provider, in.Region), &InstanceChanged{Instance: in, Kind: ev.Kind, Reason: ev.Reason}, in.ID + "-" + string(ev.Kind), true
	case providers.EventSpotInterruption, providers.EventRebalance, providers.EventMaintenance:
		if ev.Instance == nil {
			return "", nil, "", false
		}
		in := *ev.Instance
		return InterruptionsSubject(in.Provider, in.Region), &Interruption{Kind: ev.Kind, Instance: in, Deadline: ev.Deadline, Reason: ev.Reason}, in.ID + "-" + string(ev.Kind) + "-" + ev.Deadline.UTC().Format(time.RFC3339), true
	}
	return "", nil, "", false
}
