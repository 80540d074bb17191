package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/internal/idmap"
	"github.com/spotwise/spotwise/job"
)

// pages is this process's copy, in a file of its own, of every job's
// history and of every finished job's record, so that an old job's page is
// read from local disk (most often the kernel's cache of it) rather than
// asked of the store.
//
// Why: a read of an old job asks NATS for messages in blocks it has let
// go of; it loads each whole block from disk (4 or 8 MB) while holding
// the stream's isolation lock, which every write to the stream waits on
// (see the README's sizing, readers). A page of 1,000 old jobs opened at
// once held the submissions up by as much as a second.
//
// The copy is made by following the stores, never written by a request:
// every job event from the first the stream holds (a sequential replay at
// start, then each as it is stored), and every finished job's record as
// the index's watch brings it. It is a cache: its file is unlinked as soon
// as it is made (it goes with the process) and made again at each start.
// Until the replay has caught up, and for anything it does not hold,
// reads go to the store as before.
//
// On disk, each event is an entry [previous entry's offset+1 (8 bytes),
// its length (4)][sequence (8), time (8, Unix ns), the event as JSON],
// appended as it comes: a job's events form a chain from its newest back,
// and a history read is one read a step. A record is an entry of its
// stored bytes. Entries of jobs deleted and records replaced are garbage;
// when they are more than half the file (and more than compactAt), the
// live entries are copied to a new file (see compact).
type pages struct {
	mu  sync.Mutex
	dir string
	cur *pageFile
	// last is the newest event sequence copied; live is set once the
	// replay has caught up with the stream.
	last uint64
	live atomic.Bool
	// err is the first write error; from then on nothing is copied and
	// every read goes to the store.
	err error
	// compacting: a new file is being written from cur; the changes
	// copied meanwhile are kept in since, to be made on it too.
	compacting bool
	since      []pageChange
	compactAt  int64
	// sealJob is the job whose sealed events are being copied, sealLast
	// the last sequence its chain holds (see unsealed).
	sealJob  string
	sealLast uint64
	// begun is when the copy began; loaded is set once the index has
	// loaded the store (records copied after are dated, see pageRef).
	begun  time.Time
	loaded atomic.Bool
	// compacted counts the compactions done; snapshotted, when set, is
	// called by a compaction once it has taken its snapshot (tests).
	compacted   int
	snapshotted func()
	// onLive, when set, is called once the replay has caught up.
	onLive func()
	log    *zap.Logger
}

// pageFile is one file of the copy and where each job's entries are in it.
type pageFile struct {
	f *os.File
	w *bufio.Writer
	// size is what has been written (some of it maybe still in w),
	// flushed what the file holds.
	size, flushed int64
	jobs          *idmap.Table[pageRef]
	garbage       int64
	// max bounds size: a write past it fails (and the copy stops).
	max int64
	// readers are the reads using the file; a file replaced by a
	// compaction is closed when the last is done.
	readers int
	retired bool
}

// pageRef is where a job's entries are: its newest event's (off+1, 0 for
// none), and its record's with the bucket revision it is.
type pageRef struct {
	hist, rec       int64
	recRev          uint64
	histLen, recLen uint32
	events          uint32
	// bytes is the size of all the job's entries.
	bytes uint32
	// recAt is when the record was copied: recInitial while the index
	// was loading the store at start, else 2 + seconds since the copy
	// began (see settledFor).
	recAt uint32
	// key is the job's ID, in what would be padding otherwise.
	key idmap.Key
	// broken: an event could not be copied (larger than an entry may
	// be); the job's pages are read from the store. (After key: 64
	// bytes in all, where before it they took 72.)
	broken bool
}

// MapKey is the ref's key in the file's table (idmap.Keyed).
func (r pageRef) MapKey() idmap.Key { return r.key }

// get is where a job's entries are (the zero ref when it has none).
func (f *pageFile) get(k idmap.Key) (pageRef, bool) {
	if r := f.jobs.Get(k); r != nil {
		return *r, true
	}
	return pageRef{key: k}, false
}

// recInitial marks a record copied while the store was being loaded.
const recInitial = 1

