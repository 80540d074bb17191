// Package providers is the seam between spotwise and the clouds it buys
// capacity from.
//
// It owns the Provider interface (offers, launch, terminate, list, a stream
// of provider events), the Offer and Instance types, commitment terms (Term,
// which reservations are bought for), reserved capacity held for a term
// (Reservation) with its idle spans and utilization, and the typed errors
// retry logic branches on. Subpackages implement it: catalog holds the bundled facts
// (GPU types, instance types, list prices, relative throughput), sim is the
// simulated cloud over that catalog, and the real clouds live beside it.
//
// A provider must not schedule, decide or talk to NATS: it prices, launches,
// terminates and reports. Launches are idempotent by key.
package providers
