package server

import (
	"context"
	"fmt"
	"hash/maphash"

	"github.com/spotwise/spotwise/events"
)

// simAgentConns is how many NATS connections the simulated cloud's agents
// share. Real agents run on machines of their own, each with its own
// connection; in the server's process they would otherwise publish on the
// server's, where every publisher waits on each flush of the connection's
// buffer (nats.go flushes under the connection's lock): with thousands of
// agents reporting and shipping output, the API's and the scheduler's
// writes waited behind theirs.
const simAgentConns = 4

// agentLinks spreads the simulated agents' publishes and subscriptions
// over connections of their own, by subject (an attempt's subjects stay
// on one connection).
type agentLinks struct {
	seed  maphash.Seed
	links []*events.Bus
}

// newAgentLinks forks n connections off bus; close closes them.
func newAgentLinks(bus *events.Bus, n int) (*agentLinks, error) {
	a := &agentLinks{seed: maphash.MakeSeed()}
	for i := range n {
		l, err := bus.Fork(fmt.Sprintf("spotwise-sim-agents-%d", i+1))
		if err != nil {
			a.close()
			return nil, err
		}
		a.links = append(a.links, l)
	}
	return a, nil
}

func (a *agentLinks) on(subject string) *events.Bus {
	return a.links[maphash.String(a.seed, subject)%uint64(len(a.links))]
}

// Publish implements agent.Reporter.
func (a *agentLinks) Publish(ctx context.Context, subject string, p events.Payload, opts ...events.PublishOption) error {
	return a.on(subject).Publish(ctx, subject, p, opts...)
}

// Answer implements agent.Answerer.
func (a *agentLinks) Answer(subject string, fn func(data []byte) ([]byte, bool)) (stop func(), err error) {
	return a.on(subject).Answer(subject, fn)
}

func (a *agentLinks) close() {
	for _, l := range a.links {
		l.Close()
	}
}
