package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func (s *store) Restore(ctx context.Context, m Manifest, dir string) error {
	if err := s.restore(ctx, m, dir); err != nil {
		if cerr := emptyDir(dir); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return fmt.Errorf("restoring checkpoint of job %s at step %d: %w", m.JobID, m.Step, err)
	}
	return nil
}

func (s *store) restore(ctx context.Context, m Manifest, dir string) error {
	// The manifest may come from a remote store: its paths are checked
	// before anything is written under dir.
	if err := m.check(); err != nil {
		return err
	}
	if err := emptyDir(dir); err != nil {
		return err
	}
	base := checkpointKey(m.JobID, m.Step)
	return s.each(ctx, len(m.Files), func(ctx context.Context, i int) error {
		return s.download(ctx, base, m.Files[i], dir)
	})
}

// download streams one file into dir, hashing it on the way. A missing
// object, another size or another digest is ErrCorrupt; a failure to read
// or write is not (trying an older checkpoint would not help).
func (s *store) download(ctx context.Context, base string, f File, dir string) error {
	rc, size, err := s.obj.get(ctx, base+f.Path)
	if errors.Is(err, errNoObject) {
		return fmt.Errorf("%w: %s is missing", ErrCorrupt, f.Path)
	}
	if err != nil {
		return fmt.Errorf("downloading %s: %w", f.Path, err)
	}
	defer rc.Close()
	if size != f.Size {
		return fmt.Errorf("%w: %s is %d bytes, manifest says %d", ErrCorrupt, f.Path, size, f.Size)
	}
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	// One byte more than expected is enough to notice a longer object.
	n, err := copyBuffered(io.MultiWriter(out, h), ctxReader{ctx, io.LimitReader(rc, f.Size+1)})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("downloading %s: %w", f.Path, err)
	case n != f.Size:
		return fmt.Errorf("%w: %s: got %d bytes, manifest says %d", ErrCorrupt, f.Path, n, f.Size)
	case hex.EncodeToString(h.Sum(nil)) != f.SHA256:
		return fmt.Errorf("%w: %s: sha256 %x, manifest says %s", ErrCorrupt, f.Path, h.Sum(nil), f.SHA256)
	}
	return nil
}

// emptyDir makes dir an empty directory, creating it if needed; a symlink
// inside is removed, never followed.
func emptyDir(dir string) error {
	if dir == "" || filepath.Dir(filepath.Clean(dir)) == filepath.Clean(dir) {
		return fmt.Errorf("refusing to empty %q to restore into it", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
