package scheduler

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// What an accepted input changed in a job, for the metrics and for the
// alerts whose condition has cleared: apply notes a few facts of the
// record before the lifecycle runs (before) and noteChange compares them with the
// record it wrote.

// before is what noteChange needs of a record as it was.
type before struct {
	state   job.State
	started bool
}

func beforeOf(r *job.Record) before {
	return before{state: r.Status.State, started: !r.Status.StartedAt.IsZero()}
}

// KindPreemption is the alert a provider's notice raises (job.Apply's);
// it is ongoing: resolved once the job runs again or ends.
const KindPreemption = "preemption"

// noteChange counts what an accepted input changed in rec (as written) and
// resolves the alerts whose condition it cleared.
func (s *Scheduler) noteChange(ctx context.Context, rec *job.Record, in job.Input, was before) {
	st := &rec.Status
	m := s.metrics
	if _, ok := in.(job.Place); ok && st.Current != nil {
		m.placed(st.Current.Placement) // counted once recorded, before the launch
	}
	if !was.started && !st.StartedAt.IsZero() {
		purchase := ""
		if st.Current != nil {
			purchase = st.Current.Placement.Purchase
		}
		m.vecs().queueToRunning.WithLabelValues(purchase).Observe(st.StartedAt.Sub(st.SubmittedAt).Seconds())
	}
	if ck, ok := in.(job.Checkpointed); ok {
		// The checkpoint a notice waited for releases the attempt under
		// notice in the same write (a later one for it is stale).
		if a := attemptN(rec, ck.Attempt); a != nil && a.Released() && providerNotice(a.Notice) && st.Checkpoint != nil && st.Checkpoint.Attempt == a.N {
			m.vecs().noticeToCheckpoint.WithLabelValues(a.Placement.Provider).Observe(s.o.Clock.Now().Sub(a.Notice.At).Seconds())
		}
	}
	resumed := was.state != job.Running && st.State == job.Running
	ended := !was.state.Terminal() && st.State.Terminal()
	if (resumed || ended) && preemptionOpen(rec, resumed) {
		s.resolve(ctx, rec, KindPreemption, job.SeverityWarning, resolvedWhy(rec))
	}
}

// providerNotice reports whether a notice is a provider's that capacity
// goes (not a rebalance recommendation nor one of spotwise's own moves).
func providerNotice(n *job.Notice) bool {
	return n != nil && !n.Deadline.IsZero() && n.Kind != job.NoticeRebalance
}

// attemptN finds an attempt of a record by number: live or ended.
func attemptN(r *job.Record, n int) *job.Attempt {
	for _, a := range []*job.Attempt{r.Status.Previous, r.Status.Current} {
		if a != nil && a.N == n {
			return a
		}
	}
	for i := range r.Status.Attempts {
		if r.Status.Attempts[i].N == n {
			return &r.Status.Attempts[i]
		}
	}
	return nil
}

// preemptionOpen reports whether a provider's notice raised a preemption
// alert the job has not run since: going back from the newest attempt
// (leaving out the current one when it is the one that now runs), a
// notice comes before any attempt that ran without one.
func preemptionOpen(r *job.Record, resumed bool) bool {
	var newestFirst []*job.Attempt
	for _, a := range []*job.Attempt{r.Status.Current, r.Status.Previous} {
		if a != nil && !(resumed && a == r.Status.Current) {
			newestFirst = append(newestFirst, a)
		}
	}
	for i := len(r.Status.Attempts) - 1; i >= 0; i-- {
		newestFirst = append(newestFirst, &r.Status.Attempts[i])
	}
	for _, a := range newestFirst {
		if providerNotice(a.Notice) {
			return true
		}
		if !a.RunningAt.IsZero() {
			return false
		}
	}
	return false
}

func resolvedWhy(r *job.Record) string {
	if r.Status.State == job.Running {
		p := r.Status.Current.Placement
		return fmt.Sprintf("job %s (%s) runs again, on %s %s in %s", r.Spec.Name, r.ID, p.InstanceType, p.Purchase, p.Zone)
	}
	return fmt.Sprintf("job %s (%s) ended: %s", r.Spec.Name, r.ID, r.Status.State)
}

// resolve publishes that the condition an ongoing alert of kind reported
// for a job has cleared: the same alert (kind, severity, job, team), with
// Resolved set.
func (s *Scheduler) resolve(ctx context.Context, rec *job.Record, kind, severity, summary string) {
	a := &events.Alert{Severity: severity, Kind: kind, JobID: rec.ID, Summary: summary, Resolved: true,
		Details: map[string]string{"team": rec.Spec.Team, "state": string(rec.Status.State)}}
	id := fmt.Sprintf("%s-alert-%s-resolved-%d-%d", rec.ID, kind, rec.Status.Attempt, rec.Status.UpdatedAt.UnixNano())
	if err := s.pub.Publish(ctx, events.AlertsSubject(severity), a, events.WithID(id)); err != nil {
		s.log.Warn("publishing a resolved alert", zap.String("job", rec.ID), zap.String("event", kind), zap.Error(err))
	}
}

// ongoing reports whether alerts of a kind report a condition that a
// resolved alert ends (the others are events).
func ongoing(kind string) bool { return kind == KindPreemption }
