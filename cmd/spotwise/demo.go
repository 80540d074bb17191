package main

import (
	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/agent/demo"
)

func newDemoWorkloadCmd() *cobra.Command {
	var c demo.Config
	cmd := &cobra.Command{
		Use:   "demo-workload",
		Short: "A small workload that checkpoints and resumes like a training job (for demos)",
		Long: `demo-workload works through --steps steps at the speed the agent gives it
(SPOTWISE_WORK_SECONDS / SPOTWISE_CLOCK_SPEED), writes its progress to
SPOTWISE_PROGRESS_FILE, writes a real checkpoint into SPOTWISE_CHECKPOINT_DIR
on SIGUSR1 (SIGTERM: checkpoint and stop), resumes from SPOTWISE_RESUME_STEP,
and prints "result <hex>", which only an exactly-once run of every step
produces.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := demo.FromEnv(c)
			if err != nil {
				return err
			}
			cfg.Out = cmd.OutOrStdout()
			return demo.Run(cmd.Context(), cfg)
		},
	}
	cmd.Flags().Int64Var(&c.Steps, "steps", 1000, "number of steps")
	cmd.Flags().DurationVar(&c.StepTime, "step-time", 0, "wall time per step (default: from the agent's work seconds and clock speed)")
	cmd.Flags().IntVar(&c.PayloadMB, "checkpoint-mb", 1, "MiB of padding in each checkpoint")
	return cmd
}
