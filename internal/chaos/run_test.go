package chaos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/spotwise/spotwise/internal/server"
)

// The test binary stands in for the spotwise binary: with
// CHAOS_TEST_SERVER=1 it runs a server configured by the SPOTWISE_*
// variables the run sets, as `spotwise server` would.
func TestMain(m *testing.M) {
	if os.Getenv("CHAOS_TEST_SERVER") == "1" {
		os.Exit(serve())
	}
	os.Exit(m.Run())
}

func serve() int {
	cfg := server.Defaults()
	if err := cfg.LoadEnv(os.LookupEnv); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	zc := zap.NewProductionConfig()
	level, _ := zapcore.ParseLevel(cfg.Log.Level)
	zc.Level = zap.NewAtomicLevelAt(level)
	log, err := zc.Build()
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := server.Start(ctx, cfg, log)
	if err != nil {
		log.Error("server", zap.Error(err))
		return 1
	}
	<-ctx.Done()
	s.Close()
	return 0
}

// TestRunMeetsTheTargetsThroughAKill runs the harness itself, small: ten
// jobs, a kill -9 and a storm, launch faults on. What it asserts holds
// however fast the machine is against the simulated clock (no job is
// lost, stuck past a generous budget, doubly bought or billed wrong); how
// the jobs get there may differ from run to run.
func TestRunMeetsTheTargetsThroughAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	o := DefaultOptions()
	o.Seed, o.Jobs, o.SubmitOver = 3, 10, 2*time.Second
	o.MinWork, o.MaxWork = 10*time.Minute, 30*time.Minute
	o.Kills, o.Storms, o.MaxDown, o.ChaosFrom, o.ChaosOver = 1, 1, 300*time.Millisecond, time.Second, 3*time.Second
	o.Budget, o.Settle = 90*time.Second, 30*time.Second
	o.Dir = t.TempDir()
	o.Server = func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CHAOS_TEST_SERVER=1")
		return cmd
	}
	var progress bytes.Buffer
	o.Log = &progress
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	var report bytes.Buffer
	res.Report.Print(&report)
	if missed := res.Missed(); len(missed) > 0 {
		t.Errorf("targets missed: %v", missed)
	}
	if res.Report.Jobs != o.Jobs || len(res.Kills) != 1 || len(res.Storms) != 1 || res.Report.Instances == 0 || res.Report.CloudBill <= 0 {
		t.Errorf("%d jobs, %d kills, %d storms, %d instances, bill %s", res.Report.Jobs, len(res.Kills), len(res.Storms), res.Report.Instances, res.Report.CloudBill)
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nreport:\n%s", progress.String(), report.String())
		for _, l := range res.Logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, b)
		}
	}
}
