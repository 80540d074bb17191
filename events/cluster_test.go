package events_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

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
func startCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	routes := make([]string, n)
	clusterAddrs := make([]string, n)
	for i := range n {
		p := freePort(t)
		clusterAddrs[i] = fmt.Sprintf("127.0.0.1:%d", p)
		routes[i] = "nats-route://" + clusterAddrs[i]
	}
	servers := make([]*server.Server, n)
	for i := range n {
		ns, err := events.StartEmbedded(events.EmbeddedOptions{
			DataDir: t.TempDir(), Listen: "127.0.0.1:-1", ServerName: fmt.Sprintf("n%d", i),
			ClusterName: "spotwise-test", ClusterListen: clusterAddrs[i], Routes: routes,
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
	return servers
}

// TestClusterWithReplicatedState runs the bus against a three-node
// JetStream cluster with every stream and bucket replicated three times:
// job state survives the loss of a node and revision checks still hold.
func TestClusterWithReplicatedState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	servers := startCluster(t, 3)
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
		b, err = events.Open(actx, events.Config{URL: strings.Join(urls, ","), Replicas: 3}, "test", nil, eventstest.Logger(t))
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
		h, err := b.JobHistory(hctx, r.ID, 0)
		if err != nil {
			return err
		}
		if len(h) != 1 {
			return fmt.Errorf("history after failover has %d entries, want 1", len(h))
		}
		return nil
	})
}
