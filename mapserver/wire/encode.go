package wire

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// Snapshot frame format (see docs/netcode.md for the byte-by-byte layout).
const (
	// FormatVersion is the snapshot format this package encodes and decodes; a frame's
	// first byte is FormatVersion<<1 | delta flag. Format 2 added the entity state
	// fields (Facing, State, Template) to format 1's positions; the welcome names it.
	FormatVersion = 2
	// MaxSlots bounds entity slots: slots lie in [0, MaxSlots).
	MaxSlots = 1 << 16
	// MaxCoord bounds the magnitude of a position coordinate in quanta.
	MaxCoord = 1 << 30
	// DefaultRing is how many snapshots a client's baseline ring keeps: about 2 s at
	// 15 snapshots per second. A client whose newest ack is older gets a full snapshot.
	DefaultRing = 32
	// DefaultClientRing is how many snapshots the server remembers having sent one
	// client, so how old an acknowledged baseline may be: about 1 s at 15 snapshots per
	// second, several round trips of any live connection. An older ack gets a full
	// snapshot. Every connected client holds this ring (the slots each snapshot
	// showed), so it is kept short; a map's encoder keeps as many shared tables, since
	// an older one would never be a baseline.
	DefaultClientRing = 16
	// DefaultFarEvery is how many snapshots apart a distant entity's movement reaches a
	// client (see Encoder.EncodeFar): 12, so 1.25 times a second at 15 snapshots per
	// second, which a client interpolates over.
	DefaultFarEvery = 12
	// Bits of an update record's low three bits: what follows the slot gap.
	updateDX     = 1 << 0
	updateDY     = 1 << 1
	updateFields = 1 << 2
	updateBits   = 3
	// Bits of a field mask (spawn and update records): which state fields follow, in
	// bit order. A decoder refuses bits beyond knownFields, so a later format that adds
	// a field is refused clearly rather than misread.
	fieldFacing   = 1 << 0
	fieldState    = 1 << 1
	fieldTemplate = 1 << 2
	knownFields   = fieldFacing | fieldState | fieldTemplate
)

// EntityState is what the snapshot carries of one entity: its stable id and kind
// (sent once, in the spawn record), its position in quanta (1/16 unit), and the
// kind-specific state a client draws and predicts it with. Zero state fields cost
// nothing on the wire; a field that changes costs its new value once.
type EntityState struct {
	ID   uint64
	X, Y int32
	// Template is an item's template id; 0 for other kinds.
	Template uint32
	Kind     uint8
	// Facing is the direction the entity looks, in 1/256 turns counter-clockwise from
	// east.
	Facing uint8
	// State is kind-specific: an NPC's perception state (idle 0, suspicious 1, alert 2,
	// chasing 3), an item's flags (bit 0 pending).
	State uint8
}

// fields returns the field mask of s's non-zero state fields.
func (s *EntityState) fields() uint64 {
	var m uint64
	if s.Facing != 0 {
		m |= fieldFacing
	}
	if s.State != 0 {
		m |= fieldState
	}
	if s.Template != 0 {
		m |= fieldTemplate
	}
	return m
}

// changed returns the field mask of the state fields that differ between b and n.
func changed(b, n *EntityState) uint64 {
	var m uint64
	if b.Facing != n.Facing {
		m |= fieldFacing
	}
	if b.State != n.State {
		m |= fieldState
	}
	if b.Template != n.Template {
		m |= fieldTemplate
	}
	return m
}

// appendFields appends the mask and then the fields of s it names, in bit order.
func appendFields(dst []byte, mask uint64, s *EntityState) []byte {
	dst = binary.AppendUvarint(dst, mask)
	if mask&fieldFacing != 0 {
		dst = append(dst, s.Facing)
	}
	if mask&fieldState != 0 {
		dst = append(dst, s.State)
	}
	if mask&fieldTemplate != 0 {
		dst = binary.AppendUvarint(dst, uint64(s.Template))
	}
	return dst
}

