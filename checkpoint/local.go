package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// dirObjects keeps objects as files under a root directory. Every put goes
// to a temporary file that is synced and renamed into place, so an object is
// either whole or absent, and a manifest that exists was written after the
// files it names reached the disk.
type dirObjects struct {
	root string
}

func openDir(dir string) (*dirObjects, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &dirObjects{root: root}, nil
}

func (d *dirObjects) uri() string { return "file://" + filepath.ToSlash(d.root) }

func (d *dirObjects) path(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

func (d *dirObjects) put(ctx context.Context, key string, body *source) error {
	p := d.path(key)
	dir := filepath.Dir(p)
	tmp, err := createTemp(dir, filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	n, err := copyBuffered(tmp, ctxReader{ctx, body})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != body.Size() {
		return fmt.Errorf("%w: wrote %d of %d bytes of %s", ErrCorrupt, n, body.Size(), key)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	return syncDir(dir)
}

// createTemp creates a temporary file in dir, creating dir first. A Prune
// removing emptied directories may race with it, so it tries again when dir
// vanishes in between.
func createTemp(dir, pattern string) (f *os.File, err error) {
	for range 3 {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if f, err = os.CreateTemp(dir, pattern); !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
	}
	return nil, err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (d *dirObjects) get(_ context.Context, key string) (io.ReadCloser, int64, error) {
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, errNoObject
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, errNoObject
	}
	return f, fi.Size(), nil
}

func (d *dirObjects) list(_ context.Context, prefix string) ([]string, error) {
	// Prefixes are directories here (a job's "<job>/").
	start := d.path(prefix)
	var keys []string
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == start {
			return fs.SkipAll
		}
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	return keys, err
}

func (d *dirObjects) delete(_ context.Context, keys []string) error {
	dirs := make(map[string]bool)
	for _, k := range keys {
		p := d.path(k)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for dir := filepath.Dir(p); dir != d.root && strings.HasPrefix(dir, d.root); dir = filepath.Dir(dir) {
			dirs[dir] = true
		}
	}
	// Remove directories left empty, deepest first; a non-empty one stays.
	sorted := make([]string, 0, len(dirs))
	for dir := range dirs {
		sorted = append(sorted, dir)
	}
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) })
	for _, dir := range sorted {
		_ = os.Remove(dir)
	}
	return nil
}
