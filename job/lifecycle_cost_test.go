package job

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// A job's max_cost_usd: a running job checkpoints and then fails with the
// limit in its message and an alert; one that cannot checkpoint, or holds
// nothing that runs, fails at once; one checkpointing for a provider's
// notice stops once that checkpoint is stored.
func TestLifecycleCostLimit(t *testing.T) {
	// lifePlacement bills $3.60 an hour; a checkpoint takes a minute
	// ($0.06): a $10 cap is reached 9.94/3.60 hours after the launch.
	reachedAfter := time.Duration(9.94 / 3.6 * float64(time.Hour)).Round(time.Second)
	tests := []struct {
		name string
		over map[string]string
		// run brings the job to where the cap is hit, and returns the
		// attempt it runs on (nil: none).
		run func(l *life) *Attempt
		// stop finishes what the cap started (a checkpoint, say); nil
		// when the job fails at once.
		stop    func(l *life, a *Attempt) Result
		message string
		outcome Outcome
		// asked: the checkpoint was asked for before the cap (a move).
		asked bool
	}{
		{
			name: "checkpointed, then stopped",
			run:  func(l *life) *Attempt { a := l.running(1); l.after(reachedAfter); return a },
			stop: func(l *life, a *Attempt) Result {
				id := instances(1, 1)[0]
				l.want(Duplicate, CostLimit{}) // asked again while it checkpoints
				return l.want(Accepted, Checkpointed{Attempt: a.N, Instance: id, Checkpoint: l.checkpoint(a, 300, 0.4)})
			},
			message: "cost limit $10.00 reached: stopped after a checkpoint at 40%",
			outcome: OutcomeCostLimit,
		},
		{
			name: "a move's checkpoint stops it",
			run: func(l *life) *Attempt {
				a := l.running(1)
				l.after(reachedAfter)
				l.want(Accepted, StartMove{Attempt: 1, Kind: NoticeCheaper, Message: "cheaper elsewhere"})
				return a
			},
			stop: func(l *life, a *Attempt) Result {
				return l.want(Accepted, Checkpointed{Attempt: a.N, Instance: instances(1, 1)[0], Checkpoint: l.checkpoint(a, 300, 0.4)})
			},
			message: "cost limit $10.00 reached: stopped after a checkpoint at 40%",
			outcome: OutcomeCostLimit,
			asked:   true,
		},
		{
			name: "the checkpoint fails",
			run:  func(l *life) *Attempt { a := l.running(1); l.after(reachedAfter); return a },
			stop: func(l *life, a *Attempt) Result {
				return l.want(Accepted, CheckpointFailed{Attempt: a.N, Instance: instances(1, 1)[0], Reason: "disk full"})
			},
			message: "cost limit $10.00 reached: stopped without a new checkpoint (the checkpoint for the move failed (disk full))",
			outcome: OutcomeCostLimit,
		},
		{
			name: "the checkpoint never comes",
			run:  func(l *life) *Attempt { a := l.running(1); l.after(reachedAfter); return a },
			stop: func(l *life, a *Attempt) Result {
				l.after(MoveTimeout)
				return l.want(Accepted, Observed{Key: a.LaunchKey, Instances: []Instance{{ID: instances(1, 1)[0], LaunchedAt: t0, RunningAt: t0}}})
			},
			message: "stopped without a new checkpoint (no checkpoint for the move (cost-limit) in 10m)",
			outcome: OutcomeCostLimit,
		},
		{
			name:    "cannot checkpoint",
			over:    map[string]string{"checkpoint": "{disabled: true}"},
			run:     func(l *life) *Attempt { a := l.running(1); l.after(reachedAfter); return a },
			message: "cost limit $10.00 reached ($9.94 so far)",
			outcome: OutcomeCostLimit,
		},
		{
			name: "queued after a loss, over its cap",
			run: func(l *life) *Attempt {
				a := l.running(1)
				l.after(3 * time.Hour)
				l.want(Accepted, InstanceGone{Key: a.LaunchKey, Instance: Instance{ID: instances(1, 1)[0], EndedAt: l.now, Reason: "hardware"}})
				l.state(Queued)
				return nil
			},
			message: "cost limit $10.00 reached ($10.80 so far)",
		},
		{
			name: "under a notice: stopped once the checkpoint is stored",
			run: func(l *life) *Attempt {
				a := l.running(1)
				l.after(reachedAfter + time.Minute)
				l.want(Accepted, Interruption{Key: a.LaunchKey, Instance: instances(1, 1)[0], Kind: NoticeSpot, Deadline: l.now.Add(2 * time.Minute)})
				l.want(Stale, CostLimit{})
				l.want(Accepted, Checkpointed{Attempt: a.N, Instance: instances(1, 1)[0], Checkpoint: l.checkpoint(a, 300, 0.4)})
				l.state(Migrating)
				return nil
			},
			message: "cost limit $10.00 reached",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over := map[string]string{"max_cost_usd": `"10"`}
			for k, v := range tt.over {
				over[k] = v
			}
			l := newLife(t, over)
			a := tt.run(l)
			res := l.want(Accepted, CostLimit{})
			if tt.stop != nil {
				l.state(Checkpointing)
				if ck := effectsOf[RequestCheckpoint](res); !tt.asked && (len(ck) != 1 || ck[0].Reason != NoticeCostLimit) {
					t.Fatalf("checkpoint requests %+v", ck)
				}
				res = tt.stop(l, a)
			}
			l.state(Failed)
			if !strings.Contains(l.r.Status.Message, tt.message) {
				t.Errorf("message %q, want it to say %q", l.r.Status.Message, tt.message)
			}
			alerts := effectsOf[Alert](res)
			if !slices.ContainsFunc(alerts, func(x Alert) bool {
				return x.Kind == "cost-limit" && x.Details["max_cost_usd"] == "10.000000" && x.Details["team"] == "default"
			}) {
				t.Errorf("alerts %+v, want a cost-limit alert", alerts)
			}
			if a != nil {
				if c := l.r.Status.Current; c == nil || c.Closing != tt.outcome || len(effectsOf[Terminate](res)) != 1 {
					t.Errorf("the attempt is not released for the cost limit: %s, effects %+v", describe(l.r), res.Effects)
				}
			}
			l.want(Stale, CostLimit{}) // a terminal job stops no more
		})
	}
}

