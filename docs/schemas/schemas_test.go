package schemas_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/kernel/assets"
	"github.com/mapyard/mapyard/mapserver/kernel/assets/defaultset"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// The real messages are validated where they are made: mapserver/app
// (TestSchemas_RealMessages) captures both contracts' traffic of maps run in-process.
// These tests check the files themselves.

func mustLoad(t *testing.T) *schemas.Set {
	t.Helper()
	s, err := schemas.Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEveryRouteHasSchemas checks that each route of the map contract, both ways, has
// the schemas of its request and answer.
func TestEveryRouteHasSchemas(t *testing.T) {
	s := mustLoad(t)
	routes := []string{
		mapcontract.PathHealth, mapcontract.PathStartInstance, mapcontract.PathHandoff,
		mapcontract.PathMapReady, mapcontract.PathMapHeartbeat, mapcontract.PathRedeem,
		mapcontract.PathRequestTransfer, mapcontract.PathTransferResult, mapcontract.PathPersistSnapshot,
		mapcontract.PathPersistCritical, mapcontract.PathPersistCriticalBatch,
		mapcontract.PathInstanceItems, mapcontract.PathCharacterItems, mapcontract.PathItemPolicies,
	}
	for _, r := range routes {
		req, ans, ok := schemas.ForRoute(r)
		if !ok {
			t.Errorf("route %s has no schemas", r)
			continue
		}
		for _, name := range []string{req, ans} {
			if name != "" && len(s.Required(name)) == 0 {
				t.Errorf("%s (route %s) requires no field: a message missing one would pass", name, r)
			}
		}
	}
	if _, _, ok := schemas.ForRoute("/orch/nope"); ok {
		t.Error("ForRoute knows a route that does not exist")
	}
}

// TestMapConfigSchema checks the MapConfig schema against the generator's own rules:
// every template and world-vector config passes both, and configs the generator
// refuses for a reason a schema can say are refused by the schema too.
func TestMapConfigSchema(t *testing.T) {
	s := mustLoad(t)
	const name = "common/map-config.json"
	var good [][]byte
	for _, id := range mapgen.TemplateIDs() {
		c, err := mapgen.Template(id)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(c)
		good = append(good, raw)
	}
	vectors, _ := filepath.Glob("../world-vectors/*.json")
	if len(vectors) == 0 {
		t.Fatal("no world vectors found")
	}
	for _, f := range vectors {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Config json.RawMessage }
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		good = append(good, v.Config)
	}
	for _, raw := range good {
		if _, err := mapgen.Parse(raw); err != nil {
			t.Fatalf("generator refuses %s: %v", raw, err)
		}
		if err := s.Validate(name, raw); err != nil {
			t.Errorf("schema refuses a config the generator takes: %v", err)
		}
	}

	t.Run("PropSetsAreTheCatalog", func(t *testing.T) {
		var doc struct {
			Properties struct {
				PropSetIDs struct {
					Items struct {
						Enum []string `json:"enum"`
					} `json:"items"`
				} `json:"propSetIds"`
			} `json:"properties"`
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(slices.Values(doc.Properties.PropSetIDs.Items.Enum))
		if want := mapgen.PropSetIDs(); !reflect.DeepEqual(got, want) {
			t.Fatalf("schema lists prop sets %q, the generator's catalog %q", got, want)
		}
	})

	bad := map[string]func(m map[string]any){
		"ErrMissingTerrain":  func(m map[string]any) { delete(m, "terrain") },
		"ErrUnknownField":    func(m map[string]any) { m["colour"] = "red" },
		"ErrSchemaVersion":   func(m map[string]any) { m["schemaVersion"] = 2 },
		"ErrSeedTooLarge":    func(m map[string]any) { m["seed"] = uint64(mapgen.MaxSeed) + 1 },
		"ErrBadMapID":        func(m map[string]any) { m["mapId"] = "Forest" },
		"ErrSmallBounds":     func(m map[string]any) { m["bounds"].(map[string]any)["width"] = 99 },
		"ErrUnknownPropSet":  func(m map[string]any) { m["propSetIds"] = []string{"moon-rocks"} },
		"ErrPortalBothWays":  func(m map[string]any) { portals(m)[0].(map[string]any)["discover"] = true },
		"ErrPortalNoTarget":  func(m map[string]any) { delete(portals(m)[0].(map[string]any), "targetMapId") },
		"ErrFractionalWidth": func(m map[string]any) { m["bounds"].(map[string]any)["width"] = 150.5 },
		"ErrAssetSetVersion": func(m map[string]any) { m["assetSets"] = []any{map[string]any{"id": "castle", "version": "../2"}} },
		"ErrAssetSetNoID":    func(m map[string]any) { m["assetSets"] = []any{map[string]any{"version": "2"}} },
	}
	for name_, mutate := range bad {
		t.Run(name_, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good[0], &m); err != nil {
				t.Fatal(err)
			}
			mutate(m)
			raw, _ := json.Marshal(m)
			if _, err := mapgen.Parse(raw); err == nil {
				t.Fatalf("the generator takes %s: the case tests nothing", raw)
			}
			if err := s.Validate(name, raw); err == nil {
				t.Fatalf("schema takes a config the generator refuses: %s", raw)
			}
		})
	}
}