// table is the state of every slot at one snapshot tick; ID 0 marks an empty slot.
// sampled is what a client is shown of an entity it sees from afar: the slot's
// position and facing as of the slot's last refresh (one snapshot in farEvery,
// staggered by slot), its other fields as in slots, and the whole state at once when
// another entity takes the slot.
type table struct {
	tick    uint32
	valid   bool
	slots   []EntityState
	sampled []EntityState
}

// state returns the state of slot s a client is shown, sampled if it sees s from afar.
func (t *table) state(s uint16, far bool) *EntityState {
	if far {
		return &t.sampled[s]
	}
	return &t.slots[s]
}

// settled reports whether slot s's sampled state is its current one, so that a client
// can start seeing it from afar without seeing it step back.
func (t *table) settled(s uint16) bool {
	return t.sampled[s] == t.slots[s]
}

// Encoder builds the snapshot frames of one map. Each snapshot tick the loop calls
// Begin, then Set once per entity (the state every client's frame reads), then Encode
// once per client with that client's visible slots. The encoder keeps the last Ring
// tick tables shared by all clients; a client keeps only which slots it saw at each
// tick, so a delta against any acknowledged tick still in both rings costs no copy of
// entity state per client. Nothing allocates in steady state: tables and rings are
// reused, and Encode appends to the caller's buffer.
//
// An Encoder and its Clients are not safe for concurrent use; Encode calls for
// different clients of one tick may run in parallel only if each has its own Client
// and destination buffer (they read the shared tables only).
type Encoder struct {
	hist []table
	cur  int
	// n counts the snapshots begun; farEvery is how many apart a slot's sampled state
	// is refreshed.
	n        uint32
	farEvery uint32
}

// NewEncoder returns an encoder keeping ring snapshot tables (DefaultRing if ring <= 0).
func NewEncoder(ring int) *Encoder {
	if ring <= 0 {
		ring = DefaultRing
	}
	return &Encoder{hist: make([]table, ring), cur: -1, farEvery: DefaultFarEvery}
}

// SetFarEvery sets how many snapshots apart an entity seen from afar has its movement
// sent (DefaultFarEvery at first); k <= 1 sends it every snapshot, like a near one.
// It takes effect at the next Begin.
func (e *Encoder) SetFarEvery(k int) { e.farEvery = uint32(max(k, 1)) }

// Begin starts the snapshot of tick, which must be above the previous one. Slots not
// Set before the next Begin are empty at tick.
func (e *Encoder) Begin(tick uint32) {
	e.cur = (e.cur + 1) % len(e.hist)
	e.n++
	t := &e.hist[e.cur]
	t.tick, t.valid = tick, true
	clear(t.slots)
	clear(t.sampled)
}

// Set records the state of slot at the current tick. Slots outside [0, MaxSlots) and
// zero ids are ignored.
func (e *Encoder) Set(slot int32, s EntityState) {
	if e.cur < 0 || slot < 0 || slot >= MaxSlots || s.ID == 0 {
		return
	}
	t := &e.hist[e.cur]
	if int(slot) >= len(t.slots) {
		t.slots = slices.Grow(t.slots, int(slot)+1-len(t.slots))[:slot+1]
		t.sampled = slices.Grow(t.sampled, int(slot)+1-len(t.sampled))[:slot+1]
	}
	t.slots[slot] = s
	// The sampled state keeps the previous snapshot's position and facing but on the
	// slot's refresh, one snapshot in farEvery; a slot's phase is its number, so the
	// refreshes of a crowd spread evenly over the snapshots.
	if (e.n+uint32(slot))%e.farEvery != 0 {
		if prev := &e.hist[(e.cur+len(e.hist)-1)%len(e.hist)]; prev.valid && int(slot) < len(prev.sampled) {
			if p := &prev.sampled[slot]; p.ID == s.ID {
				s.X, s.Y, s.Facing = p.X, p.Y, p.Facing
			}
		}
	}
	t.sampled[slot] = s
}

// find returns the table of tick, or nil when it left the ring.
func (e *Encoder) find(tick uint32) *table {
	for i := range e.hist {
		if t := &e.hist[i]; t.valid && t.tick == tick {
			return t
		}
	}
	return nil
}

