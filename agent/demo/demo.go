// Package demo is a small workload that behaves like a training job for
// demos and end-to-end tests: it works through numbered steps at the speed
// the agent says its GPU would, reports progress, writes a real checkpoint
// when asked (SIGUSR1) and resumes from one, and prints a result that
// depends on every step having been done exactly once, in order — so a job
// that survived preemptions can be checked against an uninterrupted run.
package demo

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Config is what the workload reads from its environment (the agent
// protocol) and flags.
type Config struct {
	Steps int64
	// StepTime is the wall time one step takes; zero derives it from the
	// work seconds and clock speed the agent passes.
	StepTime time.Duration
	// PayloadMB pads each checkpoint with this much data, to make
	// checkpoints of a realistic size.
	PayloadMB     int
	CheckpointDir string
	ProgressFile  string
	ResumeStep    int64
	Out           io.Writer
}

// FromEnv fills a Config from the agent protocol's environment variables.
func FromEnv(c Config) (Config, error) {
	c.CheckpointDir = os.Getenv("SPOTWISE_CHECKPOINT_DIR")
	c.ProgressFile = os.Getenv("SPOTWISE_PROGRESS_FILE")
	if v := os.Getenv("SPOTWISE_RESUME_STEP"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("SPOTWISE_RESUME_STEP=%q is not a step", v)
		}
		c.ResumeStep = n
	}
	if c.StepTime == 0 {
		work, _ := strconv.ParseFloat(os.Getenv("SPOTWISE_WORK_SECONDS"), 64)
		speed, _ := strconv.ParseFloat(os.Getenv("SPOTWISE_CLOCK_SPEED"), 64)
		if speed <= 0 {
			speed = 1
		}
		if work > 0 && c.Steps > 0 {
			c.StepTime = time.Duration(work / float64(c.Steps) / speed * float64(time.Second))
		}
	}
	return c, nil
}

// state is what a checkpoint holds.
type state struct {
	Step  int64  `json:"step"`
	Acc   string `json:"acc"`
	Total int64  `json:"total"`
}

// Result is the result of an uninterrupted run of steps steps: what a run
// that survived any number of checkpoints and resumes must also print.
func Result(steps int64) string {
	acc := seed()
	for i := int64(1); i <= steps; i++ {
		acc = next(acc, i)
	}
	return hex.EncodeToString(acc[:])
}

func seed() [32]byte { return sha256.Sum256([]byte("spotwise demo workload")) }

func next(acc [32]byte, step int64) [32]byte {
	var b [40]byte
	copy(b[:], acc[:])
	binary.BigEndian.PutUint64(b[32:], uint64(step))
	return sha256.Sum256(b[:])
}

// Run works through the steps, checkpointing on SIGUSR1 and stopping
// (after a checkpoint) on SIGTERM, and prints "result <hex>" at the end.
func Run(ctx context.Context, c Config) error {
	if c.Steps <= 0 {
		return errors.New("steps must be positive")
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	acc, step := seed(), int64(0)
	if c.ResumeStep > 0 {
		st, err := load(c.CheckpointDir)
		if err != nil {
			return fmt.Errorf("resuming from step %d: %w", c.ResumeStep, err)
		}
		if st.Step != c.ResumeStep {
			return fmt.Errorf("checkpoint holds step %d, told to resume from %d", st.Step, c.ResumeStep)
		}
		raw, err := hex.DecodeString(st.Acc)
		if err != nil || len(raw) != 32 {
			return errors.New("checkpoint state is corrupt")
		}
		copy(acc[:], raw)
		step = st.Step
		fmt.Fprintf(c.Out, "resumed at step %d of %d\n", step, c.Steps)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// Without a step time, steps run back to back: a closed channel is
	// always ready.
	var tick <-chan time.Time
	if c.StepTime > 0 {
		t := time.NewTicker(c.StepTime)
		defer t.Stop()
		tick = t.C
	} else {
		ready := make(chan time.Time)
		close(ready)
		tick = ready
	}
	for step < c.Steps {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig := <-sigs:
			if err := c.save(step, acc); err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "checkpoint at step %d\n", step)
			if sig == syscall.SIGTERM {
				return errors.New("stopped by SIGTERM after a checkpoint")
			}
			continue
		case <-tick:
		}
		step++
		acc = next(acc, step)
		if c.ProgressFile != "" && (step%10 == 0 || step == c.Steps) {
			if err := writeAtomic(c.ProgressFile, fmt.Appendf(nil, "%d %d\n", step, c.Steps)); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(c.Out, "result %s\n", hex.EncodeToString(acc[:]))
	return nil
}

// save writes the state (and the padding payload), then the .done marker.
func (c Config) save(step int64, acc [32]byte) error {
	if c.CheckpointDir == "" {
		return errors.New("checkpoint requested but SPOTWISE_CHECKPOINT_DIR is not set")
	}
	if err := os.MkdirAll(c.CheckpointDir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(state{Step: step, Acc: hex.EncodeToString(acc[:]), Total: c.Steps})
	if err := writeAtomic(filepath.Join(c.CheckpointDir, "state.json"), b); err != nil {
		return err
	}
	if c.PayloadMB > 0 {
		if err := writePayload(filepath.Join(c.CheckpointDir, "weights.bin"), c.PayloadMB, step); err != nil {
			return err
		}
	}
	return writeAtomic(filepath.Join(c.CheckpointDir, ".done"), []byte(strconv.FormatInt(step, 10)))
}

func load(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("checkpoint state: %w", err)
	}
	return st, nil
}

// writePayload writes mb MiB of data that depends on the step, so each
// checkpoint differs like real weights do.
func writePayload(path string, mb int, step int64) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	block := make([]byte, 1<<20)
	h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(step)))
	for i := range block {
		block[i] = h[i%32]
	}
	for range mb {
		if _, err := f.Write(block); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
