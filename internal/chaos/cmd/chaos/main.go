// Command chaos runs spotwise through kill -9s, zone storms and refused
// launches on the simulated cloud and prints what was lost, stuck, doubly
// bought or billed to nobody (package chaos). `make chaos` builds
// bin/spotwise and runs it; it exits 1 when a target is missed, 2 when the
// run itself could not be carried out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spotwise/spotwise/internal/chaos"
)

func main() {
	o := chaos.DefaultOptions()
	seed := time.Now().UnixNano() % 1_000_000
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "CHAOS_SEED: %q is not a whole number\n", s)
			os.Exit(2)
		}
	}
	bin := flag.String("spotwise", "bin/spotwise", "the spotwise binary to run as the server")
	dir := flag.String("dir", "", "where the data directory and server logs go (default: a new temporary directory, removed when the run passes)")
	flag.Int64Var(&o.Seed, "seed", seed, "seed of the plan and the simulated cloud (default: $CHAOS_SEED, else random)")
	flag.IntVar(&o.Jobs, "jobs", o.Jobs, "jobs to submit")
	flag.IntVar(&o.Kills, "kills", o.Kills, "kill -9s of the server")
	flag.IntVar(&o.Storms, "storms", o.Storms, "zone storms")
	flag.Float64Var(&o.Speed, "speed", o.Speed, "simulated clock speed")
	flag.DurationVar(&o.Budget, "budget", o.Budget, "wall time for every job to end")
	flag.Float64Var(&o.InterruptionScale, "interruptions", o.InterruptionScale, "multiplies the seeded spot interruption rates")
	flag.Float64Var(&o.Faults.Capacity, "fault-capacity", o.Faults.Capacity, "share of launches refused for capacity")
	flag.Float64Var(&o.Faults.Permanent, "fault-permanent", o.Faults.Permanent, "share of launches refused for good")
	flag.Float64Var(&o.Faults.Unknown, "fault-unknown", o.Faults.Unknown, "share of launch calls with an unknown outcome")
	flag.Parse()

	abs, err := filepath.Abs(*bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "the spotwise binary: %v (make build)\n", err)
		os.Exit(2)
	}
	o.Server = func() *exec.Cmd { return exec.Command(abs, "server") }
	o.Dir = *dir
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", fmt.Sprintf("spotwise-chaos-%d-", o.Seed)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	o.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	plan := chaos.NewPlan(o)
	fmt.Printf("chaos run, %s", plan.Describe(o))
	fmt.Printf("  data and server logs in %s\n\n", o.Dir)
	res, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nthe run could not be carried out: %v\n", err)
		if res != nil && len(res.Logs) > 0 {
			fmt.Fprintf(os.Stderr, "server logs: %v\n", res.Logs)
		}
		os.Exit(2)
	}
	fmt.Println()
	fmt.Printf("seed                  %d, %s wall, %d kills, %d storms\n", o.Seed, res.Elapsed.Round(100*time.Millisecond), len(res.Kills), len(res.Storms))
	for _, k := range res.Kills {
		fmt.Printf("    kill -9 at %s\n", k)
	}
	for _, s := range res.Storms {
		fmt.Printf("    storm at %s: %s, %d notices\n", s.At.Round(100*time.Millisecond), orNone(s.Zone), s.Notices)
	}
	for _, c := range res.Crashes {
		fmt.Printf("    server exited on its own %s\n", c)
	}
	res.Report.Print(os.Stdout)
	fmt.Printf("\nre-run: CHAOS_SEED=%d make chaos\n", o.Seed)
	if missed := res.Missed(); len(missed) > 0 {
		fmt.Println("\nFAIL: targets missed:")
		for _, m := range missed {
			fmt.Printf("  %s\n", m)
		}
		fmt.Printf("server logs in %s\n", o.Dir)
		os.Exit(1)
	}
	fmt.Println("\nPASS: 0 lost, 0 stuck, at most 2 live attempts per job, 0 spend billed to no job, no extra instances")
	if *dir == "" {
		_ = os.RemoveAll(o.Dir) // a few hundred MB of store nobody needs
	}
}

func orNone(s string) string {
	if s == "" {
		return "skipped (no live spot instance)"
	}
	return s
}
