package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// Answerer subscribes to requests; the bus implements it.
type Answerer interface {
	Answer(subject string, fn func(data []byte) ([]byte, bool)) (stop func(), err error)
}

// controls subscribes an attempt's agent to its control subject and hands
// the requests for this attempt to the returned channel; requests for other
// attempts of the job (the agent it replaces, or its replacement) are left
// to their own agents, and a request naming another job (sent to the
// wrong subject) is no agent's here.
func controls(a Answerer, jobID string, attempt int) (<-chan *events.AgentControl, func(), error) {
	ch := make(chan *events.AgentControl, 8)
	var mu sync.Mutex
	closed := false
	stop, err := a.Answer(events.AgentControlSubject(jobID, attempt), func(data []byte) ([]byte, bool) {
		_, p, err := events.Decode(data)
		if err != nil {
			return nil, false
		}
		c, ok := p.(*events.AgentControl)
		if !ok || c.JobID != jobID || c.Attempt != attempt {
			return nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case ch <- c:
		default: // one is pending already; it covers this one
		}
		return []byte(`{"ok":true}`), true
	})
	if err != nil {
		return nil, nil, err
	}
	return ch, func() {
		stop()
		mu.Lock()
		closed = true
		mu.Unlock()
	}, nil
}

// waitToStart holds a replacement's workload until the attempt it replaces
// has checkpointed: until the scheduler says start (the checkpoint is
// stored), at the latest until startAfter. Other requests meanwhile are
// moot: there is no workload to checkpoint yet.
func waitToStart(ctx context.Context, clk clock.Clock, startAfter time.Time, requests <-chan *events.AgentControl) error {
	if startAfter.IsZero() {
		return nil
	}
	d := startAfter.Sub(clk.Now())
	if d <= 0 {
		return nil
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			return nil
		case c := <-requests:
			if c.Kind == events.ControlStart {
				return nil
			}
		}
	}
}

// restoreFromEarlier restores, into dir, the newest checkpoint that
// earlier attempts of the job stored and that verifies, falling back past
// corrupt ones. Checkpoints of this attempt are not considered: an agent
// restarted mid-attempt resumes from the same point it first did.
func restoreFromEarlier(ctx context.Context, s checkpoint.Store, jobID string, attempt int, dir string) (checkpoint.Manifest, int, error) {
	ms, err := s.List(ctx, jobID)
	if err != nil {
		return checkpoint.Manifest{}, 0, err
	}
	corrupt := 0
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Attempt >= attempt {
			continue
		}
		err := s.Restore(ctx, ms[i], dir)
		if err == nil {
			return ms[i], corrupt, nil
		}
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			return checkpoint.Manifest{}, corrupt, err
		}
		corrupt++
	}
	return checkpoint.Manifest{}, corrupt, checkpoint.ErrNotFound
}

// refOf is the scheduler's view of a stored checkpoint.
func refOf(m checkpoint.Manifest, at time.Time) *job.CheckpointRef {
	return &job.CheckpointRef{Attempt: m.Attempt, Step: m.Step, Progress: m.Progress, SHA256: m.SHA256,
		Size: m.Size, Location: m.Location, At: at}
}

// simState is what a simulated workload's checkpoint holds.
type simState struct {
	Progress float64 `json:"progress"`
	SizeGB   float64 `json:"size_gb"`
}

// saveSimState stores a simulated checkpoint: a small file with the
// progress (the declared size is recorded, not written).
func saveSimState(ctx context.Context, s checkpoint.Store, jobID string, attempt int, progress, sizeGB float64) (checkpoint.Manifest, error) {
	dir, err := os.MkdirTemp("", "spotwise-sim-ckpt-")
	if err != nil {
		return checkpoint.Manifest{}, err
	}
	defer os.RemoveAll(dir)
	b, _ := json.Marshal(simState{Progress: progress, SizeGB: sizeGB})
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
		return checkpoint.Manifest{}, err
	}
	step := int64(progress * 1e6)
	return s.Save(ctx, jobID, attempt, step, progress, dir)
}

// readSimState reads a restored simulated checkpoint.
func readSimState(dir string) (simState, error) {
	var st simState
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("checkpoint state: %w", err)
	}
	return st, nil
}
