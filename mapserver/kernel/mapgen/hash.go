package mapgen

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
)

// canonicalMagic starts the canonical encoding and names its version. Changing the
// encoding or the generator's output changes every hash, so doing so is a deliberate
// act: bump the suffix and regenerate the golden file and the world vectors.
const canonicalMagic = "mapyard-world/1\n"

// WriteCanonical writes the canonical binary encoding of w to out: the input of Hash.
// The encoding is fixed-width little-endian integers in a fixed field order; a str is a
// u32 byte length and the bytes; a byte list (bytes) the same; every other list is
// preceded by its u32 count:
//
//	str magic "mapyard-world/1\n"
//	u32 schemaVersion, str mapId, u64 seed, i32 width, i32 height
//	terrain: i32 cellSize, u32 cols, u32 rows, u32 n, n x u16 heights
//	biomes: u32 n, n x u8
//	nav: i32 cellSize, u32 cols, u32 rows, bytes walkable bits, bytes ground bits
//	propKinds: u32 n, n x (str name, str set, u8 shape)
//	props: u32 n, n x (u64 id, u16 kind, i32 x, i32 y, i32 z, u16 yaw, u16 scale)
//	colliders: u32 n, n x (u64 id, u64 owner, u8 shape, i32 x, i32 y, i32 halfX, i32 halfY)
//	spawns: u32 n, n x (u64 id, i32 x, i32 y, i32 z)
//	portals: u32 n, n x (u64 id, i32 x, i32 y, i32 z, i32 radius, str targetMapId, u64 targetSeed)
//	only when the config names asset sets: u32 n, n x (str id, str version)
//
// The asset sets come last and only when named, so the worlds of configs without them
// keep the hash they had before asset sets existed; the encoding stays unambiguous
// because every earlier section says its own length.
//
// docs/mapgen.md documents it for implementations in other languages, and the world
// vectors of docs/world-vectors pin it section by section. It returns the first error
// out returns.
func (w *World) WriteCanonical(out io.Writer) error {
	e := canonicalWriter{out: out, buf: make([]byte, 0, 8192)}
	e.str(canonicalMagic)
	e.u32(uint32(w.SchemaVersion))
	e.str(w.MapID)
	e.u64(w.Seed)
	e.i32(w.Width)
	e.i32(w.Height)

	t := &w.Terrain
	e.i32(t.CellSize)
	e.u32(uint32(t.Cols))
	e.u32(uint32(t.Rows))
	e.u32(uint32(len(t.Heights)))
	for _, h := range t.Heights {
		e.u16(h)
	}
	e.u32(uint32(len(w.Biomes)))
	for _, b := range w.Biomes {
		e.u8(uint8(b))
	}
	e.i32(w.Nav.CellSize)
	e.u32(uint32(w.Nav.Cols))
	e.u32(uint32(w.Nav.Rows))
	e.bytes(w.Nav.Walkable)
	e.bytes(w.Nav.Ground)

	e.u32(uint32(len(w.PropKinds)))
	for _, k := range w.PropKinds {
		e.str(k.Name)
		e.str(k.Set)
		e.u8(uint8(k.Shape))
	}
	e.u32(uint32(len(w.Props)))
	for _, p := range w.Props {
		e.u64(p.ID)
		e.u16(p.Kind)
		e.i32(p.X)
		e.i32(p.Y)
		e.i32(p.Z)
		e.u16(p.Yaw)
		e.u16(p.Scale)
	}
	e.u32(uint32(len(w.Colliders)))
	for _, c := range w.Colliders {
		e.u64(c.ID)
		e.u64(c.Owner)
		e.u8(uint8(c.Shape))
		e.i32(c.X)
		e.i32(c.Y)
		e.i32(c.HalfX)
		e.i32(c.HalfY)
	}
	e.u32(uint32(len(w.Spawns)))
	for _, s := range w.Spawns {
		e.u64(s.ID)
		e.i32(s.X)
		e.i32(s.Y)
		e.i32(s.Z)
	}
	e.u32(uint32(len(w.Portals)))
	for _, p := range w.Portals {
		e.u64(p.ID)
		e.i32(p.X)
		e.i32(p.Y)
		e.i32(p.Z)
		e.i32(p.Radius)
		e.str(p.TargetMapID)
		e.u64(p.TargetSeed)
	}
	if len(w.AssetSets) > 0 {
		e.u32(uint32(len(w.AssetSets)))
		for _, r := range w.AssetSets {
			e.str(r.ID)
			e.str(r.Version)
		}
	}
	e.flush()
	return e.err
}

// Hash returns the SHA-256 of the world's canonical encoding as 64 lowercase hex
// digits. The map server sends it in its welcome message and the browser compares it
// with the hash of the world it generated itself.
func (w *World) Hash() string {
	h := sha256.New()
	_ = w.WriteCanonical(h) // a hash.Hash never returns an error
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// canonicalWriter buffers the little-endian encoding and remembers the first error.
type canonicalWriter struct {
	out io.Writer
	buf []byte
	err error
}

func (e *canonicalWriter) grow() {
	if len(e.buf) >= cap(e.buf)-16 {
		e.flush()
	}
}

func (e *canonicalWriter) flush() {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.out.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

func (e *canonicalWriter) u8(v uint8)   { e.grow(); e.buf = append(e.buf, v) }
func (e *canonicalWriter) u16(v uint16) { e.grow(); e.buf = binary.LittleEndian.AppendUint16(e.buf, v) }
func (e *canonicalWriter) u32(v uint32) { e.grow(); e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }
func (e *canonicalWriter) u64(v uint64) { e.grow(); e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }
func (e *canonicalWriter) i32(v int32)  { e.u32(uint32(v)) }

func (e *canonicalWriter) bytes(b []byte) {
	e.u32(uint32(len(b)))
	e.flush()
	if e.err == nil {
		_, e.err = e.out.Write(b)
	}
}

func (e *canonicalWriter) str(s string) {
	e.u32(uint32(len(s)))
	for len(s) > 0 {
		e.grow()
		n := min(len(s), cap(e.buf)-len(e.buf))
		e.buf = append(e.buf, s[:n]...)
		s = s[n:]
	}
}
