package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStore runs the behavioural suite against every backend: the local
// directory, S3 (over HTTPS and plain HTTP, which take different checksum
// paths in the SDK) and Azure Blob, the clouds' SDKs talking to local
// servers that speak their wire formats.
func TestStore(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range suite {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, b)
				})
			}
		})
	}
}

var suite = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"save, latest, list and restore a nested tree", testRoundTrip},
	{"list is oldest first, latest is the highest step", testOrder},
	{"a failed upload leaves the previous latest", testFailedUpload},
	{"a file corrupted at rest fails restore", testCorruptAtRest},
	{"a missing file fails restore", testMissingFile},
	{"restore latest good falls back over corrupt checkpoints", testRestoreLatestGood},
	{"prune keeps the newest and removes leftovers", testPrune},
	{"prune spares an upload in progress", testPruneSparesUpload},
	{"delete removes everything of a job", testDelete},
	{"unsafe input is refused", testRefusals},
	{"a manifest escaping the directory is corrupt", testTraversalManifest},
	{"concurrent saves of different steps", testConcurrentSaves},
	{"saving a step again", testResave},
	{"a job without checkpoints", testUnknownJob},
}

var tree = map[string]string{
	"model.bin":                  strings.Repeat("weights!", 40000), // 320 kB
	"optim/state.pt":             strings.Repeat("adam", 5000),
	"optim/deep/nested/rng.json": `{"seed": 7}`,
	".hydra/config.yaml":         "lr: 0.001\n",
	"empty":                      "",
}

