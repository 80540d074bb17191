package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/job"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens",
		Long: `API tokens prove who calls the API. Each stands for one role in one team:
viewer (read the team's jobs and costs), submitter (also submit and cancel),
admin (also manage the team's tokens); a token with no team is a platform
viewer (every team, read-only) or an operator (everything).

An operator may create any token; a team's admin its own team's, up to admin.
The token is printed once: it is stored only as a hash.`,
	}
	cmd.AddCommand(newTokenCreateCmd(), newTokenListCmd(), newTokenRevokeCmd())
	return cmd
}

func newTokenCreateCmd() *cobra.Command {
	var cf clientFlags
	var req api.TokenRequest
	var role string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create a token and print it (once)",
		Example: "  spotwise token create --team nlp --role submitter --ttl 720h --name ci",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := auth.ParseRole(role)
			if err != nil {
				return err
			}
			req.Role, req.TTL = r, job.Duration(ttl)
			c, err := cf.client()
			if err != nil {
				return err
			}
			v, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, v)
			}
			fmt.Fprintln(cmd.OutOrStdout(), v.Token)
			fmt.Fprintf(cmd.ErrOrStderr(), "token %s: %s, %s; shown once, keep it safe\n", v.Info.ID, who(v.Info), expiry(v.Info))
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Team, "team", "", "the team the token acts in (empty: your own team; for an operator, a platform token)")
	cmd.Flags().StringVar(&role, "role", "", "viewer, submitter, admin or operator")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long it works, e.g. 720h (0: until revoked)")
	cmd.Flags().StringVar(&req.Name, "name", "", "what the token is for (shown in listings and audit records)")
	_ = cmd.MarkFlagRequired("role")
	cf.register(cmd)
	return cmd
}

func newTokenListCmd() *cobra.Command {
	var cf clientFlags
	var team string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a team's tokens (an operator: every token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			l, err := c.ListTokens(cmd.Context(), team)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, l)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tTEAM\tROLE\tCREATED\tEXPIRES\tSTATUS")
			now := time.Now()
			for _, t := range l.Tokens {
				status := "active"
				switch {
				case !t.RevokedAt.IsZero():
					status = "revoked " + t.RevokedAt.Format(time.RFC3339)
				case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
					status = "expired"
				}
				exp := "never"
				if !t.ExpiresAt.IsZero() {
					exp = t.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, dash(t.Name), dash(t.Team), t.Role, t.CreatedAt.Format(time.RFC3339), exp, status)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&team, "team", "", "whose tokens (default: your team's; an operator: every token)")
	cf.register(cmd)
	return cmd
}

func newTokenRevokeCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: it stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s) revoked\n", t.ID, who(*t))
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

func who(t auth.Token) string {
	if t.Team == "" {
		return "platform " + string(t.Role)
	}
	return fmt.Sprintf("%s of %s", t.Role, t.Team)
}

func expiry(t auth.Token) string {
	if t.ExpiresAt.IsZero() {
		return "works until revoked"
	}
	return "expires " + t.ExpiresAt.Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
