package checkpoint

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestLargeCheckpointStreams saves and restores a 20 MB file through each
// backend and checks that it went through in pieces: the bytes allocated
// meanwhile (by the store, the SDKs and the test servers together, 2 MiB
// or less in a normal build, up to 8 with the race detector) stay under the
// file's size, which holding the file in memory once would exceed.
func TestLargeCheckpointStreams(t *testing.T) {
	const size = 20 << 20
	src := t.TempDir()
	want := writeRandomFile(t, filepath.Join(src, "shard-00001-of-00001.safetensors"), size)

	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			e := b.open(t)
			ctx := context.Background()
			jobID := newJobID()
			dst := t.TempDir()

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			m, err := e.Save(ctx, jobID, 1, 1, 0.5, src)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Restore(ctx, m, dst); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)

			if got := fileSHA256(t, filepath.Join(dst, "shard-00001-of-00001.safetensors")); got != want {
				t.Errorf("restored file differs")
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d MiB through Save and Restore allocated %.1f MiB", b.name, size>>20, float64(alloc)/(1<<20))
			if alloc > size {
				t.Errorf("Save and Restore of %d MiB allocated %d MiB: not streamed", size>>20, alloc>>20)
			}
		})
	}
}

func writeRandomFile(t *testing.T, path string, size int64) [32]byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.NewChaCha8([32]byte{7}), size); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func fileSHA256(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}
