package azure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/providers"
)

func TestShellQuote(t *testing.T) {
	tests := map[string]string{
		"plain":      "'plain'",
		"it's":       `'it'\''s'`,
		"$(rm -rf)":  "'$(rm -rf)'",
		"a\nb":       "'a\nb'",
		"":           "''",
		`"\` + "`x`": `'"\` + "`x`'",
	}
	for in, want := range tests {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestCustomDataRuns renders the script and runs it with bash, with
// systemd-run (or, without systemd, the agent itself) replaced by a
// program that records its arguments: every value arrives intact, however
// hostile.
func TestCustomDataRuns(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	hostile := bootstrap{
		Binary: "/opt/spot wise/bin/spotwise", NATSURL: "nats://10.0.0.4:4222", NATSCreds: "/etc/spotwise/it's.creds",
		JobID: "job'; rm -rf / #\n$(reboot)", Instance: "sw-job-1234abcd-n0", Attempt: 3,
		Checkpoints: "azblob://acct/ckpt path", WorkSeconds: "7200.000",
	}
	w, _ := json.Marshal(providers.Workload{Command: []string{"sh", "-c", "echo '$HOME' \"`id`\""}, Env: map[string]string{"Q": "it's \\ \"x\""}})
	hostile.WorkloadJSON = string(w)
	for _, systemd := range []bool{true, false} {
		name := map[bool]string{true: "systemd", false: "no systemd"}[systemd]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, tool := range []string{"mkdir", "nohup", "mv"} {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Skipf("no %s", tool)
				}
				if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
			record := "#!" + bash + "\nprintf '%s\\0' \"$@\" > \"$ARGS_FILE.tmp\" && mv \"$ARGS_FILE.tmp\" \"$ARGS_FILE\"\n"
			b := hostile
			b.WorkDir = filepath.Join(dir, "work dir")
			if systemd {
				writeExec(t, filepath.Join(bin, "systemd-run"), record)
			} else {
				b.Binary = filepath.Join(dir, "spot wise")
				writeExec(t, b.Binary, record)
			}
			script, err := renderScript(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(script, []byte("#!/bin/bash\n")) {
				t.Fatalf("script does not start with a shebang:\n%s", script)
			}
			sp := filepath.Join(dir, "custom-data.sh")
			if err := os.WriteFile(sp, script, 0o600); err != nil {
				t.Fatal(err)
			}
			argsFile := filepath.Join(dir, "args")
			cmd := exec.Command(bash, sp)
			cmd.Env = []string{"PATH=" + bin, "ARGS_FILE=" + argsFile}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("script failed: %v\n%s\n%s", err, out, script)
			}
			var raw []byte
			waitFor(t, func() error {
				var err error
				raw, err = os.ReadFile(argsFile)
				return err
			})
			got := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
			want := []string{"agent", "--nats-url", b.NATSURL, "--nats-creds", b.NATSCreds, "--job", b.JobID,
				"--attempt", "3", "--instance", b.Instance, "--checkpoints", b.Checkpoints, "--notices", "azure",
				"--work-dir", b.WorkDir, "--work-seconds", "7200.000", "--workload", filepath.Join(b.WorkDir, "workload.json")}
			if systemd {
				want = append([]string{"--unit=spotwise-agent", "--collect", "--quiet", "--", b.Binary}, want...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("arguments:\n got %q\nwant %q", got, want)
			}
			wl, err := os.ReadFile(filepath.Join(b.WorkDir, "workload.json"))
			if err != nil {
				t.Fatal(err)
			}
			if string(wl) != b.WorkloadJSON+"\n" {
				t.Fatalf("workload file %q, want %q", wl, b.WorkloadJSON)
			}
		})
	}
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCustomDataPerNode(t *testing.T) {
	e := newEnv(t)
	o := e.offer(t, "azure/eastus/eastus-1/Standard_ND96asr_v4/on-demand")
	req := launchReq(o, "job-7f3a-a2", 2)
	for node, wantAgent := range []bool{true, false} {
		data, err := e.p.customData(req, o, vmName(req.IdempotencyKey, node), node)
		if err != nil {
			t.Fatal(err)
		}
		script, _ := base64.StdEncoding.DecodeString(data)
		if hasAgent := strings.Contains(string(script), "args=(agent"); hasAgent != wantAgent {
			t.Errorf("node %d runs the agent: %v\n%s", node, hasAgent, script)
		}
	}
	// The work is sized for the offer's GPU: 6 h on a V100 is much less
	// on an A100.
	data, _ := e.p.customData(req, o, "n", 0)
	script, _ := base64.StdEncoding.DecodeString(data)
	if !strings.Contains(string(script), "--work-seconds '") || strings.Contains(string(script), "--work-seconds '21600.000'") {
		t.Errorf("work seconds not sized for the GPU:\n%s", script)
	}

	// A workload too big for custom data is refused before Azure sees it.
	req.Workload.Env = map[string]string{"BLOB": strings.Repeat("x", maxCustomData)}
	if _, err := e.p.Launch(t.Context(), req); err == nil || !strings.Contains(err.Error(), "custom data") {
		t.Fatalf("oversized custom data: %v", err)
	}
}
