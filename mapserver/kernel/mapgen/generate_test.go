package mapgen_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

var update = flag.Bool("update", false, "rewrite testdata/golden_hashes.txt (TestGolden) or docs/world-vectors (TestWorldVectors) from the current generator")

const goldenPath = "testdata/golden_hashes.txt"

// goldenSeeds returns the seeds checked for each template: its own seed, the largest
// valid seed, 0, and 47 others spread over the range.
func goldenSeeds(own uint64) []uint64 {
	seeds := []uint64{own, mapgen.MaxSeed, 0}
	for i := uint64(1); len(seeds) < 50; i++ {
		seeds = append(seeds, i*i*0x9e3779b97f4a7&mapgen.MaxSeed)
	}
	return seeds
}

// goldenLines generates every golden world and returns "mapId seed hash" lines.
func goldenLines(tb testing.TB) []string {
	tb.Helper()
	var lines []string
	for _, id := range mapgen.TemplateIDs() {
		c := mustTemplate(tb, id)
		for _, seed := range goldenSeeds(c.Seed) {
			c.Seed = seed
			lines = append(lines, fmt.Sprintf("%s %d %s", id, seed, mustGenerate(tb, c).Hash()))
		}
	}
	return lines
}

// TestGolden pins the hashes of 100 worlds (50 seeds of each template). It runs both
// natively and under GOOS=js GOARCH=wasm, which is what proves the browser computes the
// same worlds. Regenerate with: go test ./mapserver/kernel/mapgen -run TestGolden -update
func TestGolden(t *testing.T) {
	got := goldenLines(t)
	if *update {
		data := "# mapId seed sha256(canonical world); regenerate with go test -run TestGolden -update\n" + strings.Join(got, "\n") + "\n"
		if err := os.WriteFile(goldenPath, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("read golden file (create it with -update): %v", err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	if len(want) < 100 {
		t.Fatalf("golden file has %d hashes, want at least 100", len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("generated %d hashes, golden file has %d", len(got), len(want))
	}
	mismatches := 0
	for i := range want {
		if got[i] != want[i] {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("got  %s\nwant %s", got[i], want[i])
			}
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d hashes differ from %s", mismatches, len(want), goldenPath)
	}
}

func TestGenerate_DeterministicInProcess(t *testing.T) {
	for _, id := range mapgen.TemplateIDs() {
		t.Run(id, func(t *testing.T) {
			c := mustTemplate(t, id)
			a, b := mustGenerate(t, c), mustGenerate(t, c)
			if !bytes.Equal(canonical(t, a), canonical(t, b)) {
				t.Fatal("canonical encodings differ between two generations")
			}
			if !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
				t.Fatal("world JSON differs between two generations")
			}
			if got, want := a.Hash(), b.Hash(); got != want {
				t.Fatalf("hashes differ: %s vs %s", got, want)
			}
		})
	}
}

func TestGenerate_SeedChangesWorld(t *testing.T) {
	c := mapgen.Default()
	a := mustGenerate(t, c).Hash()
	c.Seed++
	if b := mustGenerate(t, c).Hash(); a == b {
		t.Fatalf("seeds %d and %d gave the same hash %s", c.Seed-1, c.Seed, a)
	}
}

func TestGenerate_InstanceIDDoesNotChangeWorld(t *testing.T) {
	c := mapgen.Default()
	a := mustGenerate(t, c).Hash()
	c.InstanceID = "default-2"
	if b := mustGenerate(t, c).Hash(); a != b {
		t.Fatalf("instance id changed the world hash: %s vs %s", a, b)
	}
}

// TestGenerate_ImageDoesNotChangeWorld: the image names where a map runs, not what its
// world is, so the same map hashes the same whichever game's image runs it.
func TestGenerate_ImageDoesNotChangeWorld(t *testing.T) {
	c := mapgen.Default()
	a := mustGenerate(t, c).Hash()
	c.Image = "mapyard/tag:latest"
	if b := mustGenerate(t, c).Hash(); a != b {
		t.Fatalf("the image changed the world hash: %s vs %s", a, b)
	}
}

func TestGenerate_Invariants(t *testing.T) {
	for _, id := range mapgen.TemplateIDs() {
		t.Run(id, func(t *testing.T) {
			c := mustTemplate(t, id)
			w := mustGenerate(t, c)
			if got, want := w.Width, int32(c.Bounds.Width*100); got != want {
				t.Errorf("Width = %d cm, want %d", got, want)
			}
			tf := w.Terrain
			if got, want := len(tf.Heights), (tf.Cols+1)*(tf.Rows+1); got != want {
				t.Errorf("len(Heights) = %d, want %d", got, want)
			}
			if got, want := len(w.Biomes), tf.Cols*tf.Rows; got != want {
				t.Errorf("len(Biomes) = %d, want %d", got, want)
			}
			if got, want := len(w.Nav.Walkable), (w.Nav.Cols*w.Nav.Rows+7)/8; got != want {
				t.Errorf("len(Walkable) = %d, want %d", got, want)
			}
			// A map of a square kilometre or more has hundreds of props; a small arena
			// (tag's) a few.
			if minProps := 500; len(w.Props) < minProps && c.Bounds.Width*c.Bounds.Height >= 1_000_000 || len(w.Props) == 0 {
				t.Errorf("only %d props", len(w.Props))
			}
			if got, want := len(w.Spawns), c.GenerationRules.SpawnPoints; got != want {
				t.Errorf("%d spawn points, want %d", got, want)
			}

			ids := map[uint64]bool{}
			seen := func(id uint64) {
				if id == 0 || id >= 1<<53 || ids[id] {
					t.Errorf("id %d is zero, beyond 2^53 or repeated", id)
				}
				ids[id] = true
			}
			inside := func(what string, x, y int32) {
				if x < 0 || y < 0 || x > w.Width || y > w.Height {
					t.Errorf("%s at (%d, %d) is outside the bounds", what, x, y)
				}
			}
			for _, s := range w.Spawns {
				seen(s.ID)
				inside("spawn", s.X, s.Y)
				if !w.Nav.WalkableAt(s.X, s.Y) {
					t.Errorf("spawn %d at (%d, %d) is not walkable", s.ID, s.X, s.Y)
				}
			}
			for _, p := range w.Portals {
				seen(p.ID)
				inside("portal", p.X, p.Y)
				if err := mapgen.ValidateID("portal", p.TargetMapID); err != nil {
					t.Errorf("portal %d: %v", p.ID, err)
				}
			}
			for _, p := range w.Props {
				seen(p.ID)
				inside("prop", p.X, p.Y)
				if int(p.Kind) >= len(w.PropKinds) {
					t.Errorf("prop %d has kind %d of %d", p.ID, p.Kind, len(w.PropKinds))
				}
				if got, want := p.Z, w.Terrain.At(p.X, p.Y); got != want {
					t.Errorf("prop %d: Z = %d, terrain there is %d", p.ID, got, want)
				}
			}
			for _, col := range w.Colliders {
				seen(col.ID)
				if col.X-col.HalfX < 0 || col.Y-col.HalfY < 0 || col.X+col.HalfX > w.Width || col.Y+col.HalfY > w.Height {
					t.Errorf("collider %d reaches outside the bounds: %+v", col.ID, col)
				}
				if col.Owner != 0 && !ids[col.Owner] {
					t.Errorf("collider %d belongs to unknown prop %d", col.ID, col.Owner)
				}
			}
		})
	}
}

func TestWorld_MarshalJSON(t *testing.T) {
	w := mustGenerate(t, mapgen.Default())
	var v struct {
		MapID   string `json:"mapId"`
		Terrain struct {
			Cols int    `json:"cols"`
			Data string `json:"data"`
		} `json:"terrain"`
		Props   [][7]int64 `json:"props"`
		Portals []struct {
			TargetMapID string `json:"targetMapId"`
		} `json:"portals"`
	}
	if err := json.Unmarshal(mustJSON(t, w), &v); err != nil {
		t.Fatal(err)
	}
	if got, want := v.MapID, "default"; got != want {
		t.Errorf("mapId = %q, want %q", got, want)
	}
	if got, want := v.Terrain.Cols, w.Terrain.Cols; got != want {
		t.Errorf("terrain.cols = %d, want %d", got, want)
	}
	if got, want := len(v.Terrain.Data), (2*len(w.Terrain.Heights)+2)/3*4; got != want {
		t.Errorf("terrain.data has %d base64 characters, want %d", got, want)
	}
	if got, want := len(v.Props), len(w.Props); got != want {
		t.Fatalf("%d props in JSON, want %d", got, want)
	}
	p := w.Props[len(w.Props)-1]
	if got, want := v.Props[len(v.Props)-1], [7]int64{int64(p.ID), int64(p.Kind), int64(p.X), int64(p.Y), int64(p.Z), int64(p.Yaw), int64(p.Scale)}; got != want {
		t.Errorf("last prop in JSON = %v, want %v", got, want)
	}
	if got, want := v.Portals[0].TargetMapID, "frontier"; got != want {
		t.Errorf("portals[0].targetMapId = %q, want %q", got, want)
	}
}

func TestHeightfield_At(t *testing.T) {
	h := mapgen.Heightfield{CellSize: 100, Cols: 1, Rows: 1, Heights: []uint16{0, 100, 200, 300}}
	tests := []struct {
		x, y, want int32
	}{
		{0, 0, 0}, {100, 0, 100}, {0, 100, 200}, {100, 100, 300},
		{50, 50, 150}, {-10, -10, 0}, {500, 500, 300},
	}
	for _, tt := range tests {
		if got := h.At(tt.x, tt.y); got != tt.want {
			t.Errorf("At(%d, %d) = %d, want %d", tt.x, tt.y, got, tt.want)
		}
	}
}

func mustGenerate(tb testing.TB, c mapgen.MapConfig) *mapgen.World {
	tb.Helper()
	w, err := mapgen.Generate(c)
	if err != nil {
		tb.Fatalf("Generate(%s seed %d): %v", c.MapID, c.Seed, err)
	}
	return w
}

func canonical(tb testing.TB, w *mapgen.World) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := w.WriteCanonical(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func mustJSON(tb testing.TB, w *mapgen.World) []byte {
	tb.Helper()
	data, err := json.Marshal(w)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}
