package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/job"
)

// Errors of the key-value stores.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	// ErrConflict means the value changed since it was read: re-read,
	// re-apply, retry.
	ErrConflict = errors.New("revision conflict")
)

// mapKVError turns JetStream's KV errors into this package's.
func mapKVError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", ErrExists, err)
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// KV is a bucket of byte values with revision-checked writes.
type KV struct{ kv jetstream.KeyValue }

// Get returns a value and its revision.
func (k *KV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := k.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, mapKVError(err)
	}
	return e.Value(), e.Revision(), nil
}

// Put writes a value unconditionally.
func (k *KV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := k.kv.Put(ctx, key, value)
	return rev, mapKVError(err)
}

// Create writes a value only if the key does not exist.
func (k *KV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := k.kv.Create(ctx, key, value)
	return rev, mapKVError(err)
}

// Update writes a value only if its revision is still rev.
func (k *KV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	nrev, err := k.kv.Update(ctx, key, value, rev)
	return nrev, mapKVError(err)
}

// Delete removes a key; deleting a missing key is not an error.
func (k *KV) Delete(ctx context.Context, key string) error {
	err := mapKVError(k.kv.Delete(ctx, key))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Keys lists the keys present.
func (k *KV) Keys(ctx context.Context) ([]string, error) {
	lister, err := k.kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	for key := range lister.Keys() {
		keys = append(keys, key)
	}
	return keys, nil
}

// Entry is one value seen by a watch. Value is nil for a deleted key.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
}

// Watch calls fn for every current value, then calls ready once, then for
// every change until ctx ends or stop is called; stop returns once fn no
// longer runs. fn runs on one goroutine.
func (k *KV) Watch(ctx context.Context, fn func(Entry), ready func()) (stop func(), err error) {
	return k.watch(ctx, "", func(e jetstream.KeyValueEntry) {
		if e == nil {
			if ready != nil {
				ready()
			}
			return
		}
		var v []byte
		if e.Operation() == jetstream.KeyValuePut {
			v = e.Value()
		}
		fn(Entry{Key: e.Key(), Value: v, Revision: e.Revision()})
	})
}

// WatchKey calls fn with a key's current value (if it has one) and then
// with every new one (nil when deleted) until ctx ends or stop is called.
func (k *KV) WatchKey(ctx context.Context, key string, fn func(value []byte)) (stop func(), err error) {
	return k.watch(ctx, key, func(e jetstream.KeyValueEntry) {
		switch {
		case e == nil:
		case e.Operation() == jetstream.KeyValuePut:
			fn(e.Value())
		default:
			fn(nil)
		}
	})
}

// watch delivers a watch's entries (nil once the current values are
// through) to fn on one goroutine, every key when key is "".
func (k *KV) watch(ctx context.Context, key string, fn func(jetstream.KeyValueEntry), opts ...jetstream.WatchOpt) (stop func(), err error) {
	wctx, cancel := context.WithCancel(ctx)
	var w jetstream.KeyWatcher
	if key == "" {
		w, err = k.kv.WatchAll(wctx, opts...)
	} else {
		w, err = k.kv.Watch(wctx, key, opts...)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching %s: %w", k.kv.Bucket(), err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-wctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok || wctx.Err() != nil {
					return
				}
				fn(e)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// JobStore keeps job records in the job-state bucket. Writes are checked
// against the revision the writer read, so two writers never silently
// overwrite each other: the loser gets ErrConflict and re-reads.
type JobStore struct {
	kv  jetstream.KeyValue
	log *zap.Logger
	// seen holds the records watchers decoded last, shared by the other
	// watchers of the same versions (see watched).
	seen decodedVersions
	// reads are the bucket on the read connections, for Read.
	reads    []jetstream.KeyValue
	readNext atomic.Uint64
}

// Create stores a new record; ErrExists if the ID is taken.
func (s *JobStore) Create(ctx context.Context, r *job.Record) (uint64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Create(ctx, r.ID, b)
	return rev, mapKVError(err)
}

// Get reads a record and its revision; ErrNotFound if there is none.
func (s *JobStore) Get(ctx context.Context, id string) (*job.Record, uint64, error) {
	return s.getRecord(ctx, s.kv, id)
}

// getRecord reads a record through kv: a copy of the version this process
// decoded or wrote, when it has it, else decoded (and kept).
func (s *JobStore) getRecord(ctx context.Context, kv jetstream.KeyValue, id string) (*job.Record, uint64, error) {
	if !job.ValidID(id) {
		return nil, 0, fmt.Errorf("%w: %q is not a job ID", ErrNotFound, id)
	}
	e, err := kv.Get(ctx, id)
	if err != nil {
		return nil, 0, mapKVError(err)
	}
	if r := s.seen.version(e.Revision()); r != nil && r.ID == id {
		return r.Clone(), e.Revision(), nil
	}
	r, err := DecodeRecord(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("job %s: %w", id, err)
	}
	// Kept for the next read of this version: a reader that goes on to
	// change the record (reconciliation) reads it again in Modify.
	return s.seen.keep(e.Revision(), r).Clone(), e.Revision(), nil
}

// purge removes a record and its older revisions.
func (s *JobStore) purge(ctx context.Context, id string) error {
	err := s.kv.Purge(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return mapKVError(err)
}

// Read is Get for readers that write nothing back (the API's views): it
// goes over the read connections, so that many of them are answered at
// once.
func (s *JobStore) Read(ctx context.Context, id string) (*job.Record, uint64, error) {
	if len(s.reads) == 0 {
		return s.Get(ctx, id)
	}
	kv := s.reads[s.readNext.Add(1)%uint64(len(s.reads))]
	return s.getRecord(ctx, kv, id)
}

// DecodeRecord reads a stored record, refusing one that is garbled.
func DecodeRecord(b []byte) (*job.Record, error) {
	var r job.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &DecodeError{fmt.Errorf("job record: %w", err)}
	}
	if !job.ValidID(r.ID) || !r.Status.State.Valid() {
		return nil, &DecodeError{errors.New("job record: bad id or state")}
	}
	return &r, nil
}

// Update writes r if the stored revision is still rev; ErrConflict if not.
func (s *JobStore) Update(ctx context.Context, r *job.Record, rev uint64) (uint64, error) {
	nrev, _, err := s.update(ctx, r, rev)
	return nrev, err
}

func (s *JobStore) update(ctx context.Context, r *job.Record, rev uint64) (uint64, []byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, nil, err
	}
	nrev, err := s.kv.Update(ctx, r.ID, b, rev)
	return nrev, b, mapKVError(err)
}

