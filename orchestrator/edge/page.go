package edge

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// The browser client's files. The page's own HTML, scripts and styles are committed
// under static/; the WebAssembly module and Go's wasm_exec.js that loads it are built
// by `make build` into static/gen/ (not committed), before the binaries that embed
// them. A checkout that was never built still compiles and serves the page, which then
// says the module is missing.
const (
	// PageIndex is the page's HTML; its StaticToken is replaced by the versioned prefix.
	PageIndex = "index.html"
	// StaticToken marks, in index.html, where the versioned static prefix goes.
	StaticToken = "{{static}}"
	// PageModule is the WebAssembly module's public name; it lies in the tree as
	// GenDir/PageModule + ".gz", compressed once by the build.
	PageModule = "mapyard.wasm"
	// PageLoader is Go's wasm_exec.js, copied from the toolchain that built the module.
	PageLoader = "wasm_exec.js"
	// PageIcon is the page's icon. index.html links it under the versioned prefix, and
	// IconPath serves it too, because browsers and crawlers ask for /favicon.ico
	// whatever the page links (a 404 there is a console error on every visit).
	PageIcon = "favicon.ico"
	// IconPath is the fixed URL of the icon.
	IconPath = "/" + PageIcon
	// GenDir is the directory of the built files inside the static tree.
	GenDir = "gen"
	// StaticPrefix is the URL path under which assets live, followed by the version.
	StaticPrefix = "/static/"
)

// Page is the browser client as the edge serves it: index.html at / (never cached, so a
// new deployment is picked up at once), every other file at
// /static/<version>/<name>, cached for a year as immutable, where version is a hash of
// every file's content, so a changed file always gets a new URL. Text files and the
// module are served gzip-compressed to clients that accept it (the module is
// compressed at build time, the rest once at start).
type Page struct {
	version string
	index   asset
	assets  map[string]asset
}

// asset is one file ready to serve: plain holds the bytes unless the tree held only the
// compressed form; gz the compressed bytes when compressing pays.
type asset struct {
	ctype     string
	plain, gz []byte
}

// NewPage reads the page from fsys (the static tree: index.html, the page's scripts and
// styles, and GenDir when built).
func NewPage(fsys fs.FS) (*Page, error) {
	p := &Page{assets: map[string]asset{}}
	var names []string
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read page files: %w", err)
	}
	slices.Sort(names)
	sum := sha256.New()
	var indexHTML []byte
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read page file %s: %w", name, err)
		}
		fmt.Fprintf(sum, "%s\x00%d\x00", name, len(data))
		sum.Write(data)
		public := strings.TrimPrefix(name, GenDir+"/")
		switch {
		case name == PageIndex:
			indexHTML = data
		case strings.HasSuffix(public, ".gz"):
			public = strings.TrimSuffix(public, ".gz")
			p.assets[public] = asset{ctype: contentType(public), gz: data}
		default:
			p.assets[public] = compressed(contentType(public), data)
		}
	}
	if indexHTML == nil {
		return nil, fmt.Errorf("read page files: no %s", PageIndex)
	}
	p.version = hex.EncodeToString(sum.Sum(nil))[:12]
	p.index = compressed("text/html; charset=utf-8", bytes.ReplaceAll(indexHTML, []byte(StaticToken), []byte(p.Prefix())))
	return p, nil
}

// Version is the content hash that keys the static URLs.
func (p *Page) Version() string { return p.version }

// Prefix is the URL path of the static files of this version, without a final slash.
func (p *Page) Prefix() string { return StaticPrefix + p.version }

// Missing lists the built files the page needs but the tree lacks: empty once
// `make build` produced them.
func (p *Page) Missing() []string {
	var out []string
	for _, name := range []string{PageModule, PageLoader} {
		if _, ok := p.assets[name]; !ok {
			out = append(out, path.Join(GenDir, name))
		}
	}
	return out
}

// ServeIndex answers the page's HTML.
func (p *Page) ServeIndex(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	// The page runs only its own files: scripts, styles, the module (instantiating
	// WebAssembly needs wasm-unsafe-eval) and WebSockets to this host.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; "+
		"connect-src 'self'; img-src 'self' data: blob:; style-src 'self'; frame-ancestors 'none'")
	p.index.serve(w, r)
}

// ServeAsset answers one static file of version; a file of another version (a page
// loaded before an upgrade) or no file is not_found, never another version's bytes
// under an immutable URL.
func (p *Page) ServeAsset(w http.ResponseWriter, r *http.Request, version, name string) error {
	a, ok := p.assets[name]
	switch {
	case version != p.version:
		return apierr.Errorf(apierr.ENOTFOUND, "no page files of version %q (this edge serves %s): reload the page", version, p.version)
	case !ok && slices.Contains(p.Missing(), path.Join(GenDir, name)):
		return apierr.Errorf(apierr.ENOTFOUND, "%s was not built into this edge: run make build", name)
	case !ok:
		return apierr.Errorf(apierr.ENOTFOUND, "no page file %s", name)
	}
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	a.serve(w, r)
	return nil
}

// ServeIcon answers the page's icon at its fixed URL, cached for a day (the URL does
// not change with the version, so it cannot be immutable); not_found when the tree has
// none.
func (p *Page) ServeIcon(w http.ResponseWriter, r *http.Request) error {
	a, ok := p.assets[PageIcon]
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "no page file %s", PageIcon)
	}
	w.Header().Set("Cache-Control", "public, max-age=86400")
	a.serve(w, r)
	return nil
}

// serve writes the asset, compressed when the client accepts gzip.
func (a asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	if a.gz != nil {
		h.Add("Vary", "Accept-Encoding")
	}
	head := r.Method == http.MethodHead
	switch {
	case a.gz != nil && acceptsGzip(r):
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", fmt.Sprint(len(a.gz)))
		w.WriteHeader(http.StatusOK)
		if !head {
			_, _ = w.Write(a.gz)
		}
	case a.plain != nil:
		h.Set("Content-Length", fmt.Sprint(len(a.plain)))
		w.WriteHeader(http.StatusOK)
		if !head {
			_, _ = w.Write(a.plain)
		}
	default: // only the compressed form exists: inflate for this rare client
		w.WriteHeader(http.StatusOK)
		if zr, err := gzip.NewReader(bytes.NewReader(a.gz)); err == nil && !head {
			_, _ = io.Copy(w, zr)
		}
	}
}

// acceptsGzip reports whether the request's Accept-Encoding admits gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			return strings.ReplaceAll(params, " ", "") != "q=0"
		}
	}
	return false
}

// compressed prepares data for serving, with a gzip form when that is smaller.
func compressed(ctype string, data []byte) asset {
	a := asset{ctype: ctype, plain: data}
	if len(data) < 512 {
		return a
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(data)
	_ = zw.Close()
	if buf.Len() < len(data) {
		a.gz = buf.Bytes()
	}
	return a
}

// contentType names the type of a page file by its extension.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".wasm":
		return "application/wasm" // what WebAssembly.instantiateStreaming demands
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".ico":
		return "image/x-icon" // not in every system's MIME table (a bare image has none)
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
