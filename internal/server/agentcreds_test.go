package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// launchedCreds is the NATS credential the scheduler handed the launch of
// a job's attempt (the simulated cloud keeps each instance's workload in
// its bucket, as a real cloud keeps user data).
func launchedCreds(t *testing.T, s *Server, jobID string, attempt int) string {
	t.Helper()
	ctx := context.Background()
	keys, err := s.Bus().SimStore().Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		data, _, err := s.Bus().SimStore().Get(ctx, k)
		if err != nil {
			continue
		}
		var rec struct {
			Instance struct {
				JobID   string `json:"job_id"`
				Attempt int    `json:"attempt"`
			} `json:"instance"`
			Workload struct {
				Creds string `json:"agent_credentials"`
			} `json:"workload"`
		}
		if json.Unmarshal(data, &rec) == nil && rec.Instance.JobID == jobID && rec.Instance.Attempt == attempt && rec.Workload.Creds != "" {
			return rec.Workload.Creds
		}
	}
	t.Fatalf("no launch of %s attempt %d carries a credential", jobID, attempt)
	return ""
}

// TestLaunchedAgentCredentialIsItsAttemptsAndEndsWithIt: the credential a
// launch carries connects to the server's NATS, may publish the attempt's
// own reports and nothing of another job or attempt, is renewed while the
// attempt lives, and stops working when the attempt ends (cancel). The
// simulated cloud runs the jobs' agents as processes of their own (this
// test binary stands in, see TestMain): an agent it runs inside the
// server reports over the server's connection and gets no credential.
func TestLaunchedAgentCredentialIsItsAttemptsAndEndsWithIt(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.Sim.Speed = 60
	cfg.Sim.RunCommands, cfg.Sim.Agent = []string{"torchrun"}, "subprocess"
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx := context.Background()
	a, _, err := c.Submit(ctx, example(t, "llm-pretrain.yaml"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := c.Submit(ctx, example(t, "llm-pretrain.yaml"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, a.ID, job.Running, 30*time.Second)
	waitState(t, c, b.ID, job.Running, 30*time.Second)
	creds := launchedCreds(t, s, a.ID, 1)
	path := filepath.Join(t.TempDir(), "nats.creds")
	if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	closed := make(chan struct{})
	nc, err := nats.Connect(s.NATSURL(), nats.UserCredentials(path), nats.NoReconnect(),
		nats.CustomInboxPrefix(events.AgentInbox(a.ID, 1)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatalf("the launched credential does not connect: %v", err)
	}
	defer nc.Close()
	refused := func(subject string) bool {
		_ = nc.Publish(subject, []byte("{}"))
		_ = nc.Flush()
		select {
		case err := <-errs:
			return strings.Contains(err.Error(), "Permissions Violation")
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
	for subject, want := range map[string]bool{
		events.AgentSubject(a.ID, 1):  false,
		events.AgentSubject(a.ID, 2):  true,
		events.AgentSubject(b.ID, 1):  true,
		events.JobEventsSubject(b.ID): true,
	} {
		if got := refused(subject); got != want {
			t.Errorf("publish on %s: refused %v, want %v", subject, got, want)
		}
	}
	// Renewal while the attempt lives; none for another attempt.
	msg, err := nc.Request(events.CredentialsSubject(a.ID, 1), nil, 5*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), `"jwt"`) {
		t.Fatalf("renewal of a live attempt: %v %s", err, msg.Data)
	}
	if _, err := c.Cancel(ctx, a.ID, "done with it"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the ended attempt's agent is still connected")
	}
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if nc2, err := nats.Connect(s.NATSURL(), nats.UserCredentials(path), nats.NoReconnect()); err == nil {
			nc2.Close()
			return errors.New("the ended attempt's credential connected again")
		}
		return nil
	})
	// Job b's agent still works.
	bpath := filepath.Join(t.TempDir(), "b.creds")
	_ = os.WriteFile(bpath, []byte(launchedCreds(t, s, b.ID, 1)), 0o600)
	testutil.CheckFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		nb, err := nats.Connect(s.NATSURL(), nats.UserCredentials(bpath), nats.NoReconnect())
		if err != nil {
			return fmt.Errorf("another job's agent is refused: %w", err)
		}
		nb.Close()
		return nil
	})
	if nc3, err := nats.Connect(s.NATSURL(), nats.NoReconnect()); err == nil {
		nc3.Close()
		t.Fatal("an anonymous connection was accepted")
	}
}
