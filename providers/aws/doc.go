// Package aws is spotwise's Amazon EC2 provider: it prices GPU capacity
// (the Price List API for on-demand, the spot price history for spot, the
// bundled catalog when either is unreachable), buys it (CreateFleet of
// type instant or RunInstances, idempotent by the launch key's client
// token and the spotwise:launch-key tag, capacity reservations and
// Capacity Blocks as reserved offers), lists and terminates it, and turns
// AWS's own signals into provider events: the EventBridge events on an SQS
// queue (spot interruption warnings, rebalance recommendations, state
// changes, AWS Health scheduled changes) for the server. The agent's own
// poller of the instance metadata service (IMDSv2) is notices.NewEC2 in
// agent/notices.
//
// Each SDK sits behind a narrow interface of the calls used (EC2API,
// PricingAPI, SQSAPI). Credentials come from the SDK's standard chain and
// are never logged. The package must not schedule, decide or talk to NATS:
// it prices, launches, terminates and reports.
package aws
