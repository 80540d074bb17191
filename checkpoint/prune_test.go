package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
)

func testPrune(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	for _, step := range []int64{10, 20, 30, 40, 50} {
		e.save(t, jobID, step, map[string]string{"w": fmt.Sprint(step), "sub/o": "o"})
	}
	// Leftovers of uploads that never finished: one older than the newest
	// checkpoint, one newer (it may still be uploading).
	obj := e.Store.(*store).obj
	for _, key := range []string{jobID + "/00000000000000000025/w", jobID + "/00000000000000000060/w"} {
		if err := obj.put(ctx, key, newSource(strings.NewReader("partial"), 7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Prune(ctx, jobID, 2); err != nil {
		t.Fatal(err)
	}
	list, _ := e.List(ctx, jobID)
	if got := fmt.Sprint(steps(list)); got != "[40 50]" {
		t.Errorf("after Prune(2), List steps %s, want [40 50]", got)
	}
	keys := e.keys(t, jobID+"/")
	want := []string{
		jobID + "/00000000000000000040/MANIFEST.json", jobID + "/00000000000000000040/sub/o", jobID + "/00000000000000000040/w",
		jobID + "/00000000000000000050/MANIFEST.json", jobID + "/00000000000000000050/sub/o", jobID + "/00000000000000000050/w",
		jobID + "/00000000000000000060/w",
	}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("after Prune(2) the store holds\n%v\nwant\n%v", keys, want)
	}
	dst := t.TempDir()
	if _, err := RestoreLatestGood(ctx, e, jobID, dst); err != nil {
		t.Errorf("the kept checkpoints do not restore: %v", err)
	}
}

func testPruneSparesUpload(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID := newJobID()
	e.save(t, jobID, 10, map[string]string{"w": "10"})
	e.save(t, jobID, 20, map[string]string{"w": "20"})

	// An older step still uploading (a slow periodic checkpoint that a
	// notice-time one overtook): one file done, one held.
	started, release := make(chan struct{}), make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	e.hooks.set("slow", blockReads(started, release))
	saved := make(chan error, 1)
	dir := writeTree(t, map[string]string{"fast": "f", "slow": "s"})
	go func() { _, err := e.Save(ctx, jobID, 1, 15, 0.015, dir); saved <- err }()
	<-started
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if len(e.keys(t, jobID+"/00000000000000000015/")) == 0 {
			return errors.New("the fast file is not uploaded yet")
		}
		return nil
	})

	if err := e.Prune(ctx, jobID, 1); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	list, _ := e.List(ctx, jobID)
	if got := fmt.Sprint(steps(list)); got != "[15 20]" {
		t.Fatalf("List steps %s, want [15 20]", got)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, list[0], dst); err != nil {
		t.Fatalf("the checkpoint uploaded during Prune does not restore: %v", err)
	}
}

func testDelete(t *testing.T, b backend) {
	e := b.open(t)
	ctx := context.Background()
	jobID, other := newJobID(), newJobID()
	e.save(t, jobID, 1, tree)
	e.save(t, jobID, 2, tree)
	e.save(t, other, 1, map[string]string{"a": "b"})
	if err := e.Delete(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Latest(ctx, jobID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest after Delete = %v, want ErrNotFound", err)
	}
	if keys := e.keys(t, jobID+"/"); len(keys) != 0 {
		t.Errorf("Delete left %v", keys)
	}
	if _, err := e.Latest(ctx, other); err != nil {
		t.Errorf("Delete of one job touched another: %v", err)
	}
}
