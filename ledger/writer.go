package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
)

// Writer appends jobs' charges to the ledger as their records change: it
// reads each record version (from the job bucket, in order, from where it
// stopped last), works out the record's closed charges (Charges) and
// appends those the job's ledger subject does not hold yet, reversing
// any the record now bills differently. Appends are conditional on the
// subject's last sequence, so a second writer (a deposed scheduler still
// running) or a retry after a crash can never append a charge twice: the
// loser reads the subject again and finds nothing left to do.
type Writer struct {
	bus   *events.Bus
	clock clock.Clock
	log   *zap.Logger

	mu   sync.Mutex
	jobs map[string]*written // jobs whose subjects were read or written lately

	done atomic.Uint64 // the job bucket revision Run has written the charges of
}

// Done is the job bucket revision whose charges Run has written, all
// before it included (0: none yet).
func (w *Writer) Done() uint64 { return w.done.Load() }

// written is what one job's ledger subject holds.
type written struct {
	last uint64 // the subject's last sequence (0: none)
	// cur is, per key, the charge in force (absent once reversed);
	// versions counts the versions of each key ever written.
	cur      map[string]Entry
	versions map[string]int
}

// maxCached bounds the jobs whose subjects the writer keeps: one dropped
// is read again when its record next changes.
const maxCached = 20000

// NewWriter returns a writer that appends over bus.
func NewWriter(bus *events.Bus, clk clock.Clock, log *zap.Logger) *Writer {
	return &Writer{bus: bus, clock: clk, log: log, jobs: map[string]*written{}}
}

// Record brings a job's ledger subject in line with its record: it
// appends the charges the record has closed since, and reversals of those
// it bills differently now. It returns how many entries it appended.
func (w *Writer) Record(ctx context.Context, r *job.Record) (int, error) {
	closed, _ := Charges(r, w.clock.Now())
	w.mu.Lock()
	st := w.jobs[r.ID]
	w.mu.Unlock()
	if st == nil && len(closed) == 0 {
		return 0, nil // nothing billed yet: nothing to compare
	}
	if st == nil && r.Status.Sealed != nil && r.Status.Sealed.Bill != 0 && settled(r) && BillPrint(closed) == r.Status.Sealed.Bill {
		// Billed as when its history was sealed, which waited for this
		// writer to have appended that bill: nothing to read or append.
		return 0, nil
	}
	appended := 0
	for try := 0; ; try++ {
		if st == nil {
			var err error
			if st, err = w.read(ctx, r); err != nil {
				return appended, err
			}
		}
		n, err := w.append(ctx, r, st, closed)
		appended += n
		if err == nil {
			break
		}
		w.forget(r.ID)
		st = nil
		if !errors.Is(err, events.ErrLedgerMoved) || try >= 3 {
			return appended, err
		}
	}
	w.mu.Lock()
	if settled(r) {
		delete(w.jobs, r.ID)
	} else {
		if len(w.jobs) >= maxCached {
			for id := range w.jobs { // any one: it is read again if needed
				delete(w.jobs, id)
				break
			}
		}
		w.jobs[r.ID] = st
	}
	w.mu.Unlock()
	return appended, nil
}

// append writes what the subject lacks of closed; st follows each append.
func (w *Writer) append(ctx context.Context, r *job.Record, st *written, closed []Entry) (int, error) {
	now := w.clock.Now()
	var out []Entry
	seen := make(map[string]bool, len(closed))
	for _, e := range closed {
		seen[e.ID] = true
		cur, ok := st.cur[e.ID]
		switch {
		case ok && sameCharge(&cur, &e):
			continue
		case ok:
			out = append(out, cur.Reversal(now))
		}
		if v := st.versions[e.ID]; v > 0 {
			e.ID = fmt.Sprintf("%s~v%d", e.ID, v+1)
		}
		out = append(out, e)
	}
	// Charges the record no longer closes (an end it inferred, taken back)
	// are reversed; those of attempts it no longer lists are kept.
	oldest := r.Status.Attempt + 1
	if len(r.Status.Attempts) > 0 {
		oldest = r.Status.Attempts[0].N
	}
	for _, a := range []*job.Attempt{r.Status.Previous, r.Status.Current} {
		if a != nil && a.N < oldest {
			oldest = a.N
		}
	}
	for key, cur := range st.cur {
		if !seen[key] && cur.JobID == r.ID && attemptOf(key) >= oldest {
			out = append(out, cur.Reversal(now))
		}
	}
	subject := events.LedgerJobSubject(r.ID)
	for i := range out {
		e := &out[i]
		e.RecordedAt = now
		data, err := json.Marshal(e)
		if err != nil {
			return i, fmt.Errorf("encoding ledger entry %s: %w", e.ID, err)
		}
		seq, err := w.bus.AppendLedger(ctx, subject, data, e.ID, st.last)
		if err != nil {
			return i, err
		}
		st.last = seq
		st.fold(*e)
	}
	return len(out), nil
}