// sent is one snapshot sent to a client: its tick and the sorted visible slots.
type sent struct {
	tick  uint32
	valid bool
	set   *slotSet
}

// slotSet is the sorted visible slots of one or more consecutive snapshots of a
// client. A view rarely changes from one snapshot to the next, so records that show
// the same slots share one set instead of each holding a copy: a client's ring then
// costs about one set, not one per record. A set is never changed while referenced.
type slotSet struct {
	slots []uint16 // fit: slots lie below MaxSlots
	far   []uint64 // bit i: slots[i] was shown from afar (its sampled state)
	refs  int
}

// isFar reports whether the set showed its i-th slot from afar.
func (s *slotSet) isFar(i int) bool { return s.far[i>>6]&(1<<(i&63)) != 0 }

// same reports whether s and o show the same slots, each as near or far alike.
func (s *slotSet) same(o *slotSet) bool {
	return slices.Equal(s.slots, o.slots) && slices.Equal(s.far, o.far)
}

// keptSets bounds the released sets a client keeps for reuse.
const keptSets = 2

// Client is one client's side of the encoder: the snapshots recently sent to it and
// the newest tick it acknowledged.
type Client struct {
	// scratch, reused by every Encode: near and far visible slots as bitsets, and the
	// records of one frame (spawns and updates with the recordFar and baseFar bits)
	mark, farMark   []uint64
	despawns        []uint16
	spawns, updates []uint32

	ring   []sent
	free   []*slotSet // released sets, for reuse
	next   int
	acked  uint32
	hasAck bool
}

// NewClient returns the state of a new client, which gets a full snapshot until it
// acknowledges one; ring records (DefaultClientRing if ring <= 0), at most the
// encoder's ring.
func NewClient(ring int) *Client {
	if ring <= 0 {
		ring = DefaultClientRing
	}
	ring = max(ring, 2) // a record is compared with the one before it
	return &Client{ring: make([]sent, ring)}
}

// Ack records that the client received the snapshot of tick. Acks of ticks never sent
// to it, or older than its newest ack, are ignored (false).
func (c *Client) Ack(tick uint32) bool {
	if c.hasAck && tick <= c.acked || c.find(tick) == nil {
		return false
	}
	c.acked, c.hasAck = tick, true
	return true
}

// Reset forgets the client's acks, so that its next snapshot is full (a resumed
// connection whose decoder starts empty).
func (c *Client) Reset() {
	c.hasAck = false
	for i := range c.ring {
		c.release(&c.ring[i])
	}
}

func (c *Client) find(tick uint32) *sent {
	for i := range c.ring {
		if s := &c.ring[i]; s.valid && s.tick == tick {
			return s
		}
	}
	return nil
}

// Bits of a spawn or update record in Client's scratch above the slot number.
const (
	recordFar = 1 << 16 // the frame shows the slot's sampled state
	baseFar   = 1 << 17 // the baseline showed the slot's sampled state
)

// Encode appends the current tick's snapshot for client c to dst: a delta against the
// newest snapshot c acknowledged when both the encoder and c still hold it, a full
// snapshot otherwise (full reports which). seq is the last input seq applied for the
// client's player, self its own slot (-1 for none), and visible the slots it sees
// (any order; empty slots and duplicates are skipped). Encode must follow Begin.
func (e *Encoder) Encode(dst []byte, c *Client, seq uint64, self int32, visible []int32) (out []byte, full bool) {
	return e.EncodeFar(dst, c, seq, self, visible, nil)
}

