//go:build js && wasm

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"syscall/js"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// module holds the worlds and decoders the page opened, by the handle it was given.
// The page is single-threaded, and so is this module: no locks.
type module struct {
	catalog  *items.Catalog
	worlds   map[int]*loadedWorld
	decoders map[int]*wire.Decoder
	next     int
	scratch  []float64
	bytes    []byte
}

// main defines the global object mapyard:
//
//	loadWorld(mapConfigJSON) -> {id, hash, mapId, width, height, terrain, propKinds,
//	    props, colliders, portals, spawns} | {error}
//	dropWorld(id)
//	replay(worldId, x, y, strideDx, strideDy, strideRun, inputs, speed, hz)
//	    -> [x, y, strideDx, strideDy, strideRun] | {error}
//	    inputs is a flat array [seq, dx, dy, seq, dx, dy, ...]; the stride (sim.Stride:
//	    the direction last walked and how many inputs in a row walked it) goes in and
//	    comes out, so the page predicts each step exactly as the server takes it
//	newDecoder() -> id
//	decode(decoderId, Uint8Array) -> {tick, baseTick, full, seq, self, entities} | {error}
//	    entities is a Float64Array of entityFields.stride values per entity;
//	    error "no_baseline" means a delta against a snapshot this decoder never held
//	dropDecoder(id)
//	seededItems(worldId) -> [{itemId, template, x, y}] | {error}
//	    the items the map's generator placed in the world's instance (positions in
//	    quanta, template the wire number), to learn the id of an item entity
//
// plus the constants entityFields, quantaPerUnit, playerSpeed, bodyRadius, maxDir and
// itemTemplates (the item catalog in wire order: wire template n is itemTemplates[n-1]).
// Positions are in quanta (1/16 unit), world lengths in centimetres.
func main() {
	m := &module{catalog: items.DefaultCatalog(), worlds: map[int]*loadedWorld{}, decoders: map[int]*wire.Decoder{}}
	api := js.Global().Get("Object").New()
	for name, fn := range map[string]func([]js.Value) any{
		"loadWorld":   m.loadWorld,
		"dropWorld":   m.dropWorld,
		"replay":      m.replay,
		"newDecoder":  m.newDecoder,
		"decode":      m.decode,
		"dropDecoder": m.dropDecoder,
		"seededItems": m.seededItems,
	} {
		api.Set(name, js.FuncOf(guard(name, fn)))
	}
	api.Set("entityFields", map[string]any{
		"slot": FieldSlot, "kind": FieldKind, "id": FieldID, "x": FieldX, "y": FieldY,
		"facing": FieldFacing, "state": FieldState, "template": FieldTemplate, "stride": EntityStride,
	})
	api.Set("itemTemplates", templatesJS(m.catalog))
	api.Set("quantaPerUnit", sim.QuantaPerUnit)
	api.Set("playerSpeed", sim.DefaultPlayerSpeed)
	api.Set("bodyRadius", sim.BodyRadius)
	api.Set("maxDir", sim.MaxDir)
	js.Global().Set("mapyard", api)
	js.Global().Set("mapyardGenerate", js.FuncOf(guard("mapyardGenerate", generateJSON)))
	select {} // keep the Go runtime alive for later calls
}

// guard turns a panic inside a call into an {error} answer: a panic escaping a
// js.FuncOf would stop the Go runtime and every later call with it.
func guard(name string, fn func([]js.Value) any) func(js.Value, []js.Value) any {
	return func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			if r := recover(); r != nil {
				out = failure(fmt.Sprintf("%s: %v", name, r))
			}
		}()
		return fn(args)
	}
}

func failure(msg string) map[string]any { return map[string]any{"error": msg} }

func (m *module) loadWorld(args []js.Value) any {
	if len(args) != 1 || args[0].Type() != js.TypeString {
		return failure("loadWorld takes one argument: the MapConfig as a JSON string")
	}
	l, err := generate(args[0].String())
	if err != nil {
		return failure(err.Error())
	}
	m.next++
	m.worlds[m.next] = l
	w := l.world
	p := pack(w)
	kinds := make([]any, len(w.PropKinds))
	for i, k := range w.PropKinds {
		kinds[i] = map[string]any{"name": k.Name, "set": k.Set, "shape": int(k.Shape)}
	}
	portals := make([]any, len(w.Portals))
	for i, pt := range w.Portals {
		portals[i] = map[string]any{"x": pt.X, "y": pt.Y, "radius": pt.Radius, "target": pt.TargetMapID}
	}
	spawns := make([]any, len(w.Spawns))
	for i, s := range w.Spawns {
		spawns[i] = map[string]any{"x": s.X, "y": s.Y}
	}
	return map[string]any{
		"id": m.next, "hash": w.Hash(), "mapId": w.MapID, "width": w.Width, "height": w.Height,
		"terrain": map[string]any{
			"cellSize": w.Terrain.CellSize, "cols": w.Terrain.Cols, "rows": w.Terrain.Rows,
			"heights": bytesToJS(p.Heights), "biomes": bytesToJS(p.Biomes),
		},
		"propKinds": kinds, "props": bytesToJS(p.Props), "colliders": bytesToJS(p.Colliders),
		"propStride": PropStride, "colliderStride": ColliderStride,
		"portals": portals, "spawns": spawns,
	}
}

