package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spotwise/spotwise/job"
)

var (
	// ErrNotFound: the job has no complete checkpoint (or none that verifies,
	// from RestoreLatestGood).
	ErrNotFound = errors.New("checkpoint not found")
	// ErrCorrupt: a checkpoint's data does not match its manifest (a file is
	// missing, has another size or another digest), or the manifest itself is
	// malformed. A Save whose upload does not verify wraps it too.
	ErrCorrupt = errors.New("checkpoint corrupt")
	// ErrExists: Save was asked to store a step that already has a complete
	// checkpoint with different content. Steps are never overwritten in place,
	// so the stored checkpoint stays good.
	ErrExists = errors.New("checkpoint step already stored")
)

// Manifest describes one complete checkpoint.
type Manifest struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Step    int64  `json:"step"`
	// Progress is the fraction of the job's work done at this checkpoint (0..1).
	Progress float64 `json:"progress"`
	// Files are sorted by path; paths are relative to the checkpoint
	// directory and use forward slashes.
	Files []File `json:"files"`
	// Size is the total of the files' sizes in bytes.
	Size int64 `json:"size"`
	// SHA256 is the digest over the file list (paths, sizes, digests): it
	// identifies the checkpoint's content.
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
	// Location is where the checkpoint lives, as a URI under the store's URI
	// (file:///..., s3://..., azblob://...), for transfer-cost estimates.
	Location string `json:"location"`
}

// File is one file of a checkpoint.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// Store keeps checkpoints. Implementations are safe for concurrent use.
type Store interface {
	// Save uploads every regular file under dir (except ".done" at its top)
	// as the checkpoint of jobID at step and returns its manifest. The
	// checkpoint becomes visible (Latest, List) only once every file is
	// uploaded and verified; a failed or partial upload leaves the previous
	// latest untouched. Symlinks, special files and a top-level file named
	// MANIFEST.json are refused. Saving a step again with the same content
	// returns the stored manifest; with other content, ErrExists.
	Save(ctx context.Context, jobID string, attempt int, step int64, progress float64, dir string) (Manifest, error)
	// Latest returns the newest complete checkpoint, or ErrNotFound.
	Latest(ctx context.Context, jobID string) (Manifest, error)
	// List returns the complete checkpoints, oldest first.
	List(ctx context.Context, jobID string) ([]Manifest, error)
	// Restore downloads a checkpoint into dir (emptied first, created if
	// missing), verifying every file against the manifest. A mismatch is
	// ErrCorrupt; on any error dir is left empty.
	Restore(ctx context.Context, m Manifest, dir string) error
	// Prune keeps the newest keep complete checkpoints of a job and deletes
	// the rest, with leftovers of partial uploads older than the newest
	// complete checkpoint (newer ones may be uploads in progress).
	Prune(ctx context.Context, jobID string, keep int) error
	// Delete removes everything stored for a job.
	Delete(ctx context.Context, jobID string) error
	// URI is the store's canonical URI, as Open accepts it.
	URI() string
}

// RestoreLatestGood restores the newest checkpoint of jobID that verifies,
// falling back to older ones while the newer are corrupt, and returns the
// manifest it restored. Errors other than ErrCorrupt (a network failure, a
// full disk) stop it: falling back over them would throw work away. It
// returns ErrNotFound when no checkpoint verifies.
func RestoreLatestGood(ctx context.Context, s Store, jobID, dir string) (Manifest, error) {
	ms, err := s.List(ctx, jobID)
	if err != nil {
		return Manifest{}, err
	}
	corrupt := 0
	for i := len(ms) - 1; i >= 0; i-- {
		err := s.Restore(ctx, ms[i], dir)
		if err == nil {
			return ms[i], nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return Manifest{}, err
		}
		corrupt++
	}
	return Manifest{}, fmt.Errorf("%w: no checkpoint of job %s verifies (%d corrupt)", ErrNotFound, jobID, corrupt)
}

// manifestName is the manifest's name inside a checkpoint's directory.
const manifestName = "MANIFEST.json"

// stepDir is a step as a directory name: zero-padded so that lexical order
// is step order.
func stepDir(step int64) string { return fmt.Sprintf("%020d", step) }

// parseStepDir is the inverse of stepDir.
func parseStepDir(s string) (int64, bool) {
	if len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// checkpointKey is the key prefix of a checkpoint, relative to the store's
// root, ending in "/".
func checkpointKey(jobID string, step int64) string {
	return jobID + "/" + stepDir(step) + "/"
}

func checkJobID(jobID string) error {
	if !job.ValidID(jobID) {
		return fmt.Errorf("invalid job ID %q", jobID)
	}
	return nil
}

// checkRel reports whether p can name a file inside a checkpoint: relative,
// slash-separated, clean (no "." or ".." segments, no empty ones), valid
// UTF-8 without control characters. Manifests come from remote stores, so
// Restore checks every path with it before writing anything.
func checkRel(p string) error {
	switch {
	case p == "" || !utf8.ValidString(p):
		return fmt.Errorf("invalid path %q", p)
	case strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("path %q is not clean and relative", p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0 || strings.Contains(p, `\`):
		return fmt.Errorf("path %q has a control character or backslash", p)
	}
	return nil
}

// digest is the checkpoint's identity: SHA-256 over one line per file in
// path order, "<path> NUL <size> NUL <sha256 hex> LF". Paths cannot hold
// NUL or LF (checkRel), so the encoding is unambiguous.
func digest(files []File) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00%s\n", f.Path, f.Size, f.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// check verifies that a manifest is well formed and consistent with itself;
// any problem is ErrCorrupt.
func (m *Manifest) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest of job %q step %d: %s", ErrCorrupt, m.JobID, m.Step, fmt.Sprintf(format, args...))
	}
	if err := checkJobID(m.JobID); err != nil {
		return bad("%v", err)
	}
	if m.Step < 0 {
		return bad("negative step")
	}
	var total int64
	for i, f := range m.Files {
		if err := checkRel(f.Path); err != nil {
			return bad("%v", err)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return bad("files not sorted or not unique at %q", f.Path)
		}
		if f.Size < 0 {
			return bad("negative size of %q", f.Path)
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
			return bad("bad digest of %q", f.Path)
		}
		total += f.Size
	}
	if total != m.Size {
		return bad("size %d, files add up to %d", m.Size, total)
	}
	if d := digest(m.Files); d != m.SHA256 {
		return bad("digest %s, files give %s", m.SHA256, d)
	}
	return nil
}
