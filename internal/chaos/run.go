package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

// Result is what a run did and found.
type Result struct {
	Plan    Plan
	Report  Report
	Elapsed time.Duration
	// Kills and Storms are what was injected, as it happened.
	Kills  []string
	Storms []Storm
	// Crashes are exits of the server nobody asked for.
	Crashes []string
	// Logs are the server processes' log files, one per start.
	Logs []string
}

// Missed lists the targets the run missed, the report's and a server that
// exited on its own.
func (r Result) Missed() []string {
	out := r.Report.Missed()
	if n := len(r.Crashes); n > 0 {
		out = append(out, fmt.Sprintf("the server exited %d times on its own (target 0)", n))
	}
	return out
}

// Storm is one zone storm as sent.
type Storm struct {
	At      time.Duration
	Zone    string
	Notices int
}

// run is one chaos run in progress.
type run struct {
	o      Options
	plan   Plan
	start  time.Time
	http   string // the server's HTTP address
	nats   string // its embedded NATS server's client address
	client *api.Client
	ledger *ledger
	proc   *proc
	res    Result

	mu    sync.Mutex
	acked map[string]string // submission key -> job ID
	fatal error
}

// Run carries out a whole run: the plan drawn from o.Seed, a server
// started on a fresh data directory, jobs submitted, kills and storms
// injected on schedule, until every job has ended (or o.Budget is over)
// and the cloud has confirmed the capacity gone (or o.Settle is over);
// then the figures. An error means the run itself could not be carried out.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("chaos options: %w", err)
	}
	r := &run{o: o, plan: NewPlan(o), ledger: newLedger(), acked: map[string]string{}}
	r.res.Plan = r.plan
	var err error
	if r.http, err = freeAddr(); err != nil {
		return nil, err
	}
	if r.nats, err = freeAddr(); err != nil {
		return nil, err
	}
	r.client = &api.Client{Base: "http://" + r.http, HTTP: &http.Client{Timeout: 10 * time.Second}}
	if err := os.MkdirAll(filepath.Join(o.Dir, "data"), 0o755); err != nil {
		return nil, err
	}
	r.start = time.Now()
	if err := r.startServer(ctx); err != nil {
		return nil, err
	}
	defer func() {
		r.ledger.disconnect()
		r.proc.stop()
	}()
	subCtx, cancelSubmit := context.WithCancel(ctx)
	defer cancelSubmit()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.submit(subCtx)
	}()
	err = r.conduct(ctx)
	cancelSubmit()
	wg.Wait()
	if err == nil {
		err = r.failure()
	}
	if err != nil {
		return &r.res, err
	}
	if err := r.settle(ctx); err != nil {
		return &r.res, err
	}
	final, err := r.collect(ctx)
	if err != nil {
		return &r.res, fmt.Errorf("collecting the figures: %w", err)
	}
	// What the figures were computed from, for whoever looks into them.
	if b, err := json.MarshalIndent(final, "", " "); err == nil {
		_ = os.WriteFile(filepath.Join(r.o.Dir, "final.json"), b, 0o644)
	}
	r.res.Report = Compute(final)
	r.res.Elapsed = time.Since(r.start)
	return &r.res, nil
}

func (r *run) logf(format string, args ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, "[%6.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
	}
}

func (r *run) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// conduct injects kills and storms on schedule, restarts a server that
// exited on its own, reports progress, and returns once every planned job
// is acknowledged and ended, or the budget is over.
func (r *run) conduct(ctx context.Context) error {
	kills, storms := slices.Clone(r.plan.Kills), slices.Clone(r.plan.Storms)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if err := r.failure(); err != nil {
			return err
		}
		el := time.Since(r.start)
		if r.proc.exitedOnItsOwn() {
			msg := fmt.Sprintf("at %s: %v (log %s)", el.Round(100*time.Millisecond), r.proc.err, r.proc.log)
			r.res.Crashes = append(r.res.Crashes, msg)
			r.logf("the server exited on its own %s; starting it again", msg)
			r.ledger.disconnect()
			if err := r.startServer(ctx); err != nil {
				return err
			}
		}
		if len(kills) > 0 && el >= kills[0].At {
			if err := r.kill(ctx, kills[0]); err != nil {
				return err
			}
			kills = kills[1:]
		}
		if len(storms) > 0 && el >= storms[0] {
			r.storm(ctx)
			storms = storms[1:]
		}
		ids := r.ackedIDs()
		ended, _ := r.ledger.settled(ids)
		if time.Since(lastProgress) >= 10*time.Second {
			lastProgress = time.Now()
			r.logf("%d/%d submitted; %s", len(ids), len(r.plan.Jobs), stateLine(r.ledger.states(ids)))
		}
		if len(ids) == len(r.plan.Jobs) && ended && len(kills) == 0 && len(storms) == 0 {
			r.logf("every job has ended; %s", stateLine(r.ledger.states(ids)))
			return nil
		}
		if el >= r.o.Budget {
			r.logf("out of time (%s); %s", r.o.Budget, stateLine(r.ledger.states(ids)))
			return nil
		}
	}
}

func stateLine(states map[job.State]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, states[s]))
	}
	return strings.Join(parts, ", ")
}

// kill kill -9s the server, waits k.Down and starts it again on the same
// data directory.
func (r *run) kill(ctx context.Context, k Kill) error {
	r.ledger.disconnect()
	r.proc.kill9()
	r.res.Kills = append(r.res.Kills, fmt.Sprintf("%s (down %s)", time.Since(r.start).Round(100*time.Millisecond), k.Down.Round(100*time.Millisecond)))
	r.logf("kill -9 the server; up again in %s", k.Down.Round(100*time.Millisecond))
	select {
	case <-time.After(k.Down):
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.startServer(ctx)
}

// submit submits every planned job at its moment, each retried with its
// key until the server acknowledges it (it may be down).
func (r *run) submit(ctx context.Context) {
	for _, j := range r.plan.Jobs {
		select {
		case <-time.After(time.Until(r.start.Add(j.At))):
		case <-ctx.Done():
			return
		}
		for {
			v, _, err := r.client.Submit(ctx, j.Spec, "application/yaml", j.Key)
			if err == nil {
				r.mu.Lock()
				r.acked[j.Key] = v.ID
				r.mu.Unlock()
				break
			}
			var ae *api.Error
			if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
				r.mu.Lock()
				r.fatal = fmt.Errorf("submission %s refused: %w\n%s", j.Key, err, j.Spec)
				r.mu.Unlock()
				return
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}
}

// ackedIDs lists the acknowledged jobs.
func (r *run) ackedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.acked))
	for _, id := range r.acked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
