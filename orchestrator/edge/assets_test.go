package edge_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/assets"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// writeSet writes a set directory dir/name with one sprite file (an icon for coin)
// and its manifest, the manifest last, as a host would.
func writeSet(tb testing.TB, dir, name, id, version string, sprite []byte) {
	tb.Helper()
	full := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(full, "items"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "items", "coin.png"), sprite, 0o644); err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(sprite)
	m := assets.Manifest{SchemaVersion: 1, ID: id, Version: version,
		Files: []assets.File{{Path: "items/coin.png", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(sprite))}},
		Items: map[string]assets.Sprite{"coin": {File: "items/coin.png", Anchor: [2]int{8, 8}, PixelsPerMetre: 16}}}
	raw, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(full, assets.ManifestName), raw, 0o644); err != nil {
		tb.Fatal(err)
	}
}

type served struct {
	status int
	header http.Header
	body   []byte
}

func get(tb testing.TB, url string, header ...string) served {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// A transport without its own gzip handling, so that the test sees the encoding.
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			tb.Fatal(err)
		}
		body, _ = io.ReadAll(zr)
	}
	return served{resp.StatusCode, resp.Header, body}
}

// servedManifest is the manifest as the edge serves it: each file with its url.
type servedManifest struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Files   []struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
		URL    string `json:"url"`
	} `json:"files"`
}

func manifestOf(tb testing.TB, base string, ref assets.Ref) (servedManifest, served) {
	tb.Helper()
	r := get(tb, base+edge.ManifestURL(ref), "Accept-Encoding", "gzip")
	var m servedManifest
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &m); err != nil {
			tb.Fatalf("manifest of %s: %v", ref, err)
		}
	}
	return m, r
}

// TestAssets_ServesTheBuiltinSet checks the default set's URLs and caching: the list,
// the manifest revalidated by ETag (a reload costs a 304), and every file under its
// hash, immutable for a year, with the bytes the hash names.
func TestAssets_ServesTheBuiltinSet(t *testing.T) {
	e := MustOpenEdge(t, "", nil)
	base := e.PublicURL()

	list := get(t, base+edge.AssetSetsPath)
	if list.status != http.StatusOK || !strings.Contains(string(list.body), `"manifest":"/assets/sets/mapyard-default/1/manifest.json"`) {
		t.Fatalf("GET %s: %d %s", edge.AssetSetsPath, list.status, list.body)
	}
	m, r := manifestOf(t, base, mapgen.DefaultAssetSet)
	if r.status != http.StatusOK {
		t.Fatalf("manifest: %d %s", r.status, r.body)
	}
	if got := r.header.Get("Content-Encoding"); got != "gzip" {
		t.Errorf("manifest Content-Encoding %q, want gzip", got)
	}
	if got := r.header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("manifest Cache-Control %q, want no-cache", got)
	}
	etag := r.header.Get("ETag")
	if again := get(t, base+edge.ManifestURL(mapgen.DefaultAssetSet), "If-None-Match", etag); etag == "" || again.status != http.StatusNotModified || len(again.body) != 0 {
		t.Errorf("revalidation with ETag %q: %d, %d bytes; want 304 and none", etag, again.status, len(again.body))
	}
	if len(m.Files) < 30 {
		t.Fatalf("default manifest lists %d files", len(m.Files))
	}
	for _, f := range m.Files {
		r := get(t, base+f.URL, "Accept-Encoding", "gzip")
		sum := sha256.Sum256(r.body)
		switch {
		case r.status != http.StatusOK:
			t.Errorf("%s (%s): %d", f.URL, f.Path, r.status)
		case hex.EncodeToString(sum[:]) != f.SHA256 || !strings.Contains(f.URL, f.SHA256):
			t.Errorf("%s (%s) is not the file its hash names", f.URL, f.Path)
		case r.header.Get("Cache-Control") != "public, max-age=31536000, immutable":
			t.Errorf("%s Cache-Control %q", f.URL, r.header.Get("Cache-Control"))
		case strings.HasSuffix(f.Path, ".png") && r.header.Get("Content-Type") != "image/png":
			t.Errorf("%s Content-Type %q", f.URL, r.header.Get("Content-Type"))
		}
	}
	if r := get(t, base+edge.AssetFilesPrefix+strings.Repeat("0", 64)+".png"); r.status != http.StatusNotFound {
		t.Errorf("an unknown file: %d, want 404", r.status)
	}
	if _, r := manifestOf(t, base, assets.Ref{ID: "castle", Version: "1"}); r.status != http.StatusNotFound {
		t.Errorf("an unknown set: %d, want 404", r.status)
	}
}

// TestAssets_HostSets checks a host's asset directory: a set dropped in is served
// without a restart, a broken new version of it is refused (logged and counted) while
// the version before keeps serving, a fixed one replaces it, and a bad set beside them
// is refused from the start without touching the others.
func TestAssets_HostSets(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken", assets.ManifestName), []byte(`{"schemaVersion": 1, "id": `), 0o644); err != nil {
		t.Fatal(err)
	}
	e := MustOpenEdge(t, "", func(c *edge.Config) { c.AssetDir, c.AssetPollMS = dir, 50 })
	base := e.PublicURL()
	refused := func(reason string) float64 {
		families, err := e.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "mapyard_edge_asset_sets_refused_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == reason {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	if got := refused(assets.ReasonManifestInvalid); got != 1 {
		t.Errorf("refused manifest_invalid = %v, want 1 (the broken set at start)", got)
	}
	if _, r := manifestOf(t, base, mapgen.DefaultAssetSet); r.status != http.StatusOK {
		t.Fatalf("the built-in set stopped serving beside a broken one: %d", r.status)
	}

	castle := assets.Ref{ID: "castle", Version: "1"}
	writeSet(t, dir, "castle", castle.ID, castle.Version, []byte("castle coin v1"))
	waitFor(t, "the host's set", func() bool { _, r := manifestOf(t, base, castle); return r.status == http.StatusOK })
	m, _ := manifestOf(t, base, castle)
	if r := get(t, base+m.Files[0].URL); string(r.body) != "castle coin v1" {
		t.Fatalf("castle's coin: %d %q", r.status, r.body)
	}

	// A file replaced without its manifest: a hash mismatch, refused; v1 keeps serving.
	if err := os.WriteFile(filepath.Join(dir, "castle", "items", "coin.png"), []byte("castle coin XX"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken castle refused", func() bool { return refused(assets.ReasonHashMismatch) == 1 })
	if m2, r := manifestOf(t, base, castle); r.status != http.StatusOK || m2.Files[0].URL != m.Files[0].URL {
		t.Fatalf("castle 1 stopped serving when its directory broke: %d", r.status)
	}
	if r := get(t, base+m.Files[0].URL); string(r.body) != "castle coin v1" {
		t.Fatalf("castle 1's coin stopped serving: %d %q", r.status, r.body)
	}

	// A fixed, new version replaces it.
	castle2 := assets.Ref{ID: "castle", Version: "2"}
	writeSet(t, dir, "castle", castle2.ID, castle2.Version, []byte("castle coin v2"))
	waitFor(t, "castle 2", func() bool { _, r := manifestOf(t, base, castle2); return r.status == http.StatusOK })
	if got, want := e.Assets.Sets(), []assets.Ref{castle2, mapgen.DefaultAssetSet}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("serving %v, want %v", got, want)
	}
}
