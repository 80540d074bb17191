package checkpoint

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// cloudBackend opens a store on a fake cloud server whose faults the test
// controls.
type cloudBackend struct {
	name string
	open func(t *testing.T) (*testEnv, *fakeStorage)
}

func cloudBackends(noChecksums bool) []cloudBackend {
	s3 := func(tls bool) func(t *testing.T) (*testEnv, *fakeStorage) {
		return func(t *testing.T) (*testEnv, *fakeStorage) {
			f := newFakeS3(t, tls)
			f.noChecksums = noChecksums
			e := openEnv(t, "s3://ckpt/teams/nlp", f.options())
			return e, f.fakeStorage
		}
	}
	cbs := []cloudBackend{{"s3", s3(true)}, {"s3-plain-http", s3(false)}}
	if !noChecksums {
		cbs = append(cbs, cloudBackend{"azblob", func(t *testing.T) (*testEnv, *fakeStorage) {
			f := newFakeAzure(t)
			return openEnv(t, "azblob://devstore/ckpt/teams/nlp", f.options()), f.fakeStorage
		}})
	}
	return cbs
}

// TestCloudFaults has the servers misbehave the ways clouds and networks
// do, and checks what a user would notice: a Save that fails leaves the
// previous checkpoint the latest, and damage is reported as ErrCorrupt.
func TestCloudFaults(t *testing.T) {
	for _, tc := range []struct {
		name        string
		noChecksums bool // an S3-compatible store that keeps no checksums
		fault       fault
		once        bool  // the fault hits the first request only
		wantSave    error // nil: Save succeeds; errAny: any error
		wantRestore error
	}{
		{name: "the server serves bytes other than it stores", fault: flipGet, wantRestore: ErrCorrupt},
		{name: "the connection drops mid-upload", fault: cutPut, wantSave: errAny},
		{name: "the connection drops once: the retry uploads", fault: cutPut, once: true},
		{name: "the body is damaged on the way", fault: flipPut, wantSave: errAny},
		{name: "no checksums: the body is damaged on the way", noChecksums: true, fault: flipPut, wantSave: ErrCorrupt},
		{name: "no checksums: the ETag verifies an upload", noChecksums: true, fault: noFault},
	} {
		for _, cb := range cloudBackends(tc.noChecksums) {
			t.Run(cb.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e, fake := cb.open(t)
				ctx := context.Background()
				jobID := newJobID()
				good := e.save(t, jobID, 1, tree)

				var hits atomic.Int32
				fake.setFault(tc.fault, func(key string) bool {
					return strings.HasSuffix(key, "/00000000000000000002/optim/state.pt") &&
						(!tc.once || hits.Add(1) == 1)
				})
				newer := map[string]string{"model.bin": "newer", "optim/state.pt": strings.Repeat("newer state ", 500)}
				_, err := e.Save(ctx, jobID, 1, 2, 0.5, writeTree(t, newer))
				switch {
				case tc.wantSave == nil && err != nil:
					t.Fatalf("Save: %v", err)
				case tc.wantSave == errAny && err == nil, tc.wantSave != nil && tc.wantSave != errAny && !errors.Is(err, tc.wantSave):
					t.Fatalf("Save = %v, want %v", err, tc.wantSave)
				}
				if tc.once && hits.Load() < 2 {
					t.Errorf("the failed upload was not retried")
				}
				latest, lerr := e.Latest(ctx, jobID)
				if lerr != nil {
					t.Fatal(lerr)
				}
				if tc.wantSave != nil {
					if latest.SHA256 != good.SHA256 {
						t.Fatalf("after a failed Save, Latest is step %d, want the previous checkpoint", latest.Step)
					}
					return
				}
				dst := t.TempDir()
				err = e.Restore(ctx, latest, dst)
				if !errors.Is(err, tc.wantRestore) || (tc.wantRestore == nil && err != nil) {
					t.Fatalf("Restore = %v, want %v", err, tc.wantRestore)
				}
				if tc.wantRestore == nil {
					assertTree(t, dst, newer)
					return
				}
				m, err := RestoreLatestGood(ctx, e, jobID, dst)
				if err != nil || m.Step != 1 {
					t.Fatalf("RestoreLatestGood = step %d, %v; want the previous checkpoint", m.Step, err)
				}
				assertTree(t, dst, tree)
			})
		}
	}
}

var errAny = errors.New("any error")

// TestCloudVerification checks on the wire that every upload is verified:
// S3 PUTs carry a SHA-256 checksum (as an aws-chunked trailer over HTTPS)
// and are read back with HEAD; Azure Put Blobs are followed by Get Blob
// Properties. Listings page, so continuations are exercised.
func TestCloudVerification(t *testing.T) {
	for _, tc := range []struct {
		backend string
		want    map[string]func(puts int) int
	}{
		{"s3", map[string]func(int) int{
			"PutObject with sha256": same,
			// The empty file's checksum goes in a header: no body, no trailer.
			"PutObject with sha256 trailer": func(puts int) int { return puts - 2 },
			"HeadObject":                    same,
			"ListObjectsV2 continued":       atLeastOne,
		}},
		{"s3-plain-http", map[string]func(int) int{
			"PutObject with sha256": same,
			"PutObject aws-chunked": none,
			"HeadObject":            same,
		}},
		{"azblob", map[string]func(int) int{
			"Get Blob Properties":  same,
			"List Blobs continued": atLeastOne,
		}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			t.Parallel()
			var cb cloudBackend
			for _, c := range cloudBackends(false) {
				if c.name == tc.backend {
					cb = c
				}
			}
			e, fake := cb.open(t)
			jobID := newJobID()
			e.save(t, jobID, 1, tree)
			e.save(t, jobID, 2, tree)
			if _, err := e.List(context.Background(), jobID); err != nil {
				t.Fatal(err)
			}
			puts := fake.opCount("PutObject") + fake.opCount("Put Blob")
			if puts != 2*(len(tree)+1) {
				t.Errorf("%d uploads, want %d (files and manifests)", puts, 2*(len(tree)+1))
			}
			for op, want := range tc.want {
				if got := fake.opCount(op); got != want(puts) && !(want(puts) == -1 && got > 0) {
					t.Errorf("%s: %d, want %d for %d uploads", op, got, want(puts), puts)
				}
			}
		})
	}
}

func same(puts int) int    { return puts }
func none(int) int         { return 0 }
func atLeastOne(_ int) int { return -1 }
