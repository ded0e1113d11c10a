package assets_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mapyard/mapyard/mapserver/kernel/assets"
)

// testSet returns a small valid set directory and its manifest, for cases to break.
func testSet() (fstest.MapFS, map[string]any) {
	files := map[string][]byte{
		"terrain/grass.png": []byte("grass tile"),
		"props/oak.png":     []byte("an oak"),
		"items/coin.png":    []byte("a coin"),
		"chars/hero.png":    []byte("a hero"),
		"portal.png":        []byte("a portal"),
	}
	fsys := fstest.MapFS{}
	var list []any
	for _, p := range []string{"terrain/grass.png", "props/oak.png", "items/coin.png", "chars/hero.png", "portal.png"} {
		sum := sha256.Sum256(files[p])
		fsys[p] = &fstest.MapFile{Data: files[p]}
		list = append(list, map[string]any{"path": p, "sha256": hex.EncodeToString(sum[:]), "size": len(files[p])})
	}
	sprite := func(file string) map[string]any {
		return map[string]any{"file": file, "anchor": []int{8, 15}, "pixelsPerMetre": 16}
	}
	anim := map[string]any{"frames": []int{0, 1}, "fps": 6}
	m := map[string]any{
		"schemaVersion": 1, "id": "test-set", "version": "1.2", "files": list,
		"terrain": map[string]any{"grassland": map[string]any{"file": "terrain/grass.png", "metres": 4}},
		"props":   map[string]any{"oak": map[string]any{"file": "props/oak.png", "anchor": []int{8, 30}, "pixelsPerMetre": 16, "footprint": []int{120, 120}}},
		"items":   map[string]any{"coin": sprite("items/coin.png")},
		"characters": map[string]any{"player": map[string]any{
			"file": "chars/hero.png", "anchor": []int{8, 15}, "pixelsPerMetre": 16, "frame": []int{16, 16},
			"animations": map[string]any{"idle": anim, "walk-north": anim, "walk-east": anim, "walk-south": anim, "walk-west": anim},
		}},
		"portal": sprite("portal.png"),
	}
	return fsys, m
}

func put(fsys fstest.MapFS, m map[string]any) {
	raw, _ := json.Marshal(m)
	fsys[assets.ManifestName] = &fstest.MapFile{Data: raw}
}

func file(m map[string]any, i int) map[string]any { return m["files"].([]any)[i].(map[string]any) }