// TestAssetManifestSchema checks the manifest schema against the loader: the default
// set's manifest passes both, and manifests the loader refuses for a reason a schema
// can say are refused by the schema too.
func TestAssetManifestSchema(t *testing.T) {
	s := mustLoad(t)
	const name = "common/asset-manifest.json"
	good, err := fs.ReadFile(defaultset.FS(), assets.ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assets.Parse(good); err != nil {
		t.Fatalf("the loader refuses the default manifest: %v", err)
	}
	if err := s.Validate(name, good); err != nil {
		t.Fatalf("schema refuses the default manifest: %v", err)
	}
	file0 := func(m map[string]any) map[string]any { return m["files"].([]any)[0].(map[string]any) }
	bad := map[string]func(m map[string]any){
		"ErrMissingFiles": func(m map[string]any) { delete(m, "files") },
		"ErrUnknownField": func(m map[string]any) { m["colour"] = "red" },
		"ErrVersion":      func(m map[string]any) { m["version"] = "1/2" },
		"ErrDotDot":       func(m map[string]any) { file0(m)["path"] = "../secret.png" },
		"ErrAbsolute":     func(m map[string]any) { file0(m)["path"] = "/etc/passwd" },
		"ErrHidden":       func(m map[string]any) { file0(m)["path"] = "a/.hidden" },
		"ErrTooLarge":     func(m map[string]any) { file0(m)["size"] = 50 << 20 },
		"ErrHash":         func(m map[string]any) { file0(m)["sha256"] = "abc" },
		"ErrUnknownBiome": func(m map[string]any) {
			m["terrain"].(map[string]any)["lava"] = map[string]any{"file": "ui/placeholder.png", "metres": 4}
		},
		"ErrNoWalkEast": func(m map[string]any) {
			delete(m["characters"].(map[string]any)["npc"].(map[string]any)["animations"].(map[string]any), "walk-east")
		},
	}
	for name_, mutate := range bad {
		t.Run(name_, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			mutate(m)
			raw, _ := json.Marshal(m)
			if _, err := assets.Parse(raw); err == nil {
				t.Fatalf("the loader takes %s: the case tests nothing", name_)
			}
			if err := s.Validate(name, raw); err == nil {
				t.Fatalf("schema takes a manifest the loader refuses (%s)", name_)
			}
		})
	}
}

func portals(m map[string]any) []any {
	return m["generationRules"].(map[string]any)["portals"].([]any)
}

// TestIDsAndReferences checks that every file is named by its own $id and is reached
// under the folder a reader expects (control/, orch/, player/, common/).
func TestIDsAndReferences(t *testing.T) {
	mustLoad(t) // checks $schema, $id and every reference
	for _, name := range schemas.Names() {
		dir, _, _ := strings.Cut(name, "/")
		if !slices.Contains([]string{"common", "control", "orch", "player"}, dir) {
			t.Errorf("%s lies outside the four folders", name)
		}
	}
}
