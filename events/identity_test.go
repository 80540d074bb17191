package events_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// agentConn connects to url as an attempt's agent, with the creds the
// identity issues for it, and collects the permission errors the server
// sends back.
type agentConn struct {
	nc     *nats.Conn
	errs   chan error
	closed chan struct{}
}

func connectAgent(t *testing.T, url string, id *events.Identity, jobID string, attempt int) (*agentConn, error) {
	t.Helper()
	creds, err := id.AgentCreds(jobID, attempt, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agent.creds")
	if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &agentConn{errs: make(chan error, 16), closed: make(chan struct{})}
	nc, err := nats.Connect(url, nats.UserCredentials(path), nats.CustomInboxPrefix(events.AgentInbox(jobID, attempt)),
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { a.errs <- err }),
		nats.ClosedHandler(func(*nats.Conn) { close(a.closed) }))
	if err != nil {
		return nil, err
	}
	a.nc = nc
	t.Cleanup(nc.Close)
	return a, nil
}

// refused publishes on subject and reports whether the server refused it
// (a permissions violation comes back asynchronously; a flush orders it).
func (a *agentConn) refused(t *testing.T, subject string) bool {
	t.Helper()
	if err := a.nc.Publish(subject, []byte("x")); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
	if err := a.nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
	select {
	case err := <-a.errs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(err.Error(), "Permissions Violation") {
			t.Fatalf("publish %s: unexpected error %v", subject, err)
		}
		return true
	case <-time.After(300 * time.Millisecond):
		return false
	}
}

