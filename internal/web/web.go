// Package web is the dashboard: a page the server serves at /ui/, its
// assets embedded in the binary (no CDN, it works offline). The page holds
// no data; it reads everything from the API with the token the person
// signs in with, so it shows exactly what that token may see.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/ui/"

// Handler serves the dashboard's files under Prefix: index.html for the
// page (and for any path that is not a file, so a bookmarked view loads),
// the script and the style sheet, each with an ETag of its content.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	type file struct {
		data []byte
		etag string
	}
	byName := map[string]file{}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(files, p)
			sum := sha256.Sum256(b)
			byName[p] = file{b, `"` + hex.EncodeToString(sum[:8]) + `"`}
		}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Prefix, "/"))
		name = strings.TrimPrefix(name, "/")
		f, ok := byName[name]
		if !ok {
			name, f = "index.html", byName["index.html"]
		}
		h := w.Header()
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Everything is the server's own: no inline script, no other
		// origin, no framing.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.data))
	})
}
