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
		newSimActionCmd("maintenance", "Announce scheduled maintenance (the instance goes at the announced time)"))
	return cmd
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
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
			defer cancel()
			hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/v1/sim/"+action, bytes.NewReader(body))
			if err != nil {
				return err
			}
			hreq.Header.Set("Content-Type", "application/json")
			resp, err := c.HTTP.Do(hreq)
			if err != nil {
				return fmt.Errorf("cannot reach the spotwise server at %s: %w", c.Base, err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode >= 400 {
				var e struct {
					Error struct{ Code, Message string } `json:"error"`
				}
				if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
					return fmt.Errorf("%s (%s)", e.Error.Message, e.Error.Code)
				}
				return fmt.Errorf("server answered %s", resp.Status)
			}
			if cf.output == "json" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
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
	cmd.Flags().StringVar(&req.Instance, "instance", "", "one instance ID")
	if action == "preempt" {
		cmd.Flags().StringVar(&req.Zone, "zone", "", "every spot instance of a zone at once (a storm)")
	}
	if action == "maintenance" {
		cmd.Flags().DurationVar(&in, "in", time.Hour, "how far ahead the maintenance is announced")
	}
	return cmd
}