// TestAgentCredentialIsLimitedToItsAttempt: an agent's NATS user may
// publish its own reports (they land in the agent stream) and renewal
// requests, and nothing of another job or attempt, nor anything else; it
// may not read another attempt's control requests.
func TestAgentCredentialIsLimitedToItsAttempt(t *testing.T) {
	bus := eventstest.OpenBus(t, t.TempDir(), "127.0.0.1:-1", nil)
	id := bus.Identity()
	if id == nil {
		t.Fatal("the embedded server has no identity")
	}
	a, err := connectAgent(t, bus.ClientURL(), id, "j-AAAA", 2)
	if err != nil {
		t.Fatalf("agent connect: %v", err)
	}
	for _, tt := range []struct {
		subject string
		refused bool
	}{
		{events.AgentSubject("j-AAAA", 2), false},
		{events.CredentialsSubject("j-AAAA", 2), false},
		{events.AgentInterruptionsSubject("aws", "us-east-1", "j-AAAA", 2), false},
		{events.AgentSubject("j-AAAA", 1), true},
		{events.AgentSubject("j-AAAA", 3), true},
		{events.AgentSubject("j-BBBB", 2), true},
		{events.InterruptionsSubject("aws", "us-east-1"), true},
		{events.AgentInterruptionsSubject("aws", "us-east-1", "j-BBBB", 2), true},
		{events.JobEventsSubject("j-AAAA"), true},
		{events.SubjectJobSubmitted, true},
		{events.SubjectCancel, true},
		{events.AgentControlSubject("j-AAAA", 2), true},
		{"$KV.spotwise_jobs.j-AAAA", true},
		{"$JS.API.STREAM.LIST", true},
	} {
		if got := a.refused(t, tt.subject); got != tt.refused {
			t.Errorf("publish on %s: refused %v, want %v", tt.subject, got, tt.refused)
		}
	}
	// Reading: its own control subject, not another attempt's.
	if _, err := a.nc.SubscribeSync(events.AgentControlSubject("j-AAAA", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.nc.SubscribeSync(events.AgentControlSubject("j-AAAA", 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.nc.SubscribeSync("_INBOX.>"); err != nil {
		t.Fatal(err)
	}
	_ = a.nc.Flush()
	denied := 0
	deadline := time.After(2 * time.Second)
	for denied < 2 {
		select {
		case err := <-a.errs:
			if !strings.Contains(err.Error(), "Permissions Violation for Subscription") {
				t.Fatalf("unexpected %v", err)
			}
			denied++
		case <-deadline:
			t.Fatalf("%d of 2 foreign subscriptions refused", denied)
		}
	}
	// The report it may publish is stored, through the bus's own reading.
	js, _ := a.nc.JetStream()
	if _, err := js.Publish(events.AgentSubject("j-AAAA", 2), []byte("{}")); err != nil {
		t.Fatalf("the agent's JetStream publish of its own report: %v", err)
	}
}

// TestAgentCredentialStopsWhenItsAttemptEnds: revoking the attempt closes
// the agent's connection at once and a new connection is refused; another
// attempt's agent is untouched. The revocation survives a restart.
func TestAgentCredentialStopsWhenItsAttemptEnds(t *testing.T) {
	dir := t.TempDir()
	bus := eventstest.OpenBus(t, dir, "127.0.0.1:-1", nil)
	id := bus.Identity()
	ended, err := connectAgent(t, bus.ClientURL(), id, "j-AAAA", 1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := connectAgent(t, bus.ClientURL(), id, "j-AAAA", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.RevokeAgent(ctx, "j-AAAA", 1); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	select {
	case <-ended.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the ended attempt's agent is still connected")
	}
	if other.nc.IsClosed() || other.refused(t, events.AgentSubject("j-AAAA", 2)) {
		t.Fatal("another attempt's agent lost its connection")
	}
	// The server closes the connection a moment before it refuses new
	// ones (milliseconds).
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if _, err := connectAgent(t, bus.ClientURL(), id, "j-AAAA", 1); err == nil {
			return errors.New("a revoked agent connected again")
		}
		return nil
	})
	// A credential issued again for the ended attempt later (a replayed
	// launch) is refused as well.
	late, err := id.AgentCreds("j-AAAA", 1, time.Now().Add(events.AgentCredentialTTL/2))
	if err != nil {
		t.Fatal(err)
	}
	lpath := filepath.Join(t.TempDir(), "late.creds")
	_ = os.WriteFile(lpath, []byte(late), 0o600)
	if nc, err := nats.Connect(bus.ClientURL(), nats.UserCredentials(lpath), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a credential issued after the attempt ended was accepted")
	}
	url := bus.ClientURL()
	bus.Close()
	bus2 := eventstest.OpenBus(t, dir, strings.TrimPrefix(url, "nats://"), nil)
	if _, err := connectAgent(t, bus2.ClientURL(), bus2.Identity(), "j-AAAA", 1); err == nil {
		t.Fatal("after a restart, a revoked agent connected again")
	}
	if _, err := connectAgent(t, bus2.ClientURL(), bus2.Identity(), "j-AAAA", 2); err != nil {
		t.Fatalf("after a restart, a live attempt's agent is refused: %v", err)
	}
}

// TestNATSRefusesAnonymousAndForeignUsers: no credential, a user of an
// account the operator did not sign, or an expired agent credential is
// refused; the watcher reads events but not buckets or job requests.
func TestNATSRefusesAnonymousAndForeignUsers(t *testing.T) {
	dir := t.TempDir()
	bus := eventstest.OpenBus(t, dir, "127.0.0.1:-1", nil)
	url := bus.ClientURL()
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an anonymous connection was accepted")
	}
	foreign, err := events.LoadOrCreateIdentity(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connectAgent(t, url, foreign, "j-AAAA", 1); err == nil {
		t.Fatal("a user of another operator was accepted")
	}
	expired, err := bus.Identity().AgentCreds("j-AAAA", 1, time.Now().Add(-2*events.AgentCredentialTTL))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "expired.creds")
	_ = os.WriteFile(path, []byte(expired), 0o600)
	if nc, err := nats.Connect(url, nats.UserCredentials(path), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an expired agent credential was accepted")
	}

	// The watcher: events yes, buckets, submissions and requests no.
	wpath := filepath.Join(events.IdentityDir(dir), events.WatcherCreds)
	if fi, err := os.Stat(wpath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("watcher creds: %v %v", fi, err)
	}
	errs := make(chan error, 16)
	w, err := nats.Connect(url, nats.UserCredentials(wpath), nats.CustomInboxPrefix(events.WatcherInbox),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatalf("watcher connect: %v", err)
	}
	defer w.Close()
	sub, err := w.SubscribeSync(events.AlertsSubject("warning"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{events.SubjectJobSubmitted, events.SubjectSubmit, "$KV.spotwise_jobs.>", "_INBOX.>"} {
		if _, err := w.SubscribeSync(s); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Flush()
	for i := 0; i < 4; i++ {
		select {
		case err := <-errs:
			if !strings.Contains(err.Error(), "Permissions Violation for Subscription") {
				t.Fatalf("unexpected %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("only %d of 4 forbidden subscriptions refused", i)
		}
	}
	if err := w.Publish(events.SubjectCancel, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation for Publish") {
			t.Fatalf("unexpected %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the watcher published a cancel request")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.Publish(ctx, events.AlertsSubject("warning"), &events.Alert{Severity: "warning", Kind: "test", Summary: "seen by the watcher"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the watcher did not see an alert: %v", err)
	}
}

// TestIdentityFilesAreSecretAndStable: the identity and creds files are
// 0600, and a reload gives the same keys and users.
func TestIdentityFilesAreSecretAndStable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	a, err := events.LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{events.IdentityFile, events.ServiceCreds, events.WatcherCreds, events.SystemCreds} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, fi, err)
		}
	}
	b, err := events.LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.AccountKey() != b.AccountKey() || a.AgentUser("j-X", 3) != b.AgentUser("j-X", 3) {
		t.Fatal("a reloaded identity has other keys")
	}
	if a.AgentUser("j-X", 3) == a.AgentUser("j-X", 4) {
		t.Fatal("two attempts share a user")
	}
	tok, err := a.AgentJWT("j-X", 3, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil || uc.IssuerAccount != a.AccountKey() || uc.Expires == 0 {
		t.Fatalf("agent claims: %+v %v", uc, err)
	}
	if err := os.WriteFile(filepath.Join(dir, events.IdentityFile), []byte("{garbled"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := events.LoadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), "garbled") {
		t.Fatalf("garbled identity: %v", err)
	}
}

// TestAgentCredentialIsRenewedWhileItsAttemptLives: an agent whose
// credential lasts three seconds keeps its connection (renewing and
// reconnecting) past the first expiry while its attempt lives; once the
// attempt has ended, renewal is refused and the connection ends with the
// credential.
func TestAgentCredentialIsRenewedWhileItsAttemptLives(t *testing.T) {
	bus := eventstest.OpenBus(t, t.TempDir(), "127.0.0.1:-1", nil)
	id := bus.Identity()
	id.TTL = 3 * time.Second
	jid := job.NewID(time.Now())
	var alive atomic.Bool
	alive.Store(true)
	stop, err := bus.AnswerRenewals(func(context.Context, string, int) (bool, error) { return alive.Load(), nil })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	creds, err := id.AgentCreds(jid, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	own, ok, err := events.ParseAgentCredential([]byte(creds))
	if err != nil || !ok || own.JobID != jid || own.Attempt != 1 {
		t.Fatalf("parse: %+v %v %v", own, ok, err)
	}
	cfg := events.Config{URL: bus.ClientURL(), Agent: true}
	own.Apply(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent, err := events.Open(ctx, cfg, "agent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	go own.KeepRenewed(ctx, agent, zap.NewNop())
	report := func() error {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		return agent.Publish(pctx, events.AgentSubject(jid, 1), &events.AgentReport{JobID: jid, Attempt: 1, Kind: events.AgentHeartbeat})
	}
	deadline := time.Now().Add(5 * time.Second) // past the first credential's expiry
	for time.Now().Before(deadline) {
		testutil.CheckFor(t, 3*time.Second, 50*time.Millisecond, report) // a reconnect may be under way
		time.Sleep(250 * time.Millisecond)
	}
	alive.Store(false)
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if report() == nil {
			return errors.New("the agent of an ended attempt still publishes")
		}
		return nil
	})
}