// read folds a job's ledger subject, and its seals when its charges may
// have been sealed (the subject then holds only what came after).
func (w *Writer) read(ctx context.Context, r *job.Record) (*written, error) {
	msgs, last, garbled, err := jobCharges(ctx, w.bus, r.ID, mayBeSealed(r, w.clock.Now()))
	if err != nil {
		return nil, err
	}
	entries, bad := decodeEntries(msgs)
	if garbled += bad; garbled > 0 {
		w.log.Warn("skipping garbled ledger entries", zap.String("job", r.ID), zap.Int("entries", garbled))
	}
	st := &written{last: last, cur: map[string]Entry{}, versions: map[string]int{}}
	for _, e := range entries {
		st.fold(e)
	}
	return st, nil
}

// jobCharges are the charges stored on a job's subject and, withSeals,
// those sealed: each once, oldest first; last is the sequence of the
// subject's last message (0: it has none), garbled the seals that could
// not be read.
func jobCharges(ctx context.Context, bus *events.Bus, jobID string, withSeals bool) (msgs []events.LedgerMsg, last uint64, garbled int, err error) {
	msgs, err = bus.LedgerSubject(ctx, events.LedgerJobSubject(jobID))
	if err != nil {
		return nil, 0, 0, err
	}
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1].Seq
	}
	if !withSeals {
		return msgs, last, 0, nil
	}
	sealed, garbled, err := sealed(ctx, bus, jobID)
	if err != nil {
		return nil, 0, 0, err
	}
	// A charge both sealed and still on the subject (a crash before the
	// purge) is one charge.
	onSubject := make(map[uint64]bool, len(msgs))
	for _, m := range msgs {
		onSubject[m.Seq] = true
	}
	for _, m := range sealed {
		if !onSubject[m.Seq] {
			msgs = append(msgs, m)
		}
	}
	slices.SortFunc(msgs, func(a, b events.LedgerMsg) int { return cmpSeq(a.Seq, b.Seq) })
	return msgs, last, garbled, nil
}

// ReadJob is every charge of a job, on its subject or sealed, oldest
// first, and how many stored messages were garbled (skipped, never
// summed).
func ReadJob(ctx context.Context, bus *events.Bus, jobID string) (entries []Entry, garbled int, err error) {
	msgs, _, garbled, err := jobCharges(ctx, bus, jobID, true)
	if err != nil {
		return nil, 0, err
	}
	entries, bad := decodeEntries(msgs)
	return entries, garbled + bad, nil
}

// Read is what one ledger subject holds: its entries, oldest first, the
// sequence of the last message, and how many messages were garbled
// (skipped, never summed).
func Read(ctx context.Context, bus *events.Bus, subject string) (entries []Entry, last uint64, garbled int, err error) {
	msgs, err := bus.LedgerSubject(ctx, subject)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1].Seq
	}
	entries, garbled = decodeEntries(msgs)
	return entries, last, garbled, nil
}

// decodeEntries decodes stored charges, skipping (and counting) the
// garbled ones.
func decodeEntries(msgs []events.LedgerMsg) (entries []Entry, garbled int) {
	for _, m := range msgs {
		var e Entry
		if err := json.Unmarshal(m.Data, &e); err != nil || e.Check() != nil {
			garbled++
			continue
		}
		entries = append(entries, e)
	}
	return entries, garbled
}

