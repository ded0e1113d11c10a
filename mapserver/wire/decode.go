package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrNoBaseline is returned for a delta whose baseline tick the decoder no longer (or
// never) held. The client keeps acknowledging the newest snapshot it decoded; the
// server falls back to a full snapshot once that ack is older than its ring.
var ErrNoBaseline = errors.New("wire: snapshot baseline not held")

// ErrUnsupportedFormat is returned for a frame of another snapshot format than
// FormatVersion (a map older or newer than the client): nothing of it is decoded.
var ErrUnsupportedFormat = errors.New("wire: unsupported snapshot format")

// Entity is one entity of a decoded snapshot.
type Entity struct {
	Slot int32
	EntityState
}

// Snapshot is a decoded snapshot: the full visible state at Tick.
type Snapshot struct {
	// Tick is the simulation tick the snapshot shows.
	Tick uint32
	// Full is true for a full frame; otherwise BaseTick names the baseline.
	Full     bool
	BaseTick uint32
	// Seq is the last input seq the server applied for this client.
	Seq uint64
	// Self is the client's own slot, -1 for none.
	Self int32
	// Records counts the frame's despawn, spawn and update records: 0 says the view is
	// what it was at the baseline, so acknowledging this snapshot gains the client
	// nothing.
	Records int
	// Entities are the visible entities, sorted by slot.
	Entities []Entity
}

// Find returns the entity in slot, or nil.
func (s *Snapshot) Find(slot int32) *Entity {
	lo, hi := 0, len(s.Entities)
	for lo < hi {
		m := (lo + hi) / 2
		if s.Entities[m].Slot < slot {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.Entities) && s.Entities[lo].Slot == slot {
		return &s.Entities[lo]
	}
	return nil
}

// update is one parsed update record: m says what follows the slot (updateDX,
// updateDY, updateFields), fields which state fields st carries.
type update struct {
	slot   int32
	m      uint64
	dx, dy int64
	fields uint64
	st     EntityState
}

// Decoder turns a client's stream of snapshot frames back into snapshots. It keeps the
// last Ring decoded snapshots as possible baselines. Not safe for concurrent use.
type Decoder struct {
	ring     []Snapshot
	next     int
	scratch  Snapshot
	despawns []int32
	spawns   []Entity
	updates  []update
}

// NewDecoder returns a decoder keeping ring snapshots (DefaultRing if ring <= 0); it
// should match the server's ring.
func NewDecoder(ring int) *Decoder {
	if ring <= 0 {
		ring = DefaultRing
	}
	return &Decoder{ring: make([]Snapshot, ring)}
}

// reader reads the frame's fields and remembers the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("wire: snapshot %s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("wire: snapshot %s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = fmt.Errorf("wire: snapshot %s: truncated", what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// fieldMask reads a field mask and refuses bits this format does not define.
func (r *reader) fieldMask(what string) uint64 {
	m := r.uvarint(what + " field mask")
	if r.err == nil && m&^knownFields != 0 {
		r.err = fmt.Errorf("wire: snapshot %s: unknown field mask bits %#x", what, m&^knownFields)
	}
	return m
}

// fields reads the state fields mask names into s, in bit order.
func (r *reader) fields(mask uint64, s *EntityState) {
	if mask&fieldFacing != 0 {
		s.Facing = r.byte("facing")
	}
	if mask&fieldState != 0 {
		s.State = r.byte("state")
	}
	if mask&fieldTemplate != 0 {
		t := r.uvarint("template")
		if r.err == nil && t > 1<<32-1 {
			r.err = errors.New("wire: snapshot template out of range")
		}
		s.Template = uint32(t)
	}
}

// count reads a record count; each record takes at least one byte, so a count above
// the bytes left is malformed (and never sizes an allocation).
func (r *reader) count(what string) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("wire: snapshot %s: count %d exceeds frame", what, n)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// slot reads a slot gap after prev and checks the result.
func (r *reader) slot(gap uint64, prev int32, what string) int32 {
	if r.err != nil {
		return 0
	}
	s := int64(prev) + 1 + int64(min(gap, MaxSlots))
	if s >= MaxSlots {
		r.err = fmt.Errorf("wire: snapshot %s: slot out of range", what)
		return 0
	}
	return int32(s)
}

func coord(v int64) bool { return v > -MaxCoord && v < MaxCoord }

// Decode decodes frame against the decoder's baselines and returns the snapshot it
// shows. The snapshot stays valid for Ring further Decode calls; copy what must live
// longer. Malformed frames return an error and leave the decoder as it was; a frame of
// another format returns ErrUnsupportedFormat; a delta against a baseline not held
// returns ErrNoBaseline.
func (d *Decoder) Decode(frame []byte) (*Snapshot, error) {
	r := reader{b: frame}
	head := r.byte("header")
	if r.err != nil {
		return nil, r.err
	}
	if head>>1 != FormatVersion {
		return nil, fmt.Errorf("%w %d (this decoder reads format %d)", ErrUnsupportedFormat, head>>1, FormatVersion)
	}
	out := &d.scratch
	out.Full = head&1 == 0
	tick := r.uvarint("tick")
	if tick > 1<<32-1 {
		return nil, errors.New("wire: snapshot tick out of range")
	}
	out.Tick, out.BaseTick = uint32(tick), 0
	var base *Snapshot
	if !out.Full {
		back := r.uvarint("base")
		if r.err != nil {
			return nil, r.err
		}
		if back == 0 || back > tick {
			return nil, errors.New("wire: snapshot base tick out of range")
		}
		out.BaseTick = uint32(tick - back)
		if base = d.find(out.BaseTick); base == nil {
			return nil, ErrNoBaseline
		}
	}
	out.Seq = r.uvarint("seq")
	self := r.uvarint("self")
	if self > MaxSlots {
		return nil, errors.New("wire: snapshot self slot out of range")
	}
	out.Self = int32(self) - 1
	if err := d.parse(&r); err != nil {
		return nil, err
	}
	out.Records = len(d.despawns) + len(d.spawns) + len(d.updates)
	if len(r.b) != 0 {
		return nil, errors.New("wire: snapshot: trailing bytes")
	}
	var baseEnts []Entity
	if base != nil {
		baseEnts = base.Entities
	}
	ents, err := d.merge(out.Entities[:0], baseEnts)
	if err != nil {
		return nil, err
	}
	out.Entities = ents
	// Keep the result in the ring; the displaced snapshot becomes the next scratch.
	d.ring[d.next], d.scratch = d.scratch, d.ring[d.next]
	res := &d.ring[d.next]
	d.next = (d.next + 1) % len(d.ring)
	return res, nil
}

// find returns the held snapshot of tick, or nil.
func (d *Decoder) find(tick uint32) *Snapshot {
	for i := range d.ring {
		if s := &d.ring[i]; s.Entities != nil && s.Tick == tick {
			return s
		}
	}
	return nil
}

// parse reads the despawn, spawn and update sections into the decoder's buffers.
func (d *Decoder) parse(r *reader) error {
	d.despawns, d.spawns, d.updates = d.despawns[:0], d.spawns[:0], d.updates[:0]
	n := r.count("despawns")
	prev := int32(-1)
	for range n {
		prev = r.slot(r.uvarint("despawn"), prev, "despawn")
		d.despawns = append(d.despawns, prev)
	}
	n = r.count("spawns")
	prev = -1
	for range n {
		prev = r.slot(r.uvarint("spawn"), prev, "spawn")
		e := Entity{Slot: prev}
		e.Kind = r.byte("spawn kind")
		e.ID = r.uvarint("spawn id")
		x, y := r.varint("spawn x"), r.varint("spawn y")
		if r.err == nil && (e.ID == 0 || !coord(x) || !coord(y)) {
			return errors.New("wire: snapshot spawn: zero id or coordinate out of range")
		}
		e.X, e.Y = int32(x), int32(y)
		r.fields(r.fieldMask("spawn"), &e.EntityState)
		d.spawns = append(d.spawns, e)
	}
	n = r.count("updates")
	prev = -1
	for range n {
		v := r.uvarint("update")
		u := update{m: v & (1<<updateBits - 1)}
		prev = r.slot(v>>updateBits, prev, "update")
		u.slot = prev
		if r.err == nil && u.m == 0 {
			return errors.New("wire: snapshot update: nothing changed")
		}
		if u.m&updateDX != 0 {
			u.dx = r.varint("update x")
		}
		if u.m&updateDY != 0 {
			u.dy = r.varint("update y")
		}
		if u.m&updateFields != 0 {
			u.fields = r.fieldMask("update")
			if r.err == nil && u.fields == 0 {
				return errors.New("wire: snapshot update: empty field mask")
			}
			r.fields(u.fields, &u.st)
		}
		d.updates = append(d.updates, u)
	}
	return r.err
}

// merge applies the parsed records to the baseline entities base (sorted by slot),
// appending the result to dst. Despawns and updates must name baseline entities (and
// an update not one that is respawned in the same frame); a despawned slot may not
// also spawn.
func (d *Decoder) merge(dst, base []Entity) ([]Entity, error) {
	des, sp, up := d.despawns, d.spawns, d.updates
	for len(base) > 0 || len(sp) > 0 {
		if len(sp) > 0 && (len(base) == 0 || sp[0].Slot < base[0].Slot) {
			if len(des) > 0 && des[0] < sp[0].Slot || len(up) > 0 && up[0].slot < sp[0].Slot {
				return nil, errors.New("wire: snapshot: despawn or update of an absent slot")
			}
			dst = append(dst, sp[0])
			sp = sp[1:]
			continue
		}
		b := base[0]
		base = base[1:]
		if len(des) > 0 && des[0] < b.Slot || len(up) > 0 && up[0].slot < b.Slot {
			return nil, errors.New("wire: snapshot: despawn or update of an absent slot")
		}
		respawn := len(sp) > 0 && sp[0].Slot == b.Slot
		if len(des) > 0 && des[0] == b.Slot {
			if respawn {
				return nil, errors.New("wire: snapshot: slot both despawned and spawned")
			}
			des = des[1:]
			continue
		}
		if respawn {
			if len(up) > 0 && up[0].slot == b.Slot {
				return nil, errors.New("wire: snapshot: update of a respawned slot")
			}
			dst = append(dst, sp[0])
			sp = sp[1:]
			continue
		}
		if len(up) > 0 && up[0].slot == b.Slot {
			x, y := int64(b.X)+up[0].dx, int64(b.Y)+up[0].dy
			if !coord(x) || !coord(y) {
				return nil, errors.New("wire: snapshot update: coordinate out of range")
			}
			b.X, b.Y = int32(x), int32(y)
			if f := up[0].fields; f != 0 {
				if f&fieldFacing != 0 {
					b.Facing = up[0].st.Facing
				}
				if f&fieldState != 0 {
					b.State = up[0].st.State
				}
				if f&fieldTemplate != 0 {
					b.Template = up[0].st.Template
				}
			}
			up = up[1:]
		}
		dst = append(dst, b)
	}
	if len(des) > 0 || len(up) > 0 {
		return nil, errors.New("wire: snapshot: despawn or update of an absent slot")
	}
	if dst == nil {
		dst = []Entity{} // non-nil marks a held snapshot
	}
	return dst, nil
}
