package checkpoint

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeAzure is an Azure Blob endpoint for tests (path-style, like Azurite:
// http://host/<account>/<container>/<blob>), speaking the Blob REST API for
// the calls the store makes: Put Blob (block blobs; the service computes
// the content's MD5 and returns it, and checks a Content-MD5 sent with the
// request), Get Blob, Get Blob Properties, List Blobs (flat, with prefix,
// maxresults and markers) and Delete Blob. Requests must carry a SharedKey
// authorization for its account; the signature itself is not checked.
type fakeAzure struct {
	*fakeStorage
	srv       *httptest.Server
	account   string
	container string
	// pageSize caps List Blobs pages, so every listing pages.
	pageSize int
}

func newFakeAzure(t *testing.T) *fakeAzure {
	f := &fakeAzure{fakeStorage: newFakeStorage(t), account: "devstore", container: "ckpt", pageSize: 3}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAzure) options() []Option {
	return []Option{
		WithEndpoint(f.srv.URL + "/" + f.account),
		WithHTTPClient(f.srv.Client()),
		WithAzureSharedKey(base64.StdEncoding.EncodeToString([]byte("not a real key"))),
		WithRetry(2, 10*time.Millisecond),
	}
}

func (f *fakeAzure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "SharedKey "+f.account+":") {
		azError(w, http.StatusForbidden, "AuthenticationFailed", "Server failed to authenticate the request.")
		return
	}
	// Blob names arrive escaped, "/" as %2F included.
	parts := strings.SplitN(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/", 3)
	if len(parts) < 2 || parts[0] != f.account || parts[1] != f.container {
		azError(w, http.StatusNotFound, "ContainerNotFound", "The specified container does not exist.")
		return
	}
	q := r.URL.Query()
	if len(parts) == 2 || parts[2] == "" {
		if r.Method == http.MethodGet && q.Get("restype") == "container" && q.Get("comp") == "list" {
			f.list(w, r)
			return
		}
		azError(w, http.StatusNotImplemented, "NotImplemented", "not implemented by the fake")
		return
	}
	name, err := url.PathUnescape(parts[2])
	if err != nil {
		azError(w, http.StatusBadRequest, "InvalidUri", err.Error())
		return
	}
	switch {
	case q.Get("comp") != "":
		azError(w, http.StatusNotImplemented, "NotImplemented", "comp="+q.Get("comp")+" not implemented by the fake")
	case r.Method == http.MethodPut:
		f.put(w, r, name)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		f.get(w, r, name)
	case r.Method == http.MethodDelete:
		f.count("Delete Blob")
		if !f.remove(name) {
			azError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
			return
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		azError(w, http.StatusMethodNotAllowed, "UnsupportedHttpVerb", "method not allowed")
	}
}

func (f *fakeAzure) put(w http.ResponseWriter, r *http.Request, name string) {
	f.count("Put Blob")
	if r.Header.Get("X-Ms-Blob-Type") != "BlockBlob" {
		azError(w, http.StatusNotImplemented, "NotImplemented", "only block blobs")
		return
	}
	if r.ContentLength < 0 {
		azError(w, http.StatusLengthRequired, "MissingRequiredHeader", "Content-Length is required")
		return
	}
	if f.faulty(cutPut, name) {
		cutConnection(w, r.Body, r.ContentLength)
		return
	}
	o, err := f.receive(name, r.Body)
	if err != nil {
		azError(w, http.StatusBadRequest, "InvalidInput", err.Error())
		return
	}
	if sent := r.Header.Get("Content-MD5"); sent != "" && sent != base64.StdEncoding.EncodeToString(o.md5) {
		f.discard(o)
		azError(w, http.StatusBadRequest, "Md5Mismatch", "The MD5 value specified in the request did not match with the MD5 value calculated by the server.")
		return
	}
	f.commit(name, o)
	f.blobHeaders(w, o)
	w.Header().Set("X-Ms-Request-Server-Encrypted", "true")
	w.WriteHeader(http.StatusCreated)
}

func (f *fakeAzure) blobHeaders(w http.ResponseWriter, o *fakeObject) {
	h := w.Header()
	h.Set("ETag", `"0x`+strings.ToUpper(hex.EncodeToString(o.md5[:8]))+`"`)
	h.Set("Last-Modified", o.modified.Format(http.TimeFormat))
	h.Set("Content-MD5", base64.StdEncoding.EncodeToString(o.md5))
	h.Set("X-Ms-Version", "2025-11-05")
}

func (f *fakeAzure) get(w http.ResponseWriter, r *http.Request, name string) {
	head := r.Method == http.MethodHead
	if head {
		f.count("Get Blob Properties")
	} else {
		f.count("Get Blob")
	}
	rc, o, err := f.open(name)
	if err != nil {
		if head {
			w.Header().Set("X-Ms-Error-Code", "BlobNotFound")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		azError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
		return
	}
	defer rc.Close()
	f.blobHeaders(w, o)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Ms-Blob-Type", "BlockBlob")
	h.Set("X-Ms-Creation-Time", o.modified.Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	status, start, n := http.StatusOK, int64(0), o.size
	if rg := firstNonEmpty(r.Header.Get("X-Ms-Range"), r.Header.Get("Range")); rg != "" && !head {
		from, to, _ := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
		start, _ = strconv.ParseInt(from, 10, 64)
		end := o.size - 1
		if e, err := strconv.ParseInt(to, 10, 64); err == nil && e < end {
			end = e
		}
		status, n = http.StatusPartialContent, end-start+1
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, o.size))
		h.Del("Content-MD5") // only whole-blob reads carry it
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if !head {
		io.CopyN(io.Discard, rc, start)
		io.CopyN(w, rc, n)
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

type azEnumeration struct {
	XMLName         xml.Name `xml:"EnumerationResults"`
	ServiceEndpoint string   `xml:"ServiceEndpoint,attr"`
	ContainerName   string   `xml:"ContainerName,attr"`
	Prefix          string   `xml:",omitempty"`
	Marker          string   `xml:",omitempty"`
	MaxResults      int
	Blobs           []azBlob `xml:"Blobs>Blob"`
	NextMarker      string
}

type azBlob struct {
	Name       string
	Properties azBlobProperties
}

type azBlobProperties struct {
	CreationTime  string `xml:"Creation-Time"`
	LastModified  string `xml:"Last-Modified"`
	Etag          string
	ContentLength int64  `xml:"Content-Length"`
	ContentType   string `xml:"Content-Type"`
	ContentMD5    string `xml:"Content-MD5"`
	BlobType      string
}

func (f *fakeAzure) list(w http.ResponseWriter, r *http.Request) {
	f.count("List Blobs")
	q := r.URL.Query()
	if q.Get("delimiter") != "" {
		azError(w, http.StatusNotImplemented, "NotImplemented", "hierarchical listing not implemented by the fake")
		return
	}
	max := f.pageSize
	if s := q.Get("maxresults"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n < max {
			max = n
		}
	}
	res := azEnumeration{
		ServiceEndpoint: f.srv.URL + "/" + f.account + "/",
		ContainerName:   f.container,
		Prefix:          q.Get("prefix"),
		Marker:          q.Get("marker"),
		MaxResults:      max,
	}
	if res.Marker != "" {
		f.count("List Blobs continued")
	}
	for _, k := range f.keys(res.Prefix) {
		if res.Marker != "" && k < res.Marker {
			continue
		}
		if len(res.Blobs) == max {
			res.NextMarker = k // markers are opaque; this one is the next name
			break
		}
		o := f.lookup(k)
		if o == nil {
			continue
		}
		res.Blobs = append(res.Blobs, azBlob{Name: k, Properties: azBlobProperties{
			CreationTime:  o.modified.Format(http.TimeFormat),
			LastModified:  o.modified.Format(http.TimeFormat),
			Etag:          "0x" + strings.ToUpper(hex.EncodeToString(o.md5[:8])),
			ContentLength: o.size,
			ContentType:   "application/octet-stream",
			ContentMD5:    base64.StdEncoding.EncodeToString(o.md5),
			BlobType:      "BlockBlob",
		}})
	}
	writeXML(w, http.StatusOK, res)
}

type azErrorBody struct {
	XMLName xml.Name `xml:"Error"`
	Code    string
	Message string
}

func azError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Ms-Error-Code", code)
	writeXML(w, status, azErrorBody{Code: code, Message: msg})
}
