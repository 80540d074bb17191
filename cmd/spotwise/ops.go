package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

// serverStatus is GET /v1/status.
type serverStatus struct {
	Role      string                    `json:"role"`
	Terms     int                       `json:"terms"`
	Clock     time.Time                 `json:"clock"`
	SimSpeed  float64                   `json:"sim_speed"`
	Clouds    map[string]map[string]any `json:"clouds"`
	NATS      string                    `json:"nats"`
	Scheduler scheduler.Stats           `json:"scheduler"`
}

func newStatusCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the server: scheduling or standby, its clock, clouds and scheduler counters (needs a platform viewer or operator token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.GetJSON(cmd.Context(), "/v1/status", &raw); err != nil {
				return err
			}
			if structured(cf.output) {
				return writeRaw(cmd.OutOrStdout(), cf.output, raw)
			}
			var st serverStatus
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("reading the server's status: %w", err)
			}
			printStatus(cmd.OutOrStdout(), st, cf.output == "wide")
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

func printStatus(w io.Writer, st serverStatus, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Role", st.Role)
	row("Terms held", fmt.Sprint(st.Terms))
	speed := "real time"
	if st.SimSpeed != 1 && st.SimSpeed != 0 {
		speed = fmt.Sprintf("simulated, %gx", st.SimSpeed)
	}
	row("Clock", st.Clock.UTC().Format(time.RFC3339)+" ("+speed+")")
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range st.Clouds {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		row("Cloud "+n, fmt.Sprint(cmp.Or(st.Clouds[n]["cloud"], any(n))))
	}
	row("NATS", cmp.Or(st.NATS, "embedded (in-process only)"))
	s := st.Scheduler
	row("Queued", fmt.Sprint(s.Queued))
	row("Placements", fmt.Sprint(s.Placements))
	row("Finished", fmt.Sprint(s.Finished))
	row("Instances lost", fmt.Sprint(s.InstancesLost))
	row("Moves", fmt.Sprint(s.Moves))
	row("Overhead", s.Overhead.Human())
	if wide {
		row("Cycles", fmt.Sprintf("%d (last %s)", s.Cycles, s.LastCycle))
		row("Launch errors", fmt.Sprint(s.LaunchErrors))
		row("Terminations", fmt.Sprint(s.Terminations))
		row("Reconciles", fmt.Sprintf("%d (%d orphans)", s.Reconciles, s.Orphans))
		row("Notices", fmt.Sprint(s.Notices))
		row("Checkpoints asked", fmt.Sprintf("%d (%d failed)", s.CheckpointRequests, s.CheckpointFailures))
		row("Deposed writes", fmt.Sprint(s.DeposedWrites))
	}
	_ = tw.Flush()
}

func newInstancesCmd() *cobra.Command {
	var cf clientFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "instances",
		Short: "List the instances the clouds run for spotwise (needs a platform viewer or operator token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var l struct {
				Instances []providers.Instance `json:"instances"`
			}
			if err := c.GetJSON(cmd.Context(), "/v1/instances", &l); err != nil {
				return err
			}
			if !all {
				l.Instances = slices.DeleteFunc(l.Instances, func(i providers.Instance) bool { return !i.EndedAt.IsZero() })
			}
			if l.Instances == nil {
				l.Instances = []providers.Instance{}
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, l)
			}
			printInstances(cmd.OutOrStdout(), l.Instances, cf.output == "wide")
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "also the instances that ended")
	return cmd
}

func printInstances(w io.Writer, insts []providers.Instance, wide bool) {
	slices.SortFunc(insts, func(a, b providers.Instance) int {
		return cmp.Or(a.LaunchedAt.Compare(b.LaunchedAt), strings.Compare(a.ID, b.ID))
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tJOB\tSTATE\tPROVIDER/ZONE\tTYPE\tPURCHASE\tPRICE/H\tLAUNCHED"
	if wide {
		head += "\tATTEMPT\tNODE\tENDED\tREASON"
	}
	fmt.Fprintln(tw, head)
	for _, i := range insts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s", i.ID, dash(i.JobID), i.State, i.Provider, i.Zone, i.InstanceType, i.Purchase,
			i.Price.Human(), i.LaunchedAt.UTC().Format(time.RFC3339))
		if wide {
			ended := "-"
			if !i.EndedAt.IsZero() {
				ended = i.EndedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "\t%d\t%d\t%s\t%s", i.Attempt, i.Node, ended, dash(i.Reason))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	if len(insts) == 0 {
		fmt.Fprintln(w, "no instances")
	}
}
