package checkpoint

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// localFile is a file found in a checkpoint directory.
type localFile struct {
	rel  string // slash-separated, relative to the directory
	path string
	info fs.FileInfo // from Lstat, to notice a file replaced during Save
}

// scanDir lists the regular files under dir, sorted by relative path. It
// refuses what could make a checkpoint escape its directory or silently lose
// data: symlinks, special files, unclean names, and a top-level file that
// would collide with the manifest. The top-level ".done" marker is skipped.
func scanDir(dir string) ([]localFile, error) {
	root, err := filepath.EvalSymlinks(dir) // the directory itself may be a link
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory: %w", err)
	}
	var files []localFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink: checkpoints hold regular files only", rel)
		case t.IsDir():
			return checkRel(rel)
		case !t.IsRegular():
			return fmt.Errorf("%s is not a regular file (%s)", rel, t)
		case rel == ".done":
			return nil
		case rel == manifestName:
			return fmt.Errorf("%s: the name is reserved for the checkpoint's manifest", rel)
		}
		if err := checkRel(rel); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, localFile{rel: rel, path: p, info: info})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scanning checkpoint directory %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, nil
}

// openLocal opens a scanned file for reading and checks it is still the
// file that was scanned (not swapped for a link or another file).
func openLocal(lf localFile) (*os.File, error) {
	f, err := os.Open(lf.path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !os.SameFile(fi, lf.info) || fi.Size() != lf.info.Size() {
		f.Close()
		return nil, fmt.Errorf("%s changed while the checkpoint was being saved", lf.rel)
	}
	return f, nil
}

// unchanged reports an error if f was modified since it was scanned: what
// was uploaded would not be the checkpoint the workload completed.
func unchanged(f *os.File, lf localFile) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != lf.info.Size() || !fi.ModTime().Equal(lf.info.ModTime()) {
		return fmt.Errorf("%s changed while the checkpoint was being saved", lf.rel)
	}
	return nil
}

// source is the body of one upload: a fixed-size section of a file (or of a
// manifest in memory), hashed as it is read so the digest is of the bytes
// actually sent. The SDKs seek back to the start to compute their own
// checksums or to retry; the hash starts over then. It never closes the
// file underneath: the SDKs close bodies after a request, and a retry must
// still be able to read.
type source struct {
	mu     sync.Mutex
	r      *io.SectionReader
	size   int64
	sha    hash.Hash
	md5    hash.Hash
	hashed int64 // bytes hashed, contiguous from the start
	skewed bool  // a read did not continue where hashing left off
}

func newSource(r io.ReaderAt, size int64) *source {
	return &source{r: io.NewSectionReader(r, 0, size), size: size, sha: sha256.New(), md5: md5.New()}
}

func (s *source) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, _ := s.r.Seek(0, io.SeekCurrent)
	n, err := s.r.Read(p)
	switch {
	case pos == s.hashed:
		s.sha.Write(p[:n])
		s.md5.Write(p[:n])
		s.hashed += int64(n)
	case pos+int64(n) > s.hashed:
		s.skewed = true
	}
	return n, err
}

func (s *source) Seek(offset int64, whence int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, err := s.r.Seek(offset, whence)
	if err == nil && pos == 0 {
		s.sha.Reset()
		s.md5.Reset()
		s.hashed, s.skewed = 0, false
	}
	return pos, err
}

// Close does nothing; see source.
func (s *source) Close() error { return nil }

// Size is the number of bytes the upload sends.
func (s *source) Size() int64 { return s.size }

// sums returns the SHA-256 and MD5 of the bytes read, once the whole
// section was read in order.
func (s *source) sums() (sha, md []byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skewed || s.hashed != s.size {
		return nil, nil, fmt.Errorf("upload read %d of %d bytes in order: cannot vouch for what was sent", s.hashed, s.size)
	}
	return s.sha.Sum(nil), s.md5.Sum(nil), nil
}

// ctxReader stops a long local copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// copyBufPool holds the buffers of local copies and downloads: 1 MiB each,
// so a many-GB file costs a few thousand reads and no more memory.
var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

func copyBuffered(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	return io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, *bp)
}

// onlyWriter and onlyReader hide ReadFrom/WriteTo so io.CopyBuffer really
// uses the pooled buffer.
type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

var errNoObject = errors.New("no such object")