func (m *module) dropWorld(args []js.Value) any {
	if len(args) == 1 {
		delete(m.worlds, args[0].Int())
	}
	return nil
}

func (m *module) replay(args []js.Value) any {
	if len(args) != 9 {
		return failure("replay takes (worldId, x, y, strideDx, strideDy, strideRun, inputs, speed, hz)")
	}
	l := m.worlds[args[0].Int()]
	if l == nil {
		return failure("replay: no such world")
	}
	st := sim.Stride{DX: clampDir(args[3].Int()), DY: clampDir(args[4].Int()), Run: uint32(max(0, args[5].Int()))}
	flat := args[6]
	n := flat.Length() / 3
	inputs := make([]sim.Input, n)
	for i := range inputs {
		inputs[i] = sim.Input{
			Seq: uint64(flat.Index(3 * i).Float()),
			DX:  clampDir(flat.Index(3*i + 1).Int()),
			DY:  clampDir(flat.Index(3*i + 2).Int()),
		}
	}
	p, st := l.replay(int32(args[1].Int()), int32(args[2].Int()), st, inputs, int32(args[7].Int()), args[8].Int())
	return []any{p.X, p.Y, int(st.DX), int(st.DY), int(st.Run)}
}

// clampDir keeps a direction component in the range the server accepts.
func clampDir(v int) int8 { return int8(max(-sim.MaxDir, min(sim.MaxDir, v))) }

func (m *module) newDecoder(_ []js.Value) any {
	m.next++
	m.decoders[m.next] = wire.NewDecoder(wire.DefaultRing)
	return m.next
}

func (m *module) dropDecoder(args []js.Value) any {
	if len(args) == 1 {
		delete(m.decoders, args[0].Int())
	}
	return nil
}

func (m *module) decode(args []js.Value) any {
	if len(args) != 2 {
		return failure("decode takes (decoderId, Uint8Array)")
	}
	d := m.decoders[args[0].Int()]
	if d == nil {
		return failure("decode: no such decoder")
	}
	frame := make([]byte, args[1].Length())
	js.CopyBytesToGo(frame, args[1])
	r, err := decode(d, frame, m.scratch)
	if err != nil {
		return failure(err.Error())
	}
	m.scratch = r.Entities
	m.bytes = m.bytes[:0]
	for _, v := range r.Entities {
		m.bytes = binary.LittleEndian.AppendUint64(m.bytes, math.Float64bits(v))
	}
	ents := js.Global().Get("Float64Array").New(len(r.Entities))
	js.CopyBytesToJS(js.Global().Get("Uint8Array").New(ents.Get("buffer")), m.bytes)
	return map[string]any{
		"tick": r.Tick, "baseTick": r.BaseTick, "full": r.Full, "seq": float64(r.Seq), "self": r.Self,
		"records": r.Records, "entities": ents,
	}
}

func (m *module) seededItems(args []js.Value) any {
	if len(args) != 1 {
		return failure("seededItems takes (worldId)")
	}
	l := m.worlds[args[0].Int()]
	if l == nil {
		return failure("seededItems: no such world")
	}
	seeded := l.seededItems(m.catalog)
	out := make([]any, len(seeded))
	for i, it := range seeded {
		out[i] = map[string]any{"itemId": it.ItemID, "template": it.Template, "x": it.X, "y": it.Y}
	}
	return out
}

// templatesJS is the item catalog in wire order, as the page shows items.
func templatesJS(cat *items.Catalog) []any {
	ids := cat.IDs()
	out := make([]any, len(ids))
	for i, id := range ids {
		t, _ := cat.Template(id)
		o := map[string]any{"id": t.ID, "name": t.Name, "weightGrams": t.WeightGrams, "maxStack": t.MaxStack,
			"consumable": t.Consumable, "slot": string(t.Slot), "critical": t.Critical, "unique": t.Unique}
		if t.Requires != nil {
			o["requires"] = map[string]any{"skill": t.Requires.Skill, "level": t.Requires.Level}
		}
		out[i] = o
	}
	return out
}

// bytesToJS copies b into a new Uint8Array.
func bytesToJS(b []byte) js.Value {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}

// generateJSON is mapyardGenerate(mapConfigJSON) -> {world, hash} | {error}: the whole
// world as JSON (mapgen.World.MarshalJSON), for tools that want it.
func generateJSON(args []js.Value) any {
	if len(args) != 1 || args[0].Type() != js.TypeString {
		return failure("mapyardGenerate takes one argument: the MapConfig as a JSON string")
	}
	l, err := generate(args[0].String())
	if err != nil {
		return failure(err.Error())
	}
	data, err := json.Marshal(l.world)
	if err != nil {
		return failure(err.Error())
	}
	return map[string]any{"world": string(data), "hash": l.world.Hash()}
}
