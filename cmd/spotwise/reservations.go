package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
)

func newReservationsCmd() *cobra.Command {
	var cf clientFlags
	var spans bool
	cmd := &cobra.Command{
		Use:   "reservations",
		Short: "Reserved capacity and capacity blocks: slots in use, cost so far, idle cost, utilization (needs a platform viewer or operator token)",
		Long: `Every reservation and capacity block of the server's configuration: how many of its
slots jobs hold now, what its term has cost so far (every slot, used or not), what
jobs used of it, what sat idle (sunk cost) and the utilization. Reserved capacity is
used before spot and on-demand; its idle hours are what it costs beyond the jobs.`,
		Example: "  spotwise reservations\n  spotwise reservations -o json --spans   # with the idle spans",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			l, err := c.Reservations(cmd.Context(), spans)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, l)
			}
			return printReservations(cmd.OutOrStdout(), l, cf.output == "wide")
		},
	}
	cmd.Flags().BoolVar(&spans, "spans", false, "also list each reservation's idle spans (from, to, slots idle, cost)")
	cf.register(cmd)
	return cmd
}

// printReservations is the table of reservations, with their totals; wide
// adds the start and the hours, and the idle spans when asked for.
func printReservations(out io.Writer, l *api.ReservationList, wide bool) error {
	if len(l.Reservations) == 0 {
		_, err := fmt.Fprintln(out, "No reservations configured (see reservations in the server's configuration).")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "ID\tKIND\tWHERE\tTYPE\tIN USE\tSTATE\tEND\tPRICE/H\tPAID\tUSED\tIDLE\tUTILIZATION"
	if wide {
		head += "\tSTART\tPAID H\tIDLE H"
	}
	fmt.Fprintln(w, head)
	day := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }
	for _, r := range l.Reservations {
		where := r.Provider + "/" + r.Region
		if r.Zone != "" {
			where = r.Provider + "/" + r.Zone
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%", r.ID, r.Kind, where, r.InstanceType, r.InUse, r.Count,
			r.State, day(r.End), r.PricePerHour.Human(), r.Paid.Human(), r.Used.Human(), r.IdleCost.Human(), 100*r.Utilization)
		if wide {
			fmt.Fprintf(w, "\t%s\t%.1f\t%.1f", day(r.Start), r.PaidHours, r.IdleHours)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "TOTAL\t\t\t\t\t\t\t\t%s\t%s\t%s\t%.1f%%\n", l.Paid.Human(), l.Used.Human(), l.IdleCost.Human(), 100*l.Utilization)
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range l.Reservations {
		if len(r.IdleSpans) == 0 {
			continue
		}
		fmt.Fprintf(out, "\nIdle spans of %s\n", r.ID)
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "FROM\tTO\tSLOTS\tCOST")
		for _, sp := range r.IdleSpans {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", sp.From.UTC().Format(time.RFC3339), sp.To.UTC().Format(time.RFC3339), sp.Slots, sp.Cost.Human())
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}
