package mapgen_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// FuzzGenerate feeds arbitrary config JSON, with some numeric fields overridden, to
// Parse, Validate and Generate: every input must either be rejected with an error or
// generate without panicking, identically twice, and survive a JSON round trip.
func FuzzGenerate(f *testing.F) {
	for _, id := range mapgen.TemplateIDs() {
		data, err := json.Marshal(mustTemplate(f, id))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(0), 0, 0, 0, 0, 0)
		f.Add(data, uint64(mapgen.MaxSeed), 100, 100, 1, 1, 5000)
		f.Add(data, uint64(mapgen.MaxSeed+1), 8000, 8000, 16, 8, 780)
		f.Add(data, uint64(42), -5, 0, 0, 0, 0)
	}
	f.Add([]byte(`{"schemaVersion":1}`), uint64(1), 0, 0, 0, 0, 0)
	f.Add([]byte(`{"schemaVersion":1,"mapId":"x","instanceId":"x-1","seed":1,"bounds":{"width":100,"height":100},"terrain":{"cellSize":1,"maxHeight":0,"featureSize":10,"octaves":1,"persistence":0,"waterLevel":1000},"biome":{"moistureScale":10,"moistureBias":0,"beachHeight":0,"rockLine":0,"snowLine":0,"dryBelow":0,"wetAbove":0},"propSetIds":["coast"],"staticCollider":{"navCellSize":1,"maxWalkableSlope":0,"boundaryWalls":true,"wallThickness":50,"blockWater":true},"generationRules":{"propDensity":5000,"npcDensity":0,"interactableDensity":0,"spawnPoints":64,"portals":[{"count":8,"discover":true}]}}`), uint64(7), 0, 0, 0, 0, 0)
	f.Add([]byte(`not json`), uint64(0), 0, 0, 0, 0, 0)

	f.Fuzz(func(t *testing.T, data []byte, seed uint64, width, height, cellSize, navCellSize, propDensity int) {
		c, err := mapgen.Parse(data)
		if err != nil {
			return
		}
		c.Seed ^= seed
		set := func(dst *int, v int) {
			if v != 0 {
				*dst = v
			}
		}
		set(&c.Bounds.Width, width)
		set(&c.Bounds.Height, height)
		set(&c.Terrain.CellSize, cellSize)
		set(&c.StaticCollider.NavCellSize, navCellSize)
		set(&c.GenerationRules.PropDensity, propDensity)

		w1, err := mapgen.Generate(c)
		if err != nil {
			var ve *mapgen.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Generate error is not a *ValidationError: %v", err)
			}
			if c.Validate() == nil {
				t.Fatalf("Generate failed (%v) on a config Validate accepts", err)
			}
			return
		}
		w2, err := mapgen.Generate(c)
		if err != nil {
			t.Fatalf("second Generate failed: %v", err)
		}
		if h1, h2 := w1.Hash(), w2.Hash(); h1 != h2 {
			t.Fatalf("same config, different hashes: %s vs %s", h1, h2)
		}

		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := mapgen.Parse(again)
		if err != nil {
			t.Fatalf("Parse(Marshal(valid config)): %v", err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(c)) {
			t.Fatalf("JSON round trip changed the config:\n got %+v\nwant %+v", back, c)
		}
	})
}

// normalize makes nil and empty slices compare equal: JSON cannot tell them apart
// after an empty list was written as [].
func normalize(c mapgen.MapConfig) mapgen.MapConfig {
	if len(c.PropSetIDs) == 0 {
		c.PropSetIDs = nil
	}
	if len(c.GenerationRules.Portals) == 0 {
		c.GenerationRules.Portals = nil
	}
	return c
}
