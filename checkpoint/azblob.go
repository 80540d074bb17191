package checkpoint

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// maxAzurePut is the largest block blob one Put Blob may create. Larger
// files would need Put Block and Put Block List, not supported yet.
const maxAzurePut = 5000 << 20

// azureObjects keeps objects as block blobs in an Azure Blob container
// under a name prefix.
type azureObjects struct {
	client    *container.Client
	account   string
	container string
	prefix    string // "" or ending in "/"
}

func openAzure(account, containerName, prefix string, o *options) (*azureObjects, error) {
	endpoint := o.endpoint
	if endpoint == "" {
		endpoint = "https://" + account + ".blob.core.windows.net"
	}
	containerURL, err := url.JoinPath(endpoint, containerName)
	if err != nil {
		return nil, fmt.Errorf("azure endpoint %q: %w", endpoint, err)
	}
	var copts container.ClientOptions
	if o.httpClient != nil {
		copts.Transport = o.httpClient
	}
	if o.maxAttempts > 0 {
		copts.Retry.MaxRetries = int32(o.maxAttempts - 1)
		if o.maxAttempts == 1 {
			copts.Retry.MaxRetries = -1 // zero would mean the default, three
		}
	}
	if o.maxBackoff > 0 {
		copts.Retry.RetryDelay = min(o.maxBackoff, 800*time.Millisecond) // the SDK's default base
		copts.Retry.MaxRetryDelay = o.maxBackoff
	}
	var client *container.Client
	switch {
	case o.azureKey != "":
		cred, err := container.NewSharedKeyCredential(account, o.azureKey)
		if err != nil {
			return nil, err
		}
		client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, &copts)
		if err != nil {
			return nil, err
		}
	case o.azureToken != nil:
		client, err = container.NewClient(containerURL, o.azureToken, &copts)
	default:
		client, err = container.NewClientWithNoCredential(containerURL, &copts)
	}
	if err != nil {
		return nil, err
	}
	return &azureObjects{client: client, account: account, container: containerName, prefix: prefix}, nil
}

func (b *azureObjects) uri() string {
	return strings.TrimSuffix("azblob://"+b.account+"/"+b.container+"/"+b.prefix, "/")
}

// put uploads with one Put Blob. Blob storage computes the MD5 of what it
// received, returns it and keeps it as a property; put compares it, and the
// stored size read back, with what the source hashed while sending.
func (b *azureObjects) put(ctx context.Context, key string, body *source) error {
	if body.Size() > maxAzurePut {
		return fmt.Errorf("%s is %d bytes: files over 5000 MiB need block uploads, not supported yet", key, body.Size())
	}
	blobClient := b.client.NewBlockBlobClient(b.prefix + key)
	resp, err := blobClient.Upload(ctx, body, nil)
	if err != nil {
		return err
	}
	_, md, err := body.sums()
	if err != nil {
		return err
	}
	if resp.ContentMD5 != nil && !bytes.Equal(resp.ContentMD5, md) {
		return fmt.Errorf("%w: Azure received %s with MD5 %s, sent %s", ErrCorrupt, key, b64(resp.ContentMD5), b64(md))
	}
	props, err := blobClient.GetProperties(ctx, nil)
	if err != nil {
		return fmt.Errorf("verifying %s: %w", key, err)
	}
	if n := deref(props.ContentLength); n != body.Size() {
		return fmt.Errorf("%w: Azure holds %d bytes of %s, sent %d", ErrCorrupt, n, key, body.Size())
	}
	switch {
	case props.ContentMD5 != nil && !bytes.Equal(props.ContentMD5, md):
		return fmt.Errorf("%w: Azure holds %s with MD5 %s, sent %s", ErrCorrupt, key, b64(props.ContentMD5), b64(md))
	case props.ContentMD5 == nil && resp.ContentMD5 == nil:
		return fmt.Errorf("%w: cannot verify %s: Azure reported no MD5", ErrCorrupt, key)
	}
	return nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (b *azureObjects) get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	resp, err := b.client.NewBlobClient(b.prefix+key).DownloadStream(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound) {
		return nil, 0, errNoObject
	}
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, deref(resp.ContentLength), nil
}

func (b *azureObjects) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	pages := b.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: ptr(b.prefix + prefix)})
	for pages.More() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Segment.BlobItems {
			keys = append(keys, strings.TrimPrefix(deref(item.Name), b.prefix))
		}
	}
	return keys, nil
}

func ptr[T any](v T) *T { return &v }

// delete deletes blob by blob (a few at a time); the batch API would save
// round trips for checkpoints of thousands of files.
func (b *azureObjects) delete(ctx context.Context, keys []string) error {
	return parallel(ctx, len(keys), 8, func(ctx context.Context, i int) error {
		_, err := b.client.NewBlobClient(b.prefix+keys[i]).Delete(ctx, &blob.DeleteOptions{})
		if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
			return fmt.Errorf("deleting %s: %w", keys[i], err)
		}
		return nil
	})
}
