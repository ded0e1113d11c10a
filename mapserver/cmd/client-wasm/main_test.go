//go:build !js

package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

func TestPack(t *testing.T) {
	w, err := mapgen.Generate(mapgen.Default())
	if err != nil {
		t.Fatal(err)
	}
	p := pack(w)
	if len(p.Biomes) != len(w.Biomes) || len(p.Heights) != 2*len(w.Terrain.Heights) {
		t.Fatalf("terrain packed to %d biomes, %d height bytes", len(p.Biomes), len(p.Heights))
	}
	if len(p.Props) != 4*PropStride*len(w.Props) || len(p.Colliders) != 4*ColliderStride*len(w.Colliders) {
		t.Fatalf("packed %d prop bytes, %d collider bytes", len(p.Props), len(p.Colliders))
	}
	last := w.Colliders[len(w.Colliders)-1]
	at := func(b []byte, i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }
	n := ColliderStride * (len(w.Colliders) - 1)
	if got := [5]int32{at(p.Colliders, n), at(p.Colliders, n+1), at(p.Colliders, n+2), at(p.Colliders, n+3), at(p.Colliders, n+4)}; got != [5]int32{int32(last.Shape), last.X, last.Y, last.HalfX, last.HalfY} {
		t.Fatalf("last collider packed as %v, want %+v", got, last)
	}
}

