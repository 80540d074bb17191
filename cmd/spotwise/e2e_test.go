package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

// The test binary doubles as the spotwise binary: with SPOTWISE_E2E_ARGS
// set it runs the CLI with those arguments instead of the tests. The
// end-to-end tests start real server processes this way and kill them with
// SIGKILL.
func TestMain(m *testing.M) {
	// The agent inside a test server (or its agent processes) runs from
	// this same binary, and so does the demo workload.
	if len(os.Args) > 1 && (os.Args[1] == "demo-workload" || os.Args[1] == "agent") {
		os.Args[0] = "spotwise"
		main()
		os.Exit(0)
	}
	if args := os.Getenv("SPOTWISE_E2E_ARGS"); args != "" {
		os.Args = append([]string{"spotwise"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	// The CLI reads (and a server writes) $XDG_CONFIG_HOME/spotwise:
	// never the user's own in tests.
	cfgHome, err := os.MkdirTemp("", "spotwise-test-config")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", cfgHome)
	code := m.Run()
	os.RemoveAll(cfgHome)
	os.Exit(code)
}

type serverProc struct {
	cmd   *exec.Cmd
	addr  string
	log   *os.File
	token string // the operator token the server left in its data dir
}

// client is an API client with the operator token.
func (p *serverProc) client() *api.Client {
	c := api.NewClient(p.addr)
	c.Token = p.token
	return c
}

// get sends an authenticated GET to the server.
func (p *serverProc) get(t *testing.T, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// logText is everything the server (and its agents) logged so far.
func (p *serverProc) logText(t *testing.T) string {
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startProc(t *testing.T, dir, addr string, extra ...string) *serverProc {
	t.Helper()
	args := append([]string{"server", "--data-dir", dir, "--http-addr", addr, "--nats-listen", "", "--log-level", "warn", "--log-format", "json", "--no-client-config"}, extra...)
	logf, err := os.OpenFile(filepath.Join(t.TempDir(), "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	// Jobs stay where they are placed: these tests count attempts.
	cmd.Env = append(os.Environ(), "SPOTWISE_E2E_ARGS="+strings.Join(args, "\x1f"), "SPOTWISE_RECONCILE_EVERY=500ms", "SPOTWISE_ARBITRAGE=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, addr: addr, log: logf}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("server log:\n%s", b)
		}
	})
	testutil.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	b, err := os.ReadFile(filepath.Join(dir, auth.OperatorTokenFile))
	if err != nil {
		t.Fatalf("the server left no operator token: %v", err)
	}
	p.token = strings.TrimSpace(string(b))
	return p
}

func (p *serverProc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

func instancesOf(t *testing.T, p *serverProc) []providers.Instance {
	t.Helper()
	resp := p.get(t, "/v1/instances")
	defer resp.Body.Close()
	var body struct {
		Instances []providers.Instance `json:"instances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Instances
}

// TestKill9MidRunLosesNothingAndLaunchesNothingTwice starts a server,
// submits jobs, kills the server with SIGKILL while they are being placed
// and run, starts it again on the same data directory, and checks that
// every job finishes, each on exactly the capacity it bought the first
// time.
func TestKill9MidRunLosesNothingAndLaunchesNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	t.Parallel() // mostly waits on real time
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startProc(t, dir, addr, "--sim-speed", "900")
	c := p.client()
	ctx := context.Background()
	specs := map[string]int{ // file -> nodes
		"bert-finetune.yaml": 1, "resnet50-spot.yaml": 1, "eu-only.yaml": 1, "batch-inference.yaml": 1, "multi-node": 4,
	}
	var ids []string
	nodes := map[string]int{}
	for i := range 3 {
		for file, n := range specs {
			b := []byte("name: multi-node\ncommand: [x]\nresources: {gpus_per_node: 8, nodes: 4, accelerators: [A100, H100]}\nwork: 3h on A100\npurchase: on-demand\n")
			if file != "multi-node" {
				var err error
				if b, err = os.ReadFile(filepath.Join("..", "..", "examples", file)); err != nil {
					t.Fatal(err)
				}
			}
			v, _, err := c.Submit(ctx, b, "application/yaml", fmt.Sprintf("%s-%d", file, i))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
			nodes[v.ID] = n
		}
	}
	pending, _, err := c.Submit(ctx, []byte("name: never\ncommand: [x]\nresources: {gpus_per_node: 8, accelerators: [H100]}\nwork: 1h on H100\nmax_price_per_hour: 1.00\n"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	// Kill as soon as some jobs hold capacity and others are still on
	// their way.
	testutil.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		l, err := c.List(ctx, api.Query{States: []job.State{job.Placing, job.Running}})
		if err != nil {
			return err
		}
		if len(l.Jobs) < 3 {
			return fmt.Errorf("%d jobs hold capacity", len(l.Jobs))
		}
		return nil
	})
	p.kill9(t)

	// The same data dir: the same operator token.
	p = startProc(t, dir, addr, "--sim-speed", "900")
	// A job succeeds when its command exits; its capacity is released
	// after that, and its last attempt is closed once the capacity is
	// gone. Wait for both: what is checked below is the end state.
	for _, id := range ids {
		testutil.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
			v, err := c.Get(ctx, id)
			if err != nil {
				return err
			}
			if v.State != job.Succeeded {
				return fmt.Errorf("job %s is %s (%s)", id, v.State, v.Message)
			}
			if n := len(v.Attempts); n == 0 || v.Attempts[n-1].Outcome != "succeeded" {
				return fmt.Errorf("job %s succeeded, its last attempt is not closed yet: %+v", id, v.Attempts)
			}
			return nil
		})
	}
	byJob := map[string][]providers.Instance{}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		clear(byJob)
		for _, in := range instancesOf(t, p) {
			byJob[in.JobID] = append(byJob[in.JobID], in)
		}
		for _, id := range ids {
			for _, in := range byJob[id] {
				if !in.State.Ended() {
					return fmt.Errorf("instance %s of finished job %s is still %s", in.ID, id, in.State)
				}
			}
		}
		return nil
	})
	for _, id := range ids {
		v, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// A restart may find that a launch it must repeat is refused now
		// (the capacity went meanwhile); the job then moves on, but no
		// attempt other than the last may hold any instance.
		last := v.Attempts[len(v.Attempts)-1]
		if last.Outcome != "succeeded" {
			t.Errorf("job %s: last attempt %+v", id, last)
		}
		for _, a := range v.Attempts[:len(v.Attempts)-1] {
			if a.Outcome != "launch-failed" || len(a.Instances) > 0 {
				t.Errorf("job %s: attempt %d ended %q with instances %v: the restart disturbed it", id, a.N, a.Outcome, a.Instances)
			}
		}
		insts := byJob[id]
		if len(insts) != nodes[id] {
			t.Errorf("job %s has %d instances %+v, want %d; attempts %+v", id, len(insts), insts, nodes[id], v.Attempts)
		}
		for _, in := range insts {
			if !in.State.Ended() {
				t.Errorf("instance %s of finished job %s is still %s", in.ID, id, in.State)
			}
			if in.IdempotencyKey != last.LaunchKey {
				t.Errorf("instance %s has key %s, not the succeeding attempt's %s: capacity bought twice", in.ID, in.IdempotencyKey, last.LaunchKey)
			}
		}
		if v.CostUSD <= 0 {
			t.Errorf("job %s cost nothing", id)
		}
	}
	pv, err := c.Get(ctx, pending.ID)
	if err != nil || pv.State != job.Queued || len(pv.PendingReasons) == 0 {
		t.Errorf("unplaceable job after restart: %+v, %v", pv, err)
	}
}
