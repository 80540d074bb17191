package alerts

import (
	"context"

	"github.com/spotwise/spotwise/events"
)

// Publisher is the part of the bus Publish needs; *events.Bus is one.
type Publisher interface {
	Publish(ctx context.Context, subject string, p events.Payload, opts ...events.PublishOption) error
}

// Publish puts an alert on the alert stream, on the subject of its
// severity. It waits for JetStream to store the alert, never for its
// delivery. Give events.WithID a deterministic ID (for example
// "<job>-a<attempt>-preempted") so that a retried publish of the same
// alert is stored, and so delivered, once.
func Publish(ctx context.Context, bus Publisher, a events.Alert, opts ...events.PublishOption) error {
	return bus.Publish(ctx, events.AlertsSubject(a.Severity), &a, opts...)
}
