package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/agent/demo"
	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// The daemon on a real cloud's SDK, pointed at a local fake of that cloud:
// the instances the daemon buys are "booted" by running the agent command
// line their user data (custom data) holds, as the instance would, each
// with a metadata service of its own. Real clock throughout: the work is
// sized in seconds.

// e2eSteps is the demo workload's length; its result is checked against
// an uninterrupted run's.
const e2eSteps = 300

// cloudJob is the job both clouds run: 24 s of real work on an A100 that
// checkpoints in well under the notice window.
func cloudJob(provider string) string {
	return fmt.Sprintf(`name: real-cloud-e2e
command: [spotwise, demo-workload, --steps, "%d", --checkpoint-mb, "1"]
resources: {gpus_per_node: 1, accelerators: [A100]}
work: 24s on A100
purchase: spot
placement: {providers: [%s]}
checkpoint: {duration: 5s}
`, e2eSteps, provider)
}

// cloudServer is a spotwise server with only a real cloud (no simulated
// one) on an embedded NATS server agents can reach, and checkpoints in a
// local directory the agents share.
type cloudServer struct {
	srv      *server.Server
	client   *api.Client
	natsURL  string
	ckptURI  string
	cfg      server.Config
	stopOnce sync.Once
}

func startCloudServer(t *testing.T, set func(c *server.Config, natsURL, ckptURI string), opts ...server.Option) *cloudServer {
	t.Helper()
	dir := t.TempDir()
	cfg := server.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = "127.0.0.1:0"
	natsAddr := freeAddr(t)
	cfg.NATS.Listen = natsAddr
	cfg.Sim.Enabled = false
	cfg.Scheduler.ReconcileInterval = job.Duration(2 * time.Second)
	cfg.Scheduler.Arbitrage.Enabled = false // these tests count launches
	cs := &cloudServer{natsURL: "nats://" + natsAddr, ckptURI: "file://" + filepath.Join(dir, "checkpoints")}
	cfg.Checkpoints.URI = cs.ckptURI
	set(&cfg, cs.natsURL, cs.ckptURI)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	s, err := server.Start(ctx, cfg, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cs.srv, cs.cfg = s, cfg
	cs.client = api.NewClient(s.HTTPAddr())
	cs.client.Token = s.OperatorToken()
	t.Cleanup(cs.stop)
	return cs
}

func (cs *cloudServer) stop() { cs.stopOnce.Do(cs.srv.Close) }

// submit sends the job over HTTP.
func (cs *cloudServer) submit(t *testing.T, spec string) string {
	t.Helper()
	v, _, err := cs.client.Submit(context.Background(), []byte(spec), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	return v.ID
}

// waitJob polls the job until cond holds.
func (cs *cloudServer) waitJob(t *testing.T, id, what string, limit time.Duration, cond func(*api.JobView) bool) *api.JobView {
	t.Helper()
	var got *api.JobView
	testutil.CheckFor(t, limit, 20*time.Millisecond, func() error {
		var err error
		if got, err = cs.client.Get(context.Background(), id); err != nil {
			return err
		}
		if !cond(got) {
			return fmt.Errorf("%s: job %s at %.0f%%, attempt %d (%s)", what, got.State, got.Progress*100, got.Attempt, got.Message)
		}
		return nil
	})
	return got
}

// bootedAgent is the agent of one instance, running as its own process
// (this test binary doubles as spotwise), its output in a file.
type bootedAgent struct {
	cmd  *exec.Cmd
	out  string
	done chan struct{}
	once sync.Once
}

// bootAgent runs the agent command line an instance's boot script holds
// (argv from "agent" on), with the workload the script carries, a work
// directory of its own, and extra flags (its metadata service); later
// flags override the script's.
func bootAgent(t *testing.T, argv []string, workload, creds []byte, extra ...string) *bootedAgent {
	t.Helper()
	for len(argv) > 0 && argv[0] != "agent" {
		argv = argv[1:] // the binary's path on the image
	}
	if len(argv) == 0 {
		t.Fatalf("the boot script does not run spotwise agent")
	}
	dir := t.TempDir()
	wl := filepath.Join(dir, "workload.json")
	if err := os.WriteFile(wl, workload, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), argv...), "--workload", wl, "--work-dir", filepath.Join(dir, "work"))
	if creds != nil { // the attempt's own NATS user, where this "instance" keeps it
		path := filepath.Join(dir, "nats.creds")
		if err := os.WriteFile(path, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--nats-creds", path)
	}
	args = append(args, extra...)
	a := &bootedAgent{out: filepath.Join(dir, "agent.log"), done: make(chan struct{})}
	f, err := os.Create(a.out)
	if err != nil {
		t.Fatal(err)
	}
	a.cmd = exec.Command(os.Args[0], args...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(a.done)
		_ = a.cmd.Wait()
		f.Close()
	}()
	t.Cleanup(a.kill)
	return a
}

// scriptCreds is the NATS credential a boot script writes for its agent;
// a launch by a server with a NATS identity always carries one.
func scriptCreds(t *testing.T, script string) []byte {
	t.Helper()
	creds, err := providers.CredsFromScript(script)
	if err != nil || creds == nil {
		t.Fatalf("the boot script carries no agent credential (%v)", err)
	}
	return creds
}

// kill is the instance going away: the agent and its workload die.
func (a *bootedAgent) kill() {
	a.once.Do(func() {
		// The workload runs in a process group of its own, a child of
		// the agent: both go with the instance, without warning.
		pid := a.cmd.Process.Pid
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
			for _, child := range strings.Fields(string(b)) {
				var c int
				if _, err := fmt.Sscan(child, &c); err == nil {
					_ = syscall.Kill(-c, syscall.SIGKILL)
				}
			}
			_ = a.cmd.Process.Signal(syscall.SIGKILL)
		} else {
			_ = a.cmd.Process.Signal(syscall.SIGTERM) // the agent kills its workload
		}
	})
	<-a.done
}

