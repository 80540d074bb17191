package agent_test

import (
	"testing"

	"github.com/spotwise/spotwise/agent"
)

// Only an agent started as a process of its own connects to NATS with
// the attempt's credential; the simulated workload and the real agent run
// in the server's process report over the server's connection.
func TestDispatchSaysWhichAgentsRunInProcess(t *testing.T) {
	sim := &agent.SimWorkload{}
	for _, c := range []struct {
		name    string
		real    *agent.Local
		command []string
		want    bool
	}{
		{"simulated workload", &agent.Local{Subprocess: true, NATSURL: "nats://127.0.0.1:4222"}, []string{"train"}, true},
		{"no command", &agent.Local{Subprocess: true, NATSURL: "nats://127.0.0.1:4222"}, nil, true},
		{"real command, agent process", &agent.Local{Subprocess: true, NATSURL: "nats://127.0.0.1:4222"}, []string{"python", "train.py"}, false},
		{"real command, agent in the server", &agent.Local{}, []string{"python", "train.py"}, true},
		{"real command, no NATS URL for a process", &agent.Local{Subprocess: true}, []string{"python", "train.py"}, true},
		{"no real runner", nil, []string{"python", "train.py"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &agent.Dispatch{Commands: []string{"python"}, Sim: sim, Real: c.real}
			if got := d.InProcess(c.command); got != c.want {
				t.Errorf("InProcess(%q) = %v, want %v", c.command, got, c.want)
			}
		})
	}
}
