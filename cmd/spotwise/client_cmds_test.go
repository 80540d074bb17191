package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/providers/catalog"
)

// apiServer is the real API service on an embedded NATS server, over HTTP.
type apiServer struct {
	bus   *events.Bus
	svc   *api.Service
	url   string
	token string // an operator's
}

func startAPI(t *testing.T) *apiServer {
	t.Helper()
	clk := clock.NewFake(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))
	bus := eventstest.NewBus(t, clk)
	tokens, err := auth.OpenTokens(t.Context(), bus.TokenStore(), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tokens.Close)
	authn, err := auth.NewAuthenticator(tokens, nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := tokens.Create(t.Context(), auth.NewToken{Role: auth.Operator}, "test")
	if err != nil {
		t.Fatal(err)
	}
	svc := api.NewService(bus, catalog.Default(), clk, eventstest.Logger(t)).WithAuth(authn)
	ready := make(chan error, 1)
	go func() { ready <- svc.Start(t.Context()) }()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("starting the API service: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the API service's index did not become ready")
	}
	srv := httptest.NewServer(svc.Handler(nil))
	t.Cleanup(srv.Close)
	return &apiServer{bus: bus, svc: svc, url: srv.URL, token: tok}
}

// names lists the stored jobs' names, sorted.
func (a *apiServer) names(t *testing.T) []string {
	t.Helper()
	l, err := a.svc.List(auth.WithPrincipal(context.Background(), auth.System("test")), api.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range l.Jobs {
		out = append(out, j.Name)
	}
	slices.Sort(out)
	return out
}

// submitRun is what a user sees of one `spotwise submit`.
type submitRun struct {
	stdout, stderr string
	err            error
}

func (a *apiServer) submit(t *testing.T, stdin string, args ...string) submitRun {
	t.Helper()
	cmd := newSubmitCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(append([]string{"--server", a.url, "--token", a.token}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(t.Context())
	return submitRun{out.String(), errOut.String(), err}
}

func specYAML(name string, gpus int) string {
	return fmt.Sprintf("name: %s\ncommand: [python, train.py]\nresources: {gpus_per_node: %d}\nwork: 1h on V100\n", name, gpus)
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// jobID is elided from what submit prints: IDs are not reproducible.
var jobID = regexp.MustCompile(`j-[0-9a-z-]+`)

func lines(s string) []string {
	return strings.Split(strings.TrimSpace(jobID.ReplaceAllString(s, "j-ID")), "\n")
}

func TestSubmit(t *testing.T) {
	hint := "follow it with: spotwise jobs   or   spotwise job <id>"
	three := specYAML("bert", 1) + "---\n" + specYAML("gpt", 17) + "---\n" + specYAML("t5", 2)
	tests := []struct {
		name      string
		file      string // written as jobs.yaml; the command names it FILE
		args      []string
		stdin     string
		stdout    []string
		stderr    []string
		err       string // "" for success
		submitted []string
	}{
		{
			name:      "one document",
			file:      specYAML("bert", 1),
			args:      []string{"FILE"},
			stdout:    []string{"submitted j-ID (bert): queued", hint},
			submitted: []string{"bert"},
		},
		{
			name:      "one document between markers",
			file:      "---\n" + specYAML("bert", 1) + "---\n",
			args:      []string{"FILE"},
			stdout:    []string{"submitted j-ID (bert): queued", hint},
			submitted: []string{"bert"},
		},
		{
			name: "a marker inside a block scalar is not a separator",
			file: strings.Replace(specYAML("bert", 1), "command: [python, train.py]", "command:\n  - sh\n  - |\n    echo a\n    ---\n    echo b", 1),
			args: []string{"FILE"}, stdout: []string{"submitted j-ID (bert): queued", hint},
			submitted: []string{"bert"},
		},
		{
			name:      "JSON",
			file:      `{"name": "bert", "command": ["x"], "resources": {"gpus_per_node": 1}, "work": "1h on V100"}`,
			args:      []string{"FILE"},
			stdout:    []string{"submitted j-ID (bert): queued", hint},
			submitted: []string{"bert"},
		},
		{
			name:   "one document refused",
			file:   specYAML("bert", 17),
			args:   []string{"FILE"},
			err:    "resources.gpus_per_node: must be between 1 and 16",
			stdout: []string{""},
		},
		{
			name: "several documents, one refused",
			file: three,
			args: []string{"FILE"},
			stdout: []string{
				"FILE[1]: submitted j-ID (bert): queued",
				"FILE[3]: submitted j-ID (t5): queued",
				hint,
			},
			stderr:    []string{"FILE[2]: refused: resources.gpus_per_node: must be between 1 and 16"},
			err:       "1 of 3 job specs refused",
			submitted: []string{"bert", "t5"},
		},
		{
			name:      "several documents from standard input",
			stdin:     specYAML("bert", 1) + "---\n" + specYAML("t5", 1),
			args:      []string{"-"},
			stdout:    []string{"stdin[1]: submitted j-ID (bert): queued", "stdin[2]: submitted j-ID (t5): queued", hint},
			submitted: []string{"bert", "t5"},
		},
		{
			name:      "several documents as JSON",
			file:      three,
			args:      []string{"FILE", "-o", "json"},
			stderr:    []string{"FILE[2]: refused: resources.gpus_per_node: must be between 1 and 16"},
			err:       "1 of 3 job specs refused",
			submitted: []string{"bert", "t5"},
		},
		{
			name:   "a broken document submits nothing",
			file:   specYAML("bert", 1) + "---\nname: [x\n",
			args:   []string{"FILE"},
			err:    "spec is neither valid YAML nor JSON: yaml: line 6",
			stdout: []string{""},
		},
		{
			name:   "every document refused",
			file:   specYAML("a", 0) + "---\n" + specYAML("b", 1) + "deadline: 0001-01-01T00:00:00Z\n",
			args:   []string{"FILE"},
			stdout: []string{""},
			stderr: []string{
				"FILE[1]: refused: resources.gpus_per_node: must be between 1 and 16",
				"FILE[2]: refused: deadline: the zero time is not a deadline; leave deadline out for none",
			},
			err: "2 of 2 job specs refused",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startAPI(t)
			path := ""
			if tt.file != "" {
				path = writeFile(t, "jobs.yaml", tt.file)
			}
			args := slices.Clone(tt.args)
			for i, arg := range args {
				if arg == "FILE" {
					args[i] = path
				}
			}
			run := a.submit(t, tt.stdin, args...)
			stdout, stderr := run.stdout, run.stderr
			if path != "" {
				stdout = strings.ReplaceAll(stdout, path, "FILE")
				stderr = strings.ReplaceAll(stderr, path, "FILE")
			}
			switch {
			case tt.err == "" && run.err != nil:
				t.Fatalf("submit failed: %v\nstdout:\n%s\nstderr:\n%s", run.err, stdout, stderr)
			case tt.err != "" && (run.err == nil || !strings.Contains(errorText(run.err), tt.err)):
				t.Fatalf("error = %v, want one saying %q", run.err, tt.err)
			}
			if tt.stdout != nil && !slices.Equal(lines(stdout), tt.stdout) {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, strings.Join(tt.stdout, "\n"))
			}
			if got := lines(stderr); (tt.stderr != nil || stderr != "") && !slices.Equal(got, tt.stderr) {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(tt.stderr, "\n"))
			}
			if got := a.names(t); !slices.Equal(got, tt.submitted) {
				t.Errorf("stored jobs %q, want %q", got, tt.submitted)
			}
			if slices.Contains(tt.args, "json") {
				checkJSONViews(t, run.stdout, tt.submitted)
			}
		})
	}
}

// errorText is the error as main prints it, field problems included.
func errorText(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return err.Error()
}

// checkJSONViews reads submit -o json's output: one job view per job.
func checkJSONViews(t *testing.T, out string, names []string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var got []string
	for {
		var v api.JobView
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("output is not a stream of job views (%v):\n%s", err, out)
		}
		got = append(got, v.Name)
	}
	if !slices.Equal(got, names) {
		t.Errorf("job views name %q, want %q", got, names)
	}
}

