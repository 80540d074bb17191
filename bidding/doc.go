// Package bidding is spotwise's money and risk model: how long a job takes
// on a GPU type, what it costs to finish on an offer with the risk of the
// capacity being taken back (ExpectedCost), whether it can meet its
// deadline, which purchase options a job's policy allows, what reserved,
// tiered, transferred and stored capacity costs, and the deadline-aware
// policies that choose between spot, on-demand and waiting (Policy).
//
// Everything here is a pure function of its inputs: no I/O, no clock
// reads, no NATS. The scheduler, `spotwise quote` and `spotwise simulate`
// call the same code, so what the simulator measures is what the scheduler
// does.
package bidding
