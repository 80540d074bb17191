package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
)

func newLogsCmd() *cobra.Command {
	var cf clientFlags
	var q api.LogsQuery
	var follow, prefix bool
	var since string
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's output (stdout and stderr of every attempt); -f follows it until the job ends",
		Long: `Print a job's output: its workload's stdout and stderr, every attempt's in
order (a preempted job's first attempt, then the one that resumed from its
checkpoint, ...), or one attempt's with --attempt. Lines the agent adds are
its notes: lines dropped over the rate limit, the workload's exit.

Plain, each line is printed as written, with a line "==> attempt N (instance)
<==" where another attempt's output begins; --prefix starts every line with
its time, attempt and stream instead; -o json prints one JSON object a line.
-f follows the output as it is written, until the job has ended.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if since != "" {
				if d, err := time.ParseDuration(since); err == nil && d > 0 {
					q.SinceAgo = d // back from the server's now
				} else if q.Since, err = time.Parse(time.RFC3339, since); err != nil {
					return fmt.Errorf("--since: %q is neither a duration (10m) nor an RFC 3339 time", since)
				}
			}
			p := &logPrinter{w: cmd.OutOrStdout(), prefix: prefix, json: cf.output == "json"}
			id := args[0]
			if follow {
				state, err := c.FollowLogs(cmd.Context(), id, q, p.print)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "job %s %s\n", id, state)
				return nil
			}
			for {
				page, err := c.Logs(cmd.Context(), id, q)
				if err != nil {
					return err
				}
				for _, l := range page.Lines {
					if err := p.print(l); err != nil {
						return err
					}
				}
				if !page.More {
					return nil
				}
				q.After, q.Tail = page.Next, 0
			}
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "follow the output as it is written, until the job ends")
	f.IntVar(&q.Attempt, "attempt", 0, "only this attempt's output (default: every attempt's, in order)")
	f.IntVar(&q.Tail, "tail", 0, "only the last N lines (at most 5000)")
	f.StringVar(&since, "since", "", "only lines written since: a duration back from now (10m) or an RFC 3339 time")
	f.BoolVar(&prefix, "prefix", false, "start each line with its time, attempt and stream")
	return cmd
}

// logPrinter prints lines of output as the flags say.
type logPrinter struct {
	w       io.Writer
	prefix  bool
	json    bool
	attempt int // of the last line printed
}

func (p *logPrinter) print(l api.LogLineView) error {
	var err error
	switch {
	case p.json:
		var b []byte
		if b, err = json.Marshal(l); err == nil {
			_, err = fmt.Fprintf(p.w, "%s\n", b)
		}
	case p.prefix:
		_, err = fmt.Fprintf(p.w, "%s a%d %-6s %s\n", l.Time.UTC().Format(time.RFC3339), l.Attempt, l.Stream, l.Text)
	default:
		if p.attempt != 0 && l.Attempt != p.attempt {
			where := ""
			if l.Instance != "" {
				where = " (" + l.Instance + ")"
			}
			if _, err = fmt.Fprintf(p.w, "==> attempt %d%s <==\n", l.Attempt, where); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintln(p.w, l.Text)
	}
	p.attempt = l.Attempt
	return err
}
