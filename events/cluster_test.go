package events_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCluster starts n JetStream servers clustered on 127.0.0.1.
func startCluster(t *testing.T, n int) ([]*server.Server, *events.Identity) {
	t.Helper()
	routes := make([]string, n)
	clusterAddrs := make([]string, n)
	for i := range n {
		p := freePort(t)
		clusterAddrs[i] = fmt.Sprintf("127.0.0.1:%d", p)
		routes[i] = "nats-route://" + clusterAddrs[i]
	}
	servers := make([]*server.Server, n)
	id, err := events.LoadOrCreateIdentity(filepath.Join(t.TempDir(), "nats")) // one identity for the cluster
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ns, err := events.StartEmbedded(events.EmbeddedOptions{
			DataDir: t.TempDir(), Listen: "127.0.0.1:-1", ServerName: fmt.Sprintf("n%d", i),
			ClusterName: "spotwise-test", ClusterListen: clusterAddrs[i], Routes: routes, Identity: id,
		}, eventstest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = ns
		t.Cleanup(ns.Shutdown)
	}
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		for _, s := range servers {
			if s.NumRoutes() < n-1 {
				return fmt.Errorf("%s has %d routes", s.Name(), s.NumRoutes())
			}
			if !s.JetStreamIsClustered() || !s.JetStreamIsCurrent() {
				return errors.New("JetStream has no meta leader yet")
			}
		}
		return nil
	})
	return servers, id
}

// TestClusterWithReplicatedState runs the bus against a three-node
// JetStream cluster with every stream and bucket replicated three times:
// job state survives the loss of a node and revision checks still hold.
func TestClusterWithReplicatedState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	servers, id := startCluster(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b *events.Bus
	// Leader election for the meta group takes a moment after the routes
	// are up.
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		defer acancel()
		var err error
		b, err = events.Open(actx, events.Config{URL: strings.Join(urls, ","), Replicas: 3, IdentityDir: id.Dir()}, "test", nil, eventstest.Logger(t))
		return err
	})
	defer b.Close()
	r := newRecord(time.Now())
	rev, err := b.Jobs().Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, events.JobEventsSubject(r.ID), &events.JobEvent{JobID: r.ID, Kind: events.KindQueued, State: job.Queued}); err != nil {
		t.Fatal(err)
	}
	checkAgentsAcrossNodes(t, ctx, b, id, urls, r.ID)
	// Take a node away; the client reconnects to another if it was on it.
	servers[2].Shutdown()
	// Every call below may meet an election in progress: each is retried
	// with a short timeout until the cluster answers.
	retry := func(what string, fn func(ctx context.Context) error) {
		t.Helper()
		testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
			actx, acancel := context.WithTimeout(ctx, 3*time.Second)
			defer acancel()
			if err := fn(actx); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		})
	}
	retry("update after failover", func(ctx context.Context) error {
		got, grev, err := b.Jobs().Get(ctx, r.ID)
		switch {
		case err != nil:
			return err
		case got.Status.Message == "after failover":
			return nil // an earlier try went through
		case grev != rev:
			return fmt.Errorf("revision %d, want %d", grev, rev)
		}
		got.Status.Message = "after failover"
		_, err = b.Jobs().Update(ctx, got, rev)
		return err
	})
	// A stale writer is still refused.
	retry("stale update", func(ctx context.Context) error {
		got, _, err := b.Jobs().Get(ctx, r.ID)
		if err != nil {
			return err
		}
		if got.Status.Message != "after failover" {
			return fmt.Errorf("message %q", got.Status.Message)
		}
		got.Status.Message = "stale"
		if _, err := b.Jobs().Update(ctx, got, rev); !errors.Is(err, events.ErrConflict) {
			return fmt.Errorf("want a conflict, got %v", err)
		}
		return nil
	})
	// The stream's leader may have been on the lost node: reads succeed
	// once a new one is elected.
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		hctx, hcancel := context.WithTimeout(ctx, 3*time.Second)
		defer hcancel()
		h, err := b.JobHistory(hctx, r.ID, nil, 0)
		if err != nil {
			return err
		}
		if len(h) != 1 {
			return fmt.Errorf("history after failover has %d entries, want 1", len(h))
		}
		return nil
	})
}

