package events_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// The tests here run the bus against an external nats-server, started in
// this process but reached over TCP as a real deployment would reach it.

// startNATS starts a JetStream server on a free port with the given
// security settings; storeDir keeps its store (a restart reuses it).
func startNATS(t *testing.T, storeDir string, port int, secure func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir,
		NoLog: true, NoSigs: true, JetStreamMaxMemory: 64 << 20}
	if secure != nil {
		secure(o)
	}
	ns, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		ns.Shutdown()
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// openBus opens a bus on cfg, closing it when the test ends.
func openBus(t *testing.T, cfg events.Config, log *zap.Logger) (*events.Bus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := events.Open(ctx, cfg, "auth-test", nil, log)
	if err == nil {
		t.Cleanup(b.Close)
	}
	return b, err
}

// checkUsable checks that an opened bus is good for work: every stream and
// bucket is there and a job record round-trips.
func checkUsable(t *testing.T, b *events.Bus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{events.StreamJobs, events.StreamPrices, events.StreamInstances,
		events.StreamInterruptions, events.StreamAgent, events.StreamAlerts} {
		if _, err := js.Stream(ctx, s); err != nil {
			t.Errorf("stream %s: %v", s, err)
		}
	}
	for _, k := range []string{events.BucketJobs, events.BucketMeta, events.BucketSim} {
		if _, err := js.KeyValue(ctx, k); err != nil {
			t.Errorf("bucket %s: %v", k, err)
		}
	}
	p := 100
	now := time.Now()
	r := &job.Record{ID: job.NewID(now), Spec: job.Spec{APIVersion: job.APIVersion, Name: "auth", Team: "a", Priority: &p},
		Status: job.Status{State: job.Queued, SubmittedAt: now, UpdatedAt: now}}
	if _, err := b.Jobs().Create(ctx, r); err != nil {
		t.Fatalf("creating a job record: %v", err)
	}
	got, _, err := b.Jobs().Get(ctx, r.ID)
	if err != nil || got.ID != r.ID || got.Status.State != job.Queued {
		t.Fatalf("reading the job record back = %+v, %v", got, err)
	}
}

// checkRefused checks that Open failed, saying why, without the secret.
func checkRefused(t *testing.T, err error, want error, secret string) {
	t.Helper()
	if err == nil {
		t.Fatal("Open succeeded, want it refused")
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("Open: %v, want %v", err, want)
	}
	if !strings.Contains(err.Error(), "connecting to NATS") {
		t.Errorf("Open: %q does not say it was connecting to NATS", err)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Errorf("Open's error %q contains the secret", err)
	}
}

func TestExternalServerAuth(t *testing.T) {
	const password, token = "s3cret-Pa55word", "t0ken-9f8e7d"
	seed, pub := nkeyUser(t)
	otherSeed, _ := nkeyUser(t)

	tests := []struct {
		name   string
		server func(*server.Options)
		cfg    func(url string) events.Config
		// refused is nil when Open must work; else the error it gives.
		refused error
		secret  string // must not show in the error
	}{
		{"user and password",
			func(o *server.Options) { o.Username, o.Password = "spotwise", password },
			func(url string) events.Config {
				return events.Config{URL: url, User: "spotwise", Password: password}
			}, nil, ""},
		{"wrong password",
			func(o *server.Options) { o.Username, o.Password = "spotwise", password },
			func(url string) events.Config {
				return events.Config{URL: url, User: "spotwise", Password: "not-" + password}
			}, nats.ErrAuthorization, "not-" + password},
		{"no credentials for a server that wants them",
			func(o *server.Options) { o.Username, o.Password = "spotwise", password },
			func(url string) events.Config { return events.Config{URL: url} },
			nats.ErrAuthorization, ""},
		{"token",
			func(o *server.Options) { o.Authorization = token },
			func(url string) events.Config { return events.Config{URL: url, Token: token} }, nil, ""},
		{"wrong token",
			func(o *server.Options) { o.Authorization = token },
			func(url string) events.Config { return events.Config{URL: url, Token: token + "x"} },
			nats.ErrAuthorization, token + "x"},
		{"nkey seed file",
			func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
			func(url string) events.Config { return events.Config{URL: url, NKeyFile: seed} }, nil, ""},
		{"nkey the server does not know",
			func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
			func(url string) events.Config { return events.Config{URL: url, NKeyFile: otherSeed} },
			nats.ErrAuthorization, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := startNATS(t, t.TempDir(), -1, tt.server)
			b, err := openBus(t, tt.cfg(ns.ClientURL()), nil)
			if tt.refused == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				checkUsable(t, b)
				return
			}
			checkRefused(t, err, tt.refused, tt.secret)
		})
	}
}

