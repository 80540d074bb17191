package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// Faults are launch errors the simulated cloud injects, the three kinds a
// real cloud answers now and then (see providers/errors.go), so that the
// scheduler's handling of each is exercised under load (the chaos harness
// turns them on). Each share is of launch calls; zero turns that kind off.
//
// Every call of a launch key draws once, from the cloud's seed, the key and
// how many times the key was asked before, so a cloud asked the same
// launches in the same order injects the same faults.
type Faults struct {
	// Capacity is the share of new launches refused for lack of capacity
	// (*providers.InsufficientCapacityError for the offer): nothing is
	// bought.
	Capacity float64
	// Permanent is the share of new launches refused for good
	// (*providers.LaunchRefusedError for the offer): nothing is bought.
	Permanent float64
	// Unknown is the share of calls, new launches and retries alike, that
	// end in an error that is neither (ErrLaunchUnknown, a time-out): the
	// caller cannot tell whether anything was bought.
	Unknown float64
	// UnknownLaunched is the share of those unknown outcomes (of new
	// launches) where the launch went through all the same: its instances
	// exist, boot and bill, and asking again with the key returns them.
	UnknownLaunched float64
}

// ErrLaunchUnknown is the error of an injected unknown-outcome launch.
var ErrLaunchUnknown = errors.New("request timed out (injected fault): the launch may or may not have happened")

// Codes of the injected refusals.
const (
	FaultCapacityCode = "InjectedInsufficientCapacity"
	FaultRefusedCode  = "InjectedUnsupported"
)

func (f Faults) validate() error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"Capacity", f.Capacity}, {"Permanent", f.Permanent}, {"Unknown", f.Unknown}, {"UnknownLaunched", f.UnknownLaunched}} {
		if !(v.v >= 0 && v.v <= 1) {
			return fmt.Errorf("sim: faults: %s %v is not between 0 and 1", v.name, v.v)
		}
	}
	if s := f.Capacity + f.Permanent + f.Unknown; s > 1 {
		return fmt.Errorf("sim: faults: the shares add up to %v, more than 1", s)
	}
	return nil
}

// On reports whether any fault is injected.
func (f Faults) On() bool { return f.Capacity > 0 || f.Permanent > 0 || f.Unknown > 0 }

// injector draws and counts the faults of one cloud.
type injector struct {
	f    Faults
	seed int64
	log  *zap.Logger

	mu    sync.Mutex
	asked map[string]int // launch key -> calls so far
}

func newInjector(f *Faults, seed int64, log *zap.Logger) (*injector, error) {
	if f == nil {
		return nil, nil
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	if !f.On() {
		return nil, nil
	}
	return &injector{f: *f, seed: seed, log: log, asked: map[string]int{}}, nil
}

// fault is what one launch call gets.
type fault int

const (
	noFault fault = iota
	faultCapacity
	faultRefused
	faultUnknown         // nothing happened
	faultUnknownLaunched // the launch happened
)

// draw picks the fault of the next call of key; retry says the cloud has
// instances for the key already, where only an unknown outcome applies
// (a cloud does not refuse a launch it has served).
func (j *injector) draw(key string, retry bool) fault {
	j.mu.Lock()
	n := j.asked[key]
	j.asked[key] = n + 1
	j.mu.Unlock()
	h := seeded(j.seed, "launch-fault", key, strconv.Itoa(n))
	u := unit(h)
	switch f := j.f; {
	case u < f.Unknown:
		if !retry && unit(splitmix(h)) < f.UnknownLaunched {
			return faultUnknownLaunched
		}
		return faultUnknown
	case retry:
		return noFault
	case u < f.Unknown+f.Capacity:
		return faultCapacity
	case u < f.Unknown+f.Capacity+f.Permanent:
		return faultRefused
	}
	return noFault
}

// launch runs one launch call through the injector: refused or lost
// before the cloud sees it, or served and its answer lost, or served.
func (j *injector) launch(ctx context.Context, c *Cloud, req providers.LaunchRequest) ([]providers.Instance, error) {
	if req.IdempotencyKey == "" || req.Count <= 0 {
		return c.launch(ctx, req) // refused for what it is
	}
	have, err := c.InstancesByKey(ctx, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	offerID := req.Offer.ID()
	f := j.draw(req.IdempotencyKey, len(have) > 0)
	if f != noFault {
		j.log.Info("injecting a launch fault", zap.String("offer", offerID), zap.String("job", req.JobID),
			zap.String("key", req.IdempotencyKey), zap.String("fault", f.String()))
	}
	switch f {
	case faultCapacity:
		return nil, &providers.InsufficientCapacityError{OfferID: offerID, Code: FaultCapacityCode,
			Reason: "no capacity for this request right now (injected fault)"}
	case faultRefused:
		return nil, &providers.LaunchRefusedError{OfferID: offerID, Code: FaultRefusedCode,
			Reason: "the simulated cloud does not serve this request (injected fault)", Scope: providers.ScopeOffer}
	case faultUnknown:
		return nil, fmt.Errorf("launching %s: %w", offerID, ErrLaunchUnknown)
	case faultUnknownLaunched:
		if _, err := c.launch(ctx, req); err != nil {
			return nil, err // a real refusal is still heard as one
		}
		return nil, fmt.Errorf("launching %s: %w", offerID, ErrLaunchUnknown)
	}
	return c.launch(ctx, req)
}

func (f fault) String() string {
	switch f {
	case faultCapacity:
		return "capacity"
	case faultRefused:
		return "permanent"
	case faultUnknown:
		return "unknown"
	case faultUnknownLaunched:
		return "unknown-launched"
	}
	return "none"
}
