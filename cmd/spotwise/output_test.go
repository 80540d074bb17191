package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/job"
)

// liveServer is a whole spotwise server in this process (embedded NATS,
// simulated cloud, scheduler), at 3600x.
type liveServer struct {
	*server.Server
	url   string
	token string
}

func startLiveServer(t *testing.T) *liveServer {
	t.Helper()
	cfg := server.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS.Listen = ""
	cfg.Sim.Speed = 3600
	cfg.Scheduler.Arbitrage.Enabled = false
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := server.Start(ctx, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &liveServer{Server: s, url: "http://" + s.HTTPAddr(), token: s.OperatorToken()}
}

func (s *liveServer) client() *api.Client {
	c := api.NewClient(s.url)
	c.Token = s.token
	return c
}

// run runs the CLI (the root command, as a user would) and returns what
// it printed and its error.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// Every command that prints takes -o table|wide|json|yaml: the JSON is
// JSON, the YAML parses back to the same document, and a format it does
// not know is refused naming the choices.
func TestEveryCommandPrintsEveryFormat(t *testing.T) {
	s := startLiveServer(t)
	conn := []string{"--server", s.url, "--token", s.token}
	specFile := writeFile(t, "job.yaml", specYAML("formats", 1))
	v, _, err := s.client().Submit(t.Context(), []byte(specYAML("listed", 1)), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "z_v100_1.json")
	if err := os.WriteFile(trace, []byte(`{"metadata": {"gap_seconds": 3600}, "data": [4, 4, 3, 4, 4, 4, 4, 4], "prices": [1, 1, 1, 1, 1, 1, 1, 1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args func() []string
		key  string // a field the structured output has (at the top, or in its first element)
	}{
		{"job", func() []string { return append([]string{"job", v.ID}, conn...) }, "id"},
		{"jobs", func() []string { return append([]string{"jobs"}, conn...) }, "id"},
		{"submit", func() []string { return append([]string{"submit", specFile}, conn...) }, "id"},
		{"cancel", func() []string {
			// Queued for good (priced below every offer): one that runs
			// would end within a second or two of the server's fast clock,
			// before a slow machine got to cancel it.
			c, _, err := s.client().Submit(t.Context(), []byte(specYAML("to-cancel", 1)+"max_price_per_hour: 0.01\n"), "application/yaml", "")
			if err != nil {
				t.Fatal(err)
			}
			return append([]string{"cancel", c.ID}, conn...)
		}, "state"},
		{"token list", func() []string { return append([]string{"token", "list"}, conn...) }, "tokens"},
		{"audit", func() []string { return append([]string{"audit"}, conn...) }, "records"},
		{"status", func() []string { return append([]string{"status"}, conn...) }, "role"},
		{"instances", func() []string { return append([]string{"instances", "--all"}, conn...) }, "instances"},
		{"reservations", func() []string { return append([]string{"reservations"}, conn...) }, "reservations"},
		{"quote", func() []string { return []string{"quote", specFile, "--at", "2026-12-01T12:00:00Z"} }, "options"},
		{"quote --server", func() []string { return append([]string{"quote", specFile}, conn...) }, "decision"},
		{"simulate", func() []string {
			return []string{"simulate", "--trace", trace, "--nodes", "4", "--use-trace-prices", "--spot-price", "99", "--job-hours", "3",
				"--deadline-hours", "7", "--changeover-hours", "1", "--starts", "1", "--policy", "greedy"}
		}, "policies"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, format := range outputFormats {
				out, stderr, err := run(t, append(c.args(), "-o", format)...)
				if err != nil {
					t.Fatalf("-o %s: %v\n%s", format, err, stderr)
				}
				if strings.TrimSpace(out) == "" {
					t.Fatalf("-o %s printed nothing", format)
				}
				var doc any
				switch format {
				case "json":
					if err := json.Unmarshal([]byte(out), &doc); err != nil {
						t.Fatalf("-o json is not JSON: %v\n%.400s", err, out)
					}
				case "yaml":
					j, err := yaml.YAMLToJSON([]byte(out))
					if err != nil {
						t.Fatalf("-o yaml does not parse back: %v\n%.400s", err, out)
					}
					if err := json.Unmarshal(j, &doc); err != nil {
						t.Fatal(err)
					}
				default:
					if json.Valid([]byte(out)) || strings.Contains(out, "\x1b[") {
						t.Errorf("-o %s printed JSON or colour to a buffer:\n%.400s", format, out)
					}
					continue
				}
				if list, ok := doc.([]any); ok && len(list) > 0 {
					doc = list[0]
				}
				if m, ok := doc.(map[string]any); !ok || m[c.key] == nil {
					t.Errorf("-o %s has no %q: %.400s", format, c.key, out)
				}
			}
			_, _, err := run(t, append(c.args(), "-o", "xml")...)
			if err == nil || !strings.Contains(err.Error(), `unknown output format "xml"`) || !strings.Contains(err.Error(), "table, wide, json, yaml") {
				t.Errorf("-o xml: %v", err)
			}
		})
	}
}

// -o wide shows more than -o table.
func TestWideShowsMoreColumns(t *testing.T) {
	s := startLiveServer(t)
	conn := []string{"--server", s.url, "--token", s.token}
	if _, _, err := s.client().Submit(t.Context(), []byte(specYAML("wide", 1)), "application/yaml", ""); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"jobs"}, {"status"}} {
		table, _, err := run(t, append(append(cmd, conn...), "-o", "table")...)
		if err != nil {
			t.Fatal(err)
		}
		wide, _, err := run(t, append(append(cmd, conn...), "-o", "wide")...)
		if err != nil {
			t.Fatal(err)
		}
		if len(wide) <= len(table) {
			t.Errorf("%v: -o wide (%d bytes) shows no more than -o table (%d)", cmd, len(wide), len(table))
		}
	}
	if out, _, _ := run(t, append([]string{"jobs", "-o", "wide"}, conn...)...); !strings.Contains(out, "PRIORITY") || !strings.Contains(out, "SUBMITTED") {
		t.Errorf("jobs -o wide:\n%s", out)
	}
}

// runAsMain runs the CLI with the process's own standard output and
// error (files here), as main does: cobra sends its notices to the
// standard error only when no output writer is set.
func runAsMain(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	dir := t.TempDir()
	outF, _ := os.Create(filepath.Join(dir, "stdout"))
	errF, _ := os.Create(filepath.Join(dir, "stderr"))
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	root := newRoot()
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return string(o), string(e), err
}

// The --json of quote and simulate still works, as -o json, with a
// deprecation notice on the standard error (standard output stays JSON).
func TestJSONFlagIsADeprecatedAliasOfOutputJSON(t *testing.T) {
	spec := writeFile(t, "job.yaml", specYAML("alias", 1))
	out, stderr, err := runAsMain(t, "quote", spec, "--at", "2026-12-01T12:00:00Z", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep quoteReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Options) == 0 {
		t.Fatalf("quote --json: %v\n%.300s", err, out)
	}
	if !strings.Contains(stderr, "deprecated") || !strings.Contains(stderr, "-o json") {
		t.Errorf("no deprecation notice: %q", stderr)
	}
	// -o given beside --json wins.
	out, _, err = runAsMain(t, "quote", spec, "--at", "2026-12-01T12:00:00Z", "--json", "-o", "yaml")
	if err != nil || json.Valid([]byte(out)) || !strings.Contains(out, "options:") {
		t.Errorf("--json -o yaml printed %.200q (%v)", out, err)
	}
}

// Colour goes only to a terminal (a character device here), and never
// with NO_COLOR set; a file or a buffer gets none.
func TestColourOnlyOnATerminalWithoutNOCOLOR(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	dev, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, c := range []struct {
		name    string
		w       any
		noColor string
		want    bool
	}{
		{"character device", dev, "", true},
		{"character device, NO_COLOR", dev, "1", false},
		{"file", file, "", false},
		{"buffer", &bytes.Buffer{}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", c.noColor)
			w := c.w.(interface{ Write([]byte) (int, error) })
			if got := colorOn(w); got != c.want {
				t.Errorf("colorOn = %v, want %v", got, c.want)
			}
			if got := strings.Contains(paletteFor(w).state(job.Failed), "\x1b["); got != c.want {
				t.Errorf("a failed state painted: %v, want %v", got, c.want)
			}
		})
	}
}

// The console log of `spotwise server` is coloured only when asked to
// be: redirected to a file (or with NO_COLOR), it holds no escape codes.
func TestConsoleLogColourFollowsTheTerminal(t *testing.T) {
	for _, color := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "log")
		log, err := buildLogger(server.LogConfig{Level: "info", Format: "console"}, color, []string{path})
		if err != nil {
			t.Fatal(err)
		}
		log.Warn("something to see")
		_ = log.Sync()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, []byte("\x1b[")); got != color || !bytes.Contains(b, []byte("WARN")) {
			t.Errorf("colour %v: log %q", color, b)
		}
	}
	t.Setenv("NO_COLOR", "1")
	if colorOn(os.Stderr) {
		t.Error("NO_COLOR set, yet the log would be coloured")
	}
}

// Completion offers the server's job IDs (active ones for cancel) and
// the states; a server that does not answer completes nothing, quietly.
func TestCompletion(t *testing.T) {
	s := startLiveServer(t)
	conn := []string{"--server", s.url, "--token", s.token}
	// Priced below every offer, both jobs stay queued: one that could run
	// would finish within a second of the server's fast clock, and drop
	// out of cancel's list (or be done before the cancellation reaches
	// it) whenever the machine is slow.
	unplaceable := []byte("max_price_per_hour: 0.01\n")
	live, _, err := s.client().Submit(t.Context(), append([]byte(specYAML("live", 1)), unplaceable...), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	gone, _, err := s.client().Submit(t.Context(), append([]byte(specYAML("gone", 1)), unplaceable...), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client().Cancel(t.Context(), gone.ID, "test"); err != nil {
		t.Fatal(err)
	}
	// The listing follows the store: wait until it has the cancellation.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		jobs, err := s.client().ListAll(t.Context(), api.Query{States: []job.State{job.Cancelled}}, 200)
		if err == nil && slices.ContainsFunc(jobs, func(v api.Summary) bool { return v.ID == gone.ID }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listed as cancelled after 10 s: %v", gone.ID, err)
		}
	}
	complete := func(args ...string) []string {
		t.Helper()
		out, _, err := run(t, append([]string{cobra.ShellCompNoDescRequestCmd}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") {
				got = append(got, l)
			}
		}
		return got
	}
	has := func(list []string, s string) bool { return strings.Contains(strings.Join(list, "\n"), s) }
	if got := complete(append([]string{"job"}, append(conn, "")...)...); !has(got, live.ID) || !has(got, gone.ID) {
		t.Errorf("job <TAB>: %v, want %s and %s", got, live.ID, gone.ID)
	}
	if got := complete(append([]string{"cancel"}, append(conn, "")...)...); !has(got, live.ID) || has(got, gone.ID) {
		t.Errorf("cancel <TAB>: %v, want %s and not the cancelled %s", got, live.ID, gone.ID)
	}
	if got := complete("jobs", "--state", ""); len(got) != len(job.States) || got[0] != "queued" {
		t.Errorf("jobs --state <TAB>: %v", got)
	}
	if got := complete("jobs", "--state", "queued,ru"); !has(got, "queued,running") {
		t.Errorf("jobs --state queued,<TAB>: %v", got)
	}
	if got := complete("jobs", "-o", ""); strings.Join(got, " ") != "table wide json yaml" {
		t.Errorf("-o <TAB>: %v", got)
	}
	start := time.Now()
	if got := complete("job", "--server", "127.0.0.1:1", "--token", "x", ""); len(got) != 0 {
		t.Errorf("with no server: %v", got)
	}
	if d := time.Since(start); d > 2*completionTimeout {
		t.Errorf("completion without a server took %s", d)
	}
}
