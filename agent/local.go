package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
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
	// Subprocess runs each agent as its own process (`spotwise agent`,
	// the same code path a real instance runs) connected to NATSURL,
	// instead of in this process.
	Subprocess bool
	NATSURL    string
	// StoreURI is the checkpoint store the subprocess opens.
	StoreURI string
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
	if l.Subprocess && l.NATSURL != "" {
		return l.startProcess(inst, w, runtime, dir, log)
	}
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

// InProcess reports whether the runner Start picks for a workload with
// this command runs its agent in this process, reporting over the
// server's own NATS connection (no credential of its own needed).
func (d *Dispatch) InProcess(command []string) bool {
	if d.Real != nil && len(command) > 0 && slices.Contains(d.Commands, command[0]) {
		return d.Real.InProcess(command)
	}
	return true
}

// InProcess reports whether the agent runs in this process rather than as
// a `spotwise agent` process of its own, which connects to NATS with the
// attempt's credential.
func (l *Local) InProcess([]string) bool { return !l.Subprocess || l.NATSURL == "" }

// startProcess runs `spotwise agent` for the instance; stopping it is the
// instance going away: SIGTERM (the agent kills the workload and exits),
// then SIGKILL if it lingers.
func (l *Local) startProcess(inst providers.Instance, w providers.Workload, runtime time.Duration, dir string, log *zap.Logger) (stop func()) {
	creds := w.AgentCredentials
	w.AgentCredentials = "" // its own file
	wj, err := json.Marshal(w)
	if err != nil {
		log.Error("encoding the workload", zap.Error(err))
		return func() {}
	}
	args := []string{"agent", "--nats-url", l.NATSURL, "--job", inst.JobID,
		"--attempt", strconv.Itoa(inst.Attempt), "--instance", inst.ID, "--work-dir", dir,
		"--work-seconds", strconv.FormatFloat(runtime.Seconds(), 'f', 3, 64),
		"--clock-speed", strconv.FormatFloat(l.ClockSpeed, 'f', -1, 64),
		"--checkpoints", l.StoreURI, "--sim-clock", "--workload", "-"}
	if creds != "" {
		// The attempt's own NATS user, as a real instance gets it.
		path := filepath.Join(dir, "nats.creds")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			log.Error("agent work directory", zap.Error(err))
			return func() {}
		}
		if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
			log.Error("writing the agent's NATS credential", zap.Error(err))
			return func() {}
		}
		args = append(args, "--nats-creds", path)
	}
	out := &logWriter{log: log}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, l.Executable, args...)
	cmd.Stdin = bytes.NewReader(wj)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		log.Error("starting the agent process", zap.Error(err))
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer os.RemoveAll(dir)
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			log.Warn("agent process ended", zap.Error(err))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// logWriter turns a process's output into log lines.
type logWriter struct {
	log *zap.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.log.Info("agent", zap.String("line", string(w.buf[:i])))
		w.buf = w.buf[i+1:]
	}
}