// ErrNoChange, returned by a Modify function, skips the write.
var ErrNoChange = errors.New("no change")

// Modify reads a record, applies fn to a copy and writes it back with a
// revision check, retrying on conflicts. If fn returns ErrNoChange the
// record is returned unwritten; any other error aborts.
//
// The first try starts from the newest version of the record this
// process decoded or wrote, when it holds one, without reading the
// store: the revision check refuses the write if the store has a newer
// one. A verdict on that version that writes nothing (ErrNoChange, an
// error) is made again on the record read from the store, since only a
// write proves a version the latest.
func (s *JobStore) Modify(ctx context.Context, id string, fn func(r *job.Record) error) (*job.Record, uint64, error) {
	return s.ModifyFrom(ctx, id, nil, 0, fn)
}

// ModifyFrom is Modify for a caller that holds a version of the record
// (from, at revision rev, as Watch gave it: not changed here): the first
// try starts from it when it is newer than any this process keeps. A
// caller that watches the bucket holds the versions of the jobs it works
// on longer than the few seconds of writes this process keeps.
func (s *JobStore) ModifyFrom(ctx context.Context, id string, from *job.Record, rev uint64, fn func(r *job.Record) error) (*job.Record, uint64, error) {
	hint, hintRev := from, rev
	for attempt := 0; ; attempt++ {
		r, rev, cached := (*job.Record)(nil), uint64(0), false
		if attempt == 0 {
			c, crev := s.seen.newest(id)
			if hint != nil && hint.ID == id && hintRev > crev {
				c, crev = hint, hintRev
			}
			if c != nil {
				r, rev, cached = c.Clone(), crev, true
			}
		}
		if !cached {
			var err error
			if r, rev, err = s.Get(ctx, id); err != nil {
				return nil, 0, err
			}
		}
		if err := fn(r); err != nil {
			if cached {
				continue
			}
			if errors.Is(err, ErrNoChange) {
				return r, rev, nil
			}
			return nil, 0, err
		}
		nrev, b, err := s.update(ctx, r, rev)
		if err == nil {
			// The version written is kept as decoding it would give (its
			// spec is the one read, which was decoded): the watchers of
			// this process, and the next change, take it from here.
			if c, ok := storedForm(r); ok {
				if checkStoredForms {
					checkStoredForm(c, b)
				}
				s.seen.keep(nrev, c)
			}
			return r, nrev, nil
		}
		if !errors.Is(err, ErrConflict) || attempt >= 20 {
			return nil, 0, err
		}
		if !cached {
			time.Sleep(time.Duration(attempt+1) * time.Millisecond)
		}
	}
}

// JobChange is one change to the job bucket seen by Watch. Record is nil
// when the job was deleted.
type JobChange struct {
	ID       string
	Revision uint64
	Record   *job.Record
	// Raw is the record as stored (DecodeRecord reads it), shared: not
	// to be changed. Nil when the job was deleted, and from WatchFrom.
	Raw []byte
}

