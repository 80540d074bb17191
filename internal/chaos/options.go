package chaos

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// Options configure a run. DefaultOptions is the full run of `make chaos`.
type Options struct {
	Seed int64

	// Jobs is how many jobs are submitted, over SubmitOver of wall time.
	Jobs       int
	SubmitOver time.Duration
	// MultiNodeShare and DeadlineShare are the shares of jobs with 2-4
	// nodes and with a deadline.
	MultiNodeShare float64
	DeadlineShare  float64
	// MinWork and MaxWork bound each job's work on its reference GPU, in
	// simulated time.
	MinWork, MaxWork time.Duration

	// Kills kill -9 the server, each down for up to MaxDown, at least
	// MinKillGap apart; Storms send every spot instance of the busiest zone
	// a notice at once. Both fall in [ChaosFrom, ChaosFrom+ChaosOver) of
	// wall time.
	Kills      int
	MaxDown    time.Duration
	MinKillGap time.Duration
	Storms     int
	ChaosFrom  time.Duration
	ChaosOver  time.Duration

	// Faults are the launch faults the simulated cloud injects.
	Faults Faults
	// InterruptionScale multiplies the seeded spot interruption rates.
	InterruptionScale float64
	// Speed is the simulated clock's speed.
	Speed float64
	// ReconcileEvery is the scheduler's reconciliation interval (wall).
	ReconcileEvery time.Duration

	// Budget is the wall time from the start for every job to end; Settle
	// the time after that for the cloud to confirm every instance gone.
	Budget time.Duration
	Settle time.Duration

	// Dir holds the server's data directory and logs.
	Dir string
	// Server makes the command of one server process (the spotwise
	// binary's `server`); the run configures it through SPOTWISE_*
	// variables added to its environment.
	Server func() *exec.Cmd
	// Log gets progress lines; nil: none.
	Log io.Writer
}

// Faults are the shares of launch calls the simulated cloud fails
// (sim.faults).
type Faults struct {
	Capacity, Permanent, Unknown, UnknownLaunched float64
}

func (f Faults) env() string {
	return fmt.Sprintf("capacity=%g,permanent=%g,unknown=%g,unknown_launched=%g", f.Capacity, f.Permanent, f.Unknown, f.UnknownLaunched)
}

// DefaultOptions is the full run: 300 jobs, 5 kills, 6 storms, every
// kind of launch fault, spot interruptions as often as `make run` has
// them, at 600x, within about three minutes.
func DefaultOptions() Options {
	return Options{
		Seed: 1, Jobs: 300, SubmitOver: 60 * time.Second, MultiNodeShare: 0.3, DeadlineShare: 0.35,
		MinWork: 30 * time.Minute, MaxWork: 150 * time.Minute,
		Kills: 5, MaxDown: 1500 * time.Millisecond, MinKillGap: 10 * time.Second, Storms: 6,
		ChaosFrom: 5 * time.Second, ChaosOver: 65 * time.Second, // while jobs run
		Faults:            Faults{Capacity: 0.08, Permanent: 0.03, Unknown: 0.08, UnknownLaunched: 0.5},
		InterruptionScale: 2000, Speed: 600, ReconcileEvery: time.Second,
		Budget: 200 * time.Second, Settle: 30 * time.Second,
	}
}

func (o Options) check() error {
	var errs []error
	switch {
	case o.Jobs < 1:
		errs = append(errs, errors.New("jobs: at least 1"))
	case o.MinWork <= 0 || o.MaxWork < o.MinWork:
		errs = append(errs, errors.New("work: 0 < min <= max"))
	case o.Speed <= 0:
		errs = append(errs, errors.New("speed: above 0"))
	case o.Budget <= 0 || o.Settle <= 0 || o.ReconcileEvery < 100*time.Millisecond:
		errs = append(errs, errors.New("budget and settle above 0, reconcile interval at least 100ms"))
	case o.Kills < 0 || o.Storms < 0:
		errs = append(errs, errors.New("kills and storms: not negative"))
	case o.Dir == "" || o.Server == nil:
		errs = append(errs, errors.New("a directory and a server command are required"))
	}
	return errors.Join(errs...)
}
