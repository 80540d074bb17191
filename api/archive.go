package api

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/idmap"
	"github.com/spotwise/spotwise/job"
)

// ArchiveAfter is how long after it finished a job's record leaves the
// job bucket for the archive (see events.ArchiveJob). It is the period of
// an idempotency key: a job is archived only once no submission can name
// it again (the key's next period names a new job), and after its charges
// and history were sealed (an hour after it finished). Until then a
// finished job costs NATS a subject; after, none.
const ArchiveAfter = job.KeyPeriod

// archiveCursor is where the archiver's next round looks from: the last
// job it looked at (by submission, then ID).
type archiveCursor struct {
	at  int64
	key idmap.Key
	set bool
}

// Archive archives the records of up to limit finished jobs that are due
// (finished more than ArchiveAfter ago, their charges and history sealed)
// and returns how many it archived. Each round goes on, in submission
// order, from where the last left off, back to the oldest job after the
// newest: a job not due yet (its charges not sealed, say) is looked at
// again a round later, without holding back the others. It is the active
// scheduler's server's to call (as Prune); a job archived twice is
// harmless.
func (s *Service) Archive(ctx context.Context, limit int) (int, error) {
	now := s.clock.Now()
	ids := s.ix.archivable(&s.archiveFrom, now.Add(-ArchiveAfter), limit)
	n := 0
	for _, id := range ids {
		r, rev, err := s.jobs.Get(ctx, id)
		switch {
		case errors.Is(err, events.ErrNotFound):
			continue // removed, or archived by the server before this one
		case err != nil && ctx.Err() != nil:
			return n, err
		case err != nil:
			s.log.Warn("not archiving a job: its record could not be read", zap.String("job", id), zap.Error(err))
			continue
		}
		if !archivable(r, now) {
			continue
		}
		// Charges or events on the job's own subjects: not sealed yet
		// (or an event came after the seal); a later round looks again.
		unsealed, err := s.bus.JobUnsealed(ctx, id)
		if err != nil {
			return n, err
		}
		if unsealed {
			continue
		}
		seq, err := s.bus.ArchiveJob(ctx, r, rev)
		if err != nil {
			return n, err
		}
		s.ix.setArchived(id, seq)
		n++
	}
	if n > 0 {
		s.log.Info("finished jobs' records archived", zap.Int("jobs", n))
	}
	return n, nil
}

// archivable reports whether a job's record may be archived now: it
// finished more than ArchiveAfter ago and its history is sealed.
func archivable(r *job.Record, now time.Time) bool {
	st := r.Status
	return st.State.Terminal() && st.Sealed != nil && !st.FinishedAt.IsZero() &&
		now.Sub(st.FinishedAt) >= ArchiveAfter && now.Sub(st.SubmittedAt) >= job.KeyPeriod
}

// archivable lists, from the cursor on (in submission order), up to limit
// jobs that finished before cutoff and are neither archived nor removed,
// and moves the cursor past the last job it looked at (back to the start
// once it got to the end).
func (ix *index) archivable(from *archiveCursor, cutoff time.Time, limit int) []string {
	var out []string
	end := true
	ix.walk(from.set, from.at, from.key, func(e *entry) bool {
		if len(out) == limit {
			end = false
			return false
		}
		*from = archiveCursor{at: e.submitted, key: e.key, set: true}
		if !e.deleted && e.finished != 0 && e.archived == 0 && e.finishedAt().Before(cutoff) {
			out = append(out, e.id())
		}
		return true
	})
	if end {
		*from = archiveCursor{}
	}
	return out
}

// setArchived notes where a job's record was archived (the archive's
// follower notes it too, when it gets there).
func (ix *index) setArchived(id string, seq uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e, ok := ix.get(id); ok && !e.deleted {
		e.archived = seq
	}
}

// readRecord reads a job's record from the bucket or, when the bucket
// holds none and the job is archived, from the archive.
func (s *Service) readRecord(ctx context.Context, id string) (*job.Record, uint64, error) {
	r, rev, err := s.jobs.Read(ctx, id)
	if errors.Is(err, events.ErrNotFound) {
		if seq := s.ix.archivedAt(id); seq != 0 {
			return s.bus.ArchivedRecord(ctx, id, seq)
		}
	}
	return r, rev, err
}