func testRoundTrip(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	src := writeTree(t, tree)
	m, err := e.Save(ctx, jobID, 2, 4200, 0.42, src)
	if err != nil {
		t.Fatal(err)
	}

	wantPaths := []string{".hydra/config.yaml", "empty", "model.bin", "optim/deep/nested/rng.json", "optim/state.pt"}
	var gotPaths []string
	var size int64
	for _, f := range m.Files {
		gotPaths = append(gotPaths, f.Path)
		size += int64(len(tree[f.Path]))
		if f.Size != int64(len(tree[f.Path])) || len(f.SHA256) != 64 {
			t.Errorf("file %+v: want size %d and a sha256", f, len(tree[f.Path]))
		}
	}
	if fmt.Sprint(gotPaths) != fmt.Sprint(wantPaths) {
		t.Errorf("files %v, want %v (sorted, without .done)", gotPaths, wantPaths)
	}
	want := Manifest{JobID: jobID, Attempt: 2, Step: 4200, Progress: 0.42, Size: size, CreatedAt: epoch,
		Location: e.URI() + "/" + jobID + "/00000000000000004200"}
	if m.JobID != want.JobID || m.Attempt != want.Attempt || m.Step != want.Step || m.Progress != want.Progress ||
		m.Size != want.Size || !m.CreatedAt.Equal(want.CreatedAt) || m.Location != want.Location {
		t.Errorf("manifest %+v\nwant      %+v", m, want)
	}
	if m.SHA256 != digest(m.Files) {
		t.Errorf("manifest digest %s does not identify its files", m.SHA256)
	}

	latest, err := e.Latest(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameManifest(latest, m) {
		t.Errorf("Latest = %+v, want %+v", latest, m)
	}
	list, err := e.List(ctx, jobID)
	if err != nil || len(list) != 1 || !sameManifest(list[0], m) {
		t.Errorf("List = %+v, %v; want the one checkpoint", list, err)
	}

	dst := writeTree(t, map[string]string{"stale.txt": "from another run", "optim/old.pt": "x"})
	if err := e.Restore(ctx, latest, dst); err != nil {
		t.Fatal(err)
	}
	assertTree(t, dst, tree) // stale files and .done gone
}

func sameManifest(a, b Manifest) bool {
	return a.SHA256 == b.SHA256 && a.JobID == b.JobID && a.Step == b.Step && a.Attempt == b.Attempt &&
		a.Progress == b.Progress && a.Size == b.Size && a.CreatedAt.Equal(b.CreatedAt) &&
		a.Location == b.Location && fmt.Sprint(a.Files) == fmt.Sprint(b.Files)
}

func testOrder(t *testing.T, b backend) {
	e := b.open(t)
	jobID := newJobID()
	for _, step := range []int64{30, 5, 1200, 12} {
		e.save(t, jobID, step, map[string]string{"s": fmt.Sprint(step)})
	}
	list, err := e.List(context.Background(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(steps(list)); got != "[5 12 30 1200]" {
		t.Errorf("List steps %s, want [5 12 30 1200]", got)
	}
	latest, err := e.Latest(context.Background(), jobID)
	if err != nil || latest.Step != 1200 {
		t.Errorf("Latest = step %d, %v; want 1200", latest.Step, err)
	}
}

func testFailedUpload(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	good := e.save(t, jobID, 10, tree)

	e.hooks.set("optim/state.pt", failAfter(1000))
	newer := map[string]string{"model.bin": "newer weights", "optim/state.pt": strings.Repeat("newer", 1000)}
	_, err := e.Save(ctx, jobID, 20, 1, 0.02, writeTree(t, newer))
	if err == nil {
		t.Fatal("Save with a file failing mid-read succeeded")
	}
	latest, err := e.Latest(ctx, jobID)
	if err != nil || latest.Step != good.Step || latest.SHA256 != good.SHA256 {
		t.Fatalf("after a failed Save, Latest = step %d, %v; want step 10", latest.Step, err)
	}
	if list, _ := e.List(ctx, jobID); len(list) != 1 {
		t.Errorf("List has %d checkpoints, want 1", len(list))
	}
	if keys := e.keys(t, jobID+"/00000000000000000020/"); len(keys) != 0 {
		t.Errorf("failed Save left %v", keys)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, latest, dst); err != nil {
		t.Fatal(err)
	}
	assertTree(t, dst, tree)

	// Once the fault is gone, the same step saves.
	e.hooks.set("optim/state.pt", nil)
	m := e.save(t, jobID, 20, newer)
	if latest, _ := e.Latest(ctx, jobID); latest.Step != 20 || latest.SHA256 != m.SHA256 {
		t.Errorf("Latest = step %d, want 20", latest.Step)
	}
}

func testCorruptAtRest(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	m := e.save(t, jobID, 7, tree)
	e.rot(t, jobID+"/00000000000000000007/optim/state.pt")

	dst := writeTree(t, map[string]string{"stale": "x"})
	err := e.Restore(ctx, m, dst)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Restore of a damaged checkpoint = %v, want ErrCorrupt", err)
	}
	if !strings.Contains(err.Error(), "optim/state.pt") {
		t.Errorf("error %q does not name the damaged file", err)
	}
	assertEmptyDir(t, dst)
}

func testMissingFile(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	m := e.save(t, jobID, 7, tree)
	if err := e.Store.(*store).obj.delete(ctx, []string{jobID + "/00000000000000000007/model.bin"}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m, dst); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Restore with a file missing = %v, want ErrCorrupt", err)
	}
	assertEmptyDir(t, dst)
}

func testRestoreLatestGood(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	first := map[string]string{"state": "step one", "sub/x": "1"}
	e.save(t, jobID, 100, first)
	e.save(t, jobID, 200, map[string]string{"state": "step two", "sub/x": "2"})
	e.save(t, jobID, 300, map[string]string{"state": "step three", "sub/x": "3"})
	e.rot(t, jobID+"/00000000000000000300/sub/x")
	e.rot(t, jobID+"/00000000000000000200/state")

	dst := t.TempDir()
	m, err := RestoreLatestGood(ctx, e, jobID, dst)
	if err != nil || m.Step != 100 {
		t.Fatalf("RestoreLatestGood = step %d, %v; want step 100", m.Step, err)
	}
	assertTree(t, dst, first)

	e.rot(t, jobID+"/00000000000000000100/state")
	if _, err := RestoreLatestGood(ctx, e, jobID, dst); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RestoreLatestGood with every checkpoint corrupt = %v, want ErrNotFound", err)
	}
	assertEmptyDir(t, dst)
}

