package defaultset_test

import (
	"bytes"
	"io/fs"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/assets"
	"github.com/mapyard/mapyard/mapserver/kernel/assets/defaultset"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// maxSetBytes bounds the whole default set, manifest included: it is part of every
// player's first load, which must stay within 1.5 MB with the page's module.
const maxSetBytes = 64 << 10

// TestCommittedSet checks that the committed set loads, is what Generate draws today
// (run `go generate ./mapserver/kernel/assets/defaultset` after changing the art),
// draws everything the generator and the item catalog name, and stays small.
func TestCommittedSet(t *testing.T) {
	s, err := assets.Load(defaultset.FS())
	if err != nil {
		t.Fatalf("the committed default set is refused: %v", err)
	}
	m := s.Manifest
	if m.Ref() != defaultset.Ref || defaultset.Ref != mapgen.DefaultAssetSet {
		t.Errorf("set %s, want the generator's default %s", m.Ref(), mapgen.DefaultAssetSet)
	}

	t.Run("UpToDate", func(t *testing.T) {
		want, err := defaultset.Generate()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]byte{}
		_ = fs.WalkDir(defaultset.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				got[p], _ = fs.ReadFile(defaultset.FS(), p)
			}
			return err
		})
		for p, data := range want {
			if !bytes.Equal(got[p], data) {
				t.Errorf("%s is stale: run go generate ./mapserver/kernel/assets/defaultset", p)
			}
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				t.Errorf("%s is no longer drawn: run go generate ./mapserver/kernel/assets/defaultset", p)
			}
		}
	})

	t.Run("DrawsEverything", func(t *testing.T) {
		for b := mapgen.Biome(0); b.String() != "unknown"; b++ {
			if _, ok := m.Terrain[b.String()]; !ok {
				t.Errorf("no terrain tile for biome %s", b)
			}
		}
		for _, k := range mapgen.PropKindNames() {
			if _, ok := m.Props[k]; !ok {
				t.Errorf("no sprite for prop kind %s", k)
			}
		}
		for _, id := range items.DefaultCatalog().IDs() {
			if _, ok := m.Items[id]; !ok {
				t.Errorf("no icon for item template %s", id)
			}
		}
		for _, kind := range []string{"player", "npc"} {
			if _, ok := m.Characters[kind]; !ok {
				t.Errorf("no character %s", kind)
			}
		}
		if m.Portal == nil {
			t.Error("no portal")
		}
		if _, ok := m.UI["placeholder"]; !ok {
			t.Error("no placeholder")
		}
	})

	t.Run("Small", func(t *testing.T) {
		total := len(s.Raw)
		for _, d := range s.Data {
			total += len(d)
		}
		if total > maxSetBytes {
			t.Errorf("the default set holds %d bytes, more than %d", total, maxSetBytes)
		}
		t.Logf("default set: %d files, %d bytes", len(s.Data)+1, total)
	})
}
