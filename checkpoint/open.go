package checkpoint

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/spotwise/spotwise/clock"
)

// Option configures Open.
type Option func(*options)

type options struct {
	clock       clock.Clock
	concurrency int

	endpoint    string
	httpClient  *http.Client
	maxAttempts int
	maxBackoff  time.Duration

	region     string
	s3KeyID    string
	s3Secret   string
	azureKey   string
	azureToken azcore.TokenCredential
	sourceHook func(rel string, r io.ReaderAt) io.ReaderAt
}

// WithClock sets the clock that stamps manifests (default: the wall clock).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithConcurrency sets how many files one Save or Restore transfers at once
// (default 4).
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// WithEndpoint points an S3 or Azure Blob store at another endpoint: an S3
// compatible server (MinIO, a test server; path-style addressing is used) or
// an Azure Blob service URL including the account
// ("http://127.0.0.1:10000/devstoreaccount1" for Azurite).
func WithEndpoint(endpoint string) Option { return func(o *options) { o.endpoint = endpoint } }

// WithHTTPClient sets the HTTP client the cloud SDKs use.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRetry caps the SDKs' retries: attempts per request (1 = no retry) and
// the longest wait between two. Zero values keep the SDKs' defaults.
func WithRetry(maxAttempts int, maxBackoff time.Duration) Option {
	return func(o *options) { o.maxAttempts, o.maxBackoff = maxAttempts, maxBackoff }
}

// WithRegion sets the S3 region (default: from the AWS environment and
// shared config, else us-east-1).
func WithRegion(region string) Option { return func(o *options) { o.region = region } }

// WithS3Credentials sets static S3 credentials instead of the AWS default
// chain (environment, shared config, instance role).
func WithS3Credentials(keyID, secret string) Option {
	return func(o *options) { o.s3KeyID, o.s3Secret = keyID, secret }
}

// WithAzureSharedKey authenticates to Azure Blob with the account's key.
func WithAzureSharedKey(key string) Option { return func(o *options) { o.azureKey = key } }

// WithAzureCredential authenticates to Azure Blob with a token credential
// (for example azidentity's DefaultAzureCredential). Without it or a shared
// key, requests are anonymous, which only a public container allows.
func WithAzureCredential(c azcore.TokenCredential) Option {
	return func(o *options) { o.azureToken = c }
}

// withSourceHook wraps every file Save reads; tests inject read failures
// with it.
func withSourceHook(f func(rel string, r io.ReaderAt) io.ReaderAt) Option {
	return func(o *options) { o.sourceHook = f }
}

// Open opens the store a URI names:
//
//	file:///abs/path or a plain path   a local directory, created if missing
//	s3://bucket/prefix                 an S3 bucket
//	azblob://account/container/prefix  an Azure Blob container
//
// Opening does not contact a cloud; the first operation does.
func Open(ctx context.Context, uri string, opts ...Option) (Store, error) {
	o := options{clock: clock.Real{}, concurrency: 4}
	for _, opt := range opts {
		opt(&o)
	}
	if o.concurrency < 1 {
		o.concurrency = 1
	}
	obj, err := openObjects(ctx, uri, &o)
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint store %q: %w", uri, err)
	}
	return newStore(obj, o), nil
}

func openObjects(ctx context.Context, uri string, o *options) (objects, error) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		if uri == "" {
			return nil, fmt.Errorf("empty store URI")
		}
		if s, _, found := strings.Cut(uri, ":"); found && !filepath.IsAbs(uri) && isScheme(s) {
			return nil, fmt.Errorf("unknown store URI: want file:///path, s3://bucket/prefix, azblob://account/container/prefix or a path")
		}
		return openDir(uri)
	}
	switch scheme {
	case "file":
		u, err := url.Parse(uri)
		if err != nil {
			return nil, err
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("file URI with host %q: want file:///absolute/path", u.Host)
		}
		if !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("file URI path %q is not absolute", u.Path)
		}
		return openDir(u.Path)
	case "s3":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("s3 URI without a bucket")
		}
		return openS3(ctx, bucket, cleanPrefix(prefix), o)
	case "azblob":
		account, rest, _ := strings.Cut(rest, "/")
		container, prefix, _ := strings.Cut(rest, "/")
		if account == "" || container == "" {
			return nil, fmt.Errorf("azblob URI needs an account and a container: azblob://account/container/prefix")
		}
		return openAzure(account, container, cleanPrefix(prefix), o)
	}
	return nil, fmt.Errorf("unknown scheme %q (want file, s3 or azblob)", scheme)
}

// cleanPrefix turns a URI's path into a key prefix: "" or "a/b/".
func cleanPrefix(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return p + "/"
}

// isScheme reports whether s looks like a URI scheme, so "s3:bucket" is
// refused rather than taken for a directory of that name.
func isScheme(s string) bool {
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || strings.ContainsRune("+-.", c))) {
			return false
		}
	}
	return s != ""
}
