package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
)

// apiValidator checks requests and responses against the OpenAPI
// document.
func apiValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return v
}

// readiness asks GET /readyz without a token.
func readiness(c apiCall) (int, Readiness) {
	c.t.Helper()
	code, b := c.do(http.MethodGet, "/readyz", "", nil)
	var rd Readiness
	if err := json.Unmarshal(b, &rd); err != nil {
		c.t.Fatalf("/readyz answered %d %q: %v", code, b, err)
	}
	return code, rd
}

func checkNames(rd Readiness) []string {
	var names []string
	for _, c := range rd.Checks {
		names = append(names, c.Name)
	}
	return names
}

// Two servers on one NATS cluster: both live and ready, one as leader and
// one as standby, with every check passing; metrics say which leads. When
// NATS goes away, both stay live (nothing to restart) but are not ready,
// and say it is NATS.
func TestLivenessAndReadiness(t *testing.T) {
	natsDir := t.TempDir()
	ns, err := events.StartEmbedded(events.EmbeddedOptions{DataDir: natsDir, Listen: "127.0.0.1:-1"}, eventstest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			ns.Shutdown()
		}
	})
	mk := func(name string) Config {
		cfg := testConfig(t.TempDir())
		cfg.NATS.URL, cfg.NodeName, cfg.Sim.Speed = ns.ClientURL(), name, 600
		cfg.NATS.IdentityDir = events.IdentityDir(natsDir)
		return cfg
	}
	a := startServer(t, mk("a"))
	b := startServer(t, mk("b"))
	v := apiValidator(t)
	wantChecks := []string{"nats", "scheduler", "job store"}
	for _, st := range readyStreams {
		wantChecks = append(wantChecks, "stream "+st)
	}
	servers := []struct {
		name   string
		s      *Server
		role   string
		leader string
	}{
		{"a", a, RoleLeader, "1"},
		{"b", b, RoleStandby, "0"},
	}
	for _, tt := range servers {
		t.Run("ready "+tt.name, func(t *testing.T) {
			c := apiCall{t: t, s: tt.s, v: v}
			for _, path := range []string{"/livez", "/healthz"} {
				if body := c.want(http.StatusOK, http.MethodGet, path, "", nil); !strings.Contains(string(body), `"ok"`) {
					t.Errorf("%s: %s", path, body)
				}
			}
			code, rd := readiness(c)
			if code != http.StatusOK || !rd.Ready() || rd.Role != tt.role {
				t.Fatalf("/readyz: %d %+v, want 200, ready, %s", code, rd, tt.role)
			}
			if got := checkNames(rd); !slices.Equal(got, wantChecks) {
				t.Errorf("checks %v, want %v", got, wantChecks)
			}
			m := scrape(t, tt.s)
			if m["spotwise_scheduler_leader"] != tt.leader || m["spotwise_ready"] != "1" {
				t.Errorf("/metrics: leader %q, ready %q; want %s and 1", m["spotwise_scheduler_leader"], m["spotwise_ready"], tt.leader)
			}
		})
	}

	ns.Shutdown()
	stopped = true
	for _, tt := range servers {
		t.Run("NATS gone "+tt.name, func(t *testing.T) {
			c := apiCall{t: t, s: tt.s, v: v}
			c.want(http.StatusOK, http.MethodGet, "/livez", "", nil)
			var rd Readiness
			testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
				var code int
				if code, rd = readiness(c); code != http.StatusServiceUnavailable || rd.Ready() {
					return fmt.Errorf("/readyz: %d %+v, want 503", code, rd)
				}
				// The client learns of the loss when it reads the
				// connection's end, which a busy machine may delay.
				if rd.Checks[0].Name != "nats" || rd.Checks[0].OK || !strings.Contains(rd.Checks[0].Error, "NATS connection is") {
					return fmt.Errorf("nats check %+v: want it failing, saying how the connection is", rd.Checks[0])
				}
				return nil
			})
			for _, ck := range rd.Checks[2:] {
				if ck.OK || ck.Error == "" {
					t.Errorf("check %+v passed with NATS gone", ck)
				}
			}
		})
	}
}

// scrape reads s's /metrics (with its operator token): series -> value,
// as written ("name{labels}").
func scrape(t *testing.T, s *Server) map[string]string {
	t.Helper()
	body := scrapeText(t, s)
	out := map[string]string{}
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok {
			out[k] = v
		}
	}
	return out
}

func scrapeText(t *testing.T, s *Server) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.HTTPAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatal(errors.New("/metrics: " + resp.Status + ": " + string(b)))
	}
	return string(b)
}
