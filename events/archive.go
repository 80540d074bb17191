package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/job"
)

// Archiving a finished job's record. The job bucket holds each record on
// a subject of its own, and NATS keeps about 120 bytes of state for every
// subject a stream holds: with a million finished jobs kept (the default
// retention), their records' subjects were a third of a server's memory.
// Once a job's charges and history are sealed and it has finished for a
// while (the API's archiver decides when), its record is archived: copied,
// with the bucket revision it was, into one message on the archive
// stream's one subject, and its subject in the bucket is purged up to that
// revision (a newer version, written meanwhile, stays and wins).
//
// Every server's listing index follows the archive from its first message
// and keeps the sequence of each job's archived record, which a page read
// that finds nothing in the bucket reads by (a direct get). Retention
// removes an archived job with a tombstone on the same subject (so that
// every index drops it) and deletes the archived message.

// subjectArchive is the one subject archived records and tombstones are
// stored on.
const subjectArchive = "spotwise.archive.jobs"

// ArchiveSubject is the subject archived records are stored on (see
// ArchiveMessage).
const ArchiveSubject = subjectArchive

// archiveMsg is one message of the archive: a record as the bucket held
// it at revision Rev, or (Removed) the job's removal.
type archiveMsg struct {
	Job     string          `json:"job"`
	Rev     uint64          `json:"rev"`
	Record  json.RawMessage `json:"record,omitempty"`
	Removed bool            `json:"removed,omitempty"`
}

// Archived is one message of the archive as FollowArchive hands it over:
// a job's record as the bucket held it at Revision, stored at Seq, or
// its removal (Record nil).
type Archived struct {
	Seq      uint64
	ID       string
	Revision uint64
	Record   *job.Record
	// Raw is the record as stored (nil for a removal).
	Raw []byte
}

// decodeArchived reads one archive message stored at seq.
func decodeArchived(seq uint64, data []byte) (Archived, error) {
	var m archiveMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return Archived{}, &DecodeError{fmt.Errorf("archived record at %d: %w", seq, err)}
	}
	if !job.ValidID(m.Job) || m.Rev == 0 {
		return Archived{}, &DecodeError{fmt.Errorf("archived record at %d: no job or revision", seq)}
	}
	a := Archived{Seq: seq, ID: m.Job, Revision: m.Rev}
	if m.Removed {
		return a, nil
	}
	r, err := DecodeRecord(m.Record)
	if err != nil {
		return Archived{}, fmt.Errorf("archived record at %d: %w", seq, err)
	}
	if r.ID != m.Job {
		return Archived{}, &DecodeError{fmt.Errorf("archived record at %d: job %s's record filed as %s's", seq, r.ID, m.Job)}
	}
	a.Record, a.Raw, a.ID = r, m.Record, r.ID
	return a, nil
}

// ArchiveJob archives a finished job's record, read from the bucket at
// revision rev: it stores the record on the archive subject (once: a
// retry is de-duplicated by the stream), then purges the job's subject in
// the bucket up to rev. It returns where the archived record is.
func (b *Bus) ArchiveJob(ctx context.Context, r *job.Record, rev uint64) (uint64, error) {
	if !r.Status.State.Terminal() {
		return 0, fmt.Errorf("archiving job %s: it has not finished (%s)", r.ID, r.Status.State)
	}
	data, err := ArchiveMessage(r, rev)
	if err != nil {
		return 0, err
	}
	ack, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: subjectArchive, Data: data},
		jetstream.WithMsgID("archive-"+r.ID+"-"+strconv.FormatUint(rev, 10)))
	if err != nil {
		return 0, fmt.Errorf("archiving job %s: %w", r.ID, err)
	}
	bucket := b.jobs.kv.Bucket()
	st, err := b.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return 0, fmt.Errorf("archiving job %s: %w", r.ID, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+bucket+"."+r.ID), jetstream.WithPurgeSequence(rev+1)); err != nil {
		return 0, fmt.Errorf("archiving job %s: purging its record up to %d: %w", r.ID, rev, err)
	}
	return ack.Sequence, nil
}

// ArchiveMessage is the archive's message of a record the bucket held at
// revision rev, and the ID that de-duplicates its publication.
func ArchiveMessage(r *job.Record, rev uint64) ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("archiving job %s: %w", r.ID, err)
	}
	data, err := json.Marshal(archiveMsg{Job: r.ID, Rev: rev, Record: raw})
	if err != nil {
		return nil, fmt.Errorf("archiving job %s: %w", r.ID, err)
	}
	return data, nil
}