func TestNKeyFileMissing(t *testing.T) {
	l := listener(t)
	_, err := openBus(t, events.Config{URL: "nats://" + l.Addr().String(), NKeyFile: filepath.Join(t.TempDir(), "nope.nk")}, nil)
	if err == nil || !strings.Contains(err.Error(), "nkey file") {
		t.Fatalf("Open with a missing nkey file: %v, want an error naming the nkey file", err)
	}
	checkNotDialed(t, l)
}

// nkeyUser writes a new user's seed to a file and returns the file and the
// user's public key.
func nkeyUser(t *testing.T) (seedFile, pub string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	if pub, err = kp.PublicKey(); err != nil {
		t.Fatal(err)
	}
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return seedFile, pub
}

// A password in the URL stays out of everything spotwise prints: the
// description of the configuration, errors and every log entry, through
// connecting, publishing, a server restart and closing.
func TestCredentialsInURLStayOutOfLogs(t *testing.T) {
	const user, password = "alice", "hunter2-Zq9x"
	dir := t.TempDir()
	creds := func(o *server.Options) { o.Username, o.Password = user, password }
	ns := startNATS(t, dir, -1, creds)
	port := ns.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, password, port)
	cfg := events.Config{URL: url}

	if d := cfg.Redacted(); strings.Contains(d, password) || !strings.Contains(d, "127.0.0.1") {
		t.Errorf("Redacted() = %q, want the server without the password", d)
	}
	multi := events.Config{URL: url + ",nats://bob:" + password + "@10.0.0.2:4222"}
	if d := multi.Redacted(); strings.Contains(d, password) || !strings.Contains(d, "10.0.0.2") {
		t.Errorf("Redacted() of two URLs = %q, want both servers without the password", d)
	}

	core, logs := observer.New(zap.DebugLevel)
	b, err := openBus(t, cfg, zap.New(core))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := job.NewID(time.Now())
	rep := &events.AgentReport{JobID: id, Attempt: 1, InstanceID: "i-1", Kind: events.AgentProgress, Progress: 0.5}
	if err := b.Publish(ctx, events.AgentSubject(id, 1), rep); err != nil {
		t.Fatalf("publishing: %v", err)
	}

	// A restart of the server makes the bus log its disconnect and
	// reconnect, naming the server it reconnected to.
	ns.Shutdown()
	ns.WaitForShutdown()
	startNATS(t, dir, port, creds)
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if logs.FilterMessage("NATS reconnected").Len() == 0 {
			return errors.New("no reconnect logged")
		}
		return nil
	})
	if err := b.Publish(ctx, events.AgentSubject(id, 1), rep); err != nil {
		t.Fatalf("publishing after the restart: %v", err)
	}
	b.Close()

	// The wrong password, in the URL, is kept out of the error too.
	_, err = openBus(t, events.Config{URL: strings.Replace(url, password, "wrong-"+password, 1)}, zap.New(core))
	checkRefused(t, err, nats.ErrAuthorization, password)

	if logs.Len() == 0 {
		t.Fatal("nothing logged; the check below would prove nothing")
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message, password) {
			t.Errorf("log %q contains the password", e.Message)
		}
		for k, v := range e.ContextMap() {
			if strings.Contains(fmt.Sprint(v), password) {
				t.Errorf("log %q field %s=%v contains the password", e.Message, k, v)
			}
		}
	}
}

