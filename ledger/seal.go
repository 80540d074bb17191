package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// Sealing. A job's charges are appended to its own subject, where the
// writer's appends are fenced by the subject's last sequence. Once the
// job's bill is final they are sealed: copied, each with the sequence it
// was stored at, to a shared subject (events.LedgerSealedSubject), and
// the job's subject is purged up to the last one copied. The copy comes
// first, so a crash between the two leaves the charges twice, never
// nowhere; and since every copied charge keeps its sequence, a reader
// takes each sequence once, whether it saw the charge on the job's
// subject, in one seal, or in two (View). A charge appended while the
// others were sealed stays on the job's subject, to be sealed later.

// SealAfter is how long after a job finished, its bill final, its
// charges are sealed: long after the last correction a provider sends
// (an instance's end reported late), so that the writer, which then
// reads a job's seals as well as its subject, rarely has to.
const SealAfter = time.Hour

// sealChunk bounds the charges one seal message holds (a stream message
// is at most 1 MB).
const sealChunk = 512 << 10

// sealMsg is one message of a job's sealed charges.
type sealMsg struct {
	Job     string        `json:"job"`
	Charges []sealedEntry `json:"charges"`
}

// sealedEntry is one charge as it was stored on the job's subject.
type sealedEntry struct {
	Seq   uint64          `json:"seq"`
	Entry json.RawMessage `json:"entry"`
}

// Seal copies the charges on a job's own subject to its sealed subject
// and purges them from its own. It returns how many it sealed (0: the
// subject was empty). Sealing again what was sealed already is harmless.
func Seal(ctx context.Context, bus *events.Bus, jobID string) (int, error) {
	subject := events.LedgerJobSubject(jobID)
	msgs, err := bus.LedgerSubject(ctx, subject)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	seals, err := SealMessages(jobID, msgs)
	if err != nil {
		return 0, err
	}
	for _, m := range seals {
		if _, err := bus.PublishLedgerSeal(ctx, jobID, m.Data, m.ID); err != nil {
			return 0, err
		}
	}
	if err := bus.PurgeLedger(ctx, subject, msgs[len(msgs)-1].Seq); err != nil {
		return 0, err
	}
	return len(msgs), nil
}

// SealMessage is one message of a job's sealed charges, and the ID that
// de-duplicates its publication.
type SealMessage struct {
	Data []byte
	ID   string
}

// SealMessages encodes the charges stored on a job's subject (msgs, in
// order) as the messages that seal them: one, or a few for a long bill.
func SealMessages(jobID string, msgs []events.LedgerMsg) ([]SealMessage, error) {
	var out []SealMessage
	for i := 0; i < len(msgs); {
		m := sealMsg{Job: jobID}
		size := 0
		for ; i < len(msgs) && (len(m.Charges) == 0 || size+len(msgs[i].Data) < sealChunk); i++ {
			raw := msgs[i].Data
			if !json.Valid(raw) {
				// Garbled where it was stored, and still so sealed (as a
				// string): skipped and counted, never summed.
				raw, _ = json.Marshal(string(raw))
			}
			m.Charges = append(m.Charges, sealedEntry{Seq: msgs[i].Seq, Entry: raw})
			size += len(raw) + 32
		}
		data, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encoding the seal of %s: %w", jobID, err)
		}
		first, last := m.Charges[0].Seq, m.Charges[len(m.Charges)-1].Seq
		out = append(out, SealMessage{Data: data, ID: fmt.Sprintf("seal-%s-%d-%d", jobID, first, last)})
	}
	return out, nil
}

// decodeSeal reads the seal message stored at seq: the job's charges,
// each with the sequence it was first stored at, before the seal's own.
func decodeSeal(data []byte, seq uint64) (sealMsg, error) {
	var m sealMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("a garbled seal: %w", err)
	}
	return m, events.CheckSeal(m.Job, len(m.Charges), func(i int) uint64 { return m.Charges[i].Seq }, seq, "seal", "a charge")
}