func testRefusals(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	withLink := func(link, target string) string {
		dir := writeTree(t, map[string]string{"ok": "fine"})
		p := filepath.Join(dir, filepath.FromSlash(link))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	good := writeTree(t, map[string]string{"ok": "fine"})
	for _, tc := range []struct {
		name     string
		jobID    string
		step     int64
		progress float64
		dir      string
	}{
		{"symlink to a file outside", jobID, 1, 0, withLink("sub/leak", outside)},
		{"symlink to a directory outside", jobID, 1, 0, withLink("etc", filepath.Dir(outside))},
		{"symlink to a file inside", jobID, 1, 0, withLink("alias", "ok")},
		{"a file named like the manifest", jobID, 1, 0, writeTree(t, map[string]string{"MANIFEST.json": "{}"})},
		{"no files", jobID, 1, 0, writeTree(t, nil)},
		{"not a directory", jobID, 1, 0, outside},
		{"missing directory", jobID, 1, 0, filepath.Join(t.TempDir(), "nope")},
		{"traversal in the job ID", "../../etc", 1, 0, good},
		{"separator in the job ID", "j-abc/def", 1, 0, good},
		{"empty job ID", "", 1, 0, good},
		{"negative step", jobID, -1, 0, good},
		{"progress above 1", jobID, 1, 1.5, good},
		{"progress NaN", jobID, 1, math.NaN(), good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.Save(ctx, tc.jobID, 1, tc.step, tc.progress, tc.dir); err == nil {
				t.Fatal("Save succeeded")
			}
		})
	}
	if keys := e.keys(t, ""); len(keys) != 0 {
		t.Errorf("refused Saves stored %v", keys)
	}
	for _, bad := range []string{"../x", "j-a/../../b", "J-UPPER", ""} {
		if _, err := e.Latest(ctx, bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Latest(%q) = %v, want an invalid job ID error", bad, err)
		}
		if err := e.Delete(ctx, bad); err == nil {
			t.Errorf("Delete(%q) succeeded", bad)
		}
	}
}

func testTraversalManifest(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	m := e.save(t, jobID, 3, map[string]string{"a": "x"})
	parent := t.TempDir()
	dst := filepath.Join(parent, "ckpt")
	for _, p := range []string{"../escaped", "/etc/escaped", "a/../../escaped", "./a", "a//b", `..\escaped`} {
		evil := m
		evil.Files = []File{{Path: p, Size: 1, SHA256: m.Files[0].SHA256}}
		evil.Size = 1
		evil.SHA256 = digest(evil.Files)
		if err := e.Restore(ctx, evil, dst); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Restore of a manifest naming %q = %v, want ErrCorrupt", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "escaped")); err == nil {
		t.Error("a manifest wrote outside the restore directory")
	}
	tampered := m
	tampered.Files = []File{{Path: "a", Size: 1, SHA256: strings.Repeat("0", 64)}}
	if err := e.Restore(ctx, tampered, dst); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Restore of a manifest whose digest does not match its files = %v, want ErrCorrupt", err)
	}
}

func testConcurrentSaves(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	const n = 8
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = writeTree(t, map[string]string{"w": strings.Repeat(fmt.Sprint(i), 5000), "meta/step": fmt.Sprint(i)})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = e.Save(ctx, jobID, 1, int64(i+1)*100, 0, dirs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Save %d: %v", i, err)
		}
	}
	list, err := e.List(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(steps(list)); got != "[100 200 300 400 500 600 700 800]" {
		t.Fatalf("List steps %s", got)
	}
	for i, m := range list {
		dst := t.TempDir()
		if err := e.Restore(ctx, m, dst); err != nil {
			t.Fatal(err)
		}
		if got := readTree(t, dst)["meta/step"]; got != fmt.Sprint(i) {
			t.Errorf("step %d restored the content of save %s", m.Step, got)
		}
	}
}

func testResave(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	dir := writeTree(t, tree)
	m, err := e.Save(ctx, jobID, 1, 7, 0.1, dir)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	again, err := e.Save(ctx, jobID, 2, 7, 0.1, dir)
	if err != nil || !sameManifest(again, m) {
		t.Errorf("saving the same content again = %+v, %v; want the stored manifest", again, err)
	}
	_, err = e.Save(ctx, jobID, 2, 7, 0.1, writeTree(t, map[string]string{"model.bin": "different"}))
	if !errors.Is(err, ErrExists) {
		t.Errorf("saving other content at a stored step = %v, want ErrExists", err)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	assertTree(t, dst, tree)
}

func testUnknownJob(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	if _, err := e.Latest(ctx, jobID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest = %v, want ErrNotFound", err)
	}
	if list, err := e.List(ctx, jobID); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v; want nothing", list, err)
	}
	if _, err := RestoreLatestGood(ctx, e, jobID, t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Errorf("RestoreLatestGood = %v, want ErrNotFound", err)
	}
	if err := e.Prune(ctx, jobID, 1); err != nil {
		t.Errorf("Prune = %v", err)
	}
	if err := e.Delete(ctx, jobID); err != nil {
		t.Errorf("Delete = %v", err)
	}
}
