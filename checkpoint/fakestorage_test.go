package checkpoint

import (
	"bufio"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStorage is the disk behind the fake S3 and Azure servers: objects are
// files in a temporary directory (so a 20 MB checkpoint costs the test no
// memory), with the digests a cloud would keep, and faults a test can
// switch on per key.
type fakeStorage struct {
	dir string

	mu      sync.Mutex
	objects map[string]*fakeObject
	seq     int
	faults  map[fault]func(key string) bool
	ops     map[string]int // operation -> count, for tests that assert on the wire
}

type fakeObject struct {
	path     string
	size     int64
	sha256   []byte
	md5      []byte
	modified time.Time
}

type fault int

const (
	noFault fault = iota - 1
	// cutPut drops the connection halfway through an upload's body.
	cutPut fault = iota
	// flipPut changes one byte of an upload before the server sees it, as a
	// fault on the way would.
	flipPut
	// flipGet serves one byte different from what is stored.
	flipGet
)

func newFakeStorage(t *testing.T) *fakeStorage {
	return &fakeStorage{
		dir:     t.TempDir(),
		objects: make(map[string]*fakeObject),
		faults:  make(map[fault]func(string) bool),
		ops:     make(map[string]int),
	}
}

// setFault switches a fault on for the keys when matches (nil: off).
func (s *fakeStorage) setFault(f fault, when func(key string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[f] = when
}

func (s *fakeStorage) faulty(f fault, key string) bool {
	s.mu.Lock()
	when := s.faults[f]
	s.mu.Unlock()
	return when != nil && when(key)
}

func (s *fakeStorage) count(op string) {
	s.mu.Lock()
	s.ops[op]++
	s.mu.Unlock()
}

func (s *fakeStorage) opCount(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[op]
}

// receive streams an upload body to a new file, hashing it, and returns the
// object without making it visible: the server commits it once it has
// checked what the client declared.
func (s *fakeStorage) receive(key string, body io.Reader) (*fakeObject, error) {
	s.mu.Lock()
	s.seq++
	p := filepath.Join(s.dir, fmt.Sprintf("obj-%d", s.seq))
	s.mu.Unlock()
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if s.faulty(flipPut, key) {
		body = &flipReader{r: body, at: 0}
	}
	sh, mh := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(f, sh, mh), body)
	if err != nil {
		os.Remove(p)
		return nil, err
	}
	return &fakeObject{path: p, size: n, sha256: sh.Sum(nil), md5: mh.Sum(nil), modified: time.Now().UTC()}, nil
}

// discard drops an upload the server refused.
func (s *fakeStorage) discard(o *fakeObject) { os.Remove(o.path) }

func (s *fakeStorage) commit(key string, o *fakeObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.objects[key]; old != nil {
		os.Remove(old.path)
	}
	s.objects[key] = o
}

func (s *fakeStorage) lookup(key string) *fakeObject {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[key]
}

// open returns an object's content, corrupted when flipGet is on for it.
func (s *fakeStorage) open(key string) (io.ReadCloser, *fakeObject, error) {
	o := s.lookup(key)
	if o == nil {
		return nil, nil, os.ErrNotExist
	}
	f, err := os.Open(o.path)
	if err != nil {
		return nil, nil, err
	}
	if s.faulty(flipGet, key) {
		return struct {
			io.Reader
			io.Closer
		}{&flipReader{r: f, at: o.size / 2}, f}, o, nil
	}
	return f, o, nil
}

func (s *fakeStorage) remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[key]
	if o != nil {
		os.Remove(o.path)
		delete(s.objects, key)
	}
	return o != nil
}

// keys returns the keys with prefix, sorted.
func (s *fakeStorage) keys(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// rot flips a byte of a stored object and leaves its recorded digests as
// they were: damage at rest.
func (s *fakeStorage) rot(t *testing.T, key string) {
	t.Helper()
	o := s.lookup(key)
	if o == nil {
		t.Fatalf("rot: no object %q", key)
	}
	flipFileByte(t, o.path)
}

func flipFileByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatalf("flipping a byte of %s: %v", path, err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

// flipReader inverts the byte at offset at.
type flipReader struct {
	r   io.Reader
	at  int64
	pos int64
}

func (f *flipReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if f.at >= f.pos && f.at < f.pos+int64(n) {
		p[f.at-f.pos] ^= 0xff
	}
	f.pos += int64(n)
	return n, err
}

// cutConnection reads about half of an upload's body and drops the
// connection, as a network failure mid-upload does.
func cutConnection(w http.ResponseWriter, body io.Reader, declared int64) {
	io.CopyN(io.Discard, body, declared/2)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// awsChunkedReader decodes an aws-chunked body: chunks of "<hex size>
// [;chunk-signature=...]\r\n<data>\r\n", a zero-size chunk, then trailers
// ("x-amz-checksum-sha256:<base64>\r\n") and an empty line.
type awsChunkedReader struct {
	br       *bufio.Reader
	left     int64 // bytes left in the current chunk
	inChunk  bool
	trailers map[string]string
	err      error
}

func newAWSChunkedReader(r io.Reader) *awsChunkedReader {
	return &awsChunkedReader{br: bufio.NewReader(r), trailers: make(map[string]string)}
}

func (c *awsChunkedReader) Read(p []byte) (int, error) {
	for c.err == nil && c.left == 0 {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.br.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// next reads the end of the current chunk and the header of the next; at
// the last chunk it reads the trailers and returns io.EOF.
func (c *awsChunkedReader) next() error {
	if c.inChunk {
		if crlf, err := c.line(); err != nil || crlf != "" {
			return fmt.Errorf("aws-chunked: chunk not followed by CRLF (%v)", err)
		}
	}
	header, err := c.line()
	if err != nil {
		return err
	}
	sizeHex, _, _ := strings.Cut(header, ";")
	var size int64
	if _, err := fmt.Sscanf(sizeHex, "%x", &size); err != nil {
		return fmt.Errorf("aws-chunked: bad chunk header %q", header)
	}
	if size > 0 {
		c.left, c.inChunk = size, true
		return nil
	}
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		if line == "" {
			return io.EOF
		}
		name, value, _ := strings.Cut(line, ":")
		c.trailers[strings.ToLower(name)] = strings.TrimSpace(value)
	}
}

func (c *awsChunkedReader) line() (string, error) {
	s, err := c.br.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("aws-chunked: %w", io.ErrUnexpectedEOF)
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}
