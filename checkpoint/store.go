package checkpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// objects is what a backend does for a Store: flat keys relative to the
// store's root, slash-separated. Everything else (layout, verification,
// visibility) is store's, written once.
type objects interface {
	// put stores body under key and verifies that the stored object is
	// what body read: same size, same digest (as far as the backend
	// reports one). A mismatch wraps ErrCorrupt.
	put(ctx context.Context, key string, body *source) error
	// get opens key for reading with its size; a missing key is errNoObject.
	get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// list returns every key under prefix.
	list(ctx context.Context, prefix string) ([]string, error)
	// delete removes keys; missing keys are not an error.
	delete(ctx context.Context, keys []string) error
	// uri is the store's URI; uri()+"/"+key names an object.
	uri() string
}

// maxManifestSize bounds what is read as a manifest (about 200 bytes a file).
const maxManifestSize = 64 << 20

// store is the one Store implementation, over a backend's objects.
type store struct {
	obj objects
	o   options

	mu       sync.Mutex
	inflight map[string]int // checkpointKey -> Saves in progress, spared by Prune
}

func newStore(obj objects, o options) *store {
	return &store{obj: obj, o: o, inflight: make(map[string]int)}
}

func (s *store) URI() string { return s.obj.uri() }

// readManifest reads and checks the manifest of a step: errNoObject if it
// has none, ErrCorrupt if it is malformed or belongs elsewhere.
func (s *store) readManifest(ctx context.Context, jobID string, step int64) (Manifest, error) {
	key := checkpointKey(jobID, step) + manifestName
	rc, size, err := s.obj.get(ctx, key)
	if err != nil {
		return Manifest{}, err
	}
	defer rc.Close()
	if size > maxManifestSize {
		return Manifest{}, fmt.Errorf("%w: manifest %s is %d bytes", ErrCorrupt, key, size)
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(rc, maxManifestSize)).Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, key, err)
	}
	if m.JobID != jobID || m.Step != step {
		return Manifest{}, fmt.Errorf("%w: manifest %s is of job %s step %d", ErrCorrupt, key, m.JobID, m.Step)
	}
	if err := m.check(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// stepKeys is what a job holds under one step.
type stepKeys struct {
	step     int64
	keys     []string
	manifest bool
}

// scanJob groups a job's keys by step, in step order. Keys outside the
// layout are left alone: they are not the store's.
func (s *store) scanJob(ctx context.Context, jobID string) ([]*stepKeys, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	keys, err := s.obj.list(ctx, jobID+"/")
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints of job %s: %w", jobID, err)
	}
	byStep := make(map[int64]*stepKeys)
	for _, k := range keys {
		dir, rest, ok := strings.Cut(strings.TrimPrefix(k, jobID+"/"), "/")
		step, isStep := parseStepDir(dir)
		if !ok || !isStep || rest == "" {
			continue
		}
		sk := byStep[step]
		if sk == nil {
			sk = &stepKeys{step: step}
			byStep[step] = sk
		}
		sk.keys = append(sk.keys, k)
		sk.manifest = sk.manifest || rest == manifestName
	}
	steps := make([]*stepKeys, 0, len(byStep))
	for _, sk := range byStep {
		steps = append(steps, sk)
	}
	slices.SortFunc(steps, func(a, b *stepKeys) int { return cmp.Compare(a.step, b.step) })
	return steps, nil
}

// complete returns the manifests of the steps that have a valid one, oldest
// first. Steps whose manifest is malformed (or vanished meanwhile) are not
// complete checkpoints and are skipped.
func (s *store) complete(ctx context.Context, jobID string, steps []*stepKeys) ([]Manifest, error) {
	var ms []Manifest
	for _, sk := range steps {
		if !sk.manifest {
			continue
		}
		m, err := s.readManifest(ctx, jobID, sk.step)
		switch {
		case err == nil:
			ms = append(ms, m)
		case errors.Is(err, ErrCorrupt) || errors.Is(err, errNoObject):
		default:
			return nil, err
		}
	}
	return ms, nil
}

func (s *store) List(ctx context.Context, jobID string) ([]Manifest, error) {
	steps, err := s.scanJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	return s.complete(ctx, jobID, steps)
}

func (s *store) Latest(ctx context.Context, jobID string) (Manifest, error) {
	steps, err := s.scanJob(ctx, jobID)
	if err != nil {
		return Manifest{}, err
	}
	// Newest first, reading manifests only until one is good.
	for i := len(steps) - 1; i >= 0; i-- {
		ms, err := s.complete(ctx, jobID, steps[i:i+1])
		if err != nil {
			return Manifest{}, err
		}
		if len(ms) == 1 {
			return ms[0], nil
		}
	}
	return Manifest{}, fmt.Errorf("%w: job %s has no complete checkpoint", ErrNotFound, jobID)
}

func (s *store) Prune(ctx context.Context, jobID string, keep int) error {
	if keep < 0 {
		return fmt.Errorf("pruning checkpoints of job %s: keep %d < 0", jobID, keep)
	}
	steps, err := s.scanJob(ctx, jobID)
	if err != nil {
		return err
	}
	ms, err := s.complete(ctx, jobID, steps)
	if err != nil {
		return fmt.Errorf("pruning checkpoints of job %s: %w", jobID, err)
	}
	if len(ms) == 0 {
		return nil // whatever is there may be a first upload in progress
	}
	newest := ms[len(ms)-1].Step
	kept := make(map[int64]bool)
	for _, m := range ms[max(0, len(ms)-keep):] {
		kept[m.Step] = true
	}
	var doomed []*stepKeys
	for _, sk := range steps {
		inProgress := !sk.manifest && sk.step >= newest || s.saving(checkpointKey(jobID, sk.step))
		if kept[sk.step] || inProgress {
			continue
		}
		doomed = append(doomed, sk)
	}
	if err := s.deleteSteps(ctx, doomed); err != nil {
		return fmt.Errorf("pruning checkpoints of job %s: %w", jobID, err)
	}
	return nil
}

func (s *store) Delete(ctx context.Context, jobID string) error {
	steps, err := s.scanJob(ctx, jobID)
	if err != nil {
		return err
	}
	if err := s.deleteSteps(ctx, steps); err != nil {
		return fmt.Errorf("deleting checkpoints of job %s: %w", jobID, err)
	}
	return nil
}

// deleteSteps deletes the manifests first, so no checkpoint is ever visible
// with some of its files gone.
func (s *store) deleteSteps(ctx context.Context, steps []*stepKeys) error {
	var manifests, rest []string
	for _, sk := range steps {
		for _, k := range sk.keys {
			if strings.HasSuffix(k, "/"+manifestName) && strings.Count(k, "/") == 2 {
				manifests = append(manifests, k)
			} else {
				rest = append(rest, k)
			}
		}
	}
	if len(manifests) > 0 {
		if err := s.obj.delete(ctx, manifests); err != nil {
			return err
		}
	}
	if len(rest) > 0 {
		return s.obj.delete(ctx, rest)
	}
	return nil
}

// each runs fn for 0..n-1 on up to the configured number of goroutines.
func (s *store) each(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	return parallel(ctx, n, s.o.concurrency, fn)
}

// parallel runs fn for 0..n-1 on up to limit goroutines and returns the
// first error, cancelling the others' context.
func parallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(n, max(limit, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel(err) })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}