// pageChange is an event or a record change copied during a compaction.
type pageChange struct {
	seq   uint64
	at    int64
	id    string
	key   idmap.Key // id's, when id is not set
	body  []byte
	rec   *events.JobChange
	recAt uint32
}

const (
	eventHeader = 12
	eventMeta   = 16 // sequence and time
	// maxPageEntry bounds an event's entry: a stored message is at most a
	// megabyte (NATS's default), and a chain read never trusts a length
	// past it.
	maxPageEntry = 1 << 20
	// compactAtLeast is the garbage a compaction waits for.
	compactAtLeast = 64 << 20
)

// newPages makes the copy's file in dir (the system's temporary directory
// when empty).
func newPages(dir string, maxBytes int64, log *zap.Logger) (*pages, error) {
	f, err := newPageFile(dir, maxBytes)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &pages{dir: dir, cur: f, compactAt: compactAtLeast, log: log, begun: time.Now()}, nil
}

func newPageFile(dir string, maxBytes int64) (*pageFile, error) {
	f, err := os.CreateTemp(dir, "spotwise-pages-*")
	if err != nil {
		return nil, fmt.Errorf("job pages: %w", err)
	}
	// Unlinked at once: the file lives as long as the process holds it,
	// and a process that dies leaves nothing behind.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("job pages: %w", err)
	}
	return &pageFile{f: f, w: bufio.NewWriterSize(f, 256<<10), jobs: &idmap.Table[pageRef]{}, max: maxBytes}, nil
}

// close releases the file; reads go to the store from then on.
func (p *pages) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = errors.New("job pages closed")
	}
	p.live.Store(false)
	p.cur.retire()
}

// ready says whether reads may come from the copy: it has caught up with
// the stream and nothing has failed.
func (p *pages) ready() bool { return p != nil && p.live.Load() }

// caughtUp marks the replay as having caught up with the stream, and
// tells onLive (if set).
func (p *pages) caughtUp() {
	p.mu.Lock()
	live := p.err == nil
	if live {
		p.live.Store(true)
	}
	p.mu.Unlock()
	if live && p.onLive != nil {
		p.onLive()
	}
}

// fail stops the copy at its first error (under p.mu): reads go to the
// store from then on.
func (p *pages) fail(err error) {
	if p.err == nil {
		p.err = err
		p.log.Warn("the local copy of job pages stopped; pages are read from the store", zap.Error(err))
	}
	p.live.Store(false)
}

