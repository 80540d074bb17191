package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

func newSubmitCmd() *cobra.Command {
	var cf clientFlags
	var key string
	var wait bool
	cmd := &cobra.Command{
		Use:   "submit FILE...",
		Short: "Submit job specs (YAML or JSON; - reads standard input)",
		Long: `Submit job specs (YAML or JSON; - reads standard input).

A YAML file of several documents (separated by ---) is split: each document
is submitted as its own job and reported as FILE[N], N counting the file's
specs from 1. Every spec is tried; if any is refused, the command says which
and why, and exits non-zero.

With --wait it follows each job's event stream until the job ends (taking
a dropped connection up again where it left off) and prints the finished
job. The exit code says how they ended: 0 all succeeded, 2 one failed,
3 one was cancelled, 4 one expired (the worst wins, in that order),
5 the server could not be reached or was lost, 1 any other error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if key != "" && len(args) > 1 {
				return fmt.Errorf("--idempotency-key applies to one spec; submit one file at a time")
			}
			var specs []specDoc
			for _, path := range args {
				data, ctype, err := readSpec(cmd.InOrStdin(), path)
				if err != nil {
					return err
				}
				docs, err := splitSpec(path, data, ctype, key)
				if err != nil {
					return err
				}
				specs = append(specs, docs...)
			}
			return submitAll(cmd, c, cf.output, wait, specs)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&key, "idempotency-key", "", "retrying with the same key within a day returns the job the first submission created; "+
		"the Nth spec of a file of several documents gets key <key>-N")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the jobs until they end; exit 0 only if all succeeded (2 failed, 3 cancelled, 4 expired, 5 server lost)")
	return cmd
}

// specDoc is one spec to submit: a whole file, or one document of it.
type specDoc struct {
	label string // the file, or FILE[N] for its Nth document
	data  []byte
	ctype string
	key   string
	// doc is set for one document of several, reported with its label.
	doc bool
}

// splitSpec makes one submission per YAML document of a file. A file of one
// document (JSON is one), or text that is not YAML, goes as it is, so the
// server says what is wrong with it; the server refuses a file of several
// documents, since each is a job of its own.
func splitSpec(path string, data []byte, ctype, key string) ([]specDoc, error) {
	whole := []specDoc{{label: path, data: data, ctype: ctype, key: key}}
	docs, err := job.Documents(data)
	if err != nil {
		if len(data) > job.MaxSpecBytes {
			// The server would only say the file is too large.
			return nil, fmt.Errorf("%s is not valid YAML: %w", path, err)
		}
		return whole, nil
	}
	if len(docs) < 2 {
		return whole, nil
	}
	name := path
	if path == "-" {
		name = "stdin"
	}
	out := make([]specDoc, len(docs))
	for i, d := range docs {
		out[i] = specDoc{label: fmt.Sprintf("%s[%d]", name, i+1), data: d, ctype: "application/json", doc: true}
		if key != "" {
			out[i].key = fmt.Sprintf("%s-%d", key, i+1)
		}
	}
	return out, nil
}

// submitAll submits every spec and reports each. A spec the server refuses
// does not stop the others; the error at the end counts them. With one spec
// alone, its error is returned as it is.
func submitAll(cmd *cobra.Command, c *api.Client, output string, wait bool, specs []specDoc) error {
	out := cmd.OutOrStdout()
	type submitted struct {
		spec    specDoc
		v       *api.JobView
		created bool
	}
	var done []submitted
	refused := 0
	printed := 0
	report := func(s submitted) error {
		if structured(output) {
			if output == "yaml" && printed > 0 {
				fmt.Fprintln(out, "---")
			}
			printed++
			return writeData(out, output, s.v)
		}
		verb := "submitted"
		if !s.created {
			verb = "already submitted"
		}
		if s.spec.doc {
			verb = s.spec.label + ": " + verb
		}
		pal := paletteFor(out)
		fmt.Fprintf(out, "%s %s (%s): %s\n", verb, s.v.ID, s.v.Name, pal.state(s.v.State))
		if wait {
			printJob(out, s.v)
		}
		return nil
	}
	for _, sp := range specs {
		v, created, err := c.Submit(cmd.Context(), sp.data, sp.ctype, sp.key)
		if err != nil {
			var ae *api.Error
			if len(specs) == 1 || !errors.As(err, &ae) || ae.Status >= 500 {
				return fmt.Errorf("%s: %w", sp.label, err)
			}
			refused++
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: refused: %s\n", sp.label, refusal(ae))
			continue
		}
		s := submitted{sp, v, created}
		if wait {
			// Report once finished; the others are submitted first, so
			// they run side by side.
			done = append(done, s)
			continue
		}
		if err := report(s); err != nil {
			return err
		}
	}
	ended := map[string]job.State{}
	var order []string
	for _, s := range done {
		v, state, err := waitJob(cmd, c, s.v)
		if err != nil {
			return err
		}
		s.v = v
		ended[v.ID] = state
		order = append(order, v.ID)
		if err := report(s); err != nil {
			return err
		}
	}
	if !structured(output) && !wait && refused < len(specs) {
		fmt.Fprintln(out, "follow it with: spotwise jobs   or   spotwise job <id>")
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d job specs refused", refused, len(specs))
	}
	return outcomeError(ended, order)
}

// refusal says in one line why the server refused a spec.
func refusal(e *api.Error) string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return strings.Join(parts, "; ")
}

// maxStdinBytes bounds what submit reads from standard input: enough for
// a file of many specs, which it splits before anything is sent.
const maxStdinBytes = 64 << 20

// readSpec reads a spec file (or standard input for "-") and picks the
// content type from its name.
func readSpec(stdin io.Reader, path string) ([]byte, string, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, maxStdinBytes+1))
		if err == nil && len(data) > maxStdinBytes {
			err = fmt.Errorf("standard input is larger than %d MiB", maxStdinBytes>>20)
		}
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, "", err
	}
	ctype := "application/yaml"
	if strings.EqualFold(filepath.Ext(path), ".json") {
		ctype = "application/json"
	}
	return data, ctype, nil
}

func newJobsCmd() *cobra.Command {
	var cf clientFlags
	var states []string
	var team, name string
	var limit int
	var watch bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs, newest first, with placement and cost (--watch: then a line per change)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := api.Query{Team: team, Name: name}
			for _, s := range states {
				st := job.State(strings.ToLower(s))
				if !st.Valid() {
					return fmt.Errorf("--state: unknown state %q (%s)", s, stateNames())
				}
				q.States = append(q.States, st)
			}
			out := cmd.OutOrStdout()
			if watch {
				if !structured(cf.output) {
					jobs, err := c.ListAll(cmd.Context(), q, limit)
					if err != nil {
						return err
					}
					printJobs(out, jobs, cf.output == "wide")
				}
				return watchJobs(cmd, c, q, cf.output)
			}
			jobs, err := c.ListAll(cmd.Context(), q, limit)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(out, cf.output, jobs)
			}
			printJobs(out, jobs, cf.output == "wide")
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringSliceVar(&states, "state", nil, "only jobs in these states ("+stateNames()+")")
	cmd.Flags().StringVar(&team, "team", "", "only this team's jobs")
	cmd.Flags().StringVar(&name, "name", "", "only jobs whose name contains this")
	cmd.Flags().IntVar(&limit, "limit", 200, "at most this many jobs (0 = all)")
	cmd.Flags().BoolVar(&watch, "watch", false, "after the listing, print a line for each event of the jobs until interrupted (-o json|yaml: the events only, one document each)")
	_ = cmd.RegisterFlagCompletionFunc("state", completeStates)
	return cmd
}

func newJobCmd() *cobra.Command {
	var cf clientFlags
	var watch bool
	cmd := &cobra.Command{
		Use:   "job ID",
		Short: "Show a job: state, placement, cost, history and why it is pending (--watch: follow it to its end)",
		Long: `Show a job: state, placement, cost, history and why it is pending.

With --watch, print each of its events as it happens (its history first)
and exit when it ends, with the exit codes of submit --wait: 0 succeeded,
2 failed, 3 cancelled, 4 expired, 5 the server was lost.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(&cf, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if watch {
				return watchJob(cmd, c, args[0], cf.output)
			}
			v, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeData(cmd.OutOrStdout(), cf.output, v)
			}
			printJob(cmd.OutOrStdout(), v)
			if cf.output == "wide" {
				printAttempts(cmd.OutOrStdout(), v)
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&watch, "watch", false, "print each event as it happens until the job ends")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var cf clientFlags
	var reason string
	cmd := &cobra.Command{
		Use:               "cancel ID...",
		Short:             "Cancel jobs and release their capacity",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeJobIDs(&cf, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			pal := paletteFor(out)
			for i, id := range args {
				v, err := c.Cancel(cmd.Context(), id, reason)
				if err != nil {
					return fmt.Errorf("%s: %w", id, err)
				}
				if structured(cf.output) {
					if cf.output == "yaml" && i > 0 {
						fmt.Fprintln(out, "---")
					}
					if err := writeData(out, cf.output, v); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(out, "%s (%s): %s, cost %s\n", v.ID, v.Name, pal.state(v.State), v.CostUSD.Human())
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the job's history")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func placementText(p *job.Placement) string {
	if p == nil {
		return "-"
	}
	nodes := ""
	if p.Nodes > 1 {
		nodes = fmt.Sprintf("%dx ", p.Nodes)
	}
	return fmt.Sprintf("%s%s/%s %s %s", nodes, p.Provider, p.Zone, p.InstanceType, p.Purchase)
}

func printJobs(w io.Writer, jobs []api.Summary, wide bool) {
	pal := paletteFor(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tNAME\tTEAM\t" + pal.paint(ansiDefault, "STATE") + "\tPROGRESS\tPLACEMENT\tPRICE/H\tCOST"
	if wide {
		head += "\tPRIORITY\tSUBMITTED"
	}
	fmt.Fprintln(tw, head)
	for _, j := range jobs {
		price := "-"
		if j.Placement != nil {
			price = j.Placement.HourlyCost().Human()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%3.0f%%\t%s\t%s\t%s", j.ID, j.Name, j.Team, pal.state(j.State), j.Progress*100, placementText(j.Placement), price, j.CostUSD.Human())
		if wide {
			fmt.Fprintf(tw, "\t%d\t%s", j.Priority, j.SubmittedAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no jobs")
	}
}

func printJob(w io.Writer, v *api.JobView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("ID", v.ID)
	row("Name", fmt.Sprintf("%s (team %s, priority %d)", v.Name, v.Team, v.Priority))
	row("State", paletteFor(w).state(v.State))
	if v.Message != "" {
		row("Message", v.Message)
	}
	row("Progress", fmt.Sprintf("%.0f%%", v.Progress*100))
	row("Submitted", v.SubmittedAt.UTC().Format(time.RFC3339))
	if v.DeadlineAt != nil {
		row("Deadline", v.DeadlineAt.UTC().Format(time.RFC3339))
	}
	if v.FinishedAt != nil {
		row("Finished", v.FinishedAt.UTC().Format(time.RFC3339))
	}
	if p := v.Placement; p != nil {
		row("Placement", placementText(p))
		row("GPUs", fmt.Sprintf("%d x %s per node", p.GPUs, p.GPU))
		if p.Nodes > 1 {
			row("Price", fmt.Sprintf("%s/h per node, %s/h in all", p.PricePerHour.Human(), p.HourlyCost().Human()))
		} else {
			row("Price", p.PricePerHour.Human()+"/h")
		}
	}
	if e := v.Estimate; e != nil {
		row("Estimate", fmt.Sprintf("%s runtime, %s to finish", e.Runtime.D().Round(time.Minute), e.CostUSD.Human()))
	}
	row("Cost so far", v.CostUSD.Human())
	if c := v.Checkpoint; c != nil {
		row("Checkpoint", fmt.Sprintf("%.0f%% (step %d, attempt %d)", c.Progress*100, c.Step, c.Attempt))
	}
	if v.Preemptions > 0 || v.WorkLost > 0 {
		row("Preemptions", fmt.Sprintf("%d (work lost %s)", v.Preemptions, v.WorkLost.D().Round(time.Second)))
	}
	if v.Attempt > 0 {
		row("Attempts", fmt.Sprint(v.Attempt))
	}
	_ = tw.Flush()
	for _, warn := range v.Warnings {
		fmt.Fprintf(w, "\nWarning: %s\n", warn)
	}
	if len(v.PendingReasons) > 0 {
		fmt.Fprintln(w, "\nWhy it is pending:")
		for _, r := range v.PendingReasons {
			fmt.Fprintf(w, "  - [%s] %s\n", r.Code, r.Message)
		}
	}
	if len(v.Events) > 0 {
		fmt.Fprintln(w, "\nHistory:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, e := range v.Events {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Time.UTC().Format("2006-01-02 15:04:05"), e.Kind, e.State, e.Message)
		}
		_ = tw.Flush()
	}
	if len(v.LogTail) > 0 {
		fmt.Fprintf(w, "\nLast lines of output (spotwise logs %s has all of it):\n", v.ID)
		for _, l := range v.LogTail {
			fmt.Fprintf(w, "  %s\n", l.Text)
		}
	}
}
