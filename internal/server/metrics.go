package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spotwise/spotwise/events"
)

// droppedEvents exports the bus's count of messages its consumers ended
// for good, one series per consumer and reason (garbled, refused,
// gave-up), as spotwise_events_dropped_total.
type droppedEvents struct {
	bus  *events.Bus
	desc *prometheus.Desc
}

func newDroppedEvents(bus *events.Bus) *droppedEvents {
	return &droppedEvents{bus: bus, desc: prometheus.NewDesc("spotwise_events_dropped_total",
		"Events consumers dropped for good (terminated, never redelivered), by consumer and reason.",
		[]string{"consumer", "reason"}, nil)}
}

func (d *droppedEvents) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *droppedEvents) Collect(ch chan<- prometheus.Metric) {
	for k, n := range d.bus.Dropped() {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(n), k.Consumer, k.Reason)
	}
}
