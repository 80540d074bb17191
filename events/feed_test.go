package events

import (
	"reflect"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
)

func TestFeedMessage(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	in := providers.Instance{ID: "i-1", Provider: "aws", Region: "us-east-1", JobID: "j-1", Attempt: 2}
	offers := []providers.Offer{{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p4d.24xlarge"}}
	tests := []struct {
		name    string
		ev      providers.Event
		subject string
		payload Payload
		id      string
		ok      bool
	}{
		{name: "offers", ev: providers.Event{Kind: providers.EventOffers, Provider: "aws", Region: "us-east-1", Offers: offers},
			subject: "spotwise.prices.aws.us-east-1",
			payload: &OffersUpdated{Provider: "aws", Region: "us-east-1", Offers: offers, Source: "live"}, ok: true},
		{name: "an instance change, once per instance and kind",
			ev:      providers.Event{Kind: providers.EventInstanceTerminated, Provider: "aws", Instance: &in, Reason: "evicted"},
			subject: "spotwise.instances.aws.us-east-1",
			payload: &InstanceChanged{Instance: in, Kind: providers.EventInstanceTerminated, Reason: "evicted"},
			id:      "i-1-instance-terminated", ok: true},
		{name: "a notice, once per instance, kind and deadline (UTC, to the second)",
			ev:      providers.Event{Kind: providers.EventSpotInterruption, Provider: "aws", Instance: &in, Deadline: at},
			subject: "spotwise.interruptions.aws.us-east-1",
			payload: &Interruption{Kind: providers.EventSpotInterruption, Instance: in, Deadline: at},
			id:      "i-1-spot-interruption-2026-11-29T11:00:00Z", ok: true},
		{name: "an instance event without its instance", ev: providers.Event{Kind: providers.EventInstanceRunning, Provider: "aws"}},
		{name: "a notice without its instance", ev: providers.Event{Kind: providers.EventMaintenance, Provider: "aws"}},
		{name: "an unknown kind", ev: providers.Event{Kind: "weather", Provider: "aws", Instance: &in}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject, p, id, ok := FeedMessage(tt.ev, "live")
			if subject != tt.subject || id != tt.id || ok != tt.ok {
				t.Errorf("FeedMessage = %q, id %q, %v; want %q, id %q, %v", subject, id, ok, tt.subject, tt.id, tt.ok)
			}
			if !reflect.DeepEqual(p, tt.payload) {
				t.Errorf("payload %+v, want %+v", p, tt.payload)
			}
		})
	}
}