// sealed reads a job's sealed charges: each message stored once, by the
// sequence it was stored at on the job's subject, oldest first, and how
// many were garbled.
func sealed(ctx context.Context, bus *events.Bus, jobID string) ([]events.LedgerMsg, int, error) {
	msgs, err := bus.LedgerSubject(ctx, events.LedgerSealedSubject(jobID))
	if err != nil {
		return nil, 0, err
	}
	var out []events.LedgerMsg
	garbled := 0
	seen := map[uint64]bool{}
	for _, m := range msgs {
		s, err := decodeSeal(m.Data, m.Seq)
		if err != nil {
			garbled++
			continue
		}
		if s.Job != jobID {
			continue
		}
		for _, c := range s.Charges {
			if !seen[c.Seq] {
				seen[c.Seq] = true
				out = append(out, events.LedgerMsg{Seq: c.Seq, Subject: events.LedgerJobSubject(jobID), Data: c.Entry})
			}
		}
	}
	slices.SortFunc(out, func(a, b events.LedgerMsg) int { return cmpSeq(a.Seq, b.Seq) })
	return out, garbled, nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mayBeSealed reports whether a job's charges may have been sealed: it
// finished long enough ago (half SealAfter, for clocks that differ).
func mayBeSealed(r *job.Record, now time.Time) bool {
	return r.Status.State.Terminal() && !r.Status.FinishedAt.IsZero() && now.Sub(r.Status.FinishedAt) >= SealAfter/2
}

// Sealer seals the charges of jobs whose bills are final: those that
// finished more than SealAfter ago and are settled (every instance's end
// reported), and those whose record is gone (removed by retention).
type Sealer struct {
	bus    *events.Bus
	clock  clock.Clock
	log    *zap.Logger
	offset int // where the next round lists the job subjects from
	// Left is, after each round, how many jobs' charges are on their own
	// subjects (not sealed).
	Left atomic.Int64
	// hoffset and HistoriesLeft are offset and Left for the jobs'
	// histories (Histories).
	hoffset       int
	HistoriesLeft atomic.Int64
	// FinishedAt, when set, is a view of the jobs kept in memory: when a
	// job finished (zero while it has not), and whether the view holds
	// it. A job it holds as not finished, or finished less than SealAfter
	// ago, is passed over without reading its record (a round over a
	// store of 100,000 queued jobs reads none); one it does not hold, or
	// holds as due, is read and checked as always. A view that lags only
	// leaves a job for a later round.
	FinishedAt func(id string) (time.Time, bool)
}

// notDue reports whether the view says a job is not due yet.
func (s *Sealer) notDue(id string, now time.Time) bool {
	if s.FinishedAt == nil {
		return false
	}
	at, known := s.FinishedAt(id)
	return known && (at.IsZero() || now.Sub(at) < SealAfter)
}

// NewSealer returns a sealer over bus.
func NewSealer(bus *events.Bus, clk clock.Clock, log *zap.Logger) *Sealer {
	return &Sealer{bus: bus, clock: clk, log: log}
}

// Round seals the jobs that are due among one page of the job subjects
// (the jobs still on their own subject), at most limit of them, and
// returns how many it sealed. The next round goes on from where this one
// left off, back to the first page after the last.
func (s *Sealer) Round(ctx context.Context, limit int) (int, error) {
	return s.round(ctx, limit, s.bus.LedgerJobs, &s.offset, &s.Left, func(id string, now time.Time, written uint64) (bool, error) {
		due, err := s.due(ctx, id, now, written)
		if err != nil || !due {
			return false, err
		}
		_, err = Seal(ctx, s.bus, id)
		return err == nil, err
	})
}

// round goes through one page of the jobs list gives from *offset on,
// sealing with seal (which says whether it sealed the job) at most limit
// of them, and sets *left to how many are still listed. Only jobs whose
// every version the writer has gone past are sealed (seal gets the
// revision it has written up to): one it has yet to read (an old version,
// when it lags) would be billed again when it found the job's subject
// empty. The sealed jobs are gone from the list: the next round goes on
// past the ones this one kept, back to the first page after the last.
func (s *Sealer) round(ctx context.Context, limit int, list func(context.Context, int) ([]string, int, error), offset *int, left *atomic.Int64,
	seal func(id string, now time.Time, written uint64) (bool, error)) (int, error) {
	written, err := (&Writer{bus: s.bus}).cursor(ctx)
	if err != nil || written == 0 {
		return 0, err
	}
	ids, total, err := list(ctx, *offset)
	if err != nil {
		return 0, err
	}
	now := s.clock.Now()
	kept, n := 0, 0
	for _, id := range ids {
		if n >= limit {
			break // the rest of the page: the next round goes on from here
		}
		if s.notDue(id, now) {
			kept++
			continue
		}
		sealed, err := seal(id, now, written-1)
		if err != nil {
			return n, err
		}
		if !sealed {
			kept++
			continue
		}
		n++
	}
	left.Store(int64(total - n))
	*offset += kept
	if *offset >= total-n {
		*offset = 0
	}
	return n, nil
}

// due reports whether a job's charges are to be sealed now: its bill is
// final, and the writer has read every version of its record up to
// revision written.
func (s *Sealer) due(ctx context.Context, id string, now time.Time, written uint64) (bool, error) {
	r, rev, err := s.bus.Jobs().Get(ctx, id)
	if errors.Is(err, events.ErrNotFound) {
		// Removed (by retention): nothing will be charged again, once
		// the writer has gone past the removal.
		last, err := s.bus.JobLastRevision(ctx, id)
		if err != nil {
			return false, err
		}
		return last <= written, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		// A garbled record, or one the store would not give: kept, and
		// looked at again next round.
		s.log.Warn("not sealing a job's charges: its record could not be read", zap.String("job", id), zap.Error(err))
		return false, nil
	}
	return rev <= written && settled(r) && !r.Status.FinishedAt.IsZero() && now.Sub(r.Status.FinishedAt) >= SealAfter, nil
}

// Histories seals the histories of the jobs that are due among one page
// of the jobs' history subjects, at most limit of them, and returns how
// many it sealed (see events.SealJobHistory). A job's history is due when
// its charges would be: it finished more than SealAfter ago, its bill is
// final, and the writer has read every version of its record. The seals'
// sequences are kept in the record, with a print of its bill (BillPrint):
// the writer, shown that version, knows the ledger has the bill already.
// A history whose record is gone is the retention's to remove.
func (s *Sealer) Histories(ctx context.Context, limit int) (int, error) {
	return s.round(ctx, limit, s.bus.JobHistories, &s.hoffset, &s.HistoriesLeft, func(id string, now time.Time, written uint64) (bool, error) {
		return s.sealHistory(ctx, id, now, written)
	})
}

// sealHistory seals one job's history if it is due, and reports whether
// it did. A job that changed meanwhile (an event, a new version of its
// record) is left for a later round.
func (s *Sealer) sealHistory(ctx context.Context, id string, now time.Time, written uint64) (bool, error) {
	r, rev, err := s.bus.Jobs().Get(ctx, id)
	if errors.Is(err, events.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		s.log.Warn("not sealing a job's history: its record could not be read", zap.String("job", id), zap.Error(err))
		return false, nil
	}
	if rev > written || !settled(r) || r.Status.FinishedAt.IsZero() || now.Sub(r.Status.FinishedAt) < SealAfter {
		return false, nil
	}
	seals, upTo, err := s.bus.SealJobHistory(ctx, id)
	if errors.Is(err, events.ErrHistoryMoved) || (err == nil && upTo == 0) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c := r.Clone()
	sd := &job.Sealed{}
	if c.Status.Sealed != nil {
		sd = c.Status.Sealed
	}
	for _, seq := range seals {
		// A seal published again (a retry the stream de-duplicated)
		// comes back with the sequence it was stored at.
		if !slices.Contains(sd.History, seq) {
			sd.History = append(sd.History, seq)
		}
	}
	closed, _ := Charges(r, now)
	sd.Bill = BillPrint(closed)
	c.Status.Sealed = sd
	if _, err := s.bus.Jobs().Update(ctx, c, rev); errors.Is(err, events.ErrConflict) {
		// Changed meanwhile: its seals stay unnamed (readers take each
		// event once), and it is looked at again next round.
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := s.bus.PurgeJobHistory(ctx, id, upTo); err != nil {
		return false, err
	}
	return true, nil
}

// BillPrint fingerprints a job's closed charges (as Charges returns them
// for a settled record, which do not change with the clock): two versions
// of a record with the same print bill the same.
func BillPrint(closed []Entry) uint64 {
	if len(closed) == 0 {
		return 0
	}
	h := fnv.New64a()
	for _, e := range closed {
		e.RecordedAt = time.Time{}
		b, _ := json.Marshal(e)
		h.Write(b)
		h.Write([]byte{0})
	}
	return h.Sum64() | 1 // never 0: 0 is "no print"
}