// Watch calls fn for every stored record, then ready, then for every change
// until ctx ends or stop is called (it returns once fn no longer runs).
// Garbled records are logged and skipped. The records fn gets are shared
// with the store's other watchers: fn must not change them.
func (s *JobStore) Watch(ctx context.Context, fn func(JobChange), ready func()) (stop func(), err error) {
	return (&KV{kv: s.kv}).Watch(ctx, func(e Entry) {
		if e.Value == nil {
			fn(JobChange{ID: changeID(e.Key, nil), Revision: e.Revision})
			return
		}
		r, err := s.watched(e.Revision, e.Value)
		if err != nil {
			s.log.Warn("skipping garbled job record", zap.String("job", e.Key), zap.Error(err))
			return
		}
		fn(JobChange{ID: changeID(e.Key, r), Revision: e.Revision, Record: r, Raw: e.Value})
	}, ready)
}

// changeID is the job ID a watcher is told of: the record's own when it
// has one (shared by every watcher of the version), else a copy of the
// key. The key is cut from the message's subject, which a watcher keeping
// the ID (in a map, for as long as the job is known) would keep whole, one
// subject for each watcher.
func changeID(key string, r *job.Record) string {
	if r != nil && r.ID == key {
		return r.ID
	}
	return strings.Clone(key)
}

// Keys lists every job ID in the bucket.
func (s *JobStore) Keys(ctx context.Context) ([]string, error) {
	return (&KV{kv: s.kv}).Keys(ctx)
}

// decodedVersions keeps the last versions of records decoded for watchers
// or written by Modify (by bucket revision, which names one version): the
// scheduler, the API's index and the ledger watch the same bucket in one
// process, and each version is decoded once for all of them rather than
// once each, and not at all when this process wrote it.
type decodedVersions struct {
	mu   sync.Mutex
	recs map[uint64]*job.Record
	ring [decodedKept]uint64 // revisions in recs, oldest at next
	next int
	// newestOf is the newest revision in recs of each job there.
	newestOf map[string]uint64
}

// decodedKept bounds the versions kept: watchers that keep up with the
// bucket are within a few hundred versions of each other. At 200
// submissions a second (1,600 versions a second), 1,024 decoded 0.9%
// more versions than 4,096 did; a quiet server holding 100,000 queued
// jobs keeps 12 MB less of heap (the kept versions' small strings are
// spread over pages the burst of submissions left part-full).
const decodedKept = 1024

// version is the record of version rev if a watcher decoded it (shared:
// not to be changed), else nil.
func (d *decodedVersions) version(rev uint64) *job.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.recs[rev]
}

// newest is the newest version of job id kept (shared: not to be
// changed) and its revision; nil if none is.
func (d *decodedVersions) newest(id string) (*job.Record, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rev, ok := d.newestOf[id]
	if !ok {
		return nil, 0
	}
	return d.recs[rev], rev
}

// watched decodes the record of version rev, or returns the one another
// watcher decoded.
func (s *JobStore) watched(rev uint64, b []byte) (*job.Record, error) {
	d := &s.seen
	d.mu.Lock()
	r, ok := d.recs[rev]
	d.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := DecodeRecord(b)
	if err != nil {
		return nil, err
	}
	return d.keep(rev, r), nil
}

// keep keeps r as the record of version rev, unless one is kept already,
// and returns the one kept. r is shared from then on: not to be changed.
func (d *decodedVersions) keep(rev uint64, r *job.Record) *job.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	if had, ok := d.recs[rev]; ok {
		return had
	}
	if d.recs == nil {
		d.recs = make(map[uint64]*job.Record, decodedKept)
		d.newestOf = make(map[string]uint64, decodedKept)
	}
	if old := d.ring[d.next]; old != 0 {
		if o := d.recs[old]; o != nil && d.newestOf[o.ID] == old {
			delete(d.newestOf, o.ID)
		}
		delete(d.recs, old)
	}
	d.ring[d.next] = rev
	d.next = (d.next + 1) % decodedKept
	d.recs[rev] = r
	if rev > d.newestOf[r.ID] {
		d.newestOf[r.ID] = rev
	}
	return r
}

// WatchFrom calls fn with every version of every job record stored from
// revision from on (the bucket's older versions, while kept, included), in
// order, and then with every new one, until stop. from 0 starts with the
// latest version of each record. A reader that keeps its place (the cost
// ledger's writer) resumes where it stopped without reading the whole
// bucket again. Like Watch's, the records are shared: fn must not change
// them.
func (s *JobStore) WatchFrom(ctx context.Context, from uint64, fn func(JobChange)) (stop func(), err error) {
	var opts []jetstream.WatchOpt
	if from > 0 {
		opts = append(opts, jetstream.ResumeFromRevision(from))
	}
	return (&KV{kv: s.kv}).watch(ctx, "", func(e jetstream.KeyValueEntry) {
		if e == nil {
			return
		}
		ch := JobChange{Revision: e.Revision()}
		if e.Operation() == jetstream.KeyValuePut {
			r, err := s.watched(e.Revision(), e.Value())
			if err != nil {
				s.log.Warn("skipping garbled job record", zap.String("job", e.Key()), zap.Error(err))
				return
			}
			ch.Record = r
		}
		ch.ID = changeID(e.Key(), ch.Record)
		fn(ch)
	}, opts...)
}
