package edge_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func TestPage(t *testing.T) {
	module := bytes.Repeat([]byte("\x00asm module bytes "), 200)
	script := []byte("export const x = 1;\n" + strings.Repeat("// a comment that compresses well\n", 40))
	tree := fstest.MapFS{
		"index.html":          {Data: []byte(`<script type="module" src="{{static}}/app.js"></script>`)},
		"app.js":              {Data: script},
		"gen/mapyard.wasm.gz": {Data: gz(t, module)},
		"gen/wasm_exec.js":    {Data: []byte("// loader")},
	}
	p, err := edge.NewPage(tree)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Missing()) != 0 {
		t.Fatalf("missing %v", p.Missing())
	}
	get := func(path, encoding string) *http.Response {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if encoding != "" {
			r.Header.Set("Accept-Encoding", encoding)
		}
		w := httptest.NewRecorder()
		if path == "/" {
			p.ServeIndex(w, r)
		} else {
			name := strings.TrimPrefix(path, p.Prefix()+"/")
			version := strings.Split(strings.TrimPrefix(path, edge.StaticPrefix), "/")[0]
			if err := p.ServeAsset(w, r, version, name); err != nil {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, err.Error())
			}
		}
		return w.Result()
	}
	body := func(resp *http.Response) []byte {
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(zr)
		}
		return b
	}

	t.Run("IndexNotCachedNamesVersion", func(t *testing.T) {
		resp := get("/", "")
		if resp.Header.Get("Cache-Control") != "no-cache" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "wasm-unsafe-eval") {
			t.Fatalf("index headers %v", resp.Header)
		}
		if b := string(body(resp)); b != `<script type="module" src="`+p.Prefix()+`/app.js"></script>` || len(p.Version()) != 12 {
			t.Fatalf("index %q (version %q)", b, p.Version())
		}
	})
	t.Run("ModuleGzipImmutable", func(t *testing.T) {
		resp := get(p.Prefix()+"/mapyard.wasm", "br, gzip")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != "application/wasm" ||
			!strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			t.Fatalf("module: %d %v", resp.StatusCode, resp.Header)
		}
		if !bytes.Equal(body(resp), module) {
			t.Fatal("module bytes differ")
		}
		plain := get(p.Prefix()+"/mapyard.wasm", "")
		if plain.Header.Get("Content-Encoding") != "" || !bytes.Equal(body(plain), module) {
			t.Fatal("a client without gzip did not get the plain module")
		}
	})
	t.Run("ScriptsCompressed", func(t *testing.T) {
		resp := get(p.Prefix()+"/app.js", "gzip")
		if resp.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
			!bytes.Equal(body(resp), script) {
			t.Fatalf("script: %v", resp.Header)
		}
		if resp := get(p.Prefix()+"/wasm_exec.js", "gzip"); string(body(resp)) != "// loader" {
			t.Fatal("loader not served from gen/")
		}
	})
	t.Run("ErrOtherVersion", func(t *testing.T) {
		if resp := get(edge.StaticPrefix+"0123456789ab/app.js", "gzip"); resp.StatusCode != 404 {
			t.Fatalf("another version's file: %d", resp.StatusCode)
		}
	})
	t.Run("VersionFollowsContent", func(t *testing.T) {
		tree["app.js"] = &fstest.MapFile{Data: append([]byte("// changed\n"), script...)}
		q, err := edge.NewPage(tree)
		if err != nil || q.Version() == p.Version() {
			t.Fatalf("version %q after a change, was %q (%v)", q.Version(), p.Version(), err)
		}
	})
	t.Run("ErrModuleNotBuilt", func(t *testing.T) {
		q, err := edge.NewPage(fstest.MapFS{"index.html": {Data: []byte("page")}})
		if err != nil {
			t.Fatal(err)
		}
		if m := q.Missing(); len(m) != 2 || m[0] != "gen/mapyard.wasm" {
			t.Fatalf("missing %v", m)
		}
		w := httptest.NewRecorder()
		err = q.ServeAsset(w, httptest.NewRequest(http.MethodGet, "/", nil), q.Version(), "mapyard.wasm")
		if err == nil || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("serving an unbuilt module: %v", err)
		}
	})
	t.Run("ErrNoIndex", func(t *testing.T) {
		if _, err := edge.NewPage(fstest.MapFS{"app.js": {Data: script}}); err == nil {
			t.Fatal("a tree without index.html made a page")
		}
	})
}

// TestEdge_ServesTheIcon: browsers ask for /favicon.ico on every visit whatever the page
// links, so the edge answers it, and the page links the same icon under its versioned
// prefix.
func TestEdge_ServesTheIcon(t *testing.T) {
	e := MustOpenEdge(t, "", nil)
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(e.PublicURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, icon := get(edge.IconPath)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/x-icon" ||
		!strings.Contains(resp.Header.Get("Cache-Control"), "max-age") || !bytes.HasPrefix(icon, []byte{0, 0, 1, 0}) {
		t.Fatalf("GET %s: %d %v, %d bytes starting % x", edge.IconPath, resp.StatusCode, resp.Header, len(icon), icon[:min(len(icon), 4)])
	}
	_, index := get("/")
	m := regexp.MustCompile(`<link rel="icon" href="([^"]+)">`).FindSubmatch(index)
	if m == nil {
		t.Fatalf("the page links no icon:\n%s", index)
	}
	if resp, linked := get(string(m[1])); resp.StatusCode != http.StatusOK || !bytes.Equal(linked, icon) {
		t.Fatalf("GET %s (the linked icon): %d, same bytes %v", m[1], resp.StatusCode, bytes.Equal(linked, icon))
	}
}

// TestPage_MapGone: the page knows the edge's close code for a map that went away
// (public.CloseMapGone) by its number, as JavaScript cannot import it: it rejoins on
// it and says it in words.
func TestPage_MapGone(t *testing.T) {
	for file, want := range map[string]string{
		"session.js": fmt.Sprintf("const MAP_GONE = %d;", public.CloseMapGone),
		"words.js":   fmt.Sprintf("case %d: return ", public.CloseMapGone),
	} {
		b, err := fs.ReadFile(edge.StaticFiles(), file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s does not hold %q", file, want)
		}
	}
}
