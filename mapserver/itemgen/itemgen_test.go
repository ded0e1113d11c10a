//go:build !js

package itemgen_test

import (
	"reflect"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/itemgen"
	"github.com/mapyard/mapyard/mapserver/items"
	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestGenerate_SameAsTheMap checks that the browser's placement is the map's: the
// same items, ids and places for the default map and a denser variant.
func TestGenerate_SameAsTheMap(t *testing.T) {
	cfg := mapgen.Default()
	dense := cfg
	dense.Seed++
	dense.GenerationRules.InteractableDensity *= 3
	for _, c := range []mapgen.MapConfig{cfg, dense} {
		w, err := mapgen.Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		cols := sim.NewColliders(w)
		got := itemgen.Generate(c, w, cols, items.DefaultCatalog())
		want := game.GenerateItems(c, w, cols, items.DefaultCatalog())
		if len(got) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: itemgen placed %d items, the map %d (or they differ)", c.Seed, len(got), len(want))
		}
	}
}

// TestBrowserSafeDeps fails if the placement, which the browser runs, depends on a
// package that cannot or must not run there.
func TestBrowserSafeDeps(t *testing.T) {
	testutil.RequireBrowserSafe(t, []string{"GOOS=js", "GOARCH=wasm"}, "github.com/mapyard/mapyard/mapserver/itemgen")
}
