package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/testutil"
)

// httpAs sends a request with a bearer token ("" for none) and returns
// the status.
func httpAs(t *testing.T, s *Server, token, method, path string, body any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, "http://"+s.HTTPAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func tokenFor(t *testing.T, s *Server, team string, role auth.Role) string {
	t.Helper()
	v, err := clientOf(s).CreateToken(t.Context(), api.TokenRequest{Team: team, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return v.Token
}

// The platform's own endpoints: the simulated cloud's controls for
// operators only, status, instances and metrics for platform readers.
func TestOnlyOperatorsDriveTheSimulatedCloud(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	c := clientOf(s)
	long := []byte("name: long\nteam: nlp\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1000h on T4\npurchase: spot\n")
	v, _, err := c.Submit(t.Context(), long, "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	team := v.Team
	who := map[string]string{
		"no token":          "",
		"team submitter":    tokenFor(t, s, team, auth.Submitter),
		"team admin":        tokenFor(t, s, team, auth.Admin),
		"platform viewer":   tokenFor(t, s, "", auth.Viewer),
		"operator (issued)": tokenFor(t, s, "", auth.Operator),
		"operator (file)":   s.OperatorToken(),
	}
	want := map[string]map[string]int{
		"POST /v1/sim/preempt": {"no token": 401, "team submitter": 403, "team admin": 403, "platform viewer": 403},
		"POST /v1/sim/clock":   {"no token": 401, "team submitter": 403, "team admin": 403, "platform viewer": 403},
		"GET /v1/status":       {"no token": 401, "team submitter": 403, "team admin": 403, "platform viewer": 200},
		"GET /v1/instances":    {"no token": 401, "team submitter": 403, "team admin": 403, "platform viewer": 200},
		"GET /metrics":         {"no token": 401, "team submitter": 403, "team admin": 403, "platform viewer": 200},
	}
	bodies := map[string]any{"POST /v1/sim/preempt": SimRequest{Job: v.ID}, "POST /v1/sim/clock": ClockRequest{Paused: false}}
	for route, byWho := range want {
		method, path, _ := strings.Cut(route, " ")
		for name, tok := range who {
			expect, ok := byWho[name]
			if !ok {
				expect = 200 // operators
			}
			if route == "POST /v1/sim/preempt" && expect == 200 {
				continue // preempted below, once
			}
			if got := httpAs(t, s, tok, method, path, bodies[route]); got != expect {
				t.Errorf("%s by %s: %d, want %d", route, name, got, expect)
			}
		}
	}
	waitState(t, c, v.ID, "running", 30*time.Second)
	if got := httpAs(t, s, s.OperatorToken(), http.MethodPost, "/v1/sim/preempt", SimRequest{Job: v.ID}); got != 200 {
		t.Errorf("the operator preempts: %d", got)
	}
	// Each attempt is on the audit record, refused ones too, with the
	// client's address.
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		l, err := c.ListAudit(t.Context(), "", "", "", 0)
		if err != nil {
			return err
		}
		outcomes := map[string]int{}
		for _, e := range l.Records {
			if e.Record.Action == "sim.preempt" {
				outcomes[e.Record.Outcome]++
				if !strings.Contains(e.Record.Source, "127.0.0.1:") {
					return fmt.Errorf("record from %q: want the client's address", e.Record.Source)
				}
			}
		}
		if outcomes["ok"] != 1 || outcomes["forbidden"] != 3 || outcomes["unauthenticated"] != 1 {
			return fmt.Errorf("sim.preempt outcomes %v, want 1 ok, 3 forbidden, 1 unauthenticated", outcomes)
		}
		return nil
	})
	// Over NATS, the same rule.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := json.Marshal(SimRequest{Job: v.ID})
	for name, tok := range map[string]string{"no token": "", "team admin": who["team admin"]} {
		b, err := s.Bus().RequestWithHeader(ctx, SubjectSimControl, req, map[string]string{"Authorization": "Bearer " + tok})
		if err != nil {
			t.Fatal(err)
		}
		var r SimReply
		if err := json.Unmarshal(b, &r); err != nil || r.Error == "" || len(r.Instances) != 0 {
			t.Errorf("sim control over NATS by %s: %s, want refused", name, b)
		}
	}
}

// A team's token works over NATS as over HTTP: the same rules.
func TestNATSJobAPITakesTheSameTokens(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nlp, cv := tokenFor(t, s, "nlp", auth.Submitter), tokenFor(t, s, "cv", auth.Submitter)
	ask := func(tok, subject string, body any) api.Reply {
		b, _ := json.Marshal(body)
		h := map[string]string{}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		out, err := s.Bus().RequestWithHeader(ctx, subject, b, h)
		if err != nil {
			t.Fatal(err)
		}
		var r api.Reply
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %s", subject, out)
		}
		return r
	}
	spec := string(example(t, "resnet50-spot.yaml"))
	spec = strings.Replace(spec, "team:", "# team:", 1)
	if r := ask("", events.SubjectSubmit, api.SubmitRequest{Spec: mustJSON(spec)}); r.Error == nil || r.Error.Code != api.CodeUnauthenticated {
		t.Fatalf("submit without a token: %+v", r)
	}
	r := ask(nlp, events.SubjectSubmit, api.SubmitRequest{Spec: mustJSON(spec)})
	if r.Error != nil || r.Job == nil || r.Job.Team != "nlp" {
		t.Fatalf("nlp submits: %+v", r)
	}
	id := r.Job.ID
	for _, subject := range []string{events.SubjectGet, events.SubjectCancel} {
		if r := ask(cv, subject, api.JobRequest{ID: id}); r.Error == nil || r.Error.Code != api.CodeNotFound {
			t.Errorf("cv on %s of nlp's job: %+v, want not found", subject, r)
		}
	}
	if r := ask(cv, events.SubjectList, api.ListRequest{}); r.Error != nil || len(r.List.Jobs) != 0 {
		t.Errorf("cv lists %+v", r)
	}
	if r := ask(nlp, events.SubjectGet, api.JobRequest{ID: id}); r.Error != nil || r.Job.ID != id {
		t.Errorf("nlp gets its job: %+v", r)
	}
}

// People signing in with the organisation's identity provider: the
// server takes the issuer's ID tokens as its configuration maps them, and
// no other issuer's.
func TestServerTakesOIDCTokensOfItsIssuer(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k", Algorithm: oidc.RS256}}}
	srv := httptest.NewServer(is)
	defer srv.Close()
	is.SetIssuer(srv.URL)
	cfg := testConfig(t.TempDir())
	cfg.Auth.OIDC = []auth.OIDCIssuer{{Issuer: srv.URL, ClientID: "spotwise",
		Rules: []auth.OIDCRule{{Claim: "groups", Value: "ml-nlp", Team: "nlp", Role: auth.Submitter}}}}
	s := startServer(t, cfg)
	idToken := func(iss string, groups string) string {
		return oidctest.SignIDToken(key, "k", oidc.RS256, fmt.Sprintf(`{"iss":%q,"aud":"spotwise","sub":"ana","email":"ana@example.com","groups":[%q],"exp":%d}`,
			iss, groups, time.Now().Add(time.Hour).Unix()))
	}
	c := api.NewClient(s.HTTPAddr())
	c.Token = idToken(srv.URL, "ml-nlp")
	spec := strings.Replace(string(example(t, "resnet50-spot.yaml")), "team:", "# team:", 1)
	v, _, err := c.Submit(t.Context(), []byte(spec), "application/yaml", "")
	if err != nil || v.Team != "nlp" {
		t.Fatalf("submit with an ID token: %+v %v", v, err)
	}
	got, err := clientOf(s).Get(t.Context(), v.ID)
	if err != nil || !slices.ContainsFunc(got.Events, func(e api.EventView) bool {
		return e.Kind == events.KindQueued && strings.Contains(e.Message, "by oidc:"+srv.URL+"#ana")
	}) {
		t.Errorf("history does not say who submitted: %+v %v", got, err)
	}
	for name, tok := range map[string]string{"another issuer": idToken("https://elsewhere.example", "ml-nlp"), "no rule": idToken(srv.URL, "staff")} {
		if code := httpAs(t, s, tok, http.MethodGet, "/v1/jobs", nil); code != 401 {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
}

// The operator token's file is the operator's alone to read.
func TestOperatorTokenFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testConfig(dir))
	fi, err := os.Stat(filepath.Join(dir, auth.OperatorTokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator token file: %v, mode %v", err, fi.Mode())
	}
	b, _ := os.ReadFile(filepath.Join(dir, auth.OperatorTokenFile))
	if strings.TrimSpace(string(b)) != s.OperatorToken() {
		t.Error("the file does not hold the server's operator token")
	}
}

// The API over TLS: a client that trusts the certificate gets answers,
// one that speaks plain HTTP to it does not.
func TestAPIServesTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	cfg := testConfig(dir)
	cfg.HTTPTLS = TLSFiles{CertFile: certFile, KeyFile: keyFile}
	s := startServer(t, cfg)
	c := api.NewClient("https://" + s.HTTPAddr())
	c.Token = s.OperatorToken()
	c.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if _, err := c.List(t.Context(), api.Query{}); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	plain := clientOf(s)
	if _, err := plain.List(t.Context(), api.Query{}); err == nil {
		t.Error("plain HTTP to the TLS listener was answered")
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spotwise test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
