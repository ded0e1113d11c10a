package mapgen_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

func TestMapConfig_JSONRoundTrip(t *testing.T) {
	for _, id := range mapgen.TemplateIDs() {
		t.Run(id, func(t *testing.T) {
			want := mustTemplate(t, id)
			data, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := mapgen.Parse(data)
			if err != nil {
				t.Fatalf("Parse(Marshal(template)): %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the config:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestMapConfig_Validate(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *mapgen.MapConfig)
		field  string // want this field named; "" means valid
	}{
		{"Valid", func(c *mapgen.MapConfig) {}, ""},
		{"ValidMaxSeed", func(c *mapgen.MapConfig) { c.Seed = mapgen.MaxSeed }, ""},
		{"ErrSchemaVersion", func(c *mapgen.MapConfig) { c.SchemaVersion = 2 }, "schemaVersion"},
		{"ErrEmptyMapID", func(c *mapgen.MapConfig) { c.MapID = "" }, "mapId"},
		{"ErrUppercaseMapID", func(c *mapgen.MapConfig) { c.MapID = "Default" }, "mapId"},
		{"ErrMapIDTooLong", func(c *mapgen.MapConfig) { c.MapID = strings.Repeat("a", 49) }, "mapId"},
		{"ErrInstanceIDSlash", func(c *mapgen.MapConfig) { c.InstanceID = "a/b" }, "instanceId"},
		{"ErrInstanceIDLeadingDash", func(c *mapgen.MapConfig) { c.InstanceID = "-a" }, "instanceId"},
		{"ErrSeedBeyondJavaScript", func(c *mapgen.MapConfig) { c.Seed = mapgen.MaxSeed + 1 }, "seed"},
		{"ErrNegativeWidth", func(c *mapgen.MapConfig) { c.Bounds.Width = -5 }, "bounds.width"},
		{"ErrAbsurdHeight", func(c *mapgen.MapConfig) { c.Bounds.Height = 1_000_000 }, "bounds.height"},
		{"ErrZeroCellSize", func(c *mapgen.MapConfig) { c.Terrain.CellSize = 0 }, "terrain.cellSize"},
		{"ErrTooManyTerrainCells", func(c *mapgen.MapConfig) { c.Terrain.CellSize = 1 }, "terrain.cellSize"},
		{"ErrMaxHeight", func(c *mapgen.MapConfig) { c.Terrain.MaxHeight = 501 }, "terrain.maxHeight"},
		{"ErrFeatureSize", func(c *mapgen.MapConfig) { c.Terrain.FeatureSize = 0 }, "terrain.featureSize"},
		{"ErrOctaves", func(c *mapgen.MapConfig) { c.Terrain.Octaves = 9 }, "terrain.octaves"},
		{"ErrPersistence", func(c *mapgen.MapConfig) { c.Terrain.Persistence = -1 }, "terrain.persistence"},
		{"ErrWaterLevel", func(c *mapgen.MapConfig) { c.Terrain.WaterLevel = 1001 }, "terrain.waterLevel"},
		{"ErrMoistureScale", func(c *mapgen.MapConfig) { c.Biome.MoistureScale = 0 }, "biome.moistureScale"},
		{"ErrMoistureBias", func(c *mapgen.MapConfig) { c.Biome.MoistureBias = -1001 }, "biome.moistureBias"},
		{"ErrBeachHeight", func(c *mapgen.MapConfig) { c.Biome.BeachHeight = -1 }, "biome.beachHeight"},
		{"ErrSnowBelowRock", func(c *mapgen.MapConfig) { c.Biome.SnowLine = c.Biome.RockLine - 1 }, "biome.snowLine"},
		{"ErrWetBelowDry", func(c *mapgen.MapConfig) { c.Biome.WetAbove = c.Biome.DryBelow - 1 }, "biome.wetAbove"},
		{"ErrUnknownPropSet", func(c *mapgen.MapConfig) { c.PropSetIDs = append(c.PropSetIDs, "spaceships") }, "propSetIds[4]"},
		{"ErrDuplicatePropSet", func(c *mapgen.MapConfig) { c.PropSetIDs = []string{"rocks", "rocks"} }, "propSetIds[1]"},
		{"ErrZeroNavCellSize", func(c *mapgen.MapConfig) { c.StaticCollider.NavCellSize = 0 }, "staticCollider.navCellSize"},
		{"ErrTooManyNavCells", func(c *mapgen.MapConfig) { c.StaticCollider.NavCellSize = 1 }, "staticCollider.navCellSize"},
		{"ErrWalkableSlope", func(c *mapgen.MapConfig) { c.StaticCollider.MaxWalkableSlope = -1 }, "staticCollider.maxWalkableSlope"},
		{"ErrWallsWithoutThickness", func(c *mapgen.MapConfig) { c.StaticCollider.WallThickness = 0 }, "staticCollider.wallThickness"},
		{"ValidNoWallsNoThickness", func(c *mapgen.MapConfig) {
			c.StaticCollider.BoundaryWalls, c.StaticCollider.WallThickness = false, 0
		}, ""},
		{"ErrNegativePropDensity", func(c *mapgen.MapConfig) { c.GenerationRules.PropDensity = -1 }, "generationRules.propDensity"},
		{"ErrPropAttemptsPerMap", func(c *mapgen.MapConfig) {
			c.Bounds = mapgen.Bounds{Width: 8000, Height: 8000}
			c.Terrain.CellSize, c.StaticCollider.NavCellSize = 16, 8
			c.GenerationRules.PropDensity = 1000
		}, "generationRules.propDensity"},
		{"ErrNPCDensity", func(c *mapgen.MapConfig) { c.GenerationRules.NPCDensity = 5001 }, "generationRules.npcDensity"},
		{"ErrInteractableDensity", func(c *mapgen.MapConfig) { c.GenerationRules.InteractableDensity = -3 }, "generationRules.interactableDensity"},
		{"ErrNoSpawnPoints", func(c *mapgen.MapConfig) { c.GenerationRules.SpawnPoints = 0 }, "generationRules.spawnPoints"},
		{"ErrPortalCount", func(c *mapgen.MapConfig) { c.GenerationRules.Portals[0].Count = 0 }, "generationRules.portals[0].count"},
		{"ValidAssetSets", func(c *mapgen.MapConfig) {
			c.AssetSets = []mapgen.AssetSetRef{{ID: "castle-pack", Version: "2.1"}, mapgen.DefaultAssetSet}
		}, ""},
		{"ErrAssetSetID", func(c *mapgen.MapConfig) { c.AssetSets = []mapgen.AssetSetRef{{ID: "Castle", Version: "1"}} }, "assetSets[0].id"},
		{"ErrAssetSetVersion", func(c *mapgen.MapConfig) { c.AssetSets = []mapgen.AssetSetRef{{ID: "castle", Version: ""}} }, "assetSets[0].version"},
		{"ErrAssetSetVersionSlash", func(c *mapgen.MapConfig) { c.AssetSets = []mapgen.AssetSetRef{{ID: "castle", Version: "../1"}} }, "assetSets[0].version"},
		{"ErrDuplicateAssetSet", func(c *mapgen.MapConfig) {
			c.AssetSets = []mapgen.AssetSetRef{{ID: "castle", Version: "1"}, {ID: "castle", Version: "2"}}
		}, "assetSets[1].id"},
		{"ErrTooManyAssetSets", func(c *mapgen.MapConfig) {
			for _, id := range []string{"a", "b", "c", "d", "e"} {
				c.AssetSets = append(c.AssetSets, mapgen.AssetSetRef{ID: id, Version: "1"})
			}
		}, "assetSets"},
		{"ErrPortalTargetInvalid", func(c *mapgen.MapConfig) { c.GenerationRules.Portals[0].TargetMapID = "Nope!" }, "generationRules.portals[0].targetMapId"},
		{"ErrPortalToItself", func(c *mapgen.MapConfig) { c.GenerationRules.Portals[0].TargetMapID = c.MapID }, "generationRules.portals[0].targetMapId"},
		{"ErrDiscoverWithTarget", func(c *mapgen.MapConfig) { c.GenerationRules.Portals[0].Discover = true }, "generationRules.portals[0].targetMapId"},
		{"ValidImage", func(c *mapgen.MapConfig) { c.Image = "registry.example:5000/studio/lobby_2:v1.2@sha256:0a1b" }, ""},
		{"ErrImageSpace", func(c *mapgen.MapConfig) { c.Image = "mapyard/map latest" }, "image"},
		{"ErrImageLeadingSlash", func(c *mapgen.MapConfig) { c.Image = "/mapyard/map" }, "image"},
		{"ErrImageTooLong", func(c *mapgen.MapConfig) { c.Image = strings.Repeat("a", mapgen.MaxImageLength+1) }, "image"},
		{"ErrTooManyPortals", func(c *mapgen.MapConfig) {
			for range 4 {
				c.GenerationRules.Portals = append(c.GenerationRules.Portals, mapgen.PortalRule{Discover: true, Count: 8})
			}
		}, "generationRules.portals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mapgen.Default()
			tt.change(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *mapgen.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if got, want := ve.Field, tt.field; got != want {
				t.Fatalf("Field = %q, want %q (error %q)", got, want, err)
			}
			if got, want := err.Error(), tt.field+": "; !strings.HasPrefix(got, want) {
				t.Fatalf("Error() = %q, want prefix %q", got, want)
			}
			if _, err := mapgen.Generate(c); err == nil {
				t.Fatal("Generate accepted a config that Validate rejects")
			}
		})
	}
}

func TestMapConfig_ValidateMessage(t *testing.T) {
	c := mapgen.Default()
	c.Bounds.Width = -5
	if got, want := c.Validate().Error(), "bounds.width: must be between 100 and 8000 (got -5)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestParse(t *testing.T) {
	valid, err := json.Marshal(mapgen.Default())
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) []byte {
		if !strings.Contains(string(valid), old) {
			t.Fatalf("template JSON lacks %q", old)
		}
		return []byte(strings.Replace(string(valid), old, new, 1))
	}
	tests := []struct {
		name    string
		data    []byte
		wantErr string // substring; "" means success
	}{
		{"Valid", valid, ""},
		{"ErrMissingSchemaVersion", replace(`"schemaVersion":1,`, ``), "schemaVersion: missing"},
		{"ErrNewerSchemaVersion", replace(`"schemaVersion":1`, `"schemaVersion":2`), "schemaVersion: version 2 is newer"},
		{"ErrOlderSchemaVersion", replace(`"schemaVersion":1`, `"schemaVersion":0`), "schemaVersion: version 0 is no longer supported"},
		{"ValidImage", replace(`"seed":`, `"image":"mapyard/tag:latest","seed":`), ""},
		{"ErrUnknownField", replace(`"seed":`, `"sead":1,"seed":`), `unknown field "sead"`},
		{"ErrTrailingData", append(append([]byte(nil), valid...), []byte(`{}`)...), "decode map config"},
		{"ErrNegativeSeed", replace(`"seed":20261122`, `"seed":-1`), "decode map config"},
		{"ErrFractionalWidth", replace(`"width":2000`, `"width":2000.5`), "decode map config"},
		{"ErrBadValue", replace(`"width":2000`, `"width":0`), "bounds.width: must be between"},
		{"ErrNotJSON", []byte("not json"), "decode map config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mapgen.Parse(tt.data)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Parse() = %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Parse() = nil, want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Parse() = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func mustTemplate(tb testing.TB, id string) mapgen.MapConfig {
	tb.Helper()
	c, err := mapgen.Template(id)
	if err != nil {
		tb.Fatalf("Template(%q): %v", id, err)
	}
	return c
}

// TestIsPoolID: a pool id is a valid id with the pool prefix; nothing else is, so an
// instance id can never be taken for a blank pool member's.
func TestIsPoolID(t *testing.T) {
	for id, want := range map[string]bool{
		mapgen.PoolIDPrefix + "0a1b2c": true,
		"pool-x":                       true,
		"pool-":                        false, // ends with '-': not a valid id
		"Pool-1":                       false,
		"forest-1":                     false,
		"mypool-1":                     false,
		"":                             false,
	} {
		if got := mapgen.IsPoolID(id); got != want {
			t.Errorf("IsPoolID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestWorldHash_AssetSets checks that the world hash covers the asset sets a config
// names, in order, and that a config naming none hashes as it did before asset sets
// existed (the golden hashes and world vectors hold that too).
func TestWorldHash_AssetSets(t *testing.T) {
	base := mapgen.Default()
	hash := func(sets ...mapgen.AssetSetRef) string {
		t.Helper()
		c := base.Clone()
		c.AssetSets = sets
		w, err := mapgen.Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		return w.Hash()
	}
	none := hash()
	def := hash(mapgen.DefaultAssetSet)
	other := hash(mapgen.AssetSetRef{ID: "mapyard-default", Version: "2"})
	two := hash(mapgen.DefaultAssetSet, mapgen.AssetSetRef{ID: "castle", Version: "1"})
	swapped := hash(mapgen.AssetSetRef{ID: "castle", Version: "1"}, mapgen.DefaultAssetSet)
	seen := map[string]string{}
	for name, h := range map[string]string{"none": none, "default": def, "v2": other, "two": two, "swapped": swapped} {
		if prev, ok := seen[h]; ok {
			t.Errorf("%s and %s hash alike: %s", prev, name, h)
		}
		seen[h] = name
	}
	if got := mapgen.AssetSetsOf(base); len(got) != 1 || got[0] != mapgen.DefaultAssetSet {
		t.Errorf("AssetSetsOf(no sets) = %v, want the default set", got)
	}
}
