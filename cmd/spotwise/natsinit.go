package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/events"
)

func newNATSCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "nats", Short: "NATS identity of an external server or cluster"}
	var dir, configDir, resolverDir string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create (or reuse) the NATS identity and write the nats-server configuration for it",
		Long: `init creates the NATS identity of spotwise in --dir (an operator, the system
account and the SPOTWISE account, with a signing key for agents; mode 0600)
unless one is there, and writes:

  identity.json   the keys: give it to the spotwise servers only
                  (--nats-identity-dir), never to NATS hosts or agents
  spotwise.creds  the servers' user (everything in the SPOTWISE account)
  watcher.creds   a read-only user for operators who watch events:
                  nats --creds watcher.creds --inbox-prefix _INBOX_watcher sub 'spotwise.alerts.>'
  sys.creds       a system account user (nats server ls, account updates)
  operator.conf   the include every nats-server of the cluster loads
                  (in --config-dir when given): operator, system account,
                  a full account resolver (--resolver-dir on the NATS
                  host) and both accounts; no secret in it

Run again, it keeps what is there (identity and operator.conf), so that
revocations pushed to the cluster since are not undone.

Agents get no file: each launched attempt gets its own user, issued by the
server that launches it and revoked when the attempt ends.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := events.LoadOrCreateIdentity(dir)
			if err != nil {
				return err
			}
			path, kept, err := id.WriteServerConfig(configDir, resolverDir, time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "NATS identity in %s (account %s)\n", id.Dir(), id.AccountKey())
			if kept {
				fmt.Fprintf(out, "nats-server include: %s (kept)\n", path)
			} else {
				fmt.Fprintf(out, "nats-server include: %s\n", path)
			}
			fmt.Fprintf(out, "spotwise server --nats-url nats://... --nats-identity-dir %s\n", id.Dir())
			fmt.Fprintf(out, "watcher: nats --creds %s --inbox-prefix %s sub 'spotwise.alerts.>'\n",
				filepath.Join(id.Dir(), events.WatcherCreds), events.WatcherInbox)
			return nil
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "nats-identity", "where the identity and the files above go")
	initCmd.Flags().StringVar(&configDir, "config-dir", "", "where operator.conf goes (default --dir), for a directory the NATS hosts read and the keys are not in")
	initCmd.Flags().StringVar(&resolverDir, "resolver-dir", "/var/lib/nats/jwt", "the account resolver's directory on each NATS host")
	cmd.AddCommand(initCmd)
	return cmd
}
