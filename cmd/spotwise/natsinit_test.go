package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
)

func natsInit(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"nats", "init"}, args...))
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("spotwise nats init %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// deploy/nats/nats-1.conf with the include `spotwise nats init` writes
// makes a nats-server in operator mode: anonymous clients and the old
// shared user are refused, the spotwise servers (from identity.json alone)
// and the watcher get in, and the include holds no secret. Run again, init
// keeps the identity and the include.
func TestNATSInitMakesTheDeployConfigsOperatorMode(t *testing.T) {
	base := t.TempDir()
	keys, etc := filepath.Join(base, "keys"), filepath.Join(base, "etc-nats")
	resolver := filepath.Join(base, "store", "jwt")
	first := natsInit(t, "--dir", keys, "--config-dir", filepath.Join(etc, "identity"), "--resolver-dir", resolver)
	for _, f := range []string{events.IdentityFile, events.ServiceCreds, events.WatcherCreds, events.SystemCreds} {
		fi, err := os.Stat(filepath.Join(keys, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", f, err, fi)
		}
	}
	include := filepath.Join(etc, "identity", events.ServerConfig)
	conf, err := os.ReadFile(include)
	if err != nil {
		t.Fatalf("operator.conf not in --config-dir: %v\n%s", err, first)
	}
	if _, err := os.Stat(filepath.Join(keys, events.ServerConfig)); !os.IsNotExist(err) {
		t.Errorf("operator.conf also written next to the keys: %v", err)
	}
	var secrets map[string]string
	if b, err := os.ReadFile(filepath.Join(keys, events.IdentityFile)); err != nil || json.Unmarshal(b, &secrets) != nil || len(secrets) < 5 {
		t.Fatalf("identity.json: %v %v", err, secrets)
	}
	for k, v := range secrets {
		if strings.Contains(string(conf), v) {
			t.Errorf("operator.conf holds the identity's %s", k)
		}
	}
	again := natsInit(t, "--dir", keys, "--config-dir", filepath.Join(etc, "identity"), "--resolver-dir", resolver)
	if !strings.Contains(again, "(kept)") {
		t.Errorf("a second init did not keep operator.conf:\n%s", again)
	}
	if conf2, _ := os.ReadFile(include); !bytes.Equal(conf, conf2) {
		t.Error("a second init rewrote operator.conf")
	}
	if first, again := firstLine(first), firstLine(again); first != again {
		t.Errorf("a second init made another identity: %q then %q", first, again)
	}

	deployed, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "nats-1.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(deployed), "password:") || strings.Contains(string(deployed), "users:") {
		t.Error("deploy/nats/nats-1.conf still hands out a user with a password")
	}
	path := filepath.Join(etc, "nats.conf")
	if err := os.WriteFile(path, deployed, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("deploy/nats/nats-1.conf with the generated include does not load: %v", err)
	}
	if len(opts.TrustedOperators) != 1 || opts.SystemAccount == "" || opts.AccountResolver == nil {
		t.Fatalf("not in operator mode: %d operators, system account %q", len(opts.TrustedOperators), opts.SystemAccount)
	}
	// One node on loopback, the rest of the file as it is.
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.Cluster, opts.Routes, opts.RoutesStr = server.ClusterOpts{}, nil, ""
	opts.StoreDir = filepath.Join(base, "store")
	opts.NoSigs, opts.NoLog = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()

	for name, o := range map[string]nats.Option{"anonymous": nil, "the old shared user": nats.UserInfo("spotwise", "replaceme")} {
		var os []nats.Option
		if o != nil {
			os = append(os, o)
		}
		if nc, err := nats.Connect(ns.ClientURL(), os...); err == nil {
			nc.Close()
			t.Errorf("%s was let in", name)
		}
	}
	host := filepath.Join(base, "spotwise-host")
	if err := os.MkdirAll(host, 0o700); err != nil {
		t.Fatal(err)
	}
	id, _ := os.ReadFile(filepath.Join(keys, events.IdentityFile))
	if err := os.WriteFile(filepath.Join(host, events.IdentityFile), id, 0o400); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := events.Open(ctx, events.Config{URL: ns.ClientURL(), IdentityDir: host}, "test", nil, eventstest.Logger(t))
	if err != nil {
		t.Fatalf("spotwise with the identity: %v", err)
	}
	defer b.Close()
	w, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(filepath.Join(keys, events.WatcherCreds)), nats.CustomInboxPrefix(events.WatcherInbox))
	if err != nil {
		t.Fatalf("watcher: %v", err)
	}
	defer w.Close()
	js, _ := jetstream.New(w)
	refused, cancelRefused := context.WithTimeout(ctx, 2*time.Second) // a refused request is never answered
	defer cancelRefused()
	if _, err := js.Stream(refused, events.StreamJobs); err == nil {
		t.Error("the watcher reads the job submissions' stream")
	}
	if _, err := js.Stream(ctx, events.StreamAlerts); err != nil {
		t.Errorf("the watcher cannot read alerts: %v", err)
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
