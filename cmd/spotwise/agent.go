package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/agent"
	"github.com/spotwise/spotwise/agent/notices"
	"github.com/spotwise/spotwise/checkpoint"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/providers"
)

func newAgentCmd() *cobra.Command {
	var (
		natsURL, creds, jobID, instance, workloadFile, storeURI, workDir string
		noticesFrom, region, metadataURL                                 string
		attempt, node                                                    int
		workSeconds, speed                                               float64
		simClock                                                         bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a job's workload on this instance (started by the cloud's user data)",
		Long: `agent runs one attempt of a job beside its workload: it restores the newest
good checkpoint, starts the job's command with the SPOTWISE_* environment
(see agent/PROTOCOL.md), reports progress and heartbeats over NATS,
checkpoints when the scheduler asks or the instance's metadata warns, uploads
each completed checkpoint, and reports the exit. The workload's stdout and
stderr are shipped to the job's log stream (spotwise logs) as well as
printed.

--notices aws polls the EC2 instance metadata (IMDSv2: spot instance-action,
rebalance recommendation, scheduled events); --notices azure polls Azure
Scheduled Events (Preempt, Terminate, Reboot, Redeploy, Freeze) and approves
each once the checkpoint is stored. Every notice is also forwarded to the
scheduler (with --region) so the replacement starts at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var w providers.Workload
			if err := readWorkload(cmd.InOrStdin(), workloadFile, &w); err != nil {
				return err
			}
			log, err := newLogger(server.LogConfig{Level: "info", Format: "json"})
			if err != nil {
				return err
			}
			log = log.With(zap.String("job", jobID), zap.Int("attempt", attempt))
			src, err := noticeSource(noticesFrom, metadataURL, instance, log)
			if err != nil {
				return err
			}
			provider := noticesFrom
			if src == nil {
				provider = ""
			}
			octx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			bcfg := events.Config{URL: natsURL, CredsFile: creds, ConnName: "spotwise-agent", Agent: true, AgentSimClock: simClock}
			var own *events.AgentCredential
			if creds != "" {
				data, err := os.ReadFile(creds)
				if err != nil {
					return fmt.Errorf("NATS creds: %w", err)
				}
				var ok bool
				if own, ok, err = events.ParseAgentCredential(data); err != nil {
					return err
				} else if ok {
					if own.JobID != jobID || own.Attempt != attempt {
						return fmt.Errorf("the NATS creds are job %s attempt %d's, not job %s attempt %d's", own.JobID, own.Attempt, jobID, attempt)
					}
					own.Apply(&bcfg)
				}
			}
			bus, err := events.Open(octx, bcfg, "agent", nil, log)
			if err != nil {
				return err
			}
			defer bus.Close()
			if own != nil {
				rctx, stop := context.WithCancel(ctx)
				defer stop()
				go own.KeepRenewed(rctx, bus, log)
			}
			var clk clock.Clock = clock.Real{}
			if simClock {
				if clk, err = server.SimClockFromBus(ctx, bus); err != nil { // follows pauses until the agent ends
					return err
				}
				bus.SetClock(clk)
			}
			var store checkpoint.Store
			if storeURI != "" {
				if store, err = checkpoint.Open(octx, storeURI, checkpoint.WithClock(clk)); err != nil {
					return err
				}
			}
			exe, _ := os.Executable()
			return agent.Run(ctx, agent.Config{
				JobID: jobID, Attempt: attempt, InstanceID: instance, Workload: w,
				WorkSeconds: workSeconds, ClockSpeed: speed, WorkDir: workDir,
				Reporter: bus, Control: bus, Checkpoints: store, Clock: clk, Log: log, Executable: exe,
				Notices: src, Provider: provider, Region: region,
				Stdout: os.Stdout, Stderr: os.Stderr, Node: node,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&natsURL, "nats-url", os.Getenv("SPOTWISE_NATS_URL"), "NATS server (env SPOTWISE_NATS_URL)")
	f.StringVar(&creds, "nats-creds", os.Getenv("SPOTWISE_NATS_CREDS"), "NATS credentials file")
	f.StringVar(&jobID, "job", "", "job ID")
	f.IntVar(&attempt, "attempt", 1, "attempt number")
	f.StringVar(&instance, "instance", "", "this instance's ID")
	f.IntVar(&node, "node", 0, "this instance's rank in a job of several nodes (its output's lines say so)")
	f.StringVar(&workloadFile, "workload", "", "the workload as JSON (a file, or - for standard input)")
	f.StringVar(&storeURI, "checkpoints", "", "checkpoint store URI")
	f.StringVar(&workDir, "work-dir", "/var/lib/spotwise/work", "where the checkpoint directory and progress file live")
	f.Float64Var(&workSeconds, "work-seconds", 0, "expected runtime of the whole work on this instance (clock seconds)")
	f.Float64Var(&speed, "clock-speed", 1, "clock seconds per wall second (the simulated cloud's speed)")
	f.BoolVar(&simClock, "sim-clock", false, "keep the servers' simulated clock (read from NATS)")
	f.StringVar(&noticesFrom, "notices", "none", "where this instance's own interruption notices come from: aws, azure or none")
	f.StringVar(&region, "region", "", "the instance's region (the subject its forwarded notices go to)")
	f.StringVar(&metadataURL, "metadata-endpoint", "", "instance metadata service base URL (default: the cloud's; for aws, env AWS_EC2_METADATA_SERVICE_ENDPOINT)")
	for _, name := range []string{"nats-url", "job", "instance", "workload"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// noticeSource is the poller of the instance's metadata that --notices
// names (nil for none).
func noticeSource(from, endpoint, instance string, log *zap.Logger) (agent.NoticeSource, error) {
	switch from {
	case "", "none":
		return nil, nil
	case "aws":
		opts := []notices.EC2Option{notices.WithEC2Logger(log)}
		if endpoint == "" {
			endpoint = os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
		}
		if endpoint != "" {
			opts = append(opts, notices.WithEC2Endpoint(endpoint))
		}
		return notices.NewEC2(opts...), nil
	case "azure":
		opts := []notices.AzureOption{notices.WithAzureLogger(log), notices.WithAzureVMName(instance)}
		if endpoint != "" {
			opts = append(opts, notices.WithAzureEndpoint(endpoint))
		}
		return notices.NewAzure(opts...), nil
	}
	return nil, fmt.Errorf("--notices: %q is not aws, azure or none", from)
}

func readWorkload(stdin io.Reader, path string, w *providers.Workload) error {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(w); err != nil {
		return fmt.Errorf("reading the workload: %w", err)
	}
	if len(w.Command) == 0 {
		return fmt.Errorf("the workload has no command")
	}
	return nil
}