// checkAgentsAcrossNodes connects an agent to every node: each may publish
// its own reports only, no node takes an anonymous connection, and a
// revocation pushed through any node reaches the others.
func checkAgentsAcrossNodes(t *testing.T, ctx context.Context, b *events.Bus, id *events.Identity, urls []string, jobID string) {
	t.Helper()
	var agents []*agentConn
	for i, url := range urls {
		a, err := connectAgent(t, url, id, jobID, i+1)
		if err != nil {
			t.Fatalf("agent on node %d: %v", i, err)
		}
		if a.refused(t, events.AgentSubject(jobID, i+1)) || !a.refused(t, events.AgentSubject(jobID, i+2)) {
			t.Fatalf("agent on node %d: its permissions are not its attempt's", i)
		}
		agents = append(agents, a)
		if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Fatalf("node %d accepted an anonymous connection", i)
		}
	}
	for i, a := range agents {
		if err := b.RevokeAgent(ctx, jobID, i+1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("the revoked agent on node %d is still connected", i)
		}
		start := time.Now()
		testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			if _, err := connectAgent(t, urls[i], id, jobID, i+1); err == nil {
				return fmt.Errorf("node %d let a revoked agent in again", i)
			}
			return nil
		})
		t.Logf("node %d refused after %v", i, time.Since(start))
	}
}

// TestExternalClusterFromTheGeneratedConfig runs three nats-servers from
// configuration files that include the identity's generated operator.conf
// (what `spotwise nats init` writes for deploy/nats): spotwise connects as
// its service user, agents are confined and revoked on every node, and
// nothing anonymous gets in.
func TestExternalClusterFromTheGeneratedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	base := t.TempDir()
	id, err := events.LoadOrCreateIdentity(filepath.Join(base, "identity"))
	if err != nil {
		t.Fatal(err)
	}
	n := 3
	clusterPorts, clientPorts := make([]int, n), make([]int, n)
	var routes []string
	for i := range n {
		clusterPorts[i], clientPorts[i] = freePort(t), freePort(t)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", clusterPorts[i]))
	}
	var servers []*server.Server
	var urls []string
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		include, _, err := id.WriteServerConfig("", filepath.Join(dir, "jwt"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, include) // includes are relative to the file
		if err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
include %q
jetstream { store_dir: %q, max_memory_store: 64MB }
cluster { name: ext, listen: 127.0.0.1:%d, routes: [%s] }
`, i, clientPorts[i], rel, filepath.Join(dir, "js"), clusterPorts[i], strings.Join(routes, ", "))
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("the generated configuration does not load: %v", err)
		}
		opts.NoSigs, opts.NoLog = true, true
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server did not start")
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		servers = append(servers, ns)
		urls = append(urls, ns.ClientURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A spotwise host needs identity.json alone: the users' credentials
	// are derived from it.
	hostDir := filepath.Join(base, "spotwise-host")
	keys, err := os.ReadFile(filepath.Join(id.Dir(), events.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostDir, events.IdentityFile), keys, 0o400); err != nil {
		t.Fatal(err)
	}
	var b *events.Bus
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		defer acancel()
		var err error
		b, err = events.Open(actx, events.Config{URL: strings.Join(urls, ","), Replicas: 3, IdentityDir: hostDir}, "test", nil, eventstest.Logger(t))
		return err
	})
	defer b.Close()
	r := newRecord(time.Now())
	if _, err := b.Jobs().Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	checkAgentsAcrossNodes(t, ctx, b, id, urls, r.ID)
	// The watcher of the generated files reads events on any node.
	w, err := nats.Connect(urls[2], nats.UserCredentials(filepath.Join(id.Dir(), events.WatcherCreds)), nats.CustomInboxPrefix(events.WatcherInbox))
	if err != nil {
		t.Fatalf("watcher: %v", err)
	}
	defer w.Close()
	_ = servers
}

// An external server's identity is never made up on the spot (the cluster
// would not trust it): a missing one is an error that says how to make it,
// and nothing is written.
func TestExternalWithoutAnIdentitySaysHowToMakeOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "identity")
	_, err := events.Open(context.Background(), events.Config{URL: "nats://127.0.0.1:1", IdentityDir: dir}, "test", nil, eventstest.Logger(t))
	if err == nil || !strings.Contains(err.Error(), "spotwise nats init --dir "+dir) {
		t.Fatalf("err = %v, want one naming spotwise nats init", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the identity directory was created: %v", err)
	}
}
