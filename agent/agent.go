package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// NoticeSource is where an agent hears about its own instance's fate from
// the instance itself (AWS IMDS spot/instance-action and rebalance, Azure
// Scheduled Events, GCP's preempted flag): a second path to the same
// checkpoint, independent of the scheduler. Each cloud's poller is in
// agent/notices.
type NoticeSource interface {
	// Watch calls fn for every new notice until ctx ends.
	Watch(ctx context.Context, fn func(Notice)) error
}

// Notice is one announcement from the instance's metadata.
type Notice struct {
	// Kind is spot-interruption, rebalance or maintenance.
	Kind string
	// Deadline is when the instance goes (zero for a rebalance
	// recommendation).
	Deadline time.Time
	// Ack, when set, is called once the checkpoint is stored, to let the
	// platform go ahead early (Azure Scheduled Events' StartRequests).
	Ack func(ctx context.Context) error
}

// Config is what one agent run needs.
type Config struct {
	JobID      string
	Attempt    int
	InstanceID string
	Workload   providers.Workload
	// WorkSeconds is the expected runtime of the whole work on this
	// instance's GPU (clock seconds); ClockSpeed how many pass per wall
	// second. Both are passed on to the workload.
	WorkSeconds float64
	ClockSpeed  float64
	// WorkDir holds the checkpoint directory and the progress file.
	WorkDir     string
	Reporter    Reporter
	Control     Answerer
	Checkpoints checkpoint.Store
	Notices     NoticeSource
	// Provider and Region name the cloud the instance runs in: with them,
	// every notice the instance's metadata gives is also forwarded to the
	// scheduler as an interruption event, so that it starts the
	// replacement even when the cloud tells the daemon nothing (Azure
	// Scheduled Events) or tells it late.
	Provider, Region string
	Clock            clock.Clock
	Log              *zap.Logger
	// Executable replaces a command's first word "spotwise" (the demo
	// workload runs from this binary).
	Executable string
	// Progress is how often the progress file is read (wall time,
	// default 1s); Heartbeat how often a heartbeat is sent (default 30s).
	Progress  time.Duration
	Heartbeat time.Duration
	// Stdout and Stderr receive the workload's output (default: the log)
	// besides the log stream, where it is shipped through the Reporter.
	Stdout, Stderr io.Writer
	// Node is the instance's node rank in a job of several nodes (its
	// output's lines say so).
	Node int
	// Logs bounds the shipping of the output (defaults: LogShipOptions).
	Logs LogShipOptions
}

// Run runs one attempt of a job's workload beside it, to the end: it waits
// for StartAfter, restores the newest good checkpoint of earlier attempts,
// starts the command with the protocol's environment, reports progress and
// heartbeats, checkpoints when the scheduler asks (or the instance's own
// metadata warns, or the interval comes), uploads each completed
// checkpoint, and reports the exit. Cancelling ctx (the instance is gone)
// kills the workload.
func Run(ctx context.Context, c Config) error {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.Progress == 0 {
		c.Progress = time.Second
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 30 * time.Second
	}
	if c.ClockSpeed <= 0 {
		c.ClockSpeed = 1
	}
	a := &run{c: c, log: c.Log.With(zap.String("job", c.JobID), zap.Int("attempt", c.Attempt))}
	return a.run(ctx)
}

type run struct {
	c      Config
	log    *zap.Logger
	dir    string // checkpoint dir
	pfile  string // progress file
	cmd    *exec.Cmd
	mu     sync.Mutex
	lastCk int64 // step of the last stored checkpoint
	// lastReport is the report of the last stored checkpoint; covered is
	// the deadline it was taken for (zero when none was).
	lastReport *events.AgentReport
	covered    time.Time
	// ship sends the workload's output to the log stream.
	ship *LogShipper
}

