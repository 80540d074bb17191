package checkpoint

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeS3 is an S3 endpoint for tests, speaking the REST/XML wire format with
// path-style addressing for the calls the store makes: PutObject (plain or
// aws-chunked bodies, checksums in a header or a trailer, BadDigest when
// they do not match), GetObject, HeadObject (checksums with
// x-amz-checksum-mode), ListObjectsV2 (prefix, max-keys, continuation
// tokens), DeleteObject and DeleteObjects. Requests must be SigV4-signed
// with its access key; the signature itself is not checked.
type fakeS3 struct {
	*fakeStorage
	srv    *httptest.Server
	bucket string
	keyID  string
	// pageSize caps ListObjectsV2 pages, so every listing pages.
	pageSize int
	// noChecksums makes it an S3-compatible store of old: checksums are
	// neither checked nor kept, only the ETag (the MD5) vouches for data.
	noChecksums bool
}

func newFakeS3(t *testing.T, tls bool) *fakeS3 {
	f := &fakeS3{fakeStorage: newFakeStorage(t), bucket: "ckpt", keyID: "AKIDTEST", pageSize: 3}
	f.srv = httptest.NewUnstartedServer(f)
	// Dropped connections are the point of some tests, not news.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

// options point a store at the server.
func (f *fakeS3) options() []Option {
	return []Option{
		WithEndpoint(f.srv.URL),
		WithHTTPClient(f.srv.Client()),
		WithRegion("eu-west-1"),
		WithS3Credentials(f.keyID, "secret"),
		WithRetry(2, 10*time.Millisecond),
	}
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+f.keyID+"/") {
		s3Error(w, r, http.StatusForbidden, "AccessDenied", "Access Denied")
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket != f.bucket {
		s3Error(w, r, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	q := r.URL.Query()
	switch {
	case q.Has("uploads") || q.Has("uploadId") || q.Has("partNumber") || q.Has("tagging") || q.Has("acl"):
		s3Error(w, r, http.StatusNotImplemented, "NotImplemented", "not implemented by the fake")
	case key == "" && r.Method == http.MethodGet && q.Get("list-type") == "2":
		f.list(w, r)
	case key == "" && r.Method == http.MethodPost && q.Has("delete"):
		f.deleteObjects(w, r)
	case key == "":
		s3Error(w, r, http.StatusNotImplemented, "NotImplemented", "not implemented by the fake")
	case r.Method == http.MethodPut:
		f.put(w, r, key)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		f.get(w, r, key)
	case r.Method == http.MethodDelete:
		f.count("DeleteObject")
		f.remove(key)
		w.WriteHeader(http.StatusNoContent)
	default:
		s3Error(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed")
	}
}

func (f *fakeS3) put(w http.ResponseWriter, r *http.Request, key string) {
	f.count("PutObject")
	if r.Header.Get("X-Amz-Copy-Source") != "" {
		s3Error(w, r, http.StatusNotImplemented, "NotImplemented", "copy not implemented by the fake")
		return
	}
	body := io.Reader(r.Body)
	declared := r.ContentLength
	var chunked *awsChunkedReader
	if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
		f.count("PutObject aws-chunked")
		chunked = newAWSChunkedReader(r.Body)
		body = chunked
		var err error
		if declared, err = strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64); err != nil {
			s3Error(w, r, http.StatusBadRequest, "MissingContentLength", "aws-chunked upload without x-amz-decoded-content-length")
			return
		}
	}
	if declared < 0 {
		s3Error(w, r, http.StatusLengthRequired, "MissingContentLength", "You must provide the Content-Length HTTP header.")
		return
	}
	if f.faulty(cutPut, key) {
		cutConnection(w, body, declared)
		return
	}
	o, err := f.receive(key, body)
	if err != nil {
		s3Error(w, r, http.StatusBadRequest, "IncompleteBody", err.Error())
		return
	}
	if o.size != declared {
		f.discard(o)
		s3Error(w, r, http.StatusBadRequest, "IncompleteBody", fmt.Sprintf("got %d bytes, declared %d", o.size, declared))
		return
	}
	got := base64.StdEncoding.EncodeToString(o.sha256)
	want := r.Header.Get("X-Amz-Checksum-Sha256")
	if chunked != nil && want == "" {
		want = chunked.trailers["x-amz-checksum-sha256"]
	}
	if want != "" {
		f.count("PutObject with sha256")
		if chunked != nil && chunked.trailers["x-amz-checksum-sha256"] != "" {
			f.count("PutObject with sha256 trailer")
		}
	}
	if want != "" && want != got && !f.noChecksums {
		f.discard(o)
		s3Error(w, r, http.StatusBadRequest, "BadDigest", "The SHA256 you specified did not match the calculated checksum.")
		return
	}
	f.commit(key, o)
	f.objectHeaders(w, o, want != "" && !f.noChecksums)
	w.WriteHeader(http.StatusOK)
}

func (f *fakeS3) objectHeaders(w http.ResponseWriter, o *fakeObject, checksum bool) {
	h := w.Header()
	h.Set("ETag", `"`+hex.EncodeToString(o.md5)+`"`)
	h.Set("Last-Modified", o.modified.Format(http.TimeFormat))
	if checksum && !f.noChecksums {
		h.Set("X-Amz-Checksum-Sha256", base64.StdEncoding.EncodeToString(o.sha256))
		h.Set("X-Amz-Checksum-Type", "FULL_OBJECT")
	}
}

func (f *fakeS3) get(w http.ResponseWriter, r *http.Request, key string) {
	head := r.Method == http.MethodHead
	if head {
		f.count("HeadObject")
	} else {
		f.count("GetObject")
	}
	rc, o, err := f.open(key)
	if err != nil {
		if head {
			w.WriteHeader(http.StatusNotFound) // HEAD responses have no body
			return
		}
		s3Error(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	defer rc.Close()
	f.objectHeaders(w, o, strings.EqualFold(r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED"))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(o.size, 10))
	w.WriteHeader(http.StatusOK)
	if !head {
		io.Copy(w, rc)
	}
}

type s3ListResult struct {
	XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string
	Prefix                string
	KeyCount              int
	MaxKeys               int
	IsTruncated           bool
	ContinuationToken     string `xml:",omitempty"`
	NextContinuationToken string `xml:",omitempty"`
	StartAfter            string `xml:",omitempty"`
	Contents              []s3ListEntry
}

type s3ListEntry struct {
	Key          string
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
}

func (f *fakeS3) list(w http.ResponseWriter, r *http.Request) {
	f.count("ListObjectsV2")
	q := r.URL.Query()
	if q.Get("delimiter") != "" {
		s3Error(w, r, http.StatusNotImplemented, "NotImplemented", "delimiter not implemented by the fake")
		return
	}
	maxKeys := f.pageSize
	if s := q.Get("max-keys"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n < maxKeys {
			maxKeys = n
		}
	}
	after := q.Get("start-after")
	if tok := q.Get("continuation-token"); tok != "" {
		f.count("ListObjectsV2 continued")
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			s3Error(w, r, http.StatusBadRequest, "InvalidArgument", "The continuation token provided is incorrect")
			return
		}
		after = string(b)
	}
	res := s3ListResult{
		Name: f.bucket, Prefix: q.Get("prefix"), MaxKeys: maxKeys,
		ContinuationToken: q.Get("continuation-token"), StartAfter: q.Get("start-after"),
	}
	for _, k := range f.keys(res.Prefix) {
		if k <= after {
			continue
		}
		if len(res.Contents) == maxKeys {
			res.IsTruncated = true
			res.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(res.Contents[maxKeys-1].Key))
			break
		}
		o := f.lookup(k)
		if o == nil {
			continue // deleted meanwhile
		}
		res.Contents = append(res.Contents, s3ListEntry{
			Key: k, Size: o.size, StorageClass: "STANDARD",
			LastModified: o.modified.Format("2006-01-02T15:04:05.000Z"),
			ETag:         `"` + hex.EncodeToString(o.md5) + `"`,
		})
	}
	res.KeyCount = len(res.Contents)
	writeXML(w, http.StatusOK, res)
}

type s3Delete struct {
	Objects []struct{ Key string } `xml:"Object"`
	Quiet   bool
}

type s3DeleteResult struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
	Deleted []struct{ Key string }
}

func (f *fakeS3) deleteObjects(w http.ResponseWriter, r *http.Request) {
	f.count("DeleteObjects")
	body := io.Reader(r.Body)
	if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
		body = newAWSChunkedReader(r.Body)
	}
	var req s3Delete
	if err := xml.NewDecoder(body).Decode(&req); err != nil {
		s3Error(w, r, http.StatusBadRequest, "MalformedXML", err.Error())
		return
	}
	if len(req.Objects) > 1000 {
		s3Error(w, r, http.StatusBadRequest, "MalformedXML", "more than 1000 keys")
		return
	}
	var res s3DeleteResult
	for _, o := range req.Objects {
		f.remove(o.Key)
		if !req.Quiet {
			res.Deleted = append(res.Deleted, struct{ Key string }{o.Key})
		}
	}
	writeXML(w, http.StatusOK, res)
}

type s3ErrorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string
	RequestID string `xml:"RequestId"`
}

func s3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeXML(w, status, s3ErrorBody{Code: code, Message: msg, Resource: r.URL.Path, RequestID: "fake"})
}

func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(b)))
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	w.Write(b)
}
