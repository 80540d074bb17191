// Command spotwise is the one binary of spotwise: the server, the CLI that
// talks to it, and (later) the agent that runs beside each job.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
		os.Exit(exitCode(err))
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
	root.AddCommand(newServerCmd(), newSubmitCmd(), newJobsCmd(), newJobCmd(), newLogsCmd(), newCancelCmd(), newDemoWorkloadCmd(), newSimCmd(), newAgentCmd(), newQuoteCmd(), newSimulateCmd(), newTokenCmd(), newAuditCmd(), newNATSCmd(), newSchemaCmd())
	root.AddCommand(newStatusCmd(), newInstancesCmd(), newReservationsCmd())
	root.AddCommand(newCostsCmd())
	return root
}

// clientFlags are the flags of every command that talks to a server.
type clientFlags struct {
	server string
	token  string
	output string
}

const defaultServer = "127.0.0.1:8080"

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "spotwise server address (env SPOTWISE_SERVER, then the client config file, then "+defaultServer+")")
	cmd.Flags().StringVar(&f.token, "token", "", "API token or OIDC ID token (env SPOTWISE_TOKEN, then the client config file that `spotwise server` writes)")
	addOutputFlag(cmd, &f.output, nil)
}

func (f *clientFlags) client() (*api.Client, error) {
	if err := checkOutput(f.output); err != nil {
		return nil, err
	}
	server, token, err := resolveClient(f.server, f.token, os.Getenv)
	if err != nil {
		return nil, err
	}
	c := api.NewClient(server)
	c.Token = token
	return c, nil
}

// resolveClient picks the server and token: flags, then SPOTWISE_SERVER
// and SPOTWISE_TOKEN, then the client config file. The file's token goes
// only to the file's server: a token for the local server is not sent to
// another one named by a flag.
func resolveClient(server, token string, getenv func(string) string) (string, string, error) {
	server = cmp.Or(server, getenv("SPOTWISE_SERVER"))
	token = cmp.Or(token, getenv("SPOTWISE_TOKEN"))
	if server != "" && token != "" {
		return server, token, nil
	}
	cc, _, err := loadClientConfig()
	if err != nil {
		return "", "", fmt.Errorf("client config: %w", err)
	}
	if server == "" {
		server = cmp.Or(cc.Server, defaultServer)
	}
	if token == "" && cc.Token != "" && sameServer(server, cmp.Or(cc.Server, defaultServer)) {
		token = cc.Token
	}
	return server, token, nil
}

// sameServer compares addresses with or without a scheme.
func sameServer(a, b string) bool {
	trim := func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
		return strings.TrimRight(s, "/")
	}
	return trim(a) == trim(b)
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