// Below its cap a job is not stopped, and CostLimitAt says when it will
// reach it; a job without a cap or without billed capacity has no time.
func TestCostLimitAt(t *testing.T) {
	l := newLife(t, map[string]string{"max_cost_usd": `"10"`})
	if reached, next := l.r.CostLimitAt(l.now); reached || !next.IsZero() {
		t.Fatalf("queued with nothing spent: reached %v, next %s", reached, next)
	}
	l.running(1)
	start := l.now
	l.after(time.Hour)
	reached, next := l.r.CostLimitAt(l.now)
	if want := start.Add(time.Duration(9.94 / 3.6 * float64(time.Hour)).Round(time.Second)); reached || !next.Equal(want) {
		t.Fatalf("an hour in: reached %v, next %s, want %s", reached, next, want)
	}
	l.want(Stale, CostLimit{})
	l.now = next
	if reached, _ := l.r.CostLimitAt(l.now); !reached {
		t.Fatalf("at %s the job has cost %s: not reached", l.now, l.r.CostAt(l.now))
	}
	free := newLife(t, nil)
	free.running(1)
	free.after(1000 * time.Hour)
	if reached, next := free.r.CostLimitAt(free.now); reached || !next.IsZero() {
		t.Fatalf("no cap: reached %v, next %s", reached, next)
	}
	free.want(Refused, CostLimit{})
	if got := money.MustParse("10"); l.r.Spec.MaxCost != got {
		t.Fatalf("max_cost_usd read as %s", l.r.Spec.MaxCost)
	}
}
