package azure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
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
		JobID: "job'; rm -rf / #\n$(reboot)", Instance: "sw-job-1234abcd-n0", Region: "eastus'\nargs=(", Attempt: 3,
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
				"--attempt", "3", "--instance", b.Instance, "--region", b.Region, "--checkpoints", b.Checkpoints, "--notices", "azure",
				"--work-dir", b.WorkDir, "--work-seconds", "7200.000", "--workload", filepath.Join(b.WorkDir, "workload.json")}
			// What the fake reads from the script without running it is
			// what the script starts.
			parsed, workload, err := azurefake.ParseCustomData(string(script))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(parsed, want) || string(workload) != b.WorkloadJSON {
				t.Errorf("ParseCustomData:\n got %q %s\nwant %q %s", parsed, workload, want, b.WorkloadJSON)
			}
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

// argAfter is the value of a flag in argv, or "".
func argAfter(argv []string, flag string) string {
	if i := slices.Index(argv, flag); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
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
		argv, workload, err := azurefake.ParseCustomData(string(script))
		if !wantAgent {
			if !errors.Is(err, azurefake.ErrNoAgent) {
				t.Errorf("node %d: %v, want no agent\n%s", node, err, script)
			}
			continue
		}
		if err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
		want := []string{"agent", "--nats-url", "nats://10.0.0.4:4222", "--nats-creds", "/etc/spotwise/agent.creds",
			"--job", "job-7f3a", "--attempt", "2", "--instance", vmName(req.IdempotencyKey, 0), "--region", "eastus",
			"--checkpoints", "azblob://spotwiseckpt/checkpoints", "--notices", "azure", "--work-dir", DefaultAgentWorkDir,
			"--work-seconds", argAfter(argv, "--work-seconds"), "--workload", DefaultAgentWorkDir + "/workload.json"}
		if !slices.Equal(argv, want) {
			t.Errorf("node 0 starts\n %q\nwant %q", argv, want)
		}
		var w providers.Workload
		if err := json.Unmarshal(workload, &w); err != nil || !slices.Equal(w.Command, req.Workload.Command) {
			t.Errorf("workload %s (%v)", workload, err)
		}
	}
	// The work is sized for the offer's GPU: 6 h on a V100 is much less
	// on an A100.
	data, _ := e.p.customData(req, o, "n", 0)
	script, _ := base64.StdEncoding.DecodeString(data)
	argv, _, err := azurefake.ParseCustomData(string(script))
	if secs := argAfter(argv, "--work-seconds"); err != nil || secs == "" || secs == "21600.000" {
		t.Errorf("work seconds %q not sized for the GPU (%v)", secs, err)
	}

	// A workload too big for custom data is refused before Azure sees it.
	req.Workload.Env = map[string]string{"BLOB": strings.Repeat("x", maxCustomData)}
	if _, err := e.p.Launch(t.Context(), req); err == nil || !strings.Contains(err.Error(), "custom data") {
		t.Fatalf("oversized custom data: %v", err)
	}
}