func TestDecode(t *testing.T) {
	full, delta := frames()
	d := wire.NewDecoder(0)
	if _, err := decode(d, delta, nil); err == nil || err.Error() != errNoBaseline {
		t.Fatalf("delta before its baseline: %v, want %s", err, errNoBaseline)
	}
	r, err := decode(d, full, nil)
	if err != nil || !r.Full || r.Tick != 300 || r.Seq != 41 || r.Self != 3 {
		t.Fatalf("full: %+v, %v", r, err)
	}
	r, err = decode(d, delta, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{3, 1, 12, 16005, 8000, 0, 0, 0, 5, 2, 7, 97, 52, 96, 2, 0, 10, 3, 30, 320, 480, 0, 1, 300}
	if len(r.Entities) != len(want) {
		t.Fatalf("delta entities %v, want %v", r.Entities, want)
	}
	for i := range want {
		if r.Entities[i] != want[i] {
			t.Fatalf("delta entities %v, want %v", r.Entities, want)
		}
	}
	if _, err := decode(d, []byte{0x07}, nil); err == nil {
		t.Fatal("a frame of an unknown format decoded")
	}
}

// frames returns the worked example of docs/netcode.md as the server's encoder writes
// it: a full snapshot of tick 300 and a delta of tick 302 against it.
func frames() (full, delta []byte) {
	enc := wire.NewEncoder(0)
	c := wire.NewClient(0)
	enc.Begin(300)
	enc.Set(3, wire.EntityState{ID: 12, Kind: 1, X: 16000, Y: 8000})
	enc.Set(5, wire.EntityState{ID: 7, Kind: 2, X: 100, Y: 50, Facing: 128, State: 1})
	enc.Set(9, wire.EntityState{ID: 13, Kind: 2, X: 5, Y: 5})
	enc.Set(10, wire.EntityState{ID: 30, Kind: 3, X: 320, Y: 480, Template: 300})
	full, _ = enc.Encode(nil, c, 41, 3, []int32{3, 5, 9, 10})
	c.Ack(300)
	enc.Begin(302)
	enc.Set(3, wire.EntityState{ID: 12, Kind: 1, X: 16005, Y: 8000})
	enc.Set(5, wire.EntityState{ID: 7, Kind: 2, X: 97, Y: 52, Facing: 96, State: 2})
	enc.Set(10, wire.EntityState{ID: 30, Kind: 3, X: 320, Y: 480, Template: 300, State: 1})
	delta, _ = enc.Encode(nil, c, 43, 3, []int32{3, 5, 10})
	return full, delta
}

// nodeScript loads the module the way the page does (wasm_exec.js, then run) and calls
// every export: the generator, the movement replay and the snapshot decoder.
const nodeScript = `
const fs = require("fs");
const [wasmExec, wasmPath, configPath, fullPath, deltaPath] = process.argv.slice(2);
globalThis.require = require;
globalThis.fs = fs;
globalThis.path = require("path");
require(wasmExec);
const go = new Go();
WebAssembly.instantiate(fs.readFileSync(wasmPath), go.importObject).then(({instance}) => {
  go.run(instance);
  const m = globalThis.mapyard;
  const w = m.loadWorld(fs.readFileSync(configPath, "utf8"));
  const bad = m.loadWorld('{"schemaVersion":1,"mapId":"Bad"}');
  const inputs = [];
  for (let s = 1; s <= 90; s++) inputs.push(s, 127, s % 3 === 0 ? 40 : 0);
  const sp = w.spawns[0];
  const q = (cm) => Math.sign(cm) * Math.floor((Math.abs(cm) * 16 + 50) / 100);
  const end = m.replay(w.id, q(sp.x), q(sp.y), 0, 0, 0, inputs, m.playerSpeed, 30);
  const dec = m.newDecoder();
  const early = m.decode(dec, new Uint8Array(fs.readFileSync(deltaPath)));
  const full = m.decode(dec, new Uint8Array(fs.readFileSync(fullPath)));
  const delta = m.decode(dec, new Uint8Array(fs.readFileSync(deltaPath)));
  const gen = globalThis.mapyardGenerate(fs.readFileSync(configPath, "utf8"));
  process.stdout.write(JSON.stringify({
    hash: w.hash || "", error: w.error || "", badError: bad.error || "", mapId: w.mapId,
    props: w.props.length / 4 / w.propStride, biomes: w.terrain.biomes.length,
    start: [q(sp.x), q(sp.y)], end, early: early.error || "",
    fullTick: full.tick, delta: Array.from(delta.entities), deltaSeq: delta.seq,
    stride: m.entityFields.stride, genHash: gen.hash,
    templates: m.itemTemplates.map((t) => t.id), seeded: m.seededItems(w.id),
  }));
  process.exit(0);
});
`

func TestModuleInNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node not in PATH: the WebAssembly module test needs it")
	}
	dir := t.TempDir()
	wasm := filepath.Join(dir, "mapyard.wasm")
	build := exec.Command("go", "build", "-o", wasm, ".")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build wasm: %v\n%s", err, out)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	wasmExec := filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js")

	cfg := mapgen.Default()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	full, delta := frames()
	files := map[string][]byte{"default.json": cfgJSON, "run.js": []byte(nodeScript), "full.bin": full, "delta.bin": delta}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	out, err := exec.Command(node, at("run.js"), wasmExec, wasm, at("default.json"), at("full.bin"), at("delta.bin")).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got struct {
		Hash, Error, BadError, MapID, Early, GenHash string
		Props, Biomes, FullTick, Stride              int
		DeltaSeq                                     uint64
		Start                                        [2]int32
		End                                          [5]int32
		Delta                                        []float64
		Templates                                    []string
		Seeded                                       []struct {
			ItemID   string
			Template uint32
			X, Y     int32
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}

	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Error != "" {
		t.Fatalf("loadWorld(default) returned error %q", got.Error)
	}
	if want := w.Hash(); got.Hash != want || got.GenHash != want {
		t.Fatalf("hash in node = %s (mapyardGenerate %s), native = %s", got.Hash, got.GenHash, want)
	}
	if got.MapID != "default" || got.Props != len(w.Props) || got.Biomes != len(w.Biomes) {
		t.Fatalf("world in node: map %q, %d props, %d biomes; want default, %d, %d", got.MapID, got.Props, got.Biomes, len(w.Props), len(w.Biomes))
	}
	if !strings.Contains(got.BadError, "mapId") {
		t.Fatalf("loadWorld(bad config) error = %q, want it to name mapId", got.BadError)
	}

	// Prediction in the page is the server's movement, bit for bit.
	var inputs []sim.Input
	for s := uint64(1); s <= 90; s++ {
		in := sim.Input{Seq: s, DX: 127}
		if s%3 == 0 {
			in.DY = 40
		}
		inputs = append(inputs, in)
	}
	start := sim.Vec{X: sim.FromCentimetres(w.Spawns[0].X), Y: sim.FromCentimetres(w.Spawns[0].Y)}
	if got.Start != [2]int32{start.X, start.Y} {
		t.Fatalf("the script converted the spawn point to %v, want %v", got.Start, start)
	}
	end, st := sim.Replay(sim.NewColliders(w), start, sim.Stride{}, inputs, sim.DefaultPlayerSpeed, 30)
	if got.End != [5]int32{end.X, end.Y, int32(st.DX), int32(st.DY), int32(st.Run)} || end == start {
		t.Fatalf("replay in node ended at %v, native at %v (from %v)", got.End, end, start)
	}

	if got.Early != errNoBaseline || got.FullTick != 300 || got.DeltaSeq != 43 || got.Stride != EntityStride {
		t.Fatalf("decoder in node: early %q, full tick %d, delta seq %d, stride %d", got.Early, got.FullTick, got.DeltaSeq, got.Stride)
	}
	if want := []float64{3, 1, 12, 16005, 8000, 0, 0, 0, 5, 2, 7, 97, 52, 96, 2, 0, 10, 3, 30, 320, 480, 0, 1, 300}; !slices.Equal(got.Delta, want) {
		t.Fatalf("delta in node %v, want %v", got.Delta, want)
	}
	// The item catalog in wire order, and the items the map placed, as the map has them.
	if len(got.Templates) != len(items.DefaultCatalog().IDs()) || got.Templates[0] != items.DefaultCatalog().IDs()[0] {
		t.Fatalf("itemTemplates in node %v, want the catalog's sorted ids", got.Templates)
	}
	seeded := game.GenerateItems(cfg, w, sim.NewColliders(w), items.DefaultCatalog())
	if len(seeded) == 0 || len(got.Seeded) != len(seeded) || got.Seeded[0].ItemID != seeded[0].ID ||
		got.Seeded[0].X != sim.FromCentimetres(seeded[0].Place.X) || got.Seeded[0].Y != sim.FromCentimetres(seeded[0].Place.Y) {
		t.Fatalf("seededItems in node: %d items, first %+v; the map placed %d, first %+v", len(got.Seeded), got.Seeded, len(seeded), seeded[0])
	}
}
