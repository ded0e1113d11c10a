package edge_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// Page weight budgets: a player's first load (the page, its scripts, the module and the
// default asset set, as served with gzip, headers included) and a reload (the HTML,
// and the manifest revalidated; everything else is immutable in the browser's cache).
const (
	maxFirstLoad = 1_500_000
	maxReload    = 10_000
)

// TestPageWeight measures what a browser transfers from the edge to play, with the
// module built (`make page`; skipped without it), and holds it to the budgets.
func TestPageWeight(t *testing.T) {
	e := MustOpenEdge(t, "", nil)
	base := e.PublicURL()
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	fetch := func(path string, header ...string) (int, []byte, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		head, _ := httputil.DumpResponse(resp, false)
		return resp.StatusCode, body, len(head) + len(body)
	}
	status, index, first := fetch("/")
	if status != http.StatusOK {
		t.Fatalf("GET /: %d", status)
	}
	plain := index
	if r, err := gzipReader(index); err == nil {
		plain = r
	}
	var module int
	for _, f := range strings.Split(string(plain), `"`) {
		if !strings.HasPrefix(f, edge.StaticPrefix) {
			continue
		}
		status, _, n := fetch(f)
		if status != http.StatusOK {
			if strings.HasSuffix(f, edge.PageModule) {
				t.Skipf("the page's module is not built (make page): %s answers %d", f, status)
			}
			t.Fatalf("GET %s: %d", f, status)
		}
		if strings.HasSuffix(f, edge.PageModule) {
			module = n
		}
		first += n
	}
	// The manifest and every file of the default set, as the page loads them.
	_, manifest, n := fetch(edge.ManifestURL(mapgen.DefaultAssetSet))
	first += n
	var set int
	m := manifestFromGzip(t, manifest)
	for _, f := range m.Files {
		_, _, n := fetch(f.URL)
		set += n
	}
	first += set
	status, _, reload := fetch("/")
	_, _, etagged := fetch(edge.ManifestURL(mapgen.DefaultAssetSet), "If-None-Match", etagOf(t, base))
	reload += etagged
	t.Logf("page weight: first load %d bytes (module %d, default asset set %d with its manifest %d), reload %d bytes",
		first, module, set, n, reload)
	if first > maxFirstLoad {
		t.Errorf("first load transfers %d bytes, more than %d", first, maxFirstLoad)
	}
	if reload > maxReload {
		t.Errorf("a reload transfers %d bytes, more than %d", reload, maxReload)
	}
}

func gzipReader(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func manifestFromGzip(t *testing.T, b []byte) servedManifest {
	t.Helper()
	if plain, err := gzipReader(b); err == nil {
		b = plain
	}
	var m servedManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func etagOf(t *testing.T, base string) string {
	t.Helper()
	return get(t, base+edge.ManifestURL(mapgen.DefaultAssetSet)).header.Get("ETag")
}
