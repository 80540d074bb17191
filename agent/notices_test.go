package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// checkpointingScript is a workload that takes a checkpoint on SIGUSR1
// (protocol: state files, then .done with the step) and otherwise idles.
const checkpointingScript = `step=0
trap 'step=$((step+1)); echo "state $step" > "$SPOTWISE_CHECKPOINT_DIR/state"; echo $step > "$SPOTWISE_CHECKPOINT_DIR/.done.tmp"; mv "$SPOTWISE_CHECKPOINT_DIR/.done.tmp" "$SPOTWISE_CHECKPOINT_DIR/.done"' USR1
echo "0 100" > "$SPOTWISE_PROGRESS_FILE"
while true; do sleep 0.05; done`

// fakeNotices is the instance's metadata service: the test announces
// notices through it.
type fakeNotices struct{ c chan Notice }

func (f *fakeNotices) Watch(ctx context.Context, fn func(Notice)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-f.c:
			fn(n)
		}
	}
}

// agentRig runs one agent beside the checkpointing workload on a real
// bus, and records what it publishes.
type agentRig struct {
	bus      *events.Bus
	notices  *fakeNotices
	jobID    string
	mu       sync.Mutex
	forwards []*events.Interruption
	reports  []*events.AgentReport
}

func startAgentRig(t *testing.T, provider string) *agentRig {
	t.Helper()
	bus := eventstest.NewBus(t, nil)
	store, err := checkpoint.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &agentRig{bus: bus, notices: &fakeNotices{c: make(chan Notice, 4)}, jobID: job.NewID(time.Now())}
	ctx, cancel := context.WithCancel(context.Background())
	follow := func(stream, subject string, add func(events.Payload)) {
		stop, err := bus.Follow(ctx, stream, []string{subject}, false, func(_ context.Context, m events.Message) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			add(m.Payload)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	follow(events.StreamInterruptions, "spotwise.interruptions.>", func(p events.Payload) { r.forwards = append(r.forwards, p.(*events.Interruption)) })
	follow(events.StreamAgent, events.AgentSubject(r.jobID, 2), func(p events.Payload) {
		if rep, ok := p.(*events.AgentReport); ok {
			r.reports = append(r.reports, rep)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Run(ctx, Config{
			JobID: r.jobID, Attempt: 2, InstanceID: "i-0abc", WorkDir: t.TempDir(),
			Workload: providers.Workload{Command: []string{"bash", "-c", checkpointingScript},
				Checkpoint: providers.CheckpointPlan{Duration: 5 * time.Second}},
			Reporter: bus, Control: bus, Checkpoints: store, Notices: r.notices, Clock: clock.Real{},
			Provider: provider, Region: "us-east-1", Log: eventstest.Logger(t), Progress: 20 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	r.waitReports(t, "started", func(reps []*events.AgentReport) bool { return len(reps) > 0 })
	return r
}

func (r *agentRig) checkpoints() (steps []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.reports {
		if rep.Kind == events.AgentCheckpoint {
			steps = append(steps, rep.Checkpoint.Step)
		}
	}
	return steps
}

func (r *agentRig) waitReports(t *testing.T, what string, ok func([]*events.AgentReport) bool) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !ok(r.reports) {
			return fmt.Errorf("waiting for %s: %d reports", what, len(r.reports))
		}
		return nil
	})
}

func (r *agentRig) waitCheckpoints(t *testing.T, n int) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := r.checkpoints(); len(got) < n {
			return fmt.Errorf("%d checkpoint reports, want %d", len(got), n)
		}
		return nil
	})
}

// request is the scheduler asking the agent to checkpoint before deadline.
func (r *agentRig) request(t *testing.T, deadline time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.bus.RequestEvent(ctx, events.AgentControlSubject(r.jobID, 2), &events.AgentControl{
		JobID: r.jobID, Attempt: 2, Kind: events.ControlCheckpoint, Deadline: deadline, Reason: "spot-interruption"}); err != nil {
		t.Fatal(err)
	}
}

// The instance's own notice reaches the scheduler as an interruption
// event naming the attempt's instance and launch, and the checkpoint is
// taken once however many times the same notice is announced.
func TestInstanceNoticesAreForwardedAndCheckpointedOnce(t *testing.T) {
	deadline := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	tests := []struct {
		name string
		// order: "notice" (the instance's metadata) and "request" (the
		// scheduler, from the cloud's event), in the order they come.
		order []string
	}{
		{name: "metadata first, then the scheduler", order: []string{"notice", "request"}},
		{name: "scheduler first, then the metadata", order: []string{"request", "notice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startAgentRig(t, "aws")
			var acks atomic.Int32
			for i, from := range tt.order {
				switch from {
				case "notice":
					// The metadata rounds the time differently from the
					// cloud's event.
					r.notices.c <- Notice{Kind: string(providers.EventSpotInterruption), Deadline: deadline.Add(time.Second),
						Ack: func(context.Context) error { acks.Add(1); return nil }}
				case "request":
					r.request(t, deadline)
				}
				r.waitCheckpoints(t, i+1) // each is answered by a checkpoint report
			}
			if got := r.checkpoints(); len(got) != 2 || got[0] != 1 || got[1] != 1 {
				t.Errorf("checkpoint reports of steps %v, want [1 1]: one checkpoint, reported to both", got)
			}
			if n := acks.Load(); n != 1 {
				t.Errorf("the notice was acknowledged %d times, want once", n)
			}
			testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				r.mu.Lock()
				defer r.mu.Unlock()
				if len(r.forwards) != 1 {
					return fmt.Errorf("%d interruptions forwarded, want 1", len(r.forwards))
				}
				return nil
			})
			f := r.forwards[0]
			in := f.Instance
			if f.Kind != providers.EventSpotInterruption || !f.Deadline.Equal(deadline.Add(time.Second)) || in.ID != "i-0abc" ||
				in.Provider != "aws" || in.Region != "us-east-1" || in.JobID != r.jobID || in.Attempt != 2 || in.IdempotencyKey != job.LaunchKey(r.jobID, 2) {
				t.Errorf("forwarded %+v", f)
			}
		})
	}
}