// EncodeFar is Encode with the client's view split in two: near, the slots it sees
// every change of, and far, the slots it sees from afar, whose movement (position and
// facing) it is sent once every farEvery snapshots, staggered by slot; their other
// fields, spawns and despawns reach it at once. A slot in both lists is near. A slot
// turns far only on a snapshot where its sampled state is its current one, so no
// client sees an entity step back.
func (e *Encoder) EncodeFar(dst []byte, c *Client, seq uint64, self int32, near, far []int32) (out []byte, full bool) {
	if e.cur < 0 {
		e.Begin(0)
	}
	cur := &e.hist[e.cur]
	last := &c.ring[(c.next+len(c.ring)-1)%len(c.ring)] // the record written before
	rec := &c.ring[c.next]
	c.next = (c.next + 1) % len(c.ring)
	var base *table
	var baseSet *slotSet
	if c.hasAck {
		// A baseline about to be overwritten by this snapshot's record is unusable.
		if s := c.find(c.acked); s != nil && s != rec && s.tick != cur.tick {
			if t := e.find(c.acked); t != nil {
				base, baseSet = t, s.set
			}
		}
	}
	if rec.valid && c.hasAck && rec.tick == c.acked {
		c.hasAck = false
	}
	// Record what this snapshot shows, sorted and deduplicated, in the client's ring:
	// mark the visible slots in a bitset and read it back in order, which costs far
	// less than sorting.
	var lastSet *slotSet
	if last.valid {
		lastSet = last.set
	}
	c.release(rec)
	set := c.newSet()
	c.viewSorted(set, cur, near, far, lastSet)
	if lastSet != nil && lastSet.same(set) {
		c.free = append(c.free, set)
		set = lastSet
	}
	set.refs++
	rec.tick, rec.valid, rec.set = cur.tick, true, set
	if full = base == nil; full {
		baseSet = nil
	}
	c.classify(base, cur, baseSet, set)

	if full {
		dst = append(dst, FormatVersion<<1)
		dst = binary.AppendUvarint(dst, uint64(cur.tick))
	} else {
		dst = append(dst, FormatVersion<<1|1)
		dst = binary.AppendUvarint(dst, uint64(cur.tick))
		dst = binary.AppendUvarint(dst, uint64(cur.tick-base.tick))
	}
	dst = binary.AppendUvarint(dst, seq)
	if self < 0 || self >= MaxSlots {
		self = -1
	}
	dst = binary.AppendUvarint(dst, uint64(self+1))

	dst = binary.AppendUvarint(dst, uint64(len(c.despawns)))
	prev := int32(-1)
	for _, s := range c.despawns {
		dst = binary.AppendUvarint(dst, uint64(int32(s)-prev-1))
		prev = int32(s)
	}

	dst = binary.AppendUvarint(dst, uint64(len(c.spawns)))
	prev = -1
	for _, r := range c.spawns {
		s := uint16(r)
		st := cur.state(s, r&recordFar != 0)
		dst = binary.AppendUvarint(dst, uint64(int32(s)-prev-1))
		dst = append(dst, st.Kind)
		dst = binary.AppendUvarint(dst, st.ID)
		dst = binary.AppendVarint(dst, int64(st.X))
		dst = binary.AppendVarint(dst, int64(st.Y))
		dst = appendFields(dst, st.fields(), st)
		prev = int32(s)
	}

	// Updates: the slot gap with what follows in its low three bits, then the zigzag
	// deltas of the changed coordinates, then the changed state fields behind their
	// mask. Entities at rest cost nothing.
	dst = binary.AppendUvarint(dst, uint64(len(c.updates)))
	prev = -1
	for _, r := range c.updates {
		s := uint16(r)
		b, n := base.state(s, r&baseFar != 0), cur.state(s, r&recordFar != 0)
		var m uint64
		if b.X != n.X {
			m |= updateDX
		}
		if b.Y != n.Y {
			m |= updateDY
		}
		fields := changed(b, n)
		if fields != 0 {
			m |= updateFields
		}
		dst = binary.AppendUvarint(dst, uint64(int32(s)-prev-1)<<updateBits|m)
		if m&updateDX != 0 {
			dst = binary.AppendVarint(dst, int64(n.X)-int64(b.X))
		}
		if m&updateDY != 0 {
			dst = binary.AppendVarint(dst, int64(n.Y)-int64(b.Y))
		}
		if fields != 0 {
			dst = appendFields(dst, fields, n)
		}
		prev = int32(s)
	}
	return dst, full
}

