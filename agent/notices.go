package agent

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// sameNotice is how far apart two deadlines may be and still be one
// notice heard twice: the cloud's event and the instance's metadata round
// the time differently, and the event may be late.
const sameNotice = 2 * time.Minute

// forward publishes a notice from the instance's metadata as the
// interruption event the daemon would get from the cloud, so the
// scheduler starts the replacement at once. It carries the same
// de-duplication ID as the daemon's own event of the same notice; the
// scheduler acts on a notice once, whichever copy comes first.
func (a *run) forward(ctx context.Context, n Notice) {
	c := a.c
	if c.Provider == "" || c.Reporter == nil {
		return
	}
	ev := &events.Interruption{
		Kind: providers.EventKind(n.Kind),
		Instance: providers.Instance{
			ID: c.InstanceID, Provider: c.Provider, Region: c.Region, JobID: c.JobID, Attempt: c.Attempt,
			IdempotencyKey: job.LaunchKey(c.JobID, c.Attempt), State: providers.InstanceRunning,
		},
		Deadline: n.Deadline,
		Reason:   "the instance's metadata",
	}
	if err := ev.Validate(); err != nil {
		a.log.Warn("not forwarding the notice", zap.Error(err))
		return
	}
	id := c.InstanceID + "-" + n.Kind + "-" + n.Deadline.UTC().Format(time.RFC3339)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Reporter.Publish(pctx, events.AgentInterruptionsSubject(c.Provider, c.Region, c.JobID, c.Attempt), ev, events.WithID(id)); err != nil {
		a.log.Warn("forwarding the notice to the scheduler", zap.Error(err))
		return
	}
	a.log.Info("notice forwarded to the scheduler", zap.String("event", n.Kind))
}

// alreadyCovered reports whether a checkpoint was already stored for this
// deadline (the instance's metadata and the scheduler both announce the
// same notice). Taking a second one would spend the rest of the window
// and could miss the deadline, so the stored one is reported again: the
// scheduler, waiting on it, moves the job on.
func (a *run) alreadyCovered(ctx context.Context, deadline time.Time) bool {
	if deadline.IsZero() {
		return false
	}
	a.mu.Lock()
	rep, covered := a.lastReport, a.covered
	a.mu.Unlock()
	if rep == nil || covered.IsZero() || deadline.Sub(covered).Abs() > sameNotice {
		return false
	}
	a.log.Info("a checkpoint for this notice is already stored", zap.Time("deadline", deadline), zap.Int64("step", rep.Checkpoint.Step))
	again := *rep
	a.report(ctx, &again)
	return true
}