// TestLoad is the validation table: each case breaks a valid set one way and must be
// refused for its own reason, naming the file concerned.
func TestLoad(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(fsys fstest.MapFS, m map[string]any)
		reason string // "" for a set that loads
		path   string
	}{
		{"Valid", func(fstest.MapFS, map[string]any) {}, "", ""},
		{"ValidExtraFileIgnored", func(fsys fstest.MapFS, _ map[string]any) {
			fsys["notes.txt"] = &fstest.MapFile{Data: []byte("not listed")}
		}, "", ""},
		{"ErrManifestMissing", func(fsys fstest.MapFS, _ map[string]any) { delete(fsys, assets.ManifestName) }, assets.ReasonManifestMissing, "manifest.json"},
		{"ErrManifestDoesNotParse", func(fsys fstest.MapFS, _ map[string]any) {
			fsys[assets.ManifestName] = &fstest.MapFile{Data: []byte(`{"schemaVersion": 1, "id": `)}
		}, assets.ReasonManifestInvalid, "manifest.json"},
		{"ErrUnknownField", func(_ fstest.MapFS, m map[string]any) { m["colour"] = "red" }, assets.ReasonManifestInvalid, "manifest.json"},
		{"ErrManifestTooLarge", func(fsys fstest.MapFS, _ map[string]any) {
			fsys[assets.ManifestName] = &fstest.MapFile{Data: []byte(strings.Repeat(" ", assets.MaxManifestSize+1))}
		}, assets.ReasonManifestInvalid, "manifest.json"},
		{"ErrSchemaVersion", func(_ fstest.MapFS, m map[string]any) { m["schemaVersion"] = 2 }, assets.ReasonManifestInvalid, "schemaVersion"},
		{"ErrBadID", func(_ fstest.MapFS, m map[string]any) { m["id"] = "Test Set" }, assets.ReasonManifestInvalid, "id"},
		{"ErrBadVersion", func(_ fstest.MapFS, m map[string]any) { m["version"] = "1/2" }, assets.ReasonManifestInvalid, "version"},
		{"ErrNoFiles", func(_ fstest.MapFS, m map[string]any) { m["files"] = []any{} }, assets.ReasonManifestInvalid, "files"},
		{"ErrFileMissing", func(fsys fstest.MapFS, _ map[string]any) { delete(fsys, "props/oak.png") }, assets.ReasonFileMissing, "props/oak.png"},
		{"ErrFileIsDirectory", func(fsys fstest.MapFS, m map[string]any) {
			fsys["dir/x.png"] = &fstest.MapFile{Data: []byte("x")}
			m["files"] = append(m["files"].([]any), map[string]any{"path": "dir", "sha256": strings.Repeat("0", 64), "size": 0})
		}, assets.ReasonFileMissing, "dir"},
		{"ErrHashMismatch", func(fsys fstest.MapFS, _ map[string]any) {
			fsys["props/oak.png"] = &fstest.MapFile{Data: []byte("an elm")}
		}, assets.ReasonHashMismatch, "props/oak.png"},
		{"ErrSizeMismatch", func(fsys fstest.MapFS, _ map[string]any) {
			fsys["props/oak.png"] = &fstest.MapFile{Data: []byte("an oak tree")}
		}, assets.ReasonSizeMismatch, "props/oak.png"},
		{"ErrBadHashForm", func(_ fstest.MapFS, m map[string]any) { file(m, 0)["sha256"] = "ABC" }, assets.ReasonManifestInvalid, "terrain/grass.png"},
		{"ErrListedTooLarge", func(_ fstest.MapFS, m map[string]any) { file(m, 1)["size"] = 50 << 20 }, assets.ReasonFileTooLarge, "props/oak.png"},
		{"ErrFileTooLarge", func(fsys fstest.MapFS, m map[string]any) {
			big := make([]byte, assets.MaxFileSize+1)
			sum := sha256.Sum256(big)
			fsys["props/oak.png"] = &fstest.MapFile{Data: big}
			file(m, 1)["sha256"] = hex.EncodeToString(sum[:])
			file(m, 1)["size"] = assets.MaxFileSize // a manifest that lies about the size
		}, assets.ReasonFileTooLarge, "props/oak.png"},
		{"ErrSetTooLarge", func(_ fstest.MapFS, m map[string]any) {
			for i := range 9 {
				m["files"] = append(m["files"].([]any), map[string]any{"path": "big/" + string(rune('a'+i)), "sha256": strings.Repeat("0", 64), "size": assets.MaxFileSize})
			}
		}, assets.ReasonSetTooLarge, "big/h"},
		{"ErrDotDot", func(_ fstest.MapFS, m map[string]any) { file(m, 1)["path"] = "props/../../etc/passwd" }, assets.ReasonBadPath, "props/../../etc/passwd"},
		{"ErrAbsolute", func(_ fstest.MapFS, m map[string]any) { file(m, 1)["path"] = "/etc/passwd" }, assets.ReasonBadPath, "/etc/passwd"},
		{"ErrBackslash", func(_ fstest.MapFS, m map[string]any) { file(m, 1)["path"] = `props\oak.png` }, assets.ReasonBadPath, `props\oak.png`},
		{"ErrNotClean", func(_ fstest.MapFS, m map[string]any) { file(m, 1)["path"] = "props//oak.png" }, assets.ReasonBadPath, "props//oak.png"},
		{"ErrHidden", func(_ fstest.MapFS, m map[string]any) { file(m, 1)["path"] = ".git/config" }, assets.ReasonBadPath, ".git/config"},
		{"ErrListedTwice", func(_ fstest.MapFS, m map[string]any) {
			m["files"] = append(m["files"].([]any), file(m, 0))
		}, assets.ReasonManifestInvalid, "terrain/grass.png"},
		{"ErrSpriteNotListed", func(_ fstest.MapFS, m map[string]any) {
			m["items"].(map[string]any)["apple"] = map[string]any{"file": "items/apple.png", "anchor": []int{0, 0}, "pixelsPerMetre": 16}
		}, assets.ReasonManifestInvalid, "items.apple.file"},
		{"ErrUnknownBiome", func(_ fstest.MapFS, m map[string]any) {
			m["terrain"].(map[string]any)["lava"] = map[string]any{"file": "terrain/grass.png", "metres": 4}
		}, assets.ReasonManifestInvalid, "terrain.lava"},
		{"ErrMissingWalk", func(_ fstest.MapFS, m map[string]any) {
			delete(m["characters"].(map[string]any)["player"].(map[string]any)["animations"].(map[string]any), "walk-west")
		}, assets.ReasonManifestInvalid, "characters.player.animations"},
		{"ErrZeroScale", func(_ fstest.MapFS, m map[string]any) {
			m["portal"].(map[string]any)["pixelsPerMetre"] = 0
		}, assets.ReasonManifestInvalid, "portal.pixelsPerMetre"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys, m := testSet()
			put(fsys, m)
			c.break_(fsys, m)
			if _, ok := fsys[assets.ManifestName]; ok && !strings.HasPrefix(c.name, "ErrManifest") {
				put(fsys, m)
			}
			s, err := assets.Load(fsys)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if got, want := s.Manifest.Ref().String(), "test-set@1.2"; got != want {
					t.Errorf("ref %s, want %s", got, want)
				}
				if got := string(s.Data["props/oak.png"]); got != "an oak" {
					t.Errorf("props/oak.png holds %q", got)
				}
				return
			}
			var e *assets.Error
			if !errors.As(err, &e) {
				t.Fatalf("Load = %v, want an *assets.Error %s", err, c.reason)
			}
			if e.Reason != c.reason || e.Path != c.path {
				t.Errorf("refused as %s at %q (%v), want %s at %q", e.Reason, e.Path, e, c.reason, c.path)
			}
			if e.Message == "" {
				t.Error("refused without a message")
			}
		})
	}
}
