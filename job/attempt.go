package job

import (
	"strings"
	"time"
)

// What a job's record says of its attempts and checkpoints.

// spanOf returns the span of one of an attempt's instances, nil if it
// has none.
func spanOf(a *Attempt, id string) *Span {
	for i := range a.Spans {
		if a.Spans[i].Instance == id {
			return &a.Spans[i]
		}
	}
	return nil
}

// liveInstances lists an attempt's instances whose end is not known.
func liveInstances(a *Attempt) []string {
	var out []string
	for _, sp := range a.Spans {
		if sp.To.IsZero() {
			out = append(out, sp.Instance)
		}
	}
	return out
}

// ended reports whether every known instance of an attempt has ended
// (true for one that has none).
func ended(a *Attempt) bool { return len(liveInstances(a)) == 0 }

// awaiting reports whether an attempt is under a provider's notice and its
// checkpoint is still to come.
func awaiting(a *Attempt) bool {
	return a != nil && !a.Released() && a.Notice != nil && !voluntary(a.Notice)
}

// voluntary reports whether a notice is one of spotwise's own moves (or a
// rebalance recommendation acted on): no capacity goes at a deadline.
func voluntary(n *Notice) bool { return n != nil && n.Deadline.IsZero() }

// held reports whether an attempt is a replacement whose workload waits
// for its start.
func held(a *Attempt) bool {
	return a != nil && !a.StartAfter.IsZero() && a.RunningAt.IsZero() && !a.Released()
}

// lastEnd is the latest end known of an attempt's instances.
func lastEnd(a *Attempt) time.Time {
	var last time.Time
	for _, sp := range a.Spans {
		if sp.To.After(last) {
			last = sp.To
		}
	}
	return last
}

// inRoot reports whether a checkpoint lies in the job's checkpoint
// location.
func (t *tx) inRoot(ck CheckpointRef) bool {
	root := t.r.Status.CheckpointRoot
	return root == "" || strings.HasPrefix(ck.Location, strings.TrimSuffix(root, "/")+"/")
}
