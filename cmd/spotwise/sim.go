package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/job"
)

func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Drive the simulated cloud by hand (demos and tests)",
	}
	cmd.AddCommand(newSimActionCmd("preempt", "Send a spot interruption notice: to a job's instances, one instance, or a whole zone (a storm)"),
		newSimActionCmd("rebalance", "Send a rebalance recommendation to a job's instances or one instance"),
		newSimActionCmd("maintenance", "Announce scheduled maintenance (the instance goes at the announced time)"),
		newSimClockCmd())
	return cmd
}

// newSimClockCmd pauses, resumes or shows the simulated clock.
func newSimClockCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:       "clock [pause|resume]",
		Short:     "Pause or resume the simulated clock, or show it (no simulated time passes while it is paused)",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"pause", "resume"},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			method, body := http.MethodGet, []byte(nil)
			if len(args) == 1 {
				if args[0] != "pause" && args[0] != "resume" {
					return fmt.Errorf("unknown clock action %q (pause, resume)", args[0])
				}
				method = http.MethodPost
				body, _ = json.Marshal(server.ClockRequest{Paused: args[0] == "pause"})
			}
			data, err := simCall(cmd.Context(), c, method, "clock", body)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeRaw(cmd.OutOrStdout(), cf.output, data)
			}
			var reply server.ClockReply
			if err := json.Unmarshal(data, &reply); err != nil {
				return err
			}
			state := fmt.Sprintf("running at %gx", reply.Speed)
			if reply.Paused {
				state = "paused"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "simulated clock %s, reading %s\n", state, reply.Now.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

// simCall sends one request to /v1/sim/<action> and returns the reply's
// body, or the server's error.
func simCall(ctx context.Context, c *api.Client, method, action string, body []byte) ([]byte, error) {
	base, hc := c.Base, c.HTTP
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, method, base+"/v1/sim/"+action, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the spotwise server at %s: %w", base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 400 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("%s (%s)", e.Error.Message, e.Error.Code)
		}
		return nil, fmt.Errorf("server answered %s", resp.Status)
	}
	return data, nil
}

func newSimActionCmd(action, short string) *cobra.Command {
	var cf clientFlags
	var req server.SimRequest
	var in time.Duration
	cmd := &cobra.Command{
		Use:   action,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			req.In = job.Duration(in)
			body, _ := json.Marshal(req)
			data, err := simCall(cmd.Context(), c, http.MethodPost, action, body)
			if err != nil {
				return err
			}
			if structured(cf.output) {
				return writeRaw(cmd.OutOrStdout(), cf.output, data)
			}
			var reply server.SimReply
			if err := json.Unmarshal(data, &reply); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s sent to %s\n", action, strings.Join(reply.Instances, ", "))
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&req.Job, "job", "", "a job ID: all its live instances")
	_ = cmd.RegisterFlagCompletionFunc("job", completeJobIDs(&cf, true))
	cmd.Flags().StringVar(&req.Instance, "instance", "", "one instance ID")
	if action == "preempt" {
		cmd.Flags().StringVar(&req.Zone, "zone", "", "every spot instance of a zone at once (a storm)")
	}
	if action == "maintenance" {
		cmd.Flags().DurationVar(&in, "in", time.Hour, "how far ahead the maintenance is announced")
	}
	return cmd
}
