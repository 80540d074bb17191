package azure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/template"

	"github.com/spotwise/spotwise/providers"
)

// maxCustomData is Azure's limit on custom data before base64.
const maxCustomData = 64 * 1024

// bootstrap is what the custom data script needs.
type bootstrap struct {
	Binary, NATSURL, NATSCreds string
	JobID, Instance, Region    string
	Attempt, Node              int
	Checkpoints, WorkDir       string
	WorkSeconds                string
	WorkloadJSON               string
	// AgentCreds is the attempt's own NATS credential (written to a file
	// only root reads; it replaces NATSCreds).
	AgentCreds string
}

// AgentCredsScript writes AgentCreds to the work directory.
func (b bootstrap) AgentCredsScript() string {
	return providers.CredsScript(`"$work_dir/nats.creds"`, b.AgentCreds)
}

// scriptTemplate is the VM's custom data: a bash script cloud-init runs
// once at first boot. Node 0 starts `spotwise agent` (as a transient
// systemd service where systemd runs, so cloud-init is not held up and
// the journal keeps its output); the other nodes of a multi-node job are
// its silent peers, as on the simulated cloud. Every value is shell-quoted
// with q; none is ever put in a comment. Custom data can be read by
// anything on the VM, so the only credential in it is the attempt's own
// NATS user: it can do no more than the agent it belongs to (publish this
// attempt's reports), expires within the hour unless renewed, and is
// revoked when the attempt ends.
var scriptTemplate = template.Must(template.New("custom-data").Funcs(template.FuncMap{"q": shellQuote}).Parse(`#!/bin/bash
# spotwise: starts the agent of a job attempt on this VM (Azure custom data).
set -euo pipefail
umask 077
{{- if .Node}}
echo "spotwise: node "{{q .Node}}" of the job; its agent runs on node 0"
{{- else}}
work_dir={{q .WorkDir}}
mkdir -p "$work_dir"
printf '%s\n' {{q .WorkloadJSON}} > "$work_dir/workload.json"
{{- if .AgentCreds}}
{{.AgentCredsScript}}
{{- end}}
args=(agent
  --nats-url {{q .NATSURL}}
{{- if .AgentCreds}}
  --nats-creds "$work_dir/nats.creds"
{{- else if .NATSCreds}}
  --nats-creds {{q .NATSCreds}}
{{- end}}
  --job {{q .JobID}}
  --attempt {{q .Attempt}}
  --instance {{q .Instance}}
  --region {{q .Region}}
{{- if .Checkpoints}}
  --checkpoints {{q .Checkpoints}}
{{- end}}
  --notices azure
  --work-dir "$work_dir"
  --work-seconds {{q .WorkSeconds}}
  --workload "$work_dir/workload.json")
if command -v systemd-run >/dev/null 2>&1; then
  exec systemd-run --unit=spotwise-agent --collect --quiet -- {{q .Binary}} "${args[@]}"
fi
nohup {{q .Binary}} "${args[@]}" </dev/null >>"$work_dir/agent.log" 2>&1 &
{{- end}}
`))

// shellQuote quotes a value for bash: inside single quotes nothing is
// special, and a single quote is written '\”.
func shellQuote(v any) string {
	return "'" + strings.ReplaceAll(fmt.Sprint(v), "'", `'\''`) + "'"
}

// customData renders the script for one node of a launch and encodes it as
// Azure wants it (base64).
func (p *Provider) customData(req providers.LaunchRequest, o providers.Offer, name string, node int) (string, error) {
	wl := req.Workload
	wl.AgentCredentials = "" // its own file
	w, err := json.Marshal(wl)
	if err != nil {
		return "", fmt.Errorf("encoding the workload: %w", err)
	}
	b := bootstrap{AgentCreds: req.Workload.AgentCredentials,
		Binary: p.cfg.Agent.Binary, NATSURL: p.cfg.Agent.NATSURL, NATSCreds: p.cfg.Agent.NATSCredsFile,
		JobID: req.JobID, Instance: name, Region: o.Region, Attempt: req.Attempt, Node: node,
		Checkpoints: cmpOr(req.Workload.Checkpoint.URI, p.cfg.Agent.Checkpoints), WorkDir: p.cfg.Agent.WorkDir,
		WorkSeconds:  p.workSeconds(req.Workload, o.GPU),
		WorkloadJSON: string(w),
	}
	script, err := renderScript(b)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(script), nil
}

func renderScript(b bootstrap) ([]byte, error) {
	for _, s := range []string{b.Binary, b.NATSURL, b.NATSCreds, b.JobID, b.Instance, b.Region, b.Checkpoints, b.WorkDir, b.WorkloadJSON, b.AgentCreds} {
		if strings.ContainsRune(s, 0) {
			return nil, errors.New("custom data: a value contains a NUL byte")
		}
	}
	var buf bytes.Buffer
	if err := scriptTemplate.Execute(&buf, b); err != nil {
		return nil, fmt.Errorf("custom data: %w", err)
	}
	if buf.Len() > maxCustomData {
		return nil, fmt.Errorf("custom data is %d bytes, over Azure's %d (the workload's command and env are too large)", buf.Len(), maxCustomData)
	}
	return buf.Bytes(), nil
}

// workSeconds is the whole work's expected runtime on the offer's GPU, as
// the agent's --work-seconds wants it: rounded up to the second, or the
// reference runtime when it cannot be sized (the flag is always given).
func (p *Provider) workSeconds(w providers.Workload, gpu string) string {
	s, ok := p.cat.WorkSeconds(w.ReferenceSeconds, w.ReferenceGPU, gpu, w.Class)
	if ok {
		s = math.Ceil(s)
	} else {
		s = w.ReferenceSeconds
	}
	return strconv.FormatFloat(s, 'f', 3, 64)
}