func (a *run) run(ctx context.Context) error {
	c := a.c
	if len(c.Workload.Command) == 0 {
		return errors.New("the job has no command to run")
	}
	var requests <-chan *events.AgentControl
	if c.Control != nil {
		ch, stop, err := controls(c.Control, c.JobID, c.Attempt)
		if err != nil {
			return fmt.Errorf("listening for the scheduler: %w", err)
		}
		defer stop()
		requests = ch
	}
	if err := waitToStart(ctx, c.Clock, c.Workload.StartAfter, requests); err != nil {
		return err
	}
	a.ship = NewLogShipper(c.Reporter, LogSource{JobID: c.JobID, Attempt: c.Attempt, Instance: c.InstanceID, Node: c.Node}, c.Clock, a.log, c.Logs)
	defer a.closeOutput(ctx, 2*time.Second) // stopped: the instance is going
	a.dir = filepath.Join(c.WorkDir, "checkpoint")
	a.pfile = filepath.Join(c.WorkDir, "progress")
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return err
	}
	restored := a.restore(ctx)
	var resumeStep int64
	var resume float64
	if restored != nil {
		resumeStep, resume = restored.Step, restored.Progress
	}
	if restored != nil {
		a.ship.Line(events.LogAgent, fmt.Sprintf("spotwise: resuming from the checkpoint of attempt %d at %.1f%% (step %d)", restored.Attempt, restored.Progress*100, restored.Step))
	}
	if err := a.start(resumeStep); err != nil {
		a.ship.Line(events.LogAgent, "spotwise: "+err.Error())
		a.closeOutput(ctx, 10*time.Second)
		a.report(ctx, &events.AgentReport{Kind: events.AgentExited, ExitCode: 127, Message: err.Error(), Progress: resume})
		return err
	}
	started := &events.AgentReport{Kind: events.AgentStarted, Progress: resume}
	if restored != nil {
		started.Checkpoint = refOf(*restored, restored.CreatedAt)
	}
	a.report(ctx, started)

	exited := make(chan error, 1)
	go func() { exited <- a.cmd.Wait() }()
	notices := make(chan Notice, 4)
	if c.Notices != nil {
		go func() {
			_ = c.Notices.Watch(ctx, func(n Notice) {
				a.log.Warn("the instance's metadata announces a notice", zap.String("event", n.Kind), zap.Time("deadline", n.Deadline))
				a.forward(ctx, n)
				select {
				case notices <- n:
				default:
				}
			})
		}()
	}
	progress := time.NewTicker(c.Progress)
	defer progress.Stop()
	heartbeat := time.NewTicker(c.Heartbeat)
	defer heartbeat.Stop()
	var periodic clock.Timer
	var periodicC <-chan time.Time
	if iv := c.Workload.Checkpoint.Interval; iv > 0 && !c.Workload.Checkpoint.Disabled {
		periodic = c.Clock.NewTimer(iv)
		periodicC = periodic.C()
		defer periodic.Stop()
	}
	lastProgress := resume
	reported, reportedAt := resume, time.Time{}
	for {
		select {
		case <-ctx.Done():
			_ = a.cmd.Process.Kill()
			<-exited
			return ctx.Err()
		case err := <-exited:
			a.collect(ctx, "final") // a checkpoint written just before the exit
			code := exitCode(err)
			p := a.readProgress(lastProgress)
			if code == 0 {
				p = 1
			}
			// The output's last lines are stored before the end is
			// reported: a failed job's page and alert show them.
			a.ship.Line(events.LogAgent, "spotwise: the workload exited with code "+strconv.Itoa(code))
			a.closeOutput(ctx, 10*time.Second)
			a.report(ctx, &events.AgentReport{Kind: events.AgentExited, ExitCode: code, Progress: p, Message: errText(err)})
			return nil
		case req := <-requests:
			switch req.Kind {
			case events.ControlStop:
				_ = a.cmd.Process.Signal(syscall.SIGTERM)
				continue
			case events.ControlStart:
				// Started already (its start-after passed, or an
				// earlier start got through): a start asked again is
				// no checkpoint request.
				continue
			}
			if a.alreadyCovered(ctx, req.Deadline) {
				continue
			}
			a.checkpoint(ctx, req.Deadline, req.Reason)
		case n := <-notices:
			stored := a.alreadyCovered(ctx, n.Deadline) || a.checkpoint(ctx, n.Deadline, "instance metadata: "+n.Kind)
			if stored && n.Ack != nil {
				if err := n.Ack(ctx); err != nil {
					a.log.Warn("acknowledging the notice", zap.Error(err))
				}
			}
		case <-periodicC:
			a.checkpoint(ctx, time.Time{}, "periodic")
			periodic.Reset(c.Workload.Checkpoint.Interval)
		case <-heartbeat.C:
			a.report(ctx, &events.AgentReport{Kind: events.AgentHeartbeat, Progress: lastProgress})
		case <-progress.C:
			if p := a.readProgress(lastProgress); p > lastProgress {
				lastProgress = p
				// Reported as the job's record takes it (at each 1%, at
				// most twice a minute between 10% marks), not at every
				// read: 10,000 agents reading each second would be
				// 10,000 messages a second.
				if now := c.Clock.Now(); job.ProgressReportWanted(p, reported, reportedAt, now) {
					reported, reportedAt = p, now
					a.report(ctx, &events.AgentReport{Kind: events.AgentProgress, Progress: p})
				}
			}
			a.collect(ctx, "the workload's own")
		}
	}
}

