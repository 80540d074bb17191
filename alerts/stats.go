package alerts

import (
	"github.com/prometheus/client_golang/prometheus"
)

// WebhookStats counts what happened to the alerts meant for one webhook.
type WebhookStats struct {
	// Sent were delivered (a 2xx answer).
	Sent int64 `json:"sent"`
	// Failed were given up on: a 4xx other than 429, too many attempts, or
	// a body that could not be rendered.
	Failed int64 `json:"failed"`
	// Retried counts attempts after the first.
	Retried int64 `json:"retried"`
	// Deduplicated repeated one sent within the de-duplication window.
	Deduplicated int64 `json:"deduplicated"`
	// RateLimited were dropped by the rate limit (and counted in a
	// suppressed-alerts summary).
	RateLimited int64 `json:"rate_limited"`
	// Dropped were pushed out of a full queue, oldest first.
	Dropped int64 `json:"dropped"`
	// Filtered were below the webhook's minimum severity.
	Filtered int64 `json:"filtered"`
	// Queued are waiting now.
	Queued int `json:"queued"`
}

// Stats is a snapshot of a Notifier's counters.
type Stats struct {
	// Received alerts from the stream (by this server), counted once
	// offered to every webhook.
	Received int64 `json:"received"`
	// Ignored events on the alert stream that were not alerts.
	Ignored int64 `json:"ignored"`
	// Webhooks by name.
	Webhooks map[string]WebhookStats `json:"webhooks"`
}

// Stats returns the counters now.
func (n *Notifier) Stats() Stats {
	st := Stats{Received: n.received.Load(), Ignored: n.ignored.Load(), Webhooks: map[string]WebhookStats{}}
	for _, s := range n.sinks {
		st.Webhooks[s.w.Name] = s.stats()
	}
	return st
}

// Register adds the Notifier's metrics to a Prometheus registry:
// spotwise_alerts_received_total and, labelled by webhook,
// spotwise_alerts_{sent,failed,retries,deduplicated,rate_limited,dropped,filtered}_total
// and spotwise_alerts_queued.
func (n *Notifier) Register(r prometheus.Registerer) error {
	return r.Register(&collector{n: n})
}

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(WebhookStats) float64
}

var (
	receivedDesc = prometheus.NewDesc("spotwise_alerts_received_total", "Alerts read from the alert stream by this server.", nil, nil)
	webhookDesc  = func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("spotwise_alerts_"+name, help, []string{"webhook"}, nil)
	}
	webhookMetrics = []metric{
		{webhookDesc("sent_total", "Alerts delivered to the webhook."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.Sent) }},
		{webhookDesc("failed_total", "Alerts given up on after a refusal or too many attempts."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.Failed) }},
		{webhookDesc("retries_total", "Delivery attempts after the first."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.Retried) }},
		{webhookDesc("deduplicated_total", "Alerts not sent because the same one was sent within the window."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.Deduplicated) }},
		{webhookDesc("rate_limited_total", "Alerts dropped by the webhook's rate limit."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.RateLimited) }},
		{webhookDesc("dropped_total", "Alerts dropped from a full queue."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.Dropped) }},
		{webhookDesc("filtered_total", "Alerts below the webhook's minimum severity."), prometheus.CounterValue, func(s WebhookStats) float64 { return float64(s.Filtered) }},
		{webhookDesc("queued", "Alerts waiting in the webhook's queue."), prometheus.GaugeValue, func(s WebhookStats) float64 { return float64(s.Queued) }},
	}
)

// collector reads the counters at scrape time.
type collector struct{ n *Notifier }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- receivedDesc
	for _, m := range webhookMetrics {
		ch <- m.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(c.n.received.Load()))
	for _, s := range c.n.sinks {
		st := s.stats()
		for _, m := range webhookMetrics {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(st), s.w.Name)
		}
	}
}
