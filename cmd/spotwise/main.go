// Command spotwise is the one binary of spotwise: the server, the CLI that
// talks to it, and (later) the agent that runs beside each job.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		printError(err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "spotwise",
		Short: "Deadline-aware GPU job scheduler over spot, on-demand and reserved capacity",
		Long: `spotwise places GPU jobs where they finish cheapest before their deadline,
across clouds, regions and purchase options, and follows them to the end.

Start a server (embedded NATS and the simulated cloud by default):
  spotwise server
Then, from another shell:
  spotwise submit examples/bert-finetune.yaml
  spotwise jobs
  spotwise job <id>`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(newServerCmd(), newSubmitCmd(), newJobsCmd(), newJobCmd(), newCancelCmd(), newDemoWorkloadCmd(), newSimCmd(), newAgentCmd(), newQuoteCmd(), newSimulateCmd())
	return root
}

// clientFlags are the flags of every command that talks to a server.
type clientFlags struct {
	server string
	output string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	def := os.Getenv("SPOTWISE_SERVER")
	if def == "" {
		def = "127.0.0.1:8080"
	}
	cmd.Flags().StringVar(&f.server, "server", def, "spotwise server address (env SPOTWISE_SERVER)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table or json")
}

func (f *clientFlags) client() (*api.Client, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output must be table or json, not %q", f.output)
	}
	return api.NewClient(f.server), nil
}

func printError(err error) {
	var ae *api.Error
	if errors.As(err, &ae) {
		fmt.Fprintf(os.Stderr, "error: %s (%s)\n", ae.Message, ae.Code)
		for _, f := range ae.Fields {
			fmt.Fprintf(os.Stderr, "  %s\n", f.Error())
		}
		return
	}
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
}
