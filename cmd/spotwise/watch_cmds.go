package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

// waitJob follows a submitted job's events until it ends and returns the
// job as it ended (as the server shows it, or as the stream's end said if
// the server cannot be asked again) and its final state.
func waitJob(cmd *cobra.Command, c *api.Client, v *api.JobView) (*api.JobView, job.State, error) {
	if v.State.Terminal() {
		return v, v.State, nil
	}
	end, err := c.WatchJob(cmd.Context(), v.ID, api.WatchOptions{}, func(api.StreamEvent) {})
	if err != nil {
		return nil, "", fmt.Errorf("waiting for %s: %w", v.ID, err)
	}
	if end.Reason == api.EndDeleted {
		return nil, "", fmt.Errorf("waiting for %s: the job was deleted before it ended", v.ID)
	}
	state := end.Job.State
	final, err := c.Get(cmd.Context(), v.ID)
	if err != nil {
		// The outcome is known; show the job as the stream last saw it.
		final = v
		final.State, final.CostUSD, final.Progress = state, end.Job.CostUSD, end.Job.Progress
	}
	return final, state, nil
}

// watchJob prints a job's events as they happen (its history first) and
// returns once it ended, with the exit code of its outcome.
func watchJob(cmd *cobra.Command, c *api.Client, id, output string) error {
	out := cmd.OutOrStdout()
	pal := paletteFor(out)
	n := 0
	end, err := c.WatchJob(cmd.Context(), id, api.WatchOptions{}, func(ev api.StreamEvent) {
		if structured(output) {
			emitEvent(out, output, n, ev)
		} else {
			fmt.Fprintf(out, "%s  %-19s %s %4.0f%%  %9s  %s\n", ev.Time.UTC().Format("2006-01-02 15:04:05"), ev.Kind,
				pad(pal, ev.Job.State), ev.Job.Progress*100, ev.Job.CostUSD.Human(), ev.Message)
		}
		n++
	})
	if err != nil {
		return err
	}
	if end.Reason == api.EndDeleted {
		return fmt.Errorf("job %s was deleted", id)
	}
	if !structured(output) {
		fmt.Fprintf(out, "job %s %s, cost %s\n", id, pal.state(end.Job.State), end.Job.CostUSD.Human())
	}
	if code := outcomeCode([]job.State{end.Job.State}); code != exitOK {
		return &codedError{code: code, msg: fmt.Sprintf("job %s %s", id, end.Job.State)}
	}
	return nil
}

// watchJobs prints a line for each event of the jobs a listing shows,
// until interrupted.
func watchJobs(cmd *cobra.Command, c *api.Client, q api.Query, output string) error {
	out := cmd.OutOrStdout()
	pal := paletteFor(out)
	states := make([]string, len(q.States))
	for i, s := range q.States {
		states[i] = string(s)
	}
	n := 0
	o := api.WatchOptions{OnGap: func(g api.StreamGap) { fmt.Fprintln(cmd.ErrOrStderr(), "spotwise:", g.Message) }}
	err := c.WatchEvents(cmd.Context(), q.Team, states, o, func(ev api.StreamEvent) {
		if q.Name != "" && !strings.Contains(ev.Job.Name, q.Name) {
			return
		}
		if structured(output) {
			emitEvent(out, output, n, ev)
		} else {
			fmt.Fprintf(out, "%s  %s  %-16s %-10s %s %4.0f%%  %9s  %-19s %s\n", ev.Time.UTC().Format("2006-01-02 15:04:05"), ev.Job.ID,
				ev.Job.Name, ev.Job.Team, pad(pal, ev.Job.State), ev.Job.Progress*100, ev.Job.CostUSD.Human(), ev.Kind, ev.Message)
		}
		n++
	})
	if cmd.Context().Err() != nil {
		return nil // interrupted: the way a watch ends
	}
	return err
}

// emitEvent writes one event for scripts: a JSON object per line, or a
// YAML document each.
func emitEvent(w io.Writer, output string, n int, ev api.StreamEvent) {
	if output == "yaml" {
		if n > 0 {
			fmt.Fprintln(w, "---")
		}
		_ = writeData(w, "yaml", ev)
		return
	}
	b, err := json.Marshal(ev)
	if err == nil {
		_ = writeRaw(w, "json", b)
	}
}

// pad is a state painted and padded to the longest state's width (the
// padding outside the colour, so columns line up either way).
func pad(pal palette, s job.State) string {
	return pal.state(s) + strings.Repeat(" ", max(0, len("checkpointing")-len(s)))
}

// printAttempts adds the attempts of a job to its view (-o wide).
func printAttempts(w io.Writer, v *api.JobView) {
	if len(v.Attempts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nAttempts:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tPLACEMENT\tLAUNCHED\tENDED\tESTIMATE")
	for _, a := range v.Attempts {
		ended := "-"
		if !a.EndedAt.IsZero() {
			ended = a.EndedAt.UTC().Format(time.RFC3339)
		}
		p := a.Placement
		launched := "-"
		if !a.LaunchedAt.IsZero() {
			launched = a.LaunchedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", a.N, placementText(&p), launched, ended, a.EstimatedCost.Human())
	}
	_ = tw.Flush()
}

// stateNames lists the job states, for help and errors.
func stateNames() string {
	names := make([]string, len(job.States))
	for i, s := range job.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// completeStates completes --state values (a comma-separated list).
func completeStates(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	done, _ := cutLast(toComplete, ",")
	var out []string
	for _, s := range job.States {
		out = append(out, done+string(s))
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

func cutLast(s, sep string) (before, after string) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i+len(sep)], s[i+len(sep):]
	}
	return "", s
}

// completionTimeout bounds the server's answer to a completion: a shell
// waiting on a server that is down must not hang the user's tab key.
const completionTimeout = 2 * time.Second

// completeJobIDs completes job IDs by asking the server (with the
// command's --server and --token) for the newest jobs, active ones only
// when asked; any failure completes nothing, quietly.
func completeJobIDs(cf *clientFlags, activeOnly bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if cmd.Use == "job ID" && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := cf.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c.HTTP.Timeout = completionTimeout
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		q := api.Query{}
		if activeOnly {
			for _, s := range job.States {
				if !s.Terminal() {
					q.States = append(q.States, s)
				}
			}
		}
		jobs, err := c.ListAll(ctx, q, 200)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, j := range jobs {
			if strings.HasPrefix(j.ID, toComplete) && !contains(args, j.ID) {
				out = append(out, fmt.Sprintf("%s\t%s (%s, %s)", j.ID, j.Name, j.Team, j.State))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