// A URL that does not parse is quoted back by net/url in full; the error
// must still say what is wrong, without the password.
func TestMalformedURLErrorHidesPassword(t *testing.T) {
	const password = "p%zz-secret"
	_, err := openBus(t, events.Config{URL: "nats://alice:" + password + "@127.0.0.1:4222"}, nil)
	if err == nil {
		t.Fatal("Open with a malformed URL succeeded")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("Open's error %q contains the password", err)
	}
	if !strings.Contains(err.Error(), "invalid URL escape") || !strings.Contains(err.Error(), "127.0.0.1:4222") {
		t.Errorf("Open's error %q does not say what is wrong with which server", err)
	}
}

func TestExternalServerTLS(t *testing.T) {
	pki := newPKI(t)
	serverTLS := func(verifyClients bool) func(*server.Options) {
		return func(o *server.Options) {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pki.serverCert, KeyFile: pki.serverKey,
				CaFile: pki.ca, Verify: verifyClients})
			if err != nil {
				t.Fatal(err)
			}
			o.TLSConfig, o.TLSVerify, o.TLSTimeout = tc, verifyClients, 2
		}
	}
	tests := []struct {
		name    string
		server  func(*server.Options)
		cfg     func(url string) events.Config
		wantErr string // "" when Open must work
	}{
		{"server certificate checked against our CA", serverTLS(false),
			func(url string) events.Config { return events.Config{URL: url, TLSCAFile: pki.ca} }, ""},
		{"TLS required and given", serverTLS(false),
			func(url string) events.Config { return events.Config{URL: url, TLSCAFile: pki.ca, TLSRequired: true} }, ""},
		{"without our CA the server is not trusted", serverTLS(false),
			func(url string) events.Config { return events.Config{URL: url} }, "certificate"},
		{"TLS required from a server without it", nil,
			func(url string) events.Config { return events.Config{URL: url, TLSRequired: true} }, "secure connection"},
		{"client certificate for a server that checks clients", serverTLS(true),
			func(url string) events.Config {
				return events.Config{URL: url, TLSCAFile: pki.ca, TLSCertFile: pki.clientCert, TLSKeyFile: pki.clientKey}
			}, ""},
		{"no client certificate for a server that checks clients", serverTLS(true),
			func(url string) events.Config { return events.Config{URL: url, TLSCAFile: pki.ca} }, "connecting to NATS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := startNATS(t, t.TempDir(), -1, tt.server)
			b, err := openBus(t, tt.cfg(ns.ClientURL()), nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				checkUsable(t, b)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open: %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestHalfAClientCertificateIsRefusedBeforeConnecting(t *testing.T) {
	pki := newPKI(t)
	tests := []struct {
		name      string
		cert, key string
	}{
		{"certificate without key", pki.clientCert, ""},
		{"key without certificate", "", pki.clientKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := listener(t)
			_, err := openBus(t, events.Config{URL: "nats://" + l.Addr().String(), TLSCAFile: pki.ca,
				TLSCertFile: tt.cert, TLSKeyFile: tt.key}, nil)
			if err == nil || !strings.Contains(err.Error(), "both a certificate and a key") {
				t.Fatalf("Open: %v, want it refused for want of both a certificate and a key", err)
			}
			checkNotDialed(t, l)
		})
	}
}

// listener stands in for a server, to see whether Open dialed it.
func listener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// checkNotDialed fails if anything connected to l. A dial Open made would
// be complete, and waiting to be accepted, by the time Open returned.
func checkNotDialed(t *testing.T, l net.Listener) {
	t.Helper()
	_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Millisecond))
	if c, err := l.Accept(); err == nil {
		_ = c.Close()
		t.Error("Open connected to the server before refusing the configuration")
	}
}

// pki is a throwaway certificate authority with a server certificate for
// 127.0.0.1 and a client certificate, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spotwise test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{ca: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	p.serverCert, p.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