// restore brings back the newest good checkpoint of earlier attempts and
// returns it (nil when starting fresh).
func (a *run) restore(ctx context.Context) *checkpoint.Manifest {
	st := a.c.Checkpoints
	if st == nil || a.c.Workload.Checkpoint.Disabled {
		return nil
	}
	m, corrupt, err := restoreFromEarlier(ctx, st, a.c.JobID, a.c.Attempt, a.dir)
	if corrupt > 0 {
		a.log.Warn("skipped corrupt checkpoints", zap.Int("corrupt", corrupt))
	}
	if err != nil {
		if !errors.Is(err, checkpoint.ErrNotFound) {
			a.log.Warn("restoring checkpoint; starting fresh", zap.Error(err))
		}
		_ = os.RemoveAll(a.dir)
		_ = os.MkdirAll(a.dir, 0o755)
		return nil
	}
	a.lastCk = m.Step
	a.log.Info("restored checkpoint", zap.Int64("step", m.Step), zap.Float64("progress", m.Progress))
	return &m
}

// start launches the workload with the protocol's environment.
func (a *run) start(resumeStep int64) error {
	c := a.c
	argv := append([]string(nil), c.Workload.Command...)
	if argv[0] == "spotwise" && c.Executable != "" {
		argv[0] = c.Executable
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.WorkDir
	cmd.Env = append(os.Environ(),
		"SPOTWISE_JOB_ID="+c.JobID,
		"SPOTWISE_ATTEMPT="+strconv.Itoa(c.Attempt),
		"SPOTWISE_CHECKPOINT_DIR="+a.dir,
		"SPOTWISE_RESUME_STEP="+strconv.FormatInt(resumeStep, 10),
		"SPOTWISE_PROGRESS_FILE="+a.pfile,
		"SPOTWISE_WORK_SECONDS="+strconv.FormatFloat(c.WorkSeconds, 'f', 3, 64),
		"SPOTWISE_CLOCK_SPEED="+strconv.FormatFloat(c.ClockSpeed, 'f', -1, 64),
	)
	for k, v := range c.Workload.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout = a.output(c.Stdout, "stdout")
	cmd.Stderr = a.output(c.Stderr, "stderr")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", argv[0], err)
	}
	a.cmd = cmd
	return nil
}

// closeOutput ships the rest of the output, within wait.
func (a *run) closeOutput(ctx context.Context, wait time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	a.ship.Close(cctx)
}

// output is where the workload's stream goes: the log stream, and w or
// the log line by line.
func (a *run) output(w io.Writer, stream string) io.Writer {
	return io.MultiWriter(a.ship.Writer(stream), a.local(w, stream))
}

// local is where the workload's stream goes on the instance: w, or the
// log line by line.
func (a *run) local(w io.Writer, stream string) io.Writer {
	if w != nil {
		return w
	}
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			a.log.Info("workload", zap.String("stream", stream), zap.String("line", sc.Text()))
		}
	}()
	return pw
}

