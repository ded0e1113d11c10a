package mapgen_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// vectorsDir holds the world test vectors that docs/mapgen.md gives map authors who
// rebuild the world outside Go: one MapConfig each, with what the generator makes of it.
const vectorsDir = "../../../docs/world-vectors"

// worldVector is one file of vectorsDir. Sections are the SHA-256 of each part of the
// canonical encoding, in the order and with the layout docs/mapgen.md gives, so that an
// implementation in another language finds which part it gets wrong; the lists of
// spawns, portals (and, in small worlds, props and colliders) show the values.
type worldVector struct {
	About          string           `json:"about"`
	Config         json.RawMessage  `json:"config"`
	WorldHash      string           `json:"worldHash"`
	CanonicalBytes int              `json:"canonicalBytes"`
	Sections       []vectorSection  `json:"sections"`
	Spawns         []vectorSpawn    `json:"spawns"`
	Portals        []vectorPortal   `json:"portals"`
	Props          []vectorProp     `json:"props,omitempty"`
	Colliders      []vectorCollider `json:"colliders,omitempty"`
}

// vectorSection is one part of the canonical encoding: its name, its length in bytes
// and the lowercase hex SHA-256 of those bytes.
type vectorSection struct {
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

type vectorSpawn struct {
	ID uint64 `json:"id"`
	X  int32  `json:"x"`
	Y  int32  `json:"y"`
	Z  int32  `json:"z"`
}

type vectorPortal struct {
	ID          uint64 `json:"id"`
	X           int32  `json:"x"`
	Y           int32  `json:"y"`
	Z           int32  `json:"z"`
	Radius      int32  `json:"radius"`
	TargetMapID string `json:"targetMapId"`
	TargetSeed  uint64 `json:"targetSeed"`
}

type vectorProp struct {
	ID    uint64 `json:"id"`
	Kind  uint16 `json:"kind"`
	X     int32  `json:"x"`
	Y     int32  `json:"y"`
	Z     int32  `json:"z"`
	Yaw   uint16 `json:"yaw"`
	Scale uint16 `json:"scale"`
}

type vectorCollider struct {
	ID    uint64 `json:"id"`
	Owner uint64 `json:"owner"`
	Shape uint8  `json:"shape"`
	X     int32  `json:"x"`
	Y     int32  `json:"y"`
	HalfX int32  `json:"halfX"`
	HalfY int32  `json:"halfY"`
}

// maxListed is the largest world whose props and colliders a vector lists one by one;
// the templates' thousands are covered by their sections' digests.
const maxListed = 200

// vectorConfigs are the configs the vectors are made from: both templates (the worlds
// mapyard's maps serve) and two small worlds that exercise what the templates do not: a
// map that is not square, no water blocking, no boundary walls, and a portal to a
// discovered map.
func vectorConfigs(tb testing.TB) map[string]mapgen.MapConfig {
	tb.Helper()
	out := map[string]mapgen.MapConfig{}
	for _, id := range mapgen.TemplateIDs() {
		out[id] = mustTemplate(tb, id)
	}
	small := mustTemplate(tb, "default")
	small.MapID, small.InstanceID, small.Seed = "small", "small-1", 1
	small.Bounds = mapgen.Bounds{Width: 200, Height: 200}
	small.GenerationRules.SpawnPoints = 3
	out["small"] = small

	wide := mustTemplate(tb, "frontier")
	wide.MapID, wide.InstanceID, wide.Seed = "wide", "wide-1", 9007199254740991
	wide.Bounds = mapgen.Bounds{Width: 300, Height: 120}
	wide.StaticCollider.BoundaryWalls, wide.StaticCollider.WallThickness, wide.StaticCollider.BlockWater = false, 0, false
	wide.GenerationRules.PropDensity = 600
	out["wide"] = wide
	return out
}

// TestWorldVectors checks every vector of docs/world-vectors against the generator:
// the config it names must generate exactly the hash, sections and objects it lists.
// The section boundaries are computed here from the layout docs/mapgen.md documents,
// and must add up to the whole encoding, so the page cannot drift from the bytes.
// Regenerate with: go test ./mapserver/kernel/mapgen -run TestWorldVectors -update
func TestWorldVectors(t *testing.T) {
	configs := vectorConfigs(t)
	if *update {
		if err := os.MkdirAll(vectorsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, c := range configs {
			data, err := json.MarshalIndent(makeVector(t, c), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(vectorsDir, name+".json"), append(data, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	files, err := filepath.Glob(filepath.Join(vectorsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range configs {
		if !slices.Contains(files, filepath.Join(vectorsDir, name+".json")) {
			t.Errorf("vector %s.json is missing from %s (create it with -update)", name, vectorsDir)
		}
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want worldVector
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&want); err != nil {
				t.Fatal(err)
			}
			c, err := mapgen.Parse(want.Config)
			if err != nil {
				t.Fatalf("the vector's config is not a valid MapConfig: %v", err)
			}
			got := makeVector(t, c)
			got.Config = want.Config
			if !reflect.DeepEqual(got, want) {
				gotJSON, _ := json.MarshalIndent(got, "", "  ")
				t.Fatalf("the generator disagrees with %s (regenerate with -update only if the change is deliberate):\n%.4000s", f, gotJSON)
			}
		})
	}
}

// makeVector generates c's world and describes it as a vector.
func makeVector(tb testing.TB, c mapgen.MapConfig) worldVector {
	tb.Helper()
	w := mustGenerate(tb, c)
	var enc bytes.Buffer
	if err := w.WriteCanonical(&enc); err != nil {
		tb.Fatal(err)
	}
	config, err := json.Marshal(c)
	if err != nil {
		tb.Fatal(err)
	}
	v := worldVector{
		About:          "A MapConfig and what mapyard's generator makes of it: docs/mapgen.md#the-world-outside-go. Regenerate with: go test ./mapserver/kernel/mapgen -run TestWorldVectors -update",
		Config:         config,
		WorldHash:      w.Hash(),
		CanonicalBytes: enc.Len(),
		Sections:       sections(tb, w, enc.Bytes()),
	}
	if sum := sha256.Sum256(enc.Bytes()); hex.EncodeToString(sum[:]) != v.WorldHash {
		tb.Fatal("Hash is not the SHA-256 of WriteCanonical's bytes")
	}
	for _, p := range w.Spawns {
		v.Spawns = append(v.Spawns, vectorSpawn(p))
	}
	for _, p := range w.Portals {
		v.Portals = append(v.Portals, vectorPortal(p))
	}
	if len(w.Colliders) <= maxListed && len(w.Props) <= maxListed {
		for _, p := range w.Props {
			v.Props = append(v.Props, vectorProp(p))
		}
		for _, k := range w.Colliders {
			v.Colliders = append(v.Colliders, vectorCollider{ID: k.ID, Owner: k.Owner, Shape: uint8(k.Shape), X: k.X, Y: k.Y, HalfX: k.HalfX, HalfY: k.HalfY})
		}
	}
	return v
}

// sections cuts the canonical encoding enc of w at the boundaries the documented
// layout gives (fixed-width little-endian integers, strings and byte lists each after a
// u32 length, every list after a u32 count) and digests each part. It fails when the
// layout does not account for exactly every byte, or when the lengths the encoding
// carries disagree with the world.
func sections(tb testing.TB, w *mapgen.World, enc []byte) []vectorSection {
	tb.Helper()
	str := func(s string) int { return 4 + len(s) }
	sizes := []struct {
		name string
		n    int
	}{
		{"header", str("mapyard-world/1\n") + 4 + str(w.MapID) + 8 + 4 + 4},
		{"terrain", 4 + 4 + 4 + 4 + 2*len(w.Terrain.Heights)},
		{"biomes", 4 + len(w.Biomes)},
		{"nav", 4 + 4 + 4 + 4 + len(w.Nav.Walkable) + 4 + len(w.Nav.Ground)},
		{"propKinds", 4},
		{"props", 4 + 26*len(w.Props)},
		{"colliders", 4 + 33*len(w.Colliders)},
		{"spawns", 4 + 20*len(w.Spawns)},
		{"portals", 4},
	}
	for _, k := range w.PropKinds {
		sizes[4].n += str(k.Name) + str(k.Set) + 1
	}
	for _, p := range w.Portals {
		sizes[8].n += 8 + 4*4 + str(p.TargetMapID) + 8
	}
	var out []vectorSection
	off := 0
	for _, s := range sizes {
		if off+s.n > len(enc) {
			tb.Fatalf("section %s ends at byte %d, past the encoding's %d bytes", s.name, off+s.n, len(enc))
		}
		part := enc[off : off+s.n]
		sum := sha256.Sum256(part)
		out = append(out, vectorSection{Name: s.name, Bytes: s.n, SHA256: hex.EncodeToString(sum[:])})
		off += s.n
	}
	if off != len(enc) {
		tb.Fatalf("the documented layout accounts for %d bytes, the encoding has %d", off, len(enc))
	}
	// Spot checks that the counts sit where the layout says.
	at := func(section string, rel int) uint32 {
		o := 0
		for _, s := range out {
			if s.Name == section {
				return binary.LittleEndian.Uint32(enc[o+rel:])
			}
			o += s.Bytes
		}
		tb.Fatalf("no section %s", section)
		return 0
	}
	if got := at("header", 0); got != 16 || string(enc[4:20]) != "mapyard-world/1\n" {
		tb.Fatalf("the encoding does not start with the 16-byte magic string")
	}
	if got, want := at("terrain", 12), uint32(len(w.Terrain.Heights)); got != want {
		tb.Fatalf("terrain count %d, want %d", got, want)
	}
	if got, want := at("colliders", 0), uint32(len(w.Colliders)); got != want {
		tb.Fatalf("collider count %d, want %d", got, want)
	}
	if got, want := at("portals", 0), uint32(len(w.Portals)); got != want {
		tb.Fatalf("portal count %d, want %d", got, want)
	}
	return out
}
