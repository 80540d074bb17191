// Package sim is the simulated cloud: a providers.Provider that sells the
// bundled catalog's instance types in every priced region and zone, with
// spot prices that move, capacity that runs out and instances that take a
// while to boot. It is what demos and what-if runs buy from, so it behaves
// like a believable cloud and, for a given seed, always the same one.
//
// It owns:
//   - the offers (offers.go): one per instance type, priced region, zone and
//     purchase option, with seeded capacity and launch latency;
//   - the spot price walk (prices.go), a pure function of seed, offer and
//     price step, so two clouds with the same seed agree at the same clock
//     time however their goroutines are scheduled, and a restart resumes the
//     same prices;
//   - instance life (launch.go): pending, running after the offer's launch
//     latency, terminated or failed, with idempotent launches;
//   - persistence of instances in a key-value Store (store.go), written
//     behind the cloud's lock, many at once (behind.go), so a restarted
//     server sees the instances it had: a call returns, and an event goes
//     out, only once the changes before it are stored;
//   - interruptions (interrupt.go, notice.go): spot interruption notices
//     with the provider's window (NoticeWindow), then the end at the
//     deadline with the capacity held back for a while; zone-wide storms,
//     rebalance recommendations, scheduled maintenance and hardware
//     failures. They come from a seeded model, a pure function of (seed,
//     instance or zone, time slot), so two clouds with the same seed and
//     launches, or a cloud and its restarted self, see the same ones;
//   - availability traces (traces.go): measured spot availability per zone
//     in place of the seeded model;
//   - manual interruptions for demos and tests (manual.go), through the
//     same path as the seeded ones;
//   - reserved capacity (reserved.go): configured reservations sold as
//     reserved offers during their terms, at price 0 with their free
//     slots; their instances bill the reservation's hourly price and get
//     a maintenance notice ahead of the term's end;
//   - injected launch faults (faults.go): refusals for capacity, refusals
//     for good and unknown outcomes (some of which did launch), seeded,
//     for chaos runs;
//   - the event feed (watch.go): offers per region, price and capacity
//     changes (what its own launches and ends did to the counts at most
//     every Options.CountEvery: a burst of launches is one update, not one
//     full offer list each), instance transitions, notices.
//
// The cloud's state is a function of its clock: every call first brings the
// cloud up to the clock's current time (applying, each at its own time and
// in time order, the boots, notices and ends due by then; moving to the
// current price step), and one timer wakes it for the next thing due. So a
// clock.Fake drives it exactly in tests and a scaled clock fast-forwards it
// in demos.
//
// It must not schedule or decide anything, and it does not talk to NATS
// directly: the Store and the Runner (the in-process agent that "runs" the
// workload) are handed in by the server.
package sim