// ArchivedRecord reads the record of job id archived at seq, and the
// bucket revision it was; ErrNotFound when the archive holds none there
// (removed, or aged out).
func (b *Bus) ArchivedRecord(ctx context.Context, id string, seq uint64) (*job.Record, uint64, error) {
	subject, data, ok, err := directSeq(ctx, b.readConn(), StreamArchive, seq)
	if err != nil {
		return nil, 0, fmt.Errorf("archived record of %s: %w", id, err)
	}
	if !ok || subject != subjectArchive {
		return nil, 0, fmt.Errorf("%w: job %s's archived record at %d", ErrNotFound, id, seq)
	}
	a, err := decodeArchived(seq, data)
	if err != nil {
		return nil, 0, err
	}
	if a.Record == nil || a.ID != id {
		return nil, 0, fmt.Errorf("%w: job %s's archived record at %d", ErrNotFound, id, seq)
	}
	return a.Record, a.Revision, nil
}

// removeArchived stores the removal of an archived job (at revision rev,
// after its record's) and deletes its archived record at seq.
func (b *Bus) removeArchived(ctx context.Context, id string, rev, seq uint64) error {
	data, err := json.Marshal(archiveMsg{Job: id, Rev: rev, Removed: true})
	if err != nil {
		return err
	}
	if _, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: subjectArchive, Data: data},
		jetstream.WithMsgID("archive-removed-"+id)); err != nil {
		return fmt.Errorf("removing job %s from the archive: %w", id, err)
	}
	st, err := b.js.Stream(ctx, StreamArchive)
	if err != nil {
		return err
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !isNoMessage(err) {
		return fmt.Errorf("removing job %s's archived record: %w", id, err)
	}
	return nil
}

// archiveReader names FollowArchive's reader in readings and drops.
const archiveReader = "archived records"

// FollowArchive hands fn every message of the archive, from the first
// the stream holds, then each as it is stored, until ctx ends or stop is
// called (stop returns once fn no longer runs). fn runs on one goroutine,
// in stream order. caughtUp (if not nil) is called once, on fn's
// goroutine, when fn has had every message stored when the call was made
// (at once if there was none). A message that is not an archived record is
// counted (garbled, or refused when it is JSON) and skipped.
func (b *Bus) FollowArchive(ctx context.Context, fn func(Archived), caughtUp func()) (stop func(), err error) {
	return b.replay(ctx, StreamArchive, []string{subjectArchive}, true, archiveReader, func(seq uint64, _ string, data []byte, old bool) {
		a, err := decodeArchived(seq, data)
		switch {
		case err == nil:
		case old:
			return // counted when it was stored
		case !json.Valid(data):
			b.drop(archiveReader, "garbled")
			b.log.Warn("dropping garbled event", zap.String("reader", archiveReader), zap.String("subject", subjectArchive), zap.Uint64("seq", seq), zap.Error(err))
			return
		default: // JSON, but not an archived record
			b.drop(archiveReader, "refused")
			b.log.Warn("dropping event", zap.String("reader", archiveReader), zap.String("subject", subjectArchive), zap.Uint64("seq", seq), zap.Error(err))
			return
		}
		fn(a)
	}, caughtUp)
}

// JobUnsealed reports whether a job still has events or charges on
// subjects of its own (not sealed yet, or stored after the seals).
func (b *Bus) JobUnsealed(ctx context.Context, id string) (bool, error) {
	for _, at := range [][2]string{{StreamJobs, JobEventsSubject(id)}, {StreamLedger, LedgerJobSubject(id)}} {
		_, _, ok, err := directNext(ctx, b.readConn(), at[0], at[1], 1)
		if err != nil {
			return false, fmt.Errorf("job %s's subjects: %w", id, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// ArchivedRecords reads every record the archive holds, by job (the jobs
// removed since left out): what an inspection of the whole store adds to
// the job bucket's records.
func (b *Bus) ArchivedRecords(ctx context.Context) (map[string]*job.Record, error) {
	out := map[string]*job.Record{}
	done := make(chan struct{})
	stop, err := b.FollowArchive(ctx, func(a Archived) {
		if a.Record == nil {
			delete(out, a.ID)
			return
		}
		out[a.ID] = a.Record
	}, func() { close(done) })
	if err != nil {
		return nil, err
	}
	defer stop()
	select {
	case <-done:
		return out, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
