package checkpoint

import (
	"context"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	tmp := t.TempDir()
	t.Chdir(tmp)
	for _, tc := range []struct {
		uri     string
		wantURI string // "" for an error
	}{
		{filepath.Join(tmp, "a"), "file://" + filepath.Join(tmp, "a")},
		{"file://" + filepath.Join(tmp, "b"), "file://" + filepath.Join(tmp, "b")},
		{"file://localhost" + filepath.Join(tmp, "c"), "file://" + filepath.Join(tmp, "c")},
		{"relative/dir", "file://" + filepath.Join(tmp, "relative/dir")},
		{"s3://bucket/team/ckpt/", "s3://bucket/team/ckpt"},
		{"s3://bucket", "s3://bucket"},
		{"azblob://acct/container/team/ckpt", "azblob://acct/container/team/ckpt"},
		{"azblob://acct/container", "azblob://acct/container"},
		{"file://host/abs", ""},
		{"file://relative", ""},
		{"s3:///prefix", ""},
		{"s3:bucket", ""},
		{"azblob://acct", ""},
		{"gs://bucket/p", ""},
		{"", ""},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			s, err := Open(context.Background(), tc.uri, WithRegion("us-east-1"), WithS3Credentials("id", "secret"))
			if tc.wantURI == "" {
				if err == nil {
					t.Fatalf("Open(%q) = %s, want an error", tc.uri, s.URI())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.URI() != tc.wantURI {
				t.Errorf("URI() = %s, want %s", s.URI(), tc.wantURI)
			}
		})
	}
}