// A second notice long after the first (a new one) is checkpointed again;
// without a provider the agent forwards nothing.
func TestNewNoticeIsCheckpointedAgainAndNothingForwardedWithoutProvider(t *testing.T) {
	r := startAgentRig(t, "")
	first := time.Now().Add(time.Minute)
	r.notices.c <- Notice{Kind: string(providers.EventMaintenance), Deadline: first}
	r.waitCheckpoints(t, 1)
	r.request(t, first.Add(10*time.Minute))
	r.waitCheckpoints(t, 2)
	if got := r.checkpoints(); got[1] != 2 {
		t.Errorf("checkpoint steps %v: the later notice did not take a new checkpoint", got)
	}
	time.Sleep(100 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.forwards) != 0 {
		t.Errorf("forwarded %d notices with no provider set", len(r.forwards))
	}
}

// A start asked again once the workload runs (the scheduler repeats a
// start nobody answered) is no checkpoint request: under load the
// workload could not finish one in time, and a failed checkpoint is
// reported for nothing.
func TestStartToARunningAgentTakesNoCheckpoint(t *testing.T) {
	r := startAgentRig(t, "aws")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.bus.RequestEvent(ctx, events.AgentControlSubject(r.jobID, 2), &events.AgentControl{
		JobID: r.jobID, Attempt: 2, Kind: events.ControlStart, Reason: "the checkpoint it resumes from is stored"}); err != nil {
		t.Fatal(err)
	}
	// Requests are taken in order: once the next one is answered, the
	// start has been handled.
	r.request(t, time.Now().Add(2*time.Minute))
	r.waitReports(t, "the requested checkpoint", func(reps []*events.AgentReport) bool {
		return slices.ContainsFunc(reps, func(rep *events.AgentReport) bool { return rep.Message == "spot-interruption" })
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.reports {
		if rep.Kind == events.AgentCheckpoint || rep.Kind == events.AgentCheckpointFailed {
			if rep.Message != "spot-interruption" {
				t.Errorf("%s report %q: the start was taken for a checkpoint request", rep.Kind, rep.Message)
			}
		}
	}
}
