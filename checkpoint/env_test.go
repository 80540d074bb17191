package checkpoint

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/job"
)

// testEnv is a fresh, empty store on one backend.
type testEnv struct {
	Store
	clock *clock.Fake
	hooks *sourceHooks
	// rot damages a stored object at rest (key relative to the store).
	rot func(t *testing.T, key string)
	// fake is the server's storage, nil for the local backend.
	fake *fakeStorage
}

// backend opens test stores of one kind.
type backend struct {
	name string
	open func(t *testing.T, opts ...Option) *testEnv
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func backends() []backend {
	return []backend{
		{"local", func(t *testing.T, opts ...Option) *testEnv {
			root := t.TempDir()
			e := openEnv(t, root, opts)
			e.rot = func(t *testing.T, key string) { flipFileByte(t, filepath.Join(root, filepath.FromSlash(key))) }
			return e
		}},
		{"s3", func(t *testing.T, opts ...Option) *testEnv { return openS3Env(t, true, opts) }},
		{"s3-plain-http", func(t *testing.T, opts ...Option) *testEnv { return openS3Env(t, false, opts) }},
		{"azblob", func(t *testing.T, opts ...Option) *testEnv {
			f := newFakeAzure(t)
			e := openEnv(t, "azblob://devstore/ckpt/teams/nlp", append(f.options(), opts...))
			e.fake = f.fakeStorage
			e.rot = func(t *testing.T, key string) { f.rot(t, "teams/nlp/"+key) }
			return e
		}},
	}
}

func openS3Env(t *testing.T, tls bool, opts []Option) *testEnv {
	f := newFakeS3(t, tls)
	e := openEnv(t, "s3://ckpt/teams/nlp", append(f.options(), opts...))
	e.fake = f.fakeStorage
	e.rot = func(t *testing.T, key string) { f.rot(t, "teams/nlp/"+key) }
	return e
}

func openEnv(t *testing.T, uri string, opts []Option) *testEnv {
	t.Helper()
	e := &testEnv{clock: clock.NewFake(epoch), hooks: &sourceHooks{}}
	s, err := Open(context.Background(), uri, append([]Option{WithClock(e.clock), withSourceHook(e.hooks.wrap)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.Store = s
	return e
}

// keys lists what the store holds under prefix, through the backend.
func (e *testEnv) keys(t *testing.T, prefix string) []string {
	t.Helper()
	keys, err := e.Store.(*store).obj.list(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// save writes files (and a .done marker) into a new directory and saves it.
func (e *testEnv) save(t *testing.T, jobID string, step int64, files map[string]string) Manifest {
	t.Helper()
	m, err := e.Save(context.Background(), jobID, 1, step, float64(step)/1e6, writeTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	return m
}

func newJobID() string { return job.NewID(time.Now()) }

// writeTree creates a directory holding files (path -> content) and the
// workload's .done marker.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".done"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readTree returns the regular files under dir (path -> content).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			t.Errorf("%s is not a regular file", p)
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func assertTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := readTree(t, dir)
	if !maps.Equal(got, want) {
		t.Errorf("%s holds %v, want %v", dir, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s is not empty: %d entries", dir, len(entries))
	}
}

func steps(ms []Manifest) []int64 {
	s := make([]int64, len(ms))
	for i, m := range ms {
		s[i] = m.Step
	}
	return s
}

// sourceHooks lets a test interfere with the files Save reads, by name.
type sourceHooks struct {
	mu    sync.Mutex
	hooks map[string]func(io.ReaderAt) io.ReaderAt
}

func (h *sourceHooks) set(rel string, f func(io.ReaderAt) io.ReaderAt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hooks == nil {
		h.hooks = make(map[string]func(io.ReaderAt) io.ReaderAt)
	}
	h.hooks[rel] = f
}

func (h *sourceHooks) wrap(rel string, r io.ReaderAt) io.ReaderAt {
	h.mu.Lock()
	f := h.hooks[rel]
	h.mu.Unlock()
	if f == nil {
		return r
	}
	return f(r)
}

var errInjected = errors.New("injected read failure")

// failAfter fails reads past its first n bytes, as a disk or a vanished
// network mount does mid-file.
func failAfter(n int64) func(io.ReaderAt) io.ReaderAt {
	return func(r io.ReaderAt) io.ReaderAt { return failingReaderAt{r, n} }
}

type failingReaderAt struct {
	r     io.ReaderAt
	after int64
}

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.after {
		return 0, errInjected
	}
	if rest := f.after - off; int64(len(p)) > rest {
		n, _ := f.r.ReadAt(p[:rest], off)
		return n, errInjected
	}
	return f.r.ReadAt(p, off)
}

// blockReads holds every read until release is closed, after telling
// started.
func blockReads(started chan<- struct{}, release <-chan struct{}) func(io.ReaderAt) io.ReaderAt {
	var once sync.Once
	return func(r io.ReaderAt) io.ReaderAt {
		return readerAtFunc(func(p []byte, off int64) (int, error) {
			once.Do(func() { close(started) })
			<-release
			return r.ReadAt(p, off)
		})
	}
}

type readerAtFunc func(p []byte, off int64) (int, error)

func (f readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }
