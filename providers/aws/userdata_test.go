package aws

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
	"github.com/spotwise/spotwise/providers/catalog"
)

// renderScript renders the user data and decodes it.
func renderScript(t *testing.T, agent AgentConfig, imds, gpu string, req providers.LaunchRequest) string {
	t.Helper()
	b64, err := userData(agent, imds, catalog.Default(), gpu, req)
	if err != nil {
		t.Fatal(err)
	}
	return decodeUserData(t, b64)
}

// agentRun reads the script as the instance i-0123456789abcdef0 would
// run it: the agent's argument vector and the workload it is given.
func agentRun(t *testing.T, script string) ([]string, providers.Workload) {
	t.Helper()
	argv, raw, err := awsfake.ParseUserData(script, "i-0123456789abcdef0")
	if err != nil {
		t.Fatalf("%v in:\n%s", err, script)
	}
	var w providers.Workload
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	return argv, w
}

func TestUserData(t *testing.T) {
	base := AgentConfig{Binary: "/usr/local/bin/spotwise", NATSURL: "nats://nats.internal:4222",
		NATSCredsFile: "/etc/spotwise/agent.creds", Checkpoints: "s3://ckpt/spotwise"}
	tests := []struct {
		name     string
		agent    AgentConfig
		imds     string
		gpu      string
		mod      func(*providers.LaunchRequest)
		wantArgs []string
		wantEnv  string
	}{
		{name: "every flag", agent: base, gpu: "V100",
			wantArgs: []string{"/usr/local/bin/spotwise", "agent", "--nats-url", "nats://nats.internal:4222",
				"--nats-creds", "/etc/spotwise/agent.creds", "--job", "j-7f3a", "--attempt", "2", "--instance", "i-0123456789abcdef0",
				"--region", "us-east-1", "--checkpoints", "s3://ckpt/spotwise", "--notices", "aws", "--work-seconds", "21600",
				"--workload", "/var/lib/spotwise/workload.json"}},
		{name: "no credentials file, the job's own store, a faster GPU", gpu: "A100-40GB",
			agent: AgentConfig{Binary: "/opt/spotwise/bin/spotwise", NATSURL: "nats://10.0.0.5:4222"},
			mod: func(r *providers.LaunchRequest) {
				r.Workload.Checkpoint.URI = "s3://team-bucket/bert"
				r.Offer.Region = "eu-west-1"
			},
			wantArgs: []string{"/opt/spotwise/bin/spotwise", "agent", "--nats-url", "nats://10.0.0.5:4222", "--job", "j-7f3a",
				"--attempt", "2", "--instance", "i-0123456789abcdef0", "--region", "eu-west-1", "--checkpoints", "s3://team-bucket/bert", "--notices", "aws",
				"--work-seconds", "8308", "--workload", "/var/lib/spotwise/workload.json"}},
		{name: "hostile values stay single arguments", gpu: "unknown-gpu",
			agent: AgentConfig{Binary: "/usr/local/bin/spot wise", NATSURL: "nats://h:4222/$(reboot)", NATSCredsFile: "/etc/it's `here`.creds"},
			mod: func(r *providers.LaunchRequest) {
				r.JobID = "j'; rm -rf / #\n$(id)"
			},
			wantArgs: []string{"/usr/local/bin/spot wise", "agent", "--nats-url", "nats://h:4222/$(reboot)",
				"--nats-creds", "/etc/it's `here`.creds", "--job", "j'; rm -rf / #\n$(id)", "--attempt", "2",
				"--instance", "i-0123456789abcdef0", "--region", "us-east-1", "--notices", "aws", "--workload", "/var/lib/spotwise/workload.json"}},
		{name: "a metadata endpoint elsewhere is passed on", agent: base, imds: "http://127.0.0.1:1338/", gpu: "V100",
			wantEnv: "export AWS_EC2_METADATA_SERVICE_ENDPOINT='http://127.0.0.1:1338'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := launchReq(providers.Offer{Region: "us-east-1"}, "j-7f3a-a2", 1)
			req.Workload.Env = map[string]string{"QUOTE": `it's "$HOME"`}
			if tt.mod != nil {
				tt.mod(&req)
			}
			script := renderScript(t, tt.agent, tt.imds, tt.gpu, req)
			if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
				t.Fatalf("bash -n: %v: %s\n%s", err, out, script)
			}
			if !strings.HasPrefix(script, "#!/bin/bash\n") || !strings.Contains(script, "X-aws-ec2-metadata-token") {
				t.Errorf("script does not start the IMDSv2 way:\n%s", script)
			}
			argv, w := agentRun(t, script)
			if tt.wantArgs != nil && !reflect.DeepEqual(argv, tt.wantArgs) {
				t.Errorf("agent arguments\n got %q\nwant %q", argv, tt.wantArgs)
			}
			if tt.wantEnv != "" && !strings.Contains(script, tt.wantEnv) {
				t.Errorf("script lacks %q", tt.wantEnv)
			}
			if !reflect.DeepEqual(w, req.Workload) {
				t.Errorf("workload round trip: got %+v, want %+v", w, req.Workload)
			}
			for _, secret := range []string{"AWS_SECRET", "password", "BEGIN NKEY"} {
				if strings.Contains(script, secret) {
					t.Errorf("user data contains %q", secret)
				}
			}
		})
	}
}

func TestUserDataRefusesALaunchWithoutARegion(t *testing.T) {
	if _, err := userData(AgentConfig{Binary: "/b", NATSURL: "nats://h:4222"}, "", catalog.Default(), "V100",
		launchReq(providers.Offer{}, "k", 1)); err == nil {
		t.Error("user data without a region")
	}
}

func TestUserDataTooLarge(t *testing.T) {
	req := launchReq(providers.Offer{Region: "us-east-1"}, "k", 1)
	req.Workload.Env = map[string]string{"BLOB": strings.Repeat("x", maxUserData)}
	if _, err := userData(AgentConfig{Binary: "/b", NATSURL: "nats://h:4222"}, "", catalog.Default(), "V100", req); err == nil ||
		!strings.Contains(err.Error(), "16384") {
		t.Errorf("got %v", err)
	}
}