// output is what the agent and its workload printed so far.
func (a *bootedAgent) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(a.out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFinished waits for the agent to exit by itself.
func (a *bootedAgent) waitFinished(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(limit):
		t.Fatalf("the agent did not exit within %s:\n%s", limit, a.output(t))
	}
}

// checkSurvived checks what the user sees of a job that was preempted
// once on a real cloud: it succeeded, with one notice, a checkpoint inside
// the window, one move, no failed checkpoint, and the workload's result is
// the uninterrupted run's.
func checkSurvived(t *testing.T, done *api.JobView, last *bootedAgent) {
	t.Helper()
	if done.State != job.Succeeded {
		t.Fatalf("job ended %s: %s", done.State, done.Message)
	}
	if done.Preemptions != 1 || done.Attempt != 2 {
		t.Errorf("%d preemptions over %d attempts, want 1 over 2", done.Preemptions, done.Attempt)
	}
	count := map[string]int{}
	var notice, ckpt time.Time
	for _, e := range done.Events {
		count[e.Kind]++
		switch {
		case e.Kind == events.KindNotice:
			notice = e.Time
		case e.Kind == events.KindCheckpoint && e.Attempt == 1 && !notice.IsZero() && ckpt.IsZero():
			ckpt = e.Time
		}
	}
	for kind, want := range map[string]int{events.KindNotice: 1, events.KindMigrating: 1, events.KindPreempted: 1, events.KindCheckpointFailed: 0} {
		if count[kind] != want {
			t.Errorf("%d %q events, want %d", count[kind], kind, want)
		}
	}
	if ckpt.IsZero() || ckpt.Sub(notice) > 10*time.Second {
		t.Errorf("checkpoint at %v, %s after the notice", ckpt, ckpt.Sub(notice))
	}
	last.waitFinished(t, 30*time.Second)
	if want := "result " + demo.Result(e2eSteps); !strings.Contains(last.output(t), want) {
		t.Errorf("the resumed workload did not print the uninterrupted run's result (%s):\n%s", want, last.output(t))
	}
}
