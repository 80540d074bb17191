package job

import (
	"fmt"
	"time"
)

// The words of a job's history and alerts.

// resumePoint says where the job resumes from, for messages.
func (t *tx) resumePoint() string {
	if c := t.r.Status.Checkpoint; c != nil {
		return fmt.Sprintf("the checkpoint at %s (step %d)", pct(c.Progress), c.Step)
	}
	return "the start (no checkpoint)"
}

// joinIDs names instances in a message.
func joinIDs(ids []string) string {
	switch len(ids) {
	case 0:
		return "no instances"
	case 1:
		return ids[0]
	case 2, 3:
		out := ids[0]
		for _, id := range ids[1:] {
			out += ", " + id
		}
		return out
	}
	return fmt.Sprintf("%s and %d more", ids[0], len(ids)-1)
}

// humanDuration writes a duration for people: "6h", "1h30m", "45m", "30s".
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		h, m := d/time.Hour, (d%time.Hour)/time.Minute
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%02dm", h, m)
	case d >= time.Minute:
		m, sec := d/time.Minute, (d%time.Minute)/time.Second
		if sec == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%02ds", m, sec)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func pct(p float64) string { return fmt.Sprintf("%.0f%%", p*100) }

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// checkpointAlert records a checkpoint that did not make it, and alerts.
func (t *tx) checkpointAlert(attempt int, why string) {
	s := &t.r.Status
	t.history(KindCheckpointFailed, attempt, nil, "checkpoint failed: "+why+"; resuming from "+t.resumePoint(), LaunchKey(t.r.ID, attempt)+"-ckpt-failed")
	t.alert(SeverityWarning, "checkpoint-failed",
		fmt.Sprintf("job %s (%s): checkpoint of attempt %d failed (%s); resuming from %s", t.r.Spec.Name, t.r.ID, attempt, why, t.resumePoint()),
		map[string]string{"attempt": fmt.Sprint(attempt), "work_lost": s.WorkLost.D().String()}, fmt.Sprintf("a%d-ckpt", attempt))
}
