// Package alerts delivers operator alerts from the alert stream
// (spotwise.alerts.<severity>, stream SPOTWISE_ALERTS) to webhooks: Slack
// incoming webhooks, Alertmanager, or anything that takes a body written
// with a user template.
//
// The path of one alert:
//
//	stream -> durable consumer "alerts-webhooks" (shared by every server:
//	each alert is handled once) -> for each webhook: minimum severity ->
//	de-duplication -> rate limit -> bounded queue (ack) -> worker: render,
//	POST, retry with backoff -> counted
//
// Everything up to the queue happens in memory on the consumer's path and
// never waits; the alert is acknowledged once queued. Each webhook has its
// own queue and worker, so a slow, hanging or failing webhook delays only
// itself, and nothing that publishes an alert ever waits on a webhook.
// The price: an alert queued when its server stops is not delivered.
//
// Webhook URLs and headers are secrets. They are never logged: logs name a
// webhook by its name and host, and errors and answers are redacted before
// they are logged.
//
// This package must not decide when to alert (the scheduler does, and
// publishes with Publish) nor know about jobs beyond the alert's fields.
//
// In the server's YAML configuration:
//
//	alerts:
//	  dedupe_window: 5m
//	  rate_limit: {count: 30, per: 1m, burst: 10}   # per webhook
//	  queue_size: 256                               # per webhook
//	  retry: {max_attempts: 6, initial: 1s, max: 1m}
//	  webhooks:
//	    - name: oncall-slack
//	      url: ${SPOTWISE_SLACK_WEBHOOK_URL}          # see Config.ExpandEnv
//	      min_severity: warning
//	    - name: alertmanager
//	      url: http://alertmanager:9093/api/v2/alerts
//	      format: alertmanager
//	      generator_url: http://spotwise:8080/v1/jobs/{job_id}
//	      resolve_timeout: 5m      # an event's alert ends this long after it starts
//	      condition_timeout: 6h    # a condition's ends when it clears, at the latest this long after
//	    - name: pager
//	      url: https://events.example.com/v1/enqueue
//	      format: template
//	      headers: {Authorization: "Bearer ${PAGER_TOKEN}"}
//	      template: '{"severity": {{json .Severity}}, "text": {{json .Summary}}, "at": {{json .Time}}}'
//	      timeout: 5s
//
// Alertmanager alerts are labelled alertname (the kind), severity, team
// and job_id, so routes can pick a team's; their startsAt and endsAt are
// the wall clock's, whatever the simulated cloud's speed. An alert about a
// condition (events.Alert.Ongoing: a job leaving capacity under a notice)
// is followed by the same alert Resolved once the condition clears (the
// job runs again, or ends), which ends it at once; a resolution is never
// dropped by the rate limit.
package alerts
