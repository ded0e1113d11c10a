// Command client-wasm is the browser client's one WebAssembly module: the map server's
// own generator (mapgen), movement (sim) and snapshot decoder (wire), exported to
// JavaScript so the page never reimplements what the server computes. Loaded with Go's
// wasm_exec.js, it defines the global object `mapyard` (see js.go for the calls) and,
// for older pages, the function mapyardGenerate.
//
// This file is the part that does not touch syscall/js, so it builds and is tested
// natively; js.go binds it to JavaScript.
package main

import (
	"encoding/binary"
	"errors"

	"github.com/mapyard/mapyard/mapserver/itemgen"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Entity record layout of a decoded snapshot as the page reads it: EntityStride
// float64 values per entity, at the offsets below. Snapshot formats that carry more
// per entity append fields after the last one, so a page reading by these offsets
// keeps working; it learns the layout from the module (mapyard.entityFields).
const (
	FieldSlot = iota
	FieldKind
	FieldID
	FieldX
	FieldY
	// FieldFacing, FieldState and FieldTemplate are snapshot format 2's state fields:
	// facing in 1/256 turns, the kind's state (an NPC's perception, an item's flags),
	// an item's wire template number (1-based, in the catalog's sorted ids).
	FieldFacing
	FieldState
	FieldTemplate
	EntityStride
)

// Record layouts of the packed world arrays (little-endian int32 each).
const (
	// PropStride: kind, x (cm), y (cm), scale (permille).
	PropStride = 4
	// ColliderStride: shape, x (cm), y (cm), halfX (cm), halfY (cm).
	ColliderStride = 5
)

// loadedWorld is one generated world and what prediction needs of it.
type loadedWorld struct {
	config    mapgen.MapConfig
	world     *mapgen.World
	colliders *sim.Colliders
}

// generate parses configJSON (a MapConfig, as the welcome carries it) and generates its
// world with the server's generator.
func generate(configJSON string) (*loadedWorld, error) {
	c, err := mapgen.Parse([]byte(configJSON))
	if err != nil {
		return nil, err
	}
	w, err := mapgen.Generate(c)
	if err != nil {
		return nil, err
	}
	return &loadedWorld{config: c, world: w, colliders: sim.NewColliders(w)}, nil
}

// seededItem is one item the map's generator placed, as the page matches it against
// the item entities of the snapshots: by wire template number and position.
type seededItem struct {
	ItemID   string
	Template uint32
	X, Y     int32 // quanta
}

// seededItems are the ordinary items the map placed in this world's instance, by the
// map's own placement (itemgen), with positions in quanta as the snapshots carry them.
// Which of them still lie in the world only the snapshots tell.
func (l *loadedWorld) seededItems(cat *items.Catalog) []seededItem {
	wireIDs := make(map[string]uint32)
	for i, id := range cat.IDs() {
		wireIDs[id] = uint32(i + 1)
	}
	var out []seededItem
	for _, it := range itemgen.Generate(l.config, l.world, l.colliders, cat) {
		out = append(out, seededItem{ItemID: it.ID, Template: wireIDs[it.TemplateID],
			X: sim.FromCentimetres(it.Place.X), Y: sim.FromCentimetres(it.Place.Y)})
	}
	return out
}

// packedWorld is the generated world in the flat shapes a canvas draws from cheaply:
// typed arrays instead of thousands of JavaScript objects.
type packedWorld struct {
	// Heights are the terrain corner heights, uint16 little-endian.
	Heights []byte
	// Biomes holds one mapgen.Biome per terrain cell.
	Biomes []byte
	// Props holds PropStride int32 per prop; Colliders ColliderStride per collider.
	Props, Colliders []byte
}

// pack flattens w for drawing.
func pack(w *mapgen.World) packedWorld {
	var p packedWorld
	p.Heights = make([]byte, 0, 2*len(w.Terrain.Heights))
	for _, h := range w.Terrain.Heights {
		p.Heights = binary.LittleEndian.AppendUint16(p.Heights, h)
	}
	p.Biomes = make([]byte, len(w.Biomes))
	for i, b := range w.Biomes {
		p.Biomes[i] = byte(b)
	}
	p.Props = make([]byte, 0, 4*PropStride*len(w.Props))
	for _, pr := range w.Props {
		p.Props = appendInt32s(p.Props, int32(pr.Kind), pr.X, pr.Y, int32(pr.Scale))
	}
	p.Colliders = make([]byte, 0, 4*ColliderStride*len(w.Colliders))
	for _, c := range w.Colliders {
		p.Colliders = appendInt32s(p.Colliders, int32(c.Shape), c.X, c.Y, c.HalfX, c.HalfY)
	}
	return p
}

func appendInt32s(dst []byte, vs ...int32) []byte {
	for _, v := range vs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
	}
	return dst
}

// replay is the page's prediction and reconciliation: where a player at (x, y) with
// stride st ends after inputs, and the stride it then has, by the server's own
// movement code.
func (l *loadedWorld) replay(x, y int32, st sim.Stride, inputs []sim.Input, speed int32, hz int) (sim.Vec, sim.Stride) {
	return sim.Replay(l.colliders, sim.Vec{X: x, Y: y}, st, inputs, speed, hz)
}

// errNoBaseline is the code the page gets for wire.ErrNoBaseline: not an error to
// show, the page just keeps acknowledging what it has.
const errNoBaseline = "no_baseline"

// decodeResult is one decoded snapshot in the page's shape.
type decodeResult struct {
	Tick, BaseTick uint32
	Full           bool
	Seq            uint64
	Self           int32
	// Records is the frame's despawn, spawn and update records (wire.Snapshot.Records).
	Records int
	// Entities holds EntityStride values per entity, sorted by slot.
	Entities []float64
}

// decode decodes one binary snapshot frame with d; a delta whose baseline d never held
// returns an error whose text is errNoBaseline.
func decode(d *wire.Decoder, frame []byte, dst []float64) (decodeResult, error) {
	s, err := d.Decode(frame)
	if errors.Is(err, wire.ErrNoBaseline) {
		return decodeResult{}, errors.New(errNoBaseline)
	}
	if err != nil {
		return decodeResult{}, err
	}
	r := decodeResult{Tick: s.Tick, BaseTick: s.BaseTick, Full: s.Full, Seq: s.Seq, Self: s.Self, Records: s.Records}
	dst = dst[:0]
	for _, e := range s.Entities {
		dst = append(dst, float64(e.Slot), float64(e.Kind), float64(e.ID), float64(e.X), float64(e.Y),
			float64(e.Facing), float64(e.State), float64(e.Template))
	}
	r.Entities = dst
	return r, nil
}
