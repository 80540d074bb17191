package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/internal/clock"
	"github.com/spotwise/spotwise/providers"
)

// Local runs the real agent (Run) on this machine for instances of the
// simulated cloud: the job's command really runs, in a work directory of
// its own, as fast as the simulated clock says its GPU would go. When the
// simulated instance ends, the workload is killed, as it would be on a
// real one.
type Local struct {
	Sim         *SimWorkload // for sizing the work on the instance's GPU
	Reporter    Reporter
	Control     Answerer
	Checkpoints checkpoint.Store
	Clock       clock.Clock
	ClockSpeed  float64
	// Root holds one work directory per instance.
	Root       string
	Executable string
	Log        *zap.Logger
}

// Start runs the agent for node 0 of an instance's job.
func (l *Local) Start(inst providers.Instance, w providers.Workload) (stop func()) {
	if inst.Node != 0 || inst.JobID == "" {
		return func() {}
	}
	log := l.Log.With(zap.String("job", inst.JobID), zap.String("instance", inst.ID))
	runtime, err := l.Sim.runtime(inst, w)
	if err != nil {
		log.Error("cannot size the workload", zap.Error(err))
		return func() {}
	}
	dir := filepath.Join(l.Root, inst.ID)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer os.RemoveAll(dir)
		err := Run(ctx, Config{
			JobID: inst.JobID, Attempt: inst.Attempt, InstanceID: inst.ID, Workload: w,
			WorkSeconds: runtime.Seconds(), ClockSpeed: l.ClockSpeed, WorkDir: dir,
			Reporter: l.Reporter, Control: l.Control, Checkpoints: l.Checkpoints, Clock: l.Clock,
			Log: log, Executable: l.Executable, Progress: 250 * time.Millisecond, Heartbeat: 10 * time.Second,
		})
		if err != nil && ctx.Err() == nil {
			log.Warn("agent stopped", zap.Error(err))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Dispatch runs real commands whose first word is in Commands with Real,
// and simulates every other workload with Sim.
type Dispatch struct {
	Commands []string
	Real     *Local
	Sim      *SimWorkload
}

// Start picks the runner for a workload.
func (d *Dispatch) Start(inst providers.Instance, w providers.Workload) (stop func()) {
	if d.Real != nil && len(w.Command) > 0 && slices.Contains(d.Commands, w.Command[0]) {
		return d.Real.Start(inst, w)
	}
	return d.Sim.Start(inst, w)
}
