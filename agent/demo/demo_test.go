package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A run interrupted by checkpoints and resumed from them, in pieces,
// prints the same result as an uninterrupted run.
func TestResumedRunGivesTheSameResult(t *testing.T) {
	const steps = 500
	want := Result(steps)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	progress := filepath.Join(dir, "progress")
	resume := int64(0)
	for piece := 0; piece < 3; piece++ {
		var out bytes.Buffer
		c := Config{Steps: steps, StepTime: time.Millisecond, CheckpointDir: ckpt, ProgressFile: progress, ResumeStep: resume, Out: &out, PayloadMB: 1}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, c) }()
		if piece < 2 {
			time.Sleep(50 * time.Millisecond)
			// The agent asks for a checkpoint, then the capacity goes.
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			err := <-done
			cancel()
			if err == nil || !strings.Contains(err.Error(), "SIGTERM") {
				t.Fatalf("piece %d: %v", piece, err)
			}
			b, err := os.ReadFile(filepath.Join(ckpt, ".done"))
			if err != nil {
				t.Fatal(err)
			}
			st, err := load(ckpt)
			if err != nil || string(b) != itoa(st.Step) || st.Step <= resume {
				t.Fatalf("piece %d: checkpoint %+v, .done %q, err %v", piece, st, b, err)
			}
			resume = st.Step
			continue
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cancel()
		if got := strings.TrimSpace(out.String()); !strings.HasSuffix(got, "result "+want) {
			t.Fatalf("output %q, want result %s", got, want)
		}
	}
}

func TestResumeRefusesAMismatchedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	c := Config{Steps: 10, CheckpointDir: dir}
	if err := c.save(4, seed()); err != nil {
		t.Fatal(err)
	}
	c.ResumeStep = 5
	if err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "holds step 4") {
		t.Fatalf("err = %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