// release forgets a record, keeping its set for reuse once no record refers to it.
func (c *Client) release(r *sent) {
	if r.set != nil {
		if r.set.refs--; r.set.refs == 0 && len(c.free) < keptSets {
			c.free = append(c.free, r.set)
		}
	}
	r.valid, r.set = false, nil
}

// newSet returns an unreferenced set: a released one, or a new one.
func (c *Client) newSet() *slotSet {
	if n := len(c.free); n > 0 {
		set := c.free[n-1]
		c.free = c.free[:n-1]
		return set
	}
	return &slotSet{}
}

// viewSorted fills set with the occupied slots of near and far, sorted and without
// duplicates, through the client's bitsets, and marks the far ones: those only in far
// that the client saw from afar in its last snapshot (last, nil for none) or whose
// sampled state is their current one.
func (c *Client) viewSorted(set *slotSet, cur *table, near, far []int32, last *slotSet) {
	n := len(near) + len(far)
	if cap(set.slots) < n {
		// A little room beyond this snapshot's view, so that a ring entry grows rarely
		// in a view that only changes by a few entities.
		set.slots = make([]uint16, 0, n+n/8+8)
	}
	words := (len(cur.slots) + 63) / 64
	if len(c.mark) < words {
		c.mark, c.farMark = make([]uint64, words), make([]uint64, words)
	}
	markOccupied(c.mark, cur, near)
	markOccupied(c.farMark, cur, far)
	slots, farBits := set.slots[:0], set.far[:0]
	j := 0 // the last set's slots below the current one
	for w := range words {
		m, f := c.mark[w]|c.farMark[w], c.farMark[w]&^c.mark[w]
		for m != 0 {
			b := bits.TrailingZeros64(m)
			m &= m - 1
			s := uint16(w*64 + b)
			i := len(slots)
			slots = append(slots, s)
			if i&63 == 0 {
				farBits = append(farBits, 0)
			}
			if f&(1<<b) == 0 {
				continue
			}
			wasFar := false
			if last != nil {
				for j < len(last.slots) && last.slots[j] < s {
					j++
				}
				wasFar = j < len(last.slots) && last.slots[j] == s && last.isFar(j)
			}
			if wasFar || cur.settled(s) {
				farBits[i>>6] |= 1 << (i & 63)
			}
		}
		c.mark[w], c.farMark[w] = 0, 0
	}
	set.slots, set.far = slots, farBits
}

// markOccupied sets the bits of the occupied slots of list in mark.
func markOccupied(mark []uint64, cur *table, list []int32) {
	for _, s := range list {
		if s >= 0 && int(s) < len(cur.slots) && cur.slots[s].ID != 0 {
			mark[s>>6] |= 1 << (s & 63)
		}
	}
}

// classify splits the slots seen at the baseline (was, nil for none) and now into
// despawns (seen, no longer visible), spawns (newly visible, or holding another entity
// than at the baseline) and updates (the same entity, moved or changed as the client
// sees it, near or from afar), in the client's scratch lists.
func (c *Client) classify(base, cur *table, was, now *slotSet) {
	c.despawns, c.spawns, c.updates = c.despawns[:0], c.spawns[:0], c.updates[:0]
	var wasSlots []uint16
	if was != nil {
		wasSlots = was.slots
	}
	i := 0
	for k, s := range now.slots {
		for i < len(wasSlots) && wasSlots[i] < s {
			c.despawns = append(c.despawns, wasSlots[i])
			i++
		}
		r := uint32(s)
		if now.isFar(k) {
			r |= recordFar
		}
		if i == len(wasSlots) || wasSlots[i] != s {
			c.spawns = append(c.spawns, r)
			continue
		}
		if was.isFar(i) {
			r |= baseFar
		}
		i++
		switch {
		case int(s) >= len(base.slots) || base.slots[s].ID != cur.slots[s].ID:
			c.spawns = append(c.spawns, r)
		case *base.state(s, r&baseFar != 0) != *cur.state(s, r&recordFar != 0):
			c.updates = append(c.updates, r)
		}
	}
	c.despawns = append(c.despawns, wasSlots[i:]...)
}
