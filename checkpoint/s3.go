package checkpoint

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// s3API is the part of the S3 client the store uses.
type s3API interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObjects(context.Context, *s3.DeleteObjectsInput, ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// maxS3Put is the largest object one PutObject may create. Larger files
// would need a multipart upload, which the store does not do yet.
const maxS3Put = 5 << 30

// s3Objects keeps objects in an S3 bucket under a key prefix.
type s3Objects struct {
	client s3API
	bucket string
	prefix string // "" or ending in "/"
}

func openS3(ctx context.Context, bucket, prefix string, o *options) (*s3Objects, error) {
	var load []func(*config.LoadOptions) error
	if o.region != "" {
		load = append(load, config.WithRegion(o.region))
	}
	if o.s3KeyID != "" {
		load = append(load, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(o.s3KeyID, o.s3Secret, "")))
	}
	if o.maxAttempts > 0 || o.maxBackoff > 0 {
		load = append(load, config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				if o.maxAttempts > 0 {
					so.MaxAttempts = o.maxAttempts
				}
				if o.maxBackoff > 0 {
					so.MaxBackoff = o.maxBackoff
				}
			})
		}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.httpClient != nil {
			// Set here, not in LoadDefaultConfig, which would try to add
			// AWS_CA_BUNDLE to it: the caller's client is taken as it is.
			so.HTTPClient = o.httpClient
		}
		if o.endpoint != "" {
			so.BaseEndpoint = aws.String(o.endpoint)
			so.UsePathStyle = true
		}
		// Restore verifies every byte against the manifest itself, and
		// tells a corrupt object from a failed transfer by that.
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &s3Objects{client: client, bucket: bucket, prefix: prefix}, nil
}

func (b *s3Objects) uri() string {
	return strings.TrimSuffix("s3://"+b.bucket+"/"+b.prefix, "/")
}

// put uploads with a SHA-256 checksum the SDK computes as it streams (a
// trailer over HTTPS), so S3 refuses a body damaged on the way; then it
// reads the object's size and checksum back and compares them with what the
// source hashed.
func (b *s3Objects) put(ctx context.Context, key string, body *source) error {
	if body.Size() > maxS3Put {
		return fmt.Errorf("%s is %d bytes: files over 5 GiB need multipart uploads, not supported yet", key, body.Size())
	}
	full := b.prefix + key
	out, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            &b.bucket,
		Key:               &full,
		Body:              body,
		ContentLength:     aws.Int64(body.Size()),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return err
	}
	sha, md, err := body.sums()
	if err != nil {
		return err
	}
	want := base64.StdEncoding.EncodeToString(sha)
	if got := aws.ToString(out.ChecksumSHA256); got != "" && got != want {
		return fmt.Errorf("%w: S3 stored %s with sha256 %s, sent %s", ErrCorrupt, key, got, want)
	}
	head, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:       &b.bucket,
		Key:          &full,
		ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return fmt.Errorf("verifying %s: %w", key, err)
	}
	if n := aws.ToInt64(head.ContentLength); n != body.Size() {
		return fmt.Errorf("%w: S3 holds %d bytes of %s, sent %d", ErrCorrupt, n, key, body.Size())
	}
	switch got := aws.ToString(head.ChecksumSHA256); {
	case got == want:
	case got != "":
		return fmt.Errorf("%w: S3 holds %s with sha256 %s, sent %s", ErrCorrupt, key, got, want)
	// An S3-compatible store without checksums: a single PUT's ETag is the
	// MD5 of the content unless the object is encrypted with a customer key.
	case strings.Trim(aws.ToString(head.ETag), `"`) != hex.EncodeToString(md):
		return fmt.Errorf("%w: cannot verify %s: no sha256 and ETag %s is not its MD5", ErrCorrupt, key, aws.ToString(head.ETag))
	}
	return nil
}

func (b *s3Objects) get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)})
	if isS3NotFound(err) {
		return nil, 0, errNoObject
	}
	if err != nil {
		return nil, 0, err
	}
	return out.Body, aws.ToInt64(out.ContentLength), nil
}

func isS3NotFound(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "NoSuchKey", "NotFound":
		return true
	}
	return false
}

func (b *s3Objects) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	pages := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{
		Bucket: &b.bucket,
		Prefix: aws.String(b.prefix + prefix),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), b.prefix))
		}
	}
	return keys, nil
}

func (b *s3Objects) delete(ctx context.Context, keys []string) error {
	for batch := range slices.Chunk(keys, 1000) { // DeleteObjects takes up to 1000 keys
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(b.prefix + k)}
		}
		out, err := b.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.bucket,
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return err
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("deleting %s: %s: %s (and %d more)", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1)
		}
	}
	return nil
}
