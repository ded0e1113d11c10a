package mapgen

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
)

// worldJSON is the JSON view of a World, for the browser's renderer and for debugging.
// Bulk grids are base64 strings (little-endian uint16 heights, one byte per biome, the
// nav bitset as is) and objects use short keys, because the map server holds this view
// and the wasm entry hands it to JavaScript.
type worldJSON struct {
	SchemaVersion int            `json:"schemaVersion"`
	MapID         string         `json:"mapId"`
	Seed          uint64         `json:"seed"`
	Width         int32          `json:"width"`
	Height        int32          `json:"height"`
	Terrain       gridJSON       `json:"terrain"`
	Biomes        string         `json:"biomes"`
	Nav           gridJSON       `json:"nav"`
	Ground        string         `json:"ground"`
	PropKinds     []propKindJSON `json:"propKinds"`
	Props         []propJSON     `json:"props"`
	Colliders     []colliderJSON `json:"colliders"`
	Spawns        []spawnJSON    `json:"spawns"`
	Portals       []portalJSON   `json:"portals"`
	AssetSets     []AssetSetRef  `json:"assetSets,omitempty"`
}

type gridJSON struct {
	CellSize int32  `json:"cellSize"`
	Cols     int    `json:"cols"`
	Rows     int    `json:"rows"`
	Data     string `json:"data"`
}

type propKindJSON struct {
	Name  string    `json:"name"`
	Set   string    `json:"set"`
	Shape PropShape `json:"shape"`
}

// propJSON is a prop as the tuple [id, kind, x, y, z, yaw, scale].
type propJSON [7]int64

// colliderJSON is a collider as the tuple [id, owner, shape, x, y, halfX, halfY].
type colliderJSON [7]int64

type spawnJSON struct {
	ID uint64 `json:"id"`
	X  int32  `json:"x"`
	Y  int32  `json:"y"`
	Z  int32  `json:"z"`
}

type portalJSON struct {
	ID          uint64 `json:"id"`
	X           int32  `json:"x"`
	Y           int32  `json:"y"`
	Z           int32  `json:"z"`
	Radius      int32  `json:"r"`
	TargetMapID string `json:"targetMapId"`
	TargetSeed  uint64 `json:"targetSeed,omitempty"`
}

// MarshalJSON encodes the world for JavaScript. Terrain, biome and nav grids are
// base64 strings under "data" (heights as little-endian uint16 centimetres, biomes one
// byte per cell, nav the walkable bitset). Props and colliders, the bulk of a world, are
// arrays of number tuples rather than objects, which halves the size: a prop is
// [id, kind, x, y, z, yaw, scale] (kind indexes propKinds, yaw in 1/65536 turn, scale
// permille) and a collider [id, owner, shape, x, y, halfX, halfY] (owner 0 for walls,
// shape 1 circle or 2 box). All lengths are centimetres and all ids are below 2^53.
// The JSON view is for rendering; the hash covers the canonical encoding, not this.
func (w *World) MarshalJSON() ([]byte, error) {
	heights := make([]byte, 2*len(w.Terrain.Heights))
	for i, h := range w.Terrain.Heights {
		binary.LittleEndian.PutUint16(heights[2*i:], h)
	}
	biomes := make([]byte, len(w.Biomes))
	for i, b := range w.Biomes {
		biomes[i] = byte(b)
	}
	v := worldJSON{
		SchemaVersion: w.SchemaVersion,
		MapID:         w.MapID,
		Seed:          w.Seed,
		Width:         w.Width,
		Height:        w.Height,
		Terrain: gridJSON{CellSize: w.Terrain.CellSize, Cols: w.Terrain.Cols, Rows: w.Terrain.Rows,
			Data: base64.StdEncoding.EncodeToString(heights)},
		Biomes: base64.StdEncoding.EncodeToString(biomes),
		Nav: gridJSON{CellSize: w.Nav.CellSize, Cols: w.Nav.Cols, Rows: w.Nav.Rows,
			Data: base64.StdEncoding.EncodeToString(w.Nav.Walkable)},
		Ground:    base64.StdEncoding.EncodeToString(w.Nav.Ground),
		PropKinds: make([]propKindJSON, len(w.PropKinds)),
		Props:     make([]propJSON, len(w.Props)),
		Colliders: make([]colliderJSON, len(w.Colliders)),
		Spawns:    make([]spawnJSON, len(w.Spawns)),
		Portals:   make([]portalJSON, len(w.Portals)),
		AssetSets: w.AssetSets,
	}
	for i, k := range w.PropKinds {
		v.PropKinds[i] = propKindJSON(k)
	}
	for i, p := range w.Props {
		v.Props[i] = propJSON{int64(p.ID), int64(p.Kind), int64(p.X), int64(p.Y), int64(p.Z), int64(p.Yaw), int64(p.Scale)}
	}
	for i, c := range w.Colliders {
		v.Colliders[i] = colliderJSON{int64(c.ID), int64(c.Owner), int64(c.Shape), int64(c.X), int64(c.Y), int64(c.HalfX), int64(c.HalfY)}
	}
	for i, s := range w.Spawns {
		v.Spawns[i] = spawnJSON(s)
	}
	for i, p := range w.Portals {
		v.Portals[i] = portalJSON(p)
	}
	return json.Marshal(v)
}