// Sum is what entries bill together.
func Sum(entries []Entry) money.Micros {
	var s money.Micros
	for _, e := range entries {
		s += e.Cost
	}
	return s
}

// fold takes one stored entry into account.
func (st *written) fold(e Entry) {
	key := Key(e.ID)
	if e.Reverses != "" {
		if cur, ok := st.cur[key]; ok && cur.ID == e.Reverses {
			delete(st.cur, key)
		}
		return
	}
	st.cur[key] = e
	st.versions[key]++
}

func (w *Writer) forget(id string) {
	w.mu.Lock()
	delete(w.jobs, id)
	w.mu.Unlock()
}

// settled reports whether a job's bill is final: it has ended and every
// instance it held has an end its provider reported.
func settled(r *job.Record) bool {
	if !r.Status.State.Terminal() || r.Status.Current != nil || r.Status.Previous != nil {
		return false
	}
	for _, a := range r.Status.Attempts {
		for _, sp := range a.Spans {
			if sp.To.IsZero() {
				return false
			}
		}
	}
	return true
}

// cursorKey is where the writer keeps, in the meta bucket, the job bucket
// revision it has written the charges of.
const cursorKey = "ledger.cursor"

// Run writes the charges of every job record version stored after the
// last one it wrote before (all of them the first time), then of each new
// one, until ctx ends. A record it cannot write for (the store does not
// answer) is tried again, with a growing pause, before any later one: its
// place is kept, never skipped.
func (w *Writer) Run(ctx context.Context) error {
	from, err := w.cursor(ctx)
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		done     uint64
		saved    uint64
		lastSave time.Time
	)
	// The place is saved at most once a second while versions come, and
	// a second after the last (the sealer goes by it: ledger.Sealer).
	save := func(force bool) {
		mu.Lock()
		rev := done
		due := (force || time.Since(lastSave) > time.Second) && rev != saved
		if due {
			lastSave, saved = time.Now(), rev
		}
		mu.Unlock()
		if due && rev >= from {
			b := []byte(fmt.Sprint(rev))
			if _, err := w.bus.Meta().Put(context.WithoutCancel(ctx), cursorKey, b); err != nil {
				w.log.Warn("saving the ledger's place", zap.Error(err))
			}
		}
	}
	stop, err := w.bus.Jobs().WatchFrom(ctx, from, func(ch events.JobChange) {
		if ch.Record != nil {
			w.retry(ctx, ch.Record)
		}
		if ctx.Err() != nil {
			return
		}
		mu.Lock()
		done = ch.Revision
		mu.Unlock()
		w.done.Store(ch.Revision)
		save(false)
	})
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			save(false)
		case <-ctx.Done():
			stop()
			save(true)
			return nil
		}
	}
}

// retry writes one record's charges until it succeeds or ctx ends.
func (w *Writer) retry(ctx context.Context, r *job.Record) {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		_, err := w.Record(ctx, r)
		if err == nil {
			return
		}
		w.log.Warn("writing a job's charges to the ledger; trying again", zap.String("job", r.ID), zap.Error(err), zap.Duration("in", pause))
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// cursor is the revision to resume from: one past the saved one (0: the
// start, the latest version of every record).
func (w *Writer) cursor(ctx context.Context) (uint64, error) {
	v, _, err := w.bus.Meta().Get(ctx, cursorKey)
	switch {
	case errors.Is(err, events.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading the ledger's place: %w", err)
	}
	var rev uint64
	if _, err := fmt.Sscan(string(v), &rev); err != nil {
		return 0, nil // garbled: start again from the start, which is safe
	}
	return rev + 1, nil
}

// Fold is what a job's stored entries leave in force, per key: each
// charge's latest version, those reversed without a new one gone.
func Fold(entries []Entry) map[string]Entry {
	st := &written{cur: map[string]Entry{}, versions: map[string]int{}}
	for _, e := range entries {
		st.fold(e)
	}
	out := make(map[string]Entry, len(st.cur))
	for k, e := range st.cur {
		e.ID = k
		out[k] = e
	}
	return out
}