// checkpoint asks the workload for a checkpoint and stores it, within the
// deadline when there is one (else three checkpoint durations); it
// reports whether one was stored.
func (a *run) checkpoint(ctx context.Context, deadline time.Time, why string) bool {
	plan := a.c.Workload.Checkpoint
	if plan.Disabled || a.c.Checkpoints == nil {
		return false
	}
	wait := 3 * max(plan.Duration, time.Minute)
	if !deadline.IsZero() {
		wait = deadline.Sub(a.c.Clock.Now())
	}
	// The window is clock time: a simulated clock that is paused (or
	// slowed) gives the workload the time the window really has.
	give := a.c.Clock.NewTimer(wait)
	defer give.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	// A workload that has not written its progress file yet may not
	// handle the signal: signalled now, it would die of it. A periodic
	// checkpoint can wait for the next interval; one for a notice waits,
	// inside the window, for the workload to be up.
	for !a.up() {
		if why == "periodic" {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-give.C():
			a.failed(ctx, "the workload was not up (no progress reported) within the notice window: its last checkpoint is the one it started from")
			return false
		case <-poll.C:
		}
	}
	if err := a.ask(plan); err != nil {
		a.failed(ctx, "asking the workload: "+err.Error())
		return false
	}
	stored := func() bool {
		if !a.collect(ctx, why) {
			return false
		}
		if !deadline.IsZero() {
			a.mu.Lock()
			a.covered = deadline
			a.mu.Unlock()
		}
		return true
	}
	for {
		if stored() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-give.C():
			if stored() { // finished at the last moment
				return true
			}
			a.failed(ctx, fmt.Sprintf("the workload did not finish a checkpoint within %s", wait.Round(time.Second)))
			return false
		case <-poll.C:
		}
	}
}

// up reports whether the workload has written its progress file: it is
// running and handles the checkpoint signal.
func (a *run) up() bool {
	_, err := os.Stat(a.pfile)
	return err == nil
}

// ask tells the workload to checkpoint: its signal (default SIGUSR1), or
// its checkpoint command.
func (a *run) ask(plan providers.CheckpointPlan) error {
	if len(plan.Command) > 0 {
		cmd := exec.Command(plan.Command[0], plan.Command[1:]...)
		cmd.Env = append(os.Environ(), "SPOTWISE_CHECKPOINT_DIR="+a.dir)
		return cmd.Start()
	}
	sig := syscall.SIGUSR1
	if plan.Signal != "" {
		s, ok := signals[plan.Signal]
		if !ok {
			return fmt.Errorf("unknown signal %s", plan.Signal)
		}
		sig = s
	}
	return a.cmd.Process.Signal(sig)
}

var signals = map[string]syscall.Signal{"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM,
	"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT}

// collect uploads a checkpoint the workload completed since the last one
// (its .done names a newer step); true if one was stored.
func (a *run) collect(ctx context.Context, why string) bool {
	b, err := os.ReadFile(filepath.Join(a.dir, ".done"))
	if err != nil {
		return false
	}
	step, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil || step <= a.lastCk {
		return false
	}
	progress := a.readProgress(0)
	m, err := a.c.Checkpoints.Save(ctx, a.c.JobID, a.c.Attempt, step, progress, a.dir)
	if err != nil {
		a.failed(ctx, "uploading: "+err.Error())
		a.lastCk = step // do not retry a broken one in a loop
		return false
	}
	a.lastCk = step
	a.log.Info("checkpoint stored", zap.Int64("step", step), zap.Int64("bytes", m.Size), zap.String("reason", why))
	a.lastReport = &events.AgentReport{Kind: events.AgentCheckpoint, Progress: progress, Checkpoint: refOf(m, a.c.Clock.Now()), Message: why}
	a.report(ctx, a.lastReport)
	return true
}

func (a *run) failed(ctx context.Context, why string) {
	a.log.Warn("checkpoint failed", zap.String("reason", why))
	a.report(ctx, &events.AgentReport{Kind: events.AgentCheckpointFailed, Message: why, Progress: a.readProgress(0)})
}

// readProgress reads "<step> <total>" from the progress file.
func (a *run) readProgress(def float64) float64 {
	b, err := os.ReadFile(a.pfile)
	if err != nil {
		return def
	}
	var step, total float64
	if _, err := fmt.Sscanf(string(b), "%g %g", &step, &total); err != nil || total <= 0 {
		return def
	}
	return max(0, min(1, step/total))
}

func (a *run) report(ctx context.Context, rep *events.AgentReport) {
	rep.JobID, rep.Attempt, rep.InstanceID = a.c.JobID, a.c.Attempt, a.c.InstanceID
	for try := 0; try < 20; try++ {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := a.c.Reporter.Publish(rctx, events.AgentSubject(a.c.JobID, a.c.Attempt), rep)
		cancel()
		if err == nil {
			return
		}
		a.log.Warn("agent report not delivered; retrying", zap.String("event", rep.Kind), zap.Error(err))
		time.Sleep(time.Duration(min(try+1, 10)) * 200 * time.Millisecond)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
	}
	return 1
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
