package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

func (s *store) Save(ctx context.Context, jobID string, attempt int, step int64, progress float64, dir string) (Manifest, error) {
	m, err := s.save(ctx, jobID, attempt, step, progress, dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("saving checkpoint of job %s at step %d: %w", jobID, step, err)
	}
	return m, nil
}

func (s *store) save(ctx context.Context, jobID string, attempt int, step int64, progress float64, dir string) (Manifest, error) {
	if err := checkJobID(jobID); err != nil {
		return Manifest{}, err
	}
	if step < 0 || attempt < 0 || math.IsNaN(progress) || progress < 0 || progress > 1 {
		return Manifest{}, fmt.Errorf("invalid attempt %d, step %d or progress %v", attempt, step, progress)
	}
	files, err := scanDir(dir)
	if err != nil {
		return Manifest{}, err
	}
	if len(files) == 0 {
		// More likely a wrong directory than a job with no state.
		return Manifest{}, fmt.Errorf("checkpoint directory %s holds no files", dir)
	}
	base := checkpointKey(jobID, step)
	old, err := s.readManifest(ctx, jobID, step)
	switch {
	case err == nil:
		return s.resave(ctx, old, files)
	case !errors.Is(err, errNoObject) && !errors.Is(err, ErrCorrupt):
		return Manifest{}, err
	}

	defer s.begin(base)()
	m := Manifest{
		JobID:    jobID,
		Attempt:  attempt,
		Step:     step,
		Progress: progress,
		Files:    make([]File, len(files)),
		Location: s.obj.uri() + "/" + strings.TrimSuffix(base, "/"),
	}
	err = s.each(ctx, len(files), func(ctx context.Context, i int) error {
		f, err := s.upload(ctx, base, files[i])
		m.Files[i] = f
		return err
	})
	if err == nil {
		for _, f := range m.Files {
			m.Size += f.Size
		}
		m.SHA256 = digest(m.Files)
		m.CreatedAt = s.o.clock.Now().UTC()
		err = s.putManifest(ctx, base, &m)
	}
	if err != nil {
		s.discard(ctx, base, files)
		return Manifest{}, err
	}
	return m, nil
}

// resave handles a Save of a step that is already complete: a retry of a
// Save that succeeded returns the stored manifest; other content is refused
// rather than written over the good checkpoint.
func (s *store) resave(ctx context.Context, old Manifest, files []localFile) (Manifest, error) {
	got := make([]File, len(files))
	err := s.each(ctx, len(files), func(ctx context.Context, i int) error {
		f, err := openLocal(files[i])
		if err != nil {
			return err
		}
		defer f.Close()
		src := newSource(f, files[i].info.Size())
		if _, err := copyBuffered(io.Discard, ctxReader{ctx, src}); err != nil {
			return err
		}
		sha, _, err := src.sums()
		got[i] = File{Path: files[i].rel, Size: src.Size(), SHA256: hex.EncodeToString(sha)}
		return err
	})
	if err != nil {
		return Manifest{}, err
	}
	if digest(got) != old.SHA256 {
		return Manifest{}, fmt.Errorf("%w with other content (%s)", ErrExists, old.SHA256)
	}
	return old, nil
}

// upload streams one file to the store, hashing it on the way.
func (s *store) upload(ctx context.Context, base string, lf localFile) (File, error) {
	f, err := openLocal(lf)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	var r io.ReaderAt = f
	if s.o.sourceHook != nil {
		r = s.o.sourceHook(lf.rel, r)
	}
	src := newSource(r, lf.info.Size())
	if err := s.obj.put(ctx, base+lf.rel, src); err != nil {
		return File{}, fmt.Errorf("uploading %s: %w", lf.rel, err)
	}
	if err := unchanged(f, lf); err != nil {
		return File{}, err
	}
	sha, _, err := src.sums()
	if err != nil {
		return File{}, fmt.Errorf("uploading %s: %w", lf.rel, err)
	}
	return File{Path: lf.rel, Size: src.Size(), SHA256: hex.EncodeToString(sha)}, nil
}

func (s *store) putManifest(ctx context.Context, base string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := s.obj.put(ctx, base+manifestName, newSource(bytes.NewReader(data), int64(len(data)))); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	return nil
}

// discard removes what a failed Save uploaded, manifest first, so nothing
// half-written is left visible; it is best effort (Prune removes leftovers)
// and outlives a cancelled ctx.
func (s *store) discard(ctx context.Context, base string, files []localFile) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.obj.delete(ctx, []string{base + manifestName}); err != nil {
		return // a manifest that may exist must not lose its files
	}
	keys := make([]string, len(files))
	for i, f := range files {
		keys[i] = base + f.rel
	}
	_ = s.obj.delete(ctx, keys)
}

// begin marks a Save in progress, so Prune spares its objects; the returned
// func ends the mark.
func (s *store) begin(base string) func() {
	s.mu.Lock()
	s.inflight[base]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.inflight[base]--; s.inflight[base] == 0 {
			delete(s.inflight, base)
		}
		s.mu.Unlock()
	}
}

func (s *store) saving(base string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[base] > 0
}
