// Package events is spotwise's nervous system and the only package that
// knows NATS.
//
// It owns every subject and event type (versioned JSON envelopes, validated
// when decoded), the JetStream streams and their retention, the durable
// consumers, request/reply helpers, the key-value buckets that hold job
// state (updated with revision checks, so two writers never silently
// overwrite each other), and the embedded nats-server that is the zero-setup
// default. Everything else sees small interfaces and plain Go types.
//
// It must not decide anything: no scheduling, no pricing, no cloud calls.
// Nor does it pump provider feeds: FeedMessage says what a provider event
// becomes on the bus, and the composition root (internal/server) watches
// the providers and publishes it. See README.md for the table of subjects
// and payloads.
package events