// observe copies one stored job event. Events come in stream order; one
// already copied is skipped.
func (p *pages) observe(e events.HistoryEntry) {
	if e.Event == nil {
		return
	}
	// The event as stored (the envelope's data), else encoded again.
	body := []byte(e.Envelope.Data)
	if len(body) == 0 {
		var err error
		if body, err = json.Marshal(e.Event); err != nil {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	if e.Sealed {
		// Stored long before, and read now from a seal of the job's
		// history: copied unless the job's chain has it (the copy
		// followed the job's subject before it was purged).
		if !p.unsealed(e.Event.JobID, e.Seq) {
			return
		}
	} else {
		if e.Seq <= p.last {
			return
		}
		p.last = e.Seq
		p.sealJob = "" // the chain it knew the end of may grow
	}
	c := pageChange{seq: e.Seq, at: e.Envelope.Time.UnixNano(), id: e.Event.JobID, body: body}
	if err := p.cur.event(c); err != nil {
		p.fail(err)
		return
	}
	if p.compacting {
		p.since = append(p.since, c)
	}
}

// unsealed reports whether a sealed event of job id, stored at seq, is
// newer than the last one the job's chain holds (p.mu held). A seal's
// events come in order: the chain's last is read from the file once per
// seal, and followed from there.
func (p *pages) unsealed(id string, seq uint64) bool {
	if id != p.sealJob {
		last, err := p.cur.lastSeq(id)
		if err != nil {
			p.fail(err)
			return false
		}
		p.sealJob, p.sealLast = id, last
	}
	if seq <= p.sealLast {
		return false
	}
	p.sealLast = seq
	return true
}

// lastSeq is the sequence of the newest event of a job's chain (0: none).
func (f *pageFile) lastSeq(id string) (uint64, error) {
	ref, ok := f.get(idmap.Lookup(id))
	if !ok || ref.hist == 0 || ref.events == 0 {
		return 0, nil
	}
	if err := f.flush(); err != nil {
		return 0, err
	}
	var head [eventHeader + 8]byte
	if _, err := f.f.ReadAt(head[:], ref.hist-1); err != nil {
		return 0, fmt.Errorf("job pages: %w", err)
	}
	return binary.LittleEndian.Uint64(head[12:]), nil
}

// record copies a finished job's record as stored at its revision; any
// other change drops the copy of the job's record (reads of live jobs go
// to the store, where they are kept in memory), a deletion all of the
// job's entries.
func (p *pages) record(c events.JobChange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	p.sealJob = ""
	at := uint32(recInitial)
	if p.loaded.Load() {
		at = 2 + uint32(time.Since(p.begun)/time.Second)
	}
	if err := p.cur.record(c, at); err != nil {
		p.fail(err)
		return
	}
	if p.compacting {
		p.since = append(p.since, pageChange{rec: &c, recAt: at})
		return
	}
	if f := p.cur; f.garbage > p.compactAt && f.garbage > f.size/2 {
		p.compacting = true
		go p.compact()
	}
}

// event appends one event's entry to its job's chain.
func (f *pageFile) event(c pageChange) error {
	k := c.key
	if k.IsZero() {
		k = idmap.KeyOf(c.id)
	}
	ref, _ := f.get(k)
	if eventHeader+eventMeta+len(c.body) > maxPageEntry || ref.broken {
		ref.broken = true
		f.jobs.Put(ref)
		return nil
	}
	var head [eventHeader + eventMeta]byte
	binary.LittleEndian.PutUint64(head[0:], uint64(ref.hist))
	binary.LittleEndian.PutUint32(head[8:], ref.histLen)
	binary.LittleEndian.PutUint64(head[12:], c.seq)
	binary.LittleEndian.PutUint64(head[20:], uint64(c.at))
	off, err := f.write(head[:], c.body)
	if err != nil {
		return err
	}
	n := len(head) + len(c.body)
	ref.hist, ref.histLen = off+1, uint32(n)
	ref.events++
	ref.bytes += uint32(n)
	f.jobs.Put(ref)
	return nil
}

// record copies a change of a job's record (see pages.record), made at
// at (see pageRef.recAt).
func (f *pageFile) record(c events.JobChange, at uint32) error {
	ref, known := f.get(idmap.KeyOf(c.ID))
	if known && c.Revision <= ref.recRev {
		return nil
	}
	if c.Record == nil {
		// Deleted: its history goes with it (the store's retention
		// purges it too).
		f.garbage += int64(ref.bytes)
		f.jobs.Delete(ref.key)
		return nil
	}
	if ref.rec != 0 {
		f.garbage += int64(ref.recLen)
		ref.bytes -= ref.recLen
		ref.rec, ref.recLen = 0, 0
	}
	ref.recRev, ref.recAt = c.Revision, at
	if c.Record.Status.State.Terminal() && len(c.Raw) > 0 {
		off, err := f.write(c.Raw)
		if err != nil {
			return err
		}
		ref.rec, ref.recLen = off+1, uint32(len(c.Raw))
		ref.bytes += uint32(len(c.Raw))
	}
	f.jobs.Put(ref)
	return nil
}

// write appends parts and returns where they start.
func (f *pageFile) write(parts ...[]byte) (int64, error) {
	off, n := f.size, int64(0)
	for _, b := range parts {
		n += int64(len(b))
	}
	if off+n > f.max {
		return 0, fmt.Errorf("job pages: the copy would pass its %d bytes (page_copy.max_bytes)", f.max)
	}
	for _, b := range parts {
		n, err := f.w.Write(b)
		f.size += int64(n)
		if err != nil {
			return 0, fmt.Errorf("job pages: %w", err)
		}
	}
	return off, nil
}

// flush makes sure what was written is in the file, not only in the
// writer's buffer.
func (f *pageFile) flush() error {
	if f.size > f.flushed {
		if err := f.w.Flush(); err != nil {
			return fmt.Errorf("job pages: %w", err)
		}
		f.flushed = f.size
	}
	return nil
}

// retire closes a file no longer current once no read uses it.
func (f *pageFile) retire() {
	f.retired = true
	if f.readers == 0 {
		f.f.Close()
	}
}

// open returns the current file with a job's entries, flushed up to them,
// counted as in use until done is called; ok is false when the copy cannot
// answer for the job.
func (p *pages) open(id string) (f *pageFile, ref pageRef, ok bool) {
	if !p.ready() {
		return nil, ref, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, ref, false
	}
	f = p.cur
	ref, _ = f.get(idmap.Lookup(id))
	if ref.broken {
		return nil, ref, false
	}
	if max(ref.hist-1+int64(ref.histLen), ref.rec-1+int64(ref.recLen)) > f.flushed {
		if err := f.flush(); err != nil {
			p.fail(err)
			return nil, ref, false
		}
	}
	f.readers++
	return f, ref, true
}

// done ends a read of f begun by open.
func (p *pages) done(f *pageFile) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.readers--
	if f.retired && f.readers == 0 {
		f.f.Close()
	}
}

// finished returns a finished job's record from the copy when it holds
// the job's record at revision rev (the one the index has), and the job's
// newest limit events, oldest first. ok is false when the copy cannot
// answer: the caller reads the store.
func (p *pages) finished(id string, rev uint64, limit int, settled func(*job.Record) bool) (_ *job.Record, _ []events.HistoryEntry, ok bool) {
	f, ref, ok := p.open(id)
	if !ok {
		return nil, nil, false
	}
	defer p.done(f)
	if ref.rec == 0 || ref.recRev != rev || (ref.recAt != recInitial && !p.settledFor(ref)) {
		return nil, nil, false
	}
	b := make([]byte, ref.recLen)
	if _, err := f.f.ReadAt(b, ref.rec-1); err != nil {
		return nil, nil, false
	}
	r, err := events.DecodeRecord(b)
	if err != nil || r.ID != id || !settled(r) {
		return nil, nil, false
	}
	h, err := readChain(f.f, id, ref, limit)
	if err != nil {
		return nil, nil, false
	}
	return r, h, true
}

// settledFor says a record copied after the store was loaded has stayed
// the job's for settleAfter (wall time): the job's last events, stored
// after its record changed, have reached the copy, however far behind the
// store its follower ran. (The jobs' clock alone does not say it: the
// simulated cloud's runs many times faster.)
func (p *pages) settledFor(ref pageRef) bool {
	return ref.recAt > recInitial && time.Since(p.begun)-time.Duration(ref.recAt-2)*time.Second >= settleAfter
}

// history returns a job's newest limit events, oldest first, from the
// copy, when it holds the job's record and that has settled (jobSettled
// says the job finished long enough ago by the jobs' clock, which is what
// counts for a record copied while the store was being loaded); ok is
// false when it cannot answer.
func (p *pages) history(id string, limit int, jobSettled bool) (_ []events.HistoryEntry, ok bool) {
	return p.chain(id, limit, func(ref pageRef) bool {
		return ref.rec != 0 && (ref.recAt == recInitial && jobSettled || p.settledFor(ref))
	})
}

// chain reads a job's newest limit events, oldest first, if the copy
// holds the job's as when is true of; ok is false when it cannot answer.
func (p *pages) chain(id string, limit int, when func(pageRef) bool) (_ []events.HistoryEntry, ok bool) {
	f, ref, ok := p.open(id)
	if !ok {
		return nil, false
	}
	defer p.done(f)
	if !when(ref) {
		return nil, false
	}
	h, err := readChain(f.f, id, ref, limit)
	return h, err == nil
}

// walkChain hands fn a job's newest limit entries (0: all), newest first;
// the entry is fn's only until it returns.
func walkChain(f *os.File, ref pageRef, limit int, fn func(i int, entry []byte) error) error {
	n := int(ref.events)
	if limit > 0 {
		n = min(n, limit)
	}
	off, size := ref.hist, ref.histLen
	var buf []byte
	for i := n - 1; i >= 0; i-- {
		if off <= 0 || size < eventHeader+eventMeta || size > maxPageEntry {
			return errors.New("job pages: a chain ends early, or an entry is garbled")
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		if _, err := f.ReadAt(buf, off-1); err != nil {
			return err
		}
		if err := fn(i, buf); err != nil {
			return err
		}
		off, size = int64(binary.LittleEndian.Uint64(buf[0:])), binary.LittleEndian.Uint32(buf[8:])
	}
	return nil
}

// readChain reads a job's newest limit events from its chain, oldest
// first, slimmed as the history cache keeps them.
func readChain(f *os.File, id string, ref pageRef, limit int) ([]events.HistoryEntry, error) {
	n := int(ref.events)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]events.HistoryEntry, n)
	evs := make([]events.JobEvent, n)
	err := walkChain(f, ref, limit, func(i int, buf []byte) error {
		ev := &evs[i]
		if err := json.Unmarshal(buf[eventHeader+eventMeta:], ev); err != nil || ev.JobID != id {
			return errors.New("job pages: a garbled entry")
		}
		out[i] = events.HistoryEntry{
			Seq:      binary.LittleEndian.Uint64(buf[12:]),
			Envelope: events.Envelope{Time: time.Unix(0, int64(binary.LittleEndian.Uint64(buf[20:]))).UTC()},
			Event:    ev,
		}
		slim(&out[i], id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// compact copies the live entries of the current file to a new one, each
// job's together, and makes it current. It reads the old file without
// holding p.mu (events and records go on being copied to the old file,
// and kept in since); at the end it makes those changes on the new file
// too, under p.mu, and swaps. On any error the old file stays.
func (p *pages) compact() {
	p.mu.Lock()
	old := p.cur
	err := old.flush()
	snap := old.jobs.Clone()
	old.readers++
	p.since = nil
	hook := p.snapshotted
	p.mu.Unlock()
	if hook != nil {
		hook()
	}

	var nf *pageFile
	if err == nil {
		nf, err = newPageFile(p.dir, old.max)
	}
	var entries [][]byte
	for ref := range snap.All() {
		if err != nil {
			break
		}
		if ref.broken {
			nf.jobs.Put(pageRef{key: ref.key, broken: true, recRev: ref.recRev})
			continue
		}
		// The job's events, oldest first, each chained again in the new
		// file; then its record.
		entries = entries[:0]
		err = walkChain(old.f, *ref, 0, func(_ int, e []byte) error {
			entries = append(entries, slices.Clone(e))
			return nil
		})
		for i := len(entries) - 1; i >= 0 && err == nil; i-- {
			e := entries[i]
			err = nf.event(pageChange{seq: binary.LittleEndian.Uint64(e[12:]), at: int64(binary.LittleEndian.Uint64(e[20:])), key: ref.key, body: e[eventHeader+eventMeta:]})
		}
		r, _ := nf.get(ref.key)
		r.recRev, r.recAt = ref.recRev, ref.recAt
		if ref.rec != 0 && err == nil {
			b := make([]byte, ref.recLen)
			if _, err = old.f.ReadAt(b, ref.rec-1); err == nil {
				var off int64
				off, err = nf.write(b)
				r.rec, r.recLen, r.bytes = off+1, ref.recLen, r.bytes+ref.recLen
			}
		}
		nf.jobs.Put(r)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.since {
		if err != nil {
			break
		}
		if c.rec != nil {
			err = nf.record(*c.rec, c.recAt)
		} else {
			err = nf.event(c)
		}
	}
	p.compacting, p.since = false, nil
	old.readers--
	if err != nil || p.err != nil {
		if nf != nil {
			nf.retire()
		}
		if old.retired && old.readers == 0 {
			old.f.Close()
		}
		if err != nil {
			p.log.Warn("compacting the local copy of job pages", zap.Error(err))
		}
		return
	}
	p.log.Info("compacted the local copy of job pages", zap.Int64("from_bytes", old.size), zap.Int64("to_bytes", nf.size), zap.Int("jobs", nf.jobs.Len()))
	p.cur = nf
	p.compacted++
	old.retire()
}
