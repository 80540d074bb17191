package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newAuditCmd() *cobra.Command {
	var cf clientFlags
	var team, target, since string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Who changed what: submissions, cancellations, tokens, simulated preemptions, allowed or refused",
		Long: `Audit records of every call that changes something, allowed or refused, with who
asked, from where and how it ended. A team's admin reads its team's; an operator
everything. The records are also published on spotwise.audit.<team>.<action>.`,
		Example: "  spotwise audit --since 24h\n  spotwise audit --target j-01m8...   # who submitted and cancelled a job",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			l, err := c.ListAudit(cmd.Context(), team, target, since, limit)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, l)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TIME\tACTION\tTARGET\tTEAM\tWHO\tFROM\tOUTCOME")
			for _, e := range l.Records {
				r := e.Record
				who := r.Principal
				if r.Name != "" {
					who += " (" + r.Name + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), r.Action, dash(r.Target), dash(r.TargetTeam), who, dash(r.Source), r.Outcome)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&team, "team", "", "whose records (default: your team's; an operator: everything)")
	cmd.Flags().StringVar(&target, "target", "", "only those of one job or token id")
	cmd.Flags().StringVar(&since, "since", "", "from how long ago (24h, 7d) or an RFC 3339 time (default 7d)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, the newest (default 1000)")
	cf.register(cmd)
	return cmd
}