func TestSubmitSeveralFiles(t *testing.T) {
	a := startAPI(t)
	good, bad := writeFile(t, "good.yaml", specYAML("bert", 1)), writeFile(t, "bad.yaml", specYAML("gpt", 0))
	many := writeFile(t, "many.yaml", specYAML("t5", 1)+"---\n"+specYAML("vit", 1))
	run := a.submit(t, "", bad, good, many)
	if run.err == nil || run.err.Error() != "1 of 4 job specs refused" {
		t.Errorf("error = %v, want 1 of 4 job specs refused", run.err)
	}
	want := []string{"submitted j-ID (bert): queued", many + "[1]: submitted j-ID (t5): queued", many + "[2]: submitted j-ID (vit): queued",
		"follow it with: spotwise jobs   or   spotwise job <id>"}
	if got := lines(run.stdout); !slices.Equal(got, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", run.stdout, strings.Join(want, "\n"))
	}
	if want := bad + ": refused: resources.gpus_per_node: must be between 1 and 16\n"; run.stderr != want {
		t.Errorf("stderr = %q, want %q", run.stderr, want)
	}
	if got := a.names(t); !slices.Equal(got, []string{"bert", "t5", "vit"}) {
		t.Errorf("stored jobs %q", got)
	}
}

func TestSubmitWaitsForEveryDocument(t *testing.T) {
	a := startAPI(t)
	path := writeFile(t, "jobs.yaml", specYAML("bert", 1)+"---\n"+specYAML("t5", 1))
	finished := make(chan submitRun, 1)
	go func() { finished <- a.submit(t, "", path, "--wait") }()
	// Both are submitted before either is waited for, so they run side
	// by side: wait for both, then end them.
	var jobs []api.Summary
	for deadline := time.Now().Add(10 * time.Second); len(jobs) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("submit --wait submitted %d of 2 documents before waiting", len(jobs))
		}
		l, err := a.svc.List(auth.WithPrincipal(context.Background(), auth.System("test")), api.Query{})
		if err != nil {
			t.Fatal(err)
		}
		jobs = l.Jobs
	}
	for _, j := range jobs {
		if _, err := a.svc.Cancel(auth.WithPrincipal(context.Background(), auth.System("test")), j.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	var run submitRun
	select {
	case run = <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("submit --wait did not return once both jobs ended")
	}
	if code := exitCode(run.err); code != exitCancelled {
		t.Fatalf("submit --wait of two cancelled jobs: exit %d (%v), want %d\n%s", code, run.err, exitCancelled, run.stderr)
	}
	for i, name := range []string{"bert", "t5"} {
		if want := fmt.Sprintf("%s[%d]: submitted j-ID (%s): cancelled", path, i+1, name); !slices.Contains(lines(run.stdout), want) {
			t.Errorf("stdout:\n%s\nwant a line %q", run.stdout, want)
		}
	}
	if strings.Contains(run.stdout, "follow it with") || strings.Count(run.stdout, "Cost so far") != 2 {
		t.Errorf("stdout does not show each finished job:\n%s", run.stdout)
	}
}

func TestSubmitIdempotencyKeyPerDocument(t *testing.T) {
	a := startAPI(t)
	path := writeFile(t, "jobs.yaml", "team: nlp\n"+specYAML("bert", 1)+"---\nteam: nlp\n"+specYAML("t5", 1))
	first := a.submit(t, "", path, "--idempotency-key", "nightly")
	if first.err != nil {
		t.Fatalf("submit: %v\n%s", first.err, first.stderr)
	}
	// Each document is its own job, known by its own key (nightly-1,
	// nightly-2: the IDs the server derives from them for the day).
	var ids []string
	for i, name := range []string{"bert", "t5"} {
		m := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("%s[%d]: submitted ", path, i+1)) + `(j-k\w+) \(` + name + `\): queued`).FindStringSubmatch(first.stdout)
		if m == nil {
			t.Fatalf("stdout:\n%s\nwant a line for document %d (%s) submitted as a keyed job", first.stdout, i+1, name)
		}
		ids = append(ids, m[1])
	}
	if ids[0] == ids[1] {
		t.Fatalf("both documents submitted as %s", ids[0])
	}
	again := a.submit(t, "", path, "--idempotency-key", "nightly")
	if again.err != nil || strings.Count(again.stdout, ": already submitted ") != 2 || !strings.Contains(again.stdout, ids[0]) || !strings.Contains(again.stdout, ids[1]) {
		t.Errorf("retry: %v\n%s\nwant both documents already submitted, as %v", again.err, again.stdout, ids)
	}
	if got := a.names(t); !slices.Equal(got, []string{"bert", "t5"}) {
		t.Errorf("stored jobs %q after a retry", got)
	}
}

func TestSubmitHelpDocumentsDocuments(t *testing.T) {
	cmd := newSubmitCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"each document\nis submitted as its own job", "FILE[N]", "<key>-N"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not say %q:\n%s", want, out.String())
		}
	}
}
