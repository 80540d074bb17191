package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
)

// proc is one server process.
type proc struct {
	cmd    *exec.Cmd
	log    string
	done   chan struct{} // closed once it has exited
	err    error         // its exit, once done
	killed atomic.Bool   // the run stopped it
}

// env is the server's configuration, all of it through SPOTWISE_*
// variables so that the real binary and a test binary standing in for it
// are configured alike.
func (r *run) env() []string {
	o := r.o
	return []string{
		"SPOTWISE_DATA_DIR=" + filepath.Join(o.Dir, "data"),
		// The CLI config the server would write is not the user's.
		"SPOTWISE_NO_CLIENT_CONFIG=true",
		"XDG_CONFIG_HOME=" + filepath.Join(o.Dir, "config"),
		"SPOTWISE_HTTP_ADDR=" + r.http,
		"SPOTWISE_NATS_LISTEN=" + r.nats,
		"SPOTWISE_LOG_LEVEL=warn",
		"SPOTWISE_LOG_FORMAT=json",
		fmt.Sprintf("SPOTWISE_SIM_SPEED=%g", o.Speed),
		fmt.Sprintf("SPOTWISE_SIM_SEED=%d", o.Seed),
		fmt.Sprintf("SPOTWISE_SIM_INTERRUPTION_SCALE=%g", o.InterruptionScale),
		"SPOTWISE_SIM_FAULTS=" + o.Faults.env(),
		"SPOTWISE_RECONCILE_EVERY=" + o.ReconcileEvery.String(),
	}
}

// startServer starts a server on the run's data directory and waits until
// it answers and its job bucket is being watched.
func (r *run) startServer(ctx context.Context) error {
	cmd := r.o.Server()
	base := cmd.Env
	if base == nil {
		base = os.Environ()
	}
	// Nothing of the caller's own SPOTWISE_* settings: the run is the same
	// wherever it runs.
	var env []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "SPOTWISE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, r.env()...)
	logPath := filepath.Join(r.o.Dir, fmt.Sprintf("server-%d.log", len(r.res.Logs)+1))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting the server: %w", err)
	}
	r.res.Logs = append(r.res.Logs, logPath)
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	r.proc = p
	up := time.Now()
	deadline := up.Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + r.http + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("the server exited while starting: %v (log %s)", p.err, logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not answer in 90s (log %s)", logPath)
		}
	}
	tok, err := os.ReadFile(filepath.Join(r.o.Dir, "data", auth.OperatorTokenFile))
	if err != nil {
		return fmt.Errorf("the server left no operator token: %w", err)
	}
	// Set at the first start, before anything submits; a restart keeps
	// the token (a changed one would lock the submitters out).
	switch t := strings.TrimSpace(string(tok)); r.client.Token {
	case "":
		r.client.Token = t
	case t:
	default:
		return errors.New("the operator token changed across a restart")
	}
	creds := filepath.Join(events.IdentityDir(filepath.Join(r.o.Dir, "data")), events.ServiceCreds)
	if err := r.ledger.connect(ctx, "nats://"+r.nats, creds); err != nil {
		return fmt.Errorf("watching the job bucket: %w", err)
	}
	r.logf("server up in %s (log %s)", time.Since(up).Round(10*time.Millisecond), logPath)
	return nil
}

// kill9 kills the server with SIGKILL and waits for it to be gone.
func (p *proc) kill9() {
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the server to shut down, and kills it if it does not in 20s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// exitedOnItsOwn reports whether the server exited without being asked.
func (p *proc) exitedOnItsOwn() bool {
	select {
	case <-p.done:
		return !p.killed.Load()
	default:
		return false
	}
}
